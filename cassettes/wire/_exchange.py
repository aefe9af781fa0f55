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

from .. import bounds

__all__ = [
    "AGENT_CLOSED",
    "NEXT_TURN",
    "REDACTED",
    "Exchange",
    "Headers",
    "cut_by_client",
    "header",
]

Headers = list[tuple[str, str]]


def header(headers: Headers, name: str) -> str | None:
    """The first value of header ``name`` (case-insensitive), or ``None``."""
    lname = name.lower()
    for k, v in headers:
        if k.lower() == lname:
            return v
    return None


#: The transport error of a round trip whose client closed its connection before the answer's end:
#: mitmproxy's words for it (HTTP/1, the same in 11 and 12; MITMPROXY.md "Failure behaviour"), kept
#: as they are so that a recorder's cassette and an imported mitmproxy flow read alike. A client's
#: HTTP/2 stream reset is not told apart from the upstream's by mitmproxy's message, and stays a
#: transport error.
CLIENT_CLOSED = "Client disconnected."
#: How looptap's WebSocket recorder (:mod:`cassettes.recording.websocket`) begins the transport
#: error of a turn the agent cut: it closed the connection, or sent its next turn first.
AGENT_CLOSED = "the agent closed the connection"
NEXT_TURN = "the client started the next turn"
#: What a recorded exchange holds in place of a secret: the recorder's redactor writes it
#: (:mod:`cassettes.recording`), the analysis and ``looptap verify`` know it for what it is.
REDACTED = "[REDACTED]"


def cut_by_client(transport_error: str | None) -> bool:
    """Whether a round trip was cut by its client (a client timeout, a cancelled stream, an agent
    that stopped reading or went on to its next turn), not by the upstream or the network."""
    return transport_error is not None and (
        transport_error == CLIENT_CLOSED or transport_error.startswith((AGENT_CLOSED, NEXT_TURN))
    )


UNSET: Any = object()

#: How the note of a round trip whose failure the recorder made starts (its own TLS handshake with
#: the server: proxy/trust.py): the agent never had that failure, so it is never judged at C.
RECORDER_MADE = "looptap's own failure"


@dataclass(eq=False)
class Exchange:
    method: str
    url: str
    request_headers: Headers = field(default_factory=list)
    #: The decoded request body. When a cassette reader rebuilt the body from a history delta it
    #: holds the parsed JSON and serialises it only if someone asks for the bytes (see below).
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
    #: The request body / response chunks still carry their Content-Encoding, as they crossed the
    #: wire. :func:`cassettes.wire._decoding.decode_exchange` removes it (and clears these), and
    #: the recording pipeline runs it first, so an entry point only says what it captured.
    request_encoded: bool = False
    response_encoded: bool = False
    #: A fork's what-if edits made in this request (:mod:`cassettes.wire._edit_marks`): the request
    #: is what the upstream received, these marks give back the client's own.
    edits: list[dict[str, Any]] | None = None
    #: An imported trace's round trip rebuilt by looptap (:mod:`cassettes.interop._traces`): which
    #: fields came from the trace and which looptap inferred (``{"v": 1, "source", "from",
    #: "inferred"}``); ``None`` for a round trip that crossed a wire.
    reconstructed: dict[str, Any] | None = None
    #: A tool's HTTP call, not a model's: the recorder's forward proxy took it to a host that is
    #: not an LLM API's (docs/recorder.md, "The tools' HTTP"). Never a turn; read beside the turns
    #: and linked to the model's tool call it served (:mod:`cassettes.analysis._tool_http`).
    tool: bool = False
    #: Position in the cassette (assigned by the store).
    seq: int | None = None
    #: Set by the store: the request body extends round trip ``base`` (``{"base", "keep",
    #: "appended", "rewritten"?}``), so its first ``keep`` history items are that one's.
    history_delta: dict[str, Any] | None = None
    # Not init fields: ``dataclasses.replace`` must not carry a parse of the old body over.
    _request_json: Any = field(default=UNSET, repr=False, init=False)
    _body_pending: bool = field(default=False, repr=False, init=False)
    _request_cut: bool = field(default=False, repr=False, init=False)
    #: Why :meth:`request_json` is a cut copy ("nested deeper than 128 levels"), when it is one.
    request_cut_reason: str | None = field(default=None, repr=False, init=False, compare=False)

    @property
    def recorder_made(self) -> bool:
        """Whether the failure that ended this round trip is the recorder's own
        (:data:`RECORDER_MADE`), not one the agent would have had."""
        return self.transport_error is not None and any(
            n.startswith(RECORDER_MADE) for n in self.notes
        )

    @property
    def response_body(self) -> bytes:
        return b"".join(c for _, c in self.response_chunks)

    @property
    def request_is_lazy(self) -> bool:
        """The body is held as parsed JSON and has not been serialised yet."""
        return self._body_pending

    def request_json(self) -> Any:
        """The request body parsed as JSON, or ``None`` when it is not JSON (cached). Bounded: a
        body nested deeper than :data:`cassettes.bounds.WALK_DEPTH` is cut there (see
        :attr:`request_json_cut`), so whoever walks it is bounded too."""
        if self._request_json is UNSET:
            self._request_cut = False
            try:
                value, why = bounds.parse(self.request_body) if self.request_body else (None, None)
            except orjson.JSONDecodeError:
                value, why = None, None
            self._request_json = value
            self._request_cut = why is not None
            self.request_cut_reason = why
        return self._request_json

    @property
    def request_json_cut(self) -> bool:
        """:meth:`request_json` is a cut copy: only the raw body holds all of it (store it raw)."""
        self.request_json()
        return self._request_cut

    def set_request_json(
        self, value: Any, lazy_body: bool = False, cut: bool = False, reason: str | None = None
    ) -> None:
        """Attach an already-parsed request body (avoids a second parse). With ``lazy_body`` the
        body bytes are produced from it on first access; ``cut`` says it is a bounded copy (the
        bytes hold all of it), ``reason`` why."""
        self._request_json = value
        self._request_cut = cut
        self.request_cut_reason = reason if cut else None
        if lazy_body:
            self._body_pending = True

    def forget_request_json(self) -> None:
        """Drop the cached parse (after the body bytes were replaced)."""
        if self._body_pending:
            _ = self.request_body  # serialise a lazily held body before its JSON goes
        self._request_json = UNSET

    def request_header(self, name: str) -> str | None:
        return header(self.request_headers, name)

    def response_header(self, name: str) -> str | None:
        return header(self.response_headers, name)


def _get_request_body(self: Exchange) -> bytes:
    # A body rebuilt from a cassette's history delta is held as parsed JSON and serialised only
    # when someone asks for the bytes: analysis reads the JSON, so long runs never pay to
    # re-encode every turn's full history.
    if self._body_pending:
        self._body_pending = False
        self.__dict__["_body"] = orjson.dumps(self._request_json)
    body: bytes = self.__dict__["_body"]  # the storage behind the property, not a field
    return body


def _set_request_body(self: Exchange, value: bytes) -> None:
    self.__dict__["_body"] = value
    self._body_pending = False


# The dataclass keeps ``request_body`` as an init field and in ``replace``/``repr``; the property
# (installed after the dataclass is built) stores it in ``_body``.
Exchange.request_body = property(_get_request_body, _set_request_body)  # type: ignore[assignment]
