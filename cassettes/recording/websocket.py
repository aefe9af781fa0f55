"""A WebSocket session on an LLM path, read as round trips.

Some APIs run an agent's turns over one WebSocket connection instead of one HTTP request each:
the client sends a message that starts a turn and the server answers with the same events its
HTTP stream would carry, one per message, up to a terminal event. :class:`WsSession` is fed the
messages as they cross (direction, bytes, time) and hands back each turn as soon as its terminal
event arrives, as an ordinary :class:`~cassettes.wire.Exchange`:

* ``POST`` to the session's URL (``wss`` → ``https``), with the upgrade request's headers;
* the request body is the client's message as sent;
* the response is ``text/event-stream``: each server message of the turn as one server-sent
  event (``event: TYPE`` + ``data: MESSAGE``), at the time it crossed, so the family's stream
  parser, the findings, ``show``, the inspector and replay read it like an HTTP stream;
* a turn answered only by an error message becomes the error status it carries, with the
  message as its body;
* ``notes`` say it came over a WebSocket (connection, message numbers).

Which message opens a turn and which closes it is the provider's (``Provider.ws_turns``). A
session whose API has no such rules, messages outside any turn, and a turn cut by the end of the
connection are kept too (nothing is lost): see :meth:`WsSession.end`.

Bounded: a session keeps at most ``MAX_PENDING_BYTES`` of messages not yet handed over; beyond
that the oldest are handed over as an unreadable piece, labelled.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from .. import bounds, providers
from ..hints import count
from ..providers import WS_TURN
from ..wire import AGENT_CLOSED, NEXT_TURN, Exchange, Headers

if TYPE_CHECKING:
    from ..providers import WsTurns

__all__ = ["MAX_PENDING_BYTES", "WsSession"]

#: Messages held for one session before they are handed over regardless (a session that never
#: completes a turn must not grow the recorder without bound).
MAX_PENDING_BYTES = 64 * 1024 * 1024
_ids = itertools.count(1)


@dataclass
class _Message:
    from_client: bool
    content: bytes
    t: float
    n: int

    def json(self) -> Any:
        try:
            return bounds.loads(self.content)
        except (orjson.JSONDecodeError, ValueError):
            return None


@dataclass
class WsSession:
    """One WebSocket connection: feed :meth:`message` and :meth:`end`; both return the round
    trips completed by that call."""

    url: str
    request_headers: Headers
    response_headers: Headers = field(default_factory=list)
    started: float | None = None
    connection: str = field(default_factory=lambda: f"ws{next(_ids)}")
    _turn: list[_Message] = field(default_factory=list)
    _outside: list[_Message] = field(default_factory=list)
    _pending_bytes: int = 0
    _count: int = 0
    _turns: int = 0

    def __post_init__(self) -> None:
        u = urlsplit(self.url)
        scheme = {"wss": "https", "ws": "http"}.get(u.scheme, u.scheme)
        self.http_url = urlunsplit(u._replace(scheme=scheme))
        self._adapter = providers.detect("POST", urlsplit(self.http_url), {"input": ""})
        self._rules = self._adapter.ws_turns() if self._adapter is not None else None
        self._gathered: list[_Message] = []
        self._last_response_id: str | None = None
        self._previous: str | None = None
        self._turn_id: str | None = None

    @property
    def readable(self) -> bool:
        """Whether this API's turns can be read from the session."""
        return self._rules is not None

    def message(self, from_client: bool, content: bytes | str, t: float) -> list[Exchange]:
        data = (
            content.encode("utf-8", "surrogateescape")
            if isinstance(content, str)
            else bytes(content)
        )
        msg = _Message(from_client, data, t, self._count)
        self._count += 1
        out = self._place(msg, self._read(msg))
        self._pending_bytes = sum(
            len(m.content) for m in (*self._turn, *self._outside, *self._gathered)
        )
        if self._pending_bytes > MAX_PENDING_BYTES:
            out.extend(
                self._flush(f"over {MAX_PENDING_BYTES} bytes of messages without a turn's end")
            )
        return out

    def _read(self, msg: _Message) -> Any:
        """The message's JSON (``None``: not JSON, or an API whose turns are not read), scrubbed as
        the API's rules say (the bytes kept too)."""
        rules = self._rules
        obj = msg.json() if rules is not None else None
        if rules is not None and rules.scrub is not None and obj is not None:
            scrubbed = rules.scrub(obj)
            if scrubbed is not None:
                msg.content, obj = orjson.dumps(scrubbed), scrubbed
        return obj

    def _place(self, msg: _Message, obj: Any) -> list[Exchange]:
        """Put the message where the API's rules say (it opens a turn, is gathered for the next
        turn's request, belongs to the open turn — perhaps closing it — or is outside any turn);
        the round trips that completes."""
        rules = self._rules
        if rules is None:
            self._outside.append(msg)
        elif msg.from_client and rules.opens(obj):
            return self._open(msg)
        elif msg.from_client and rules.gathers is not None and rules.gathers(obj):
            self._gathered.append(msg)  # part of the next turn's request
        elif self._turn:
            self._turn.append(msg)
            if not msg.from_client and rules.closes(obj):
                return [self._close(rules, obj)]
        else:
            self._outside.append(msg)
        return []

    def _open(self, msg: _Message) -> list[Exchange]:
        """A client message opens a turn (cutting the open one, if any)."""
        out: list[Exchange] = []
        if self._turn:  # a new turn before the last one closed: the last one is cut
            out.append(
                self._exchange(
                    self._turn,
                    cut=f"{NEXT_TURN} before this one's terminal event",
                )
            )
        self._turn = [msg]
        self._previous = self._last_response_id
        self._turn_id = f"{self.connection}/turn{self._turns + 1}"
        return out

    def _close(self, rules: WsTurns, obj: Any) -> Exchange:
        """The server's terminal event closed the open turn: its round trip."""
        if rules.response_id is not None:
            self._last_response_id = rules.response_id(obj) or self._last_response_id
        else:  # an API without response ids (Gemini Live): the recorder's turn number
            self._last_response_id = self._turn_id
        ex = self._exchange(self._turn)
        self._turn = []
        return ex

    def end(
        self,
        close_code: int | None = None,
        reason: str | None = None,
        t: float | None = None,
        by_client: bool | None = None,
    ) -> list[Exchange]:
        """The connection closed (``by_client``: by the agent, by the upstream, or not known): a
        turn still open is cut; messages outside any turn are kept as one session record."""
        head = {
            True: AGENT_CLOSED,
            False: "the upstream closed the connection",
            None: "the connection closed",
        }[by_client]
        return self._flush(f"{head} (code {close_code}{': ' + reason if reason else ''})")

    def _flush(self, why: str) -> list[Exchange]:
        out = []
        if self._turn:
            out.append(self._exchange(self._turn, cut=f"{why} before this turn's terminal event"))
            self._turn = []
        if self._gathered:  # gathered for a turn that never started
            self._outside.extend(self._gathered)
            self._outside.sort(key=lambda m: m.n)
            self._gathered = []
        if self._outside:
            out.append(self._session_record(self._outside, why))
            self._outside = []
        self._pending_bytes = 0
        return out

    # -- building exchanges ------------------------------------------------------------------------
    def _notes(self, msgs: Sequence[_Message], what: str) -> list[str]:
        return [
            f"websocket {self.connection}: {what}, messages "
            f"{msgs[0].n}–{msgs[-1].n} of the connection"
        ]

    def _exchange(self, msgs: list[_Message], cut: str | None = None) -> Exchange:
        opener, answers = msgs[0], msgs[1:]
        server = [m for m in answers if not m.from_client]
        client_later = [m for m in answers if m.from_client]
        self._turns += 1
        body = opener.content
        if self._rules is not None and self._rules.gathers is not None:
            gathered, self._gathered = self._gathered, []
            events = b",".join(
                m.content if m.json() is not None else _placeholder(m.content)
                for m in (*gathered, opener)
            )
            envelope: dict[str, Any] = {
                "type": WS_TURN,
                "connection": self.connection,
                "previous_response_id": self._previous,
            }
            if self._rules.response_id is None:
                envelope["turn_id"] = self._turn_id  # the answer's id, for an API that gives none
            head = orjson.dumps(envelope)
            body = head[:-1] + b',"events":[' + events + b"]}"
        ex = Exchange(
            method="POST",
            url=self.http_url,
            request_headers=list(self.request_headers),
            request_body=body,
            started=opener.t,
            notes=self._notes(msgs, f"turn {self._turns}"),
        )
        if client_later and self._rules is not None and self._rules.gathers is not None:
            # sent during this turn: part of the next one's request
            self._gathered.extend(client_later)
            client_later = []
        if client_later:
            ex.notes.append(
                f"{count(len(client_later), 'client message')} during the turn "
                "kept in the session, not in this round trip"
            )
            self._outside.extend(client_later)
        only = server[0].json() if len(server) == 1 else None
        status = _error_status(only)
        if status is not None and cut is None:
            ex.status = status
            ex.response_headers = [*self.response_headers, ("content-type", "application/json")]
            ex.response_chunks = [(server[0].t - opener.t, server[0].content)]
        else:
            ex.status = 200
            ex.response_headers = [*self.response_headers, ("content-type", "text/event-stream")]
            ex.response_chunks = [(m.t - opener.t, _as_event(m)) for m in server]
        if server:
            ex.ttfb = server[0].t - opener.t
            ex.duration = server[-1].t - opener.t
        if cut is not None:
            ex.transport_error = cut
        return ex

    def _session_record(self, msgs: list[_Message], why: str) -> Exchange:
        """Messages outside any turn (or a whole session whose API looptap cannot read): one
        record, each message a line ``> `` (client) or ``< `` (server), kept, never parsed."""
        lines = b"".join(
            (b"> " if m.from_client else b"< ") + m.content.replace(b"\n", b"\\n") + b"\n"
            for m in msgs
        )
        what = (
            "session messages outside any turn"
            if self.readable
            else "a WebSocket session looptap cannot read as turns"
        )
        return Exchange(
            method="GET",
            url=self.http_url,
            request_headers=list(self.request_headers),
            status=101,
            response_headers=[*self.response_headers, ("content-type", "text/x-looptap-websocket")],
            response_chunks=[(msgs[-1].t - (self.started or msgs[0].t), lines)],
            started=self.started or msgs[0].t,
            notes=[*self._notes(msgs, what), f"kept as sent ({why})"],
        )


def _placeholder(content: bytes) -> bytes:
    """A message that is not JSON, inside an envelope: its size and hash."""
    import hashlib

    return orjson.dumps(
        {"looptap_not_json": {"bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}}
    )


def _as_event(m: _Message) -> bytes:
    obj = m.json()
    kind = obj.get("type") if isinstance(obj, dict) and isinstance(obj.get("type"), str) else None
    head = (
        b"event: " + kind.encode("utf-8", "replace").replace(b"\n", b" ") + b"\n" if kind else b""
    )
    return head + b"data: " + m.content.replace(b"\r", b"").replace(b"\n", b"\ndata: ") + b"\n\n"


def _error_status(obj: Any) -> int | None:
    """The HTTP status an error message carries (``{"type": "error", "status": 429 …}``)."""
    if not isinstance(obj, dict) or obj.get("type") != "error":
        return None
    for key in ("status", "status_code"):
        v = obj.get(key)
        if isinstance(v, int) and 400 <= v <= 599:
            return v
    err = obj.get("error")
    if isinstance(err, dict):
        v = err.get("status") or err.get("status_code")
        if isinstance(v, int) and 400 <= v <= 599:
            return v
    return None
