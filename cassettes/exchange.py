"""The neutral raw round trip: what crossed the wire, nothing interpreted.

The proxy turns a flow into an :class:`Exchange` in one place, the VCR importer builds them from
YAML, and the cassette store reads and writes them. Bodies are kept *decoded* (Content-Encoding
removed) as bytes; a streamed response is the ordered list of chunks as they arrived, each with its
time offset in seconds from the moment the request was sent (``None`` when unknown, as in imports).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["Exchange", "Headers", "header"]

Headers = list[tuple[str, str]]


def header(headers: Headers, name: str) -> str | None:
    """The first value of header ``name`` (case-insensitive), or ``None``."""
    lname = name.lower()
    for k, v in headers:
        if k.lower() == lname:
            return v
    return None


_UNSET: Any = object()


@dataclass(eq=False)
class Exchange:
    method: str
    url: str
    request_headers: Headers = field(default_factory=list)
    request_body: bytes = b""
    status: int | None = None
    reason: str | None = None
    response_headers: Headers = field(default_factory=list)
    #: Decoded response body as it arrived: ``(offset_seconds_or_None, bytes)`` per chunk.
    response_chunks: list[tuple[float | None, bytes]] = field(default_factory=list)
    #: Wall-clock start (epoch seconds) when known.
    started: float | None = None
    #: Seconds from request sent to response headers / to last byte, when measured.
    ttfb: float | None = None
    duration: float | None = None
    #: A transport failure (upstream reset, client gone); the exchange is then partial.
    transport_error: str | None = None
    #: Facts noted while capturing or decoding (lying Content-Encoding, truncated import …).
    notes: list[str] = field(default_factory=list)
    #: The Content-Encoding the body was decoded from, if any.
    decoded_from: str | None = None
    #: Position in the cassette (assigned by the store).
    seq: int | None = None
    #: Set by the store when reading: the request body was rebuilt from a history delta.
    history_delta: dict[str, Any] | None = None
    _request_json: Any = field(default=_UNSET, repr=False)

    @property
    def response_body(self) -> bytes:
        return b"".join(c for _, c in self.response_chunks)

    def request_json(self) -> Any:
        """The request body parsed as JSON, or ``None`` when it is not JSON (cached)."""
        if self._request_json is _UNSET:
            try:
                self._request_json = orjson.loads(self.request_body) if self.request_body else None
            except orjson.JSONDecodeError:
                self._request_json = None
        return self._request_json

    def set_request_json(self, value: Any) -> None:
        """Attach an already-parsed request body (avoids a second parse)."""
        self._request_json = value

    def forget_request_json(self) -> None:
        """Drop the cached parse (after the body bytes were replaced)."""
        self._request_json = _UNSET

    def request_header(self, name: str) -> str | None:
        return header(self.request_headers, name)

    def response_header(self, name: str) -> str | None:
        return header(self.response_headers, name)
