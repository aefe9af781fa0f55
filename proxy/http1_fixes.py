"""What mitmproxy's HTTP/1 layer cannot pass, patched (version-guarded): 1xx heads, trailers.

Both go wrong in the layer that reads the peer's bytes, before any hook runs, so no addon hook can
step in; mitmproxy 12.2.3 (and its main branch of 2026-08) still does the same. This is the one
place looptap patches mitmproxy's internals (``mitmproxy.proxy.layers.http._http1``):

* **Informational answers** (``103 Early Hints``, any 1xx but 101) before the answer.
  ``Http1Client.read_headers`` takes the first for the answer: a 1xx has no body
  (mitmproxy/net/http/http1/read.py:73-74), so the message ends with its head, the server
  connection forgets the request (_http1.py:209-215 in 11.0.2), reads the real answer as
  "Unexpected data from server" and closes (:395-398); the client waited until its own timeout.
  :func:`_read_headers` reads past them to the answer, as mitmproxy's HTTP/2 layer does
  (_http2.py:576-590: "A proxy MUST forward 1xx responses" is violated there too, and the client
  gets no 1xx either). Each is counted in :data:`informational`, for the round trip's note.
* **Trailer fields after a chunked body** (RFC 9112 §7.1.2). ``Http1Connection.read_body`` raises
  ``NotImplementedError("HTTP trailers are not implemented yet.")`` at them (_http1.py:114-115 in
  11.0.2, :117-118 in 12.x): the connection handler logs "mitmproxy has crashed!" and the client
  has every byte of the body but not its last chunk, waiting until its timeout. A chunked body
  gets a reader that ends the message *without* its trailer fields
  (:class:`TrailerlessChunkedReader`), which RFC 9112 §7.1.2 allows ("a recipient that removes the
  chunked coding from a message MAY selectively retain or discard the received trailer fields";
  mitmproxy re-chunks every body it forwards), in both directions.

:func:`apply` patches only the mitmproxy versions whose ``_http1.py`` was read for it
(:data:`CHECKED`), and only when what it wraps is still there; in any other version mitmproxy is
left as it is and :func:`apply` says why. The addon applies it when it loads
(:meth:`proxy.addon.LooptapRecorder.load`); tests/proxy/test_mitmproxy_quirks.py checks the
client's answer through the recorder and the version guard.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Generator
from typing import Any

import h11
from h11._readers import ChunkedReader  # the reader mitmproxy's HTTP/1 layer uses
from mitmproxy import http, version
from mitmproxy.proxy import events
from mitmproxy.proxy.layers.http import _http1
from mitmproxy.proxy.layers.http._base import ReceiveHttp
from mitmproxy.proxy.layers.http._events import ResponseHeaders

__all__ = ["CHECKED", "apply", "informational"]

#: The mitmproxy versions whose HTTP/1 layer these patches were checked against (11.0.2 by the
#: tests; 11.1.x, whose ``_http1.py`` is 11.0.2's, and the 12.x tags by reading it: 12.x changed
#: only the error codes of ``read_headers`` and ``read_body``). The addon reads mitmproxy's
#: connection handlers (``proxy/server.py``, the same in these) only in these versions too.
CHECKED = frozenset(
    {
        "11.0.2",
        "11.1.0",
        "11.1.1",
        "11.1.2",
        "11.1.3",
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

#: The informational answers an HTTP/1 upstream sent before its answer to a request (the flow's),
#: dropped: how many of each status.
informational: weakref.WeakKeyDictionary[http.Request, dict[int, int]] = weakref.WeakKeyDictionary()

_original_reader: Callable[[int | None], Any] | None = None
_original_read_headers: Callable[..., Generator[Any, Any, None]] | None = None


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
    assert _original_reader is not None
    return _original_reader(expected_size)


def _read_headers(self: Any, event: Any) -> Generator[Any, Any, None]:
    """``Http1Client.read_headers``, stopped at an informational head (its parse, by mitmproxy,
    yields the head before anything acts on it) and run again on what follows it in the buffer.
    (Its commands block nothing, so none waits for a value sent back.)"""
    assert _original_read_headers is not None
    while True:
        commands = _original_read_headers(self, event)
        for command in commands:
            if (
                isinstance(command, ReceiveHttp)
                and isinstance(command.event, ResponseHeaders)
                and 100 <= command.event.response.status_code < 200
                and command.event.response.status_code != 101
            ):
                break
            yield command
        else:
            return
        commands.close()  # before it takes the head for the whole answer
        status = self.response.status_code
        counts = informational.setdefault(self.request, {})
        counts[status] = counts.get(status, 0) + 1
        self.response = None
        event = events.DataReceived(self.conn, b"")


def apply(running: str = version.VERSION) -> str | None:
    """Patch mitmproxy ``running`` (once): ``None`` when the patches are in place, else why not."""
    global _original_reader, _original_read_headers
    reader = getattr(_http1, "make_body_reader", None)
    client = getattr(_http1, "Http1Client", None)
    if reader is _make_body_reader:
        return None
    if running not in CHECKED:
        return (
            f"mitmproxy {running} is not one looptap's HTTP/1 patches were checked against "
            f"({', '.join(sorted(CHECKED))}): an informational answer (103 Early Hints) before "
            "the answer, and trailer fields after a chunked body, are passed as this mitmproxy "
            "passes them"
        )
    read_headers = getattr(client, "read_headers", None)
    if (
        reader is None
        or type(reader(None)) is not ChunkedReader
        or not inspect.isgeneratorfunction(read_headers)
    ):
        return (
            f"mitmproxy {running} no longer has the HTTP/1 reader and head parser looptap's "
            "patches expect: left as it is"
        )
    _original_reader, _original_read_headers = reader, read_headers
    _http1.make_body_reader = _make_body_reader
    client.read_headers = _read_headers  # type: ignore[union-attr]
    return None
