"""What a recorded flow is made of: the stream callables that keep a copy of its bodies as they
pass (:class:`Tee`, for a response and for a long request) and the one conversion of
the flow into a neutral :class:`~cassettes.wire.Exchange` (:func:`flow_to_exchange`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from mitmproxy import http
from mitmproxy.net.http import status_codes
from mitmproxy.net.http.url import unparse as unparse_url
from mitmproxy.proxy import mode_specs

from ..cassettes.wire import RECORDER_MADE, Exchange
from . import http1_fixes
from .marks import marks_into
from .trust import TLS_FAILED

__all__ = [
    "CAPPED",
    "CLIENT_PATH",
    "MAX_REQUEST",
    "TOOL",
    "TOOL_BODY",
    "Tee",
    "flow_to_exchange",
    "request_body",
]

#: metadata key: the path the client sent, when a reverse listener put back the API's version
#: segment its base URL lacked (:func:`cassettes.providers.versioned_path`).
CLIENT_PATH = "looptap_client_path"
#: The flow metadata key of a request streamed to the upstream through a :class:`Tee` with a limit.
CAPPED = "looptap_capped"
#: Bytes of a request body the recorder keeps (the size of a whole LLM request: Anthropic's limit
#: for a Messages request, OpenAI's for the files of one; larger uploads are files and batches). A
#: longer body, or one of unknown length (chunked), is streamed to the upstream as it comes instead
#: of held whole (through a :class:`Tee` with a limit); the cassette keeps its first bytes, with a
#: note. Never a 413: the proxy does not break an upload the API would take.
MAX_REQUEST = 32 << 20
#: The flow metadata key of a tool's HTTP call (forward-proxy traffic to a host that is not an LLM
#: API's, recorded beside the model calls: docs/recorder.md, "The tools' HTTP").
TOOL = "looptap_tool"
#: Bytes of a tool's request or answer body the recorder keeps (a tool's answer the model gets is
#: far shorter; a download through the proxy, a package install, is not held): the rest passes
#: on, counted, and the cassette says so.
TOOL_BODY = 1 << 20


class Tee:
    """The stream callable of a recorded body: forwards every chunk untouched and keeps a
    timestamped copy — all of it, or with ``limit`` its first ``limit`` bytes, the rest counted (a
    long request, a tool's answer); cannot raise.

    With :meth:`expect`, calls ``on_complete`` once the body's announced length has arrived,
    before that last chunk is passed on."""

    __slots__ = ("_joined", "_kept", "_left", "_on_complete", "chunks", "limit", "sent")

    def __init__(self, limit: int | None = None) -> None:
        self.chunks: list[tuple[float, bytes]] = []
        self.limit = limit
        #: Bytes passed on; of them ``_kept`` kept.
        self.sent = 0
        self._kept = 0
        self._left = 0
        self._on_complete: Callable[[], None] | None = None
        self._joined: tuple[int, bytes] = (0, b"")

    def expect(self, length: int, on_complete: Callable[[], None]) -> None:
        self._left = length
        self._on_complete = on_complete

    def __call__(self, data: bytes) -> bytes:
        try:
            if data:
                self.sent += len(data)
                if self.limit is None:
                    self.chunks.append((time.time(), data))
                elif self._kept < self.limit:
                    piece = data[: self.limit - self._kept]
                    self._kept += len(piece)
                    self.chunks.append((time.time(), piece))
                if self._on_complete is not None:
                    self._left -= len(data)
                    if self._left <= 0:
                        done, self._on_complete = self._on_complete, None
                        done()
        except Exception:  # never break the stream: a raising callable drops the chunk
            pass
        return data

    @property
    def cut(self) -> bool:
        return self.limit is not None and self.sent > self._kept

    def kept_chunks(self) -> list[tuple[float, bytes]]:
        """The chunks kept: all of them, or, when the body was cut, its first bytes cut before
        their last quote (no JSON string, nor a secret in one, is kept in part)."""
        chunks = self.chunks
        if not self.cut:
            return chunks
        last = next((i for i in range(len(chunks) - 1, -1, -1) if b'"' in chunks[i][1]), -1)
        if last < 0:
            return []
        t, data = chunks[last]
        return [*chunks[:last], (t, data[: data.rfind(b'"')])]

    def kept(self) -> bytes:
        """What the cassette keeps of the body, joined (once per length: asked for by several
        hooks)."""
        if self._joined[0] != self.sent:
            self._joined = (self.sent, b"".join(c for _, c in self.kept_chunks()))
        return self._joined[1]


def request_body(flow: http.HTTPFlow) -> bytes:
    """The request body as the cassette keeps it (a streamed one: what its :class:`Tee`
    kept)."""
    raw = flow.request.raw_content
    capped = flow.metadata.get(CAPPED)
    if raw is None and isinstance(capped, Tee):
        return capped.kept()
    return raw or b""


def flow_to_exchange(flow: http.HTTPFlow, tee: Tee | None, error: str | None) -> Exchange:
    """The one place a mitmproxy flow becomes a neutral exchange. Bodies are left as they crossed
    the wire (content-encoded, and marked so): the writer process's recording pipeline decodes
    them, off the proxy's event loop."""
    req = flow.request
    start = req.timestamp_start
    url = req.pretty_url if req.scheme else _routed(flow)
    client_path = flow.metadata.get(CLIENT_PATH)
    if isinstance(client_path, str) and url.endswith(req.path):
        # what the client sent (replayed as such)
        url = url[: len(url) - len(req.path)] + client_path
    ex = Exchange(
        method=req.method,
        url=url,
        request_headers=list(req.headers.items(multi=True)),
        request_body=request_body(flow),
        started=start,
        request_encoded=True,
        response_encoded=True,
        tool=flow.metadata.get(TOOL) is True,
    )
    if flow.response is not None:
        _response_into(ex, flow.response, tee, start)
    if tee is not None and tee.cut:
        ex.response_chunks = [(max(0.0, t - start), c) for t, c in tee.kept_chunks()]
        ex.notes.append(
            f"response body: {tee.sent:,} bytes went to the client; the cassette keeps the first "
            f"{len(ex.response_body):,} (the recorder keeps at most {(tee.limit or 0) >> 10} KiB "
            "of a tool's answer, cut before a quote so that no JSON string is kept in part)"
        )
    if error:
        ex.transport_error = error
        why = TLS_FAILED.get(flow.server_conn.id)
        if why is not None:
            ex.notes.append(
                f"{RECORDER_MADE}: its TLS handshake with the server failed ({why}); the agent's "
                "own TLS never reached the server, so this is not a failure the agent had"
            )
    dropped = http1_fixes.informational.get(req)
    if dropped:
        ex.notes.append(_informational_note(dropped))
    if isinstance(client_path, str):
        ex.notes.append(
            "path: the client left out the API's version segment (its base URL lacks it); "
            f"forwarded upstream as {req.path}"
        )
    capped = flow.metadata.get(CAPPED)
    if isinstance(capped, Tee) and capped.cut:
        ex.notes.append(
            f"request body: {capped.sent:,} bytes went to the upstream; the cassette keeps the "
            f"first {len(ex.request_body):,} (the recorder keeps at most "
            f"{(capped.limit or 0) >> 20} MiB of a request, cut before a quote so that no JSON "
            "string is kept in part)"
        )
    marks_into(ex, flow.metadata)
    return ex


def _informational_note(dropped: dict[int, int]) -> str:
    """What an HTTP/1 upstream sent before its answer that the client did not get
    (:data:`proxy.http1_fixes.informational`)."""
    said = ", ".join(
        f"{status} {status_codes.RESPONSES.get(status, '')}".rstrip()
        + (f" ({n} times)" if n > 1 else "")
        for status, n in sorted(dropped.items())
    )
    return (
        f"informational: the upstream sent {said} before its answer; not passed to the client "
        "(mitmproxy passes no 1xx on)"
    )


def _routed(flow: http.HTTPFlow) -> str:
    """The URL of a request mitmproxy refused before routing it (one it could not frame, e.g. both
    ``Content-Length`` and ``Transfer-Encoding``): a reverse listener's upstream, not the
    listener's own address with no scheme."""
    mode, req = flow.client_conn.proxy_mode, flow.request
    if isinstance(mode, mode_specs.ReverseMode):
        return unparse_url(mode.scheme, *mode.address, req.path)
    return req.pretty_url


def _response_into(ex: Exchange, resp: http.Response, tee: Tee | None, start: float) -> None:
    """The response's status, headers, chunks (as the tee timed them) and timings, into ``ex``."""
    ex.status = resp.status_code
    ex.reason = resp.reason
    ex.response_headers = list(resp.headers.items(multi=True))
    if tee is not None and tee.chunks:
        ex.response_chunks = [(max(0.0, t - start), c) for t, c in tee.chunks]
    elif resp.raw_content:
        # not streamed through the tee (a response an addon made, e.g. a live fault)
        ex.response_chunks = [((resp.timestamp_end or start) - start, resp.raw_content)]
    if resp.timestamp_start:
        ex.ttfb = resp.timestamp_start - start
    end = resp.timestamp_end or (tee.chunks[-1][0] if tee is not None and tee.chunks else None)
    if end:
        ex.duration = end - start
    announced = resp.headers.get("trailer")
    if announced and resp.http_version.startswith("HTTP/1"):
        ex.notes.append(
            f"trailers: the upstream announced trailer fields ({announced}) after the body; "
            "the recorder's mitmproxy passes no HTTP/1 trailer fields: dropped, for the client and "
            "the cassette alike"
        )
