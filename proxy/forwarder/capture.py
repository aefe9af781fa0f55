"""One round trip as the forwarder saw it, turned into the same
:class:`~cassettes.wire.exchange.Exchange` :func:`proxy.addon.flow_to_exchange` builds for the same
traffic through mitmproxy: the request as recorded there (``Host`` rewritten to the upstream as a
reverse listener does, the client's path kept when the version segment was put back, with its note),
bodies as they crossed the wire (content-encoded, marked so), the response's chunks with the time
each arrived, the timings, and ``transport_error`` worded as mitmproxy words it. No mitmproxy
import.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cassettes.wire.exchange import Exchange
from proxy import notes

__all__ = ["Capture", "decoded"]


def decoded(raw: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """Header fields as mitmproxy's addon records them (UTF-8, surrogate-escaped)."""
    return [
        (k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape")) for k, v in raw
    ]


@dataclass(eq=False)
class Capture:
    """What is kept of one round trip while it is forwarded (a tee's worth: an append and a
    timestamp per chunk); :meth:`exchange` builds the record once, at its end."""

    method: str
    #: The upstream's origin and the path sent there.
    origin: str
    path: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    #: When the request's head had been read (mitmproxy's ``timestamp_start``).
    started: float
    #: The path the client sent, when the version segment was put back.
    client_path: str | None = None
    status: int | None = None
    reason: str | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    response_started: float | None = None
    response_ended: float | None = None
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    #: The upstream's own marks dropped from its response (lower-case names).
    marks_refused: list[str] = field(default_factory=list)

    def chunk(self, data: bytes) -> None:
        if data:
            self.chunks.append((time.time(), data))

    def exchange(self, error: str | None) -> Exchange:
        start = self.started
        ex = Exchange(
            method=self.method,
            url=self.origin + (self.client_path if self.client_path is not None else self.path),
            request_headers=self.request_headers,
            request_body=self.request_body,
            started=start,
            request_encoded=True,
            response_encoded=True,
        )
        if self.status is not None:
            ex.status = self.status
            ex.reason = self.reason
            ex.response_headers = self.response_headers
            if self.chunks:
                ex.response_chunks = [(max(0.0, t - start), c) for t, c in self.chunks]
            if self.response_started is not None:
                ex.ttfb = self.response_started - start
            end = self.response_ended or (self.chunks[-1][0] if self.chunks else None)
            if end:
                ex.duration = end - start
        if error:
            ex.transport_error = error
        if self.client_path is not None:
            ex.notes.append(notes.versioned(self.path))
        if self.marks_refused:
            ex.notes.append(notes.marks_refused(self.marks_refused))
        return ex
