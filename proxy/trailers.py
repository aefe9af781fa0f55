"""HTTP/1 trailer fields, which mitmproxy cannot pass on: dropped, so that the message still ends.

A chunked HTTP/1 body may end with a trailer section (RFC 9112 §7.1.2). mitmproxy reads the body
with h11's ``ChunkedReader``, and when the reader returns the end of the message with trailer
fields, ``Http1Connection.read_body`` raises ``NotImplementedError("HTTP trailers are not
implemented yet.")`` (mitmproxy/proxy/layers/http/_http1.py:114-115 in 11.0.2, :117-118 in 12.x).
The connection handler logs "mitmproxy has crashed!" and the message never ends: the client has
every byte of the body but not its last chunk, and waits until its own timeout (the openai SDK's
is 10 minutes); the cassette gets the round trip only when the client gives up. The error comes
from the layer that reads the peer's bytes, before any hook runs: no addon hook can step in, and
mitmproxy 12.2.3 (and its main branch of 2026-08) still raises there.

So this is the one place looptap patches mitmproxy's internals. :func:`apply` wraps
``_http1.make_body_reader`` so that a chunked body gets a reader that ends the message *without*
its trailer fields, which RFC 9112 §7.1.2 allows ("a recipient that removes the chunked coding from
a message MAY selectively retain or discard the received trailer fields"; mitmproxy re-chunks every
body it forwards). The client gets the whole body, ended, without the trailer fields, in both
directions (a client's chunked request with trailers hit the same error). It is applied only in
the mitmproxy versions whose ``_http1.py`` was read for it (:data:`CHECKED`: the same
``make_body_reader`` and the same ``raise``), and only when what it wraps is still there; in any
other version mitmproxy is left as it is and :func:`apply` says why. The addon applies it when it
loads (:meth:`proxy.addon.LooptapRecorder.load`); tests/proxy/test_mitmproxy_quirks.py checks the
client's answer through the recorder and the version guard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h11
from h11._readers import ChunkedReader  # the reader mitmproxy's HTTP/1 layer uses
from mitmproxy import version
from mitmproxy.proxy.layers.http import _http1

__all__ = ["CHECKED", "TrailerlessChunkedReader", "apply"]

#: The mitmproxy versions whose HTTP/1 layer this patch was checked against (11.0.2 by the tests;
#: the 12.x tags by reading their ``_http1.py``, unchanged where it matters).
CHECKED = frozenset(
    {
        "11.0.2",
        "12.0.0",
        "12.0.1",
        "12.1.0",
        "12.1.1",
        "12.1.2",
        "12.2.0",
        "12.2.1",
        "12.2.2",
        "12.2.3",
    }
)

_original: Callable[[int | None], Any] | None = None


class TrailerlessChunkedReader(ChunkedReader):
    """h11's chunked body reader, whose end of message carries no trailer fields."""

    def __call__(self, buf: Any) -> h11.Data | h11.EndOfMessage | None:
        event = super().__call__(buf)
        if isinstance(event, h11.EndOfMessage) and event.headers:
            return h11.EndOfMessage()
        return event


def _make_body_reader(expected_size: int | None) -> Any:
    """mitmproxy's ``make_body_reader``, with :class:`TrailerlessChunkedReader` for chunked
    bodies (``expected_size is None``)."""
    if expected_size is None:
        return TrailerlessChunkedReader()
    assert _original is not None
    return _original(expected_size)


def apply(running: str = version.VERSION) -> str | None:
    """Patch mitmproxy ``running`` (once): ``None`` when the patch is in place, else why not."""
    global _original
    current = getattr(_http1, "make_body_reader", None)
    if current is _make_body_reader:
        return None
    if running not in CHECKED:
        return (
            f"mitmproxy {running} is not one the trailers patch was checked against "
            f"({', '.join(sorted(CHECKED))}): an HTTP/1 body that ends with trailer fields is "
            "passed as this mitmproxy passes it"
        )
    if current is None or type(current(None)) is not ChunkedReader:
        return (
            f"mitmproxy {running} no longer makes its chunked body reader where the trailers "
            "patch expects it: left as it is"
        )
    _original = current
    _http1.make_body_reader = _make_body_reader
    return None
