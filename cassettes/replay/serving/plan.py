"""What the replay server answers a request with, decided before a byte is sent.

:meth:`Planner.plan` reads a request (HTTP, or a turn of a WebSocket session) and returns an
:data:`Answer`: the recorded answer (:class:`Play`, possibly under a fault that only changes how
it is sent), a rewritten one (:class:`Rewritten`), an injected API error (:class:`FaultStatus`),
a reset (:class:`Reset`), a request passed on to a live upstream (:class:`Forward`: new episodes
being recorded, or a conversation past its cursor), one a fork does not send past its limit of
live requests (:class:`Refused`) or a miss (:class:`Missed`). The servers
(:mod:`cassettes.replay.serving.server` for HTTP, :mod:`cassettes.replay.serving._websocket` for
WebSocket) and their :mod:`~cassettes.replay.serving._player` only speak what was decided. The
matcher's bookkeeping stays the matcher's: an attempt that does not get the recorded answer gives
it back with :meth:`Matcher.release`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import orjson

from ... import bounds
from ...matching import Matcher, Miss, Recorded
from ...net import HOP_BY_HOP, Request
from ...parsing import parse_exchange
from ...providers import Provider, Rendered
from ..live.edits import tool_answer_of
from .faults import REWRITE_KINDS, STATUS_KINDS, Fault, FaultPlan, rewrite_answer

if TYPE_CHECKING:
    from ...net import Trust
    from ..live.continuation import Continuation

__all__ = [
    "MISS_CODE",
    "MISS_STATUS",
    "NOT_REPLAYED",
    "Answer",
    "FaultStatus",
    "Forward",
    "Missed",
    "Planner",
    "Play",
    "Refused",
    "Reset",
    "Rewritten",
    "ToolAnswer",
]

#: Status and error code of the answer to a request the cassette cannot answer (over HTTP, and as a
#: WebSocket session's error message).
MISS_STATUS = 400
MISS_CODE = "looptap_replay_miss"

#: Recorded response headers that are not replayed: framing and connection (the server frames
#: the body itself), encodings (bodies are stored decoded), and per-connection values.
NOT_REPLAYED = HOP_BY_HOP | {
    "content-encoding",
    "date",
    "set-cookie",
    "alt-svc",
    "strict-transport-security",
    "x-should-retry",
    "retry-after",
    "retry-after-ms",
}

#: Where a request the cassette has no answer for goes (``new_episodes`` recording): the live
#: request (method, target, body) → base URL of a recording proxy, or ``None``.
Fallback = Callable[[str, str, bytes], str | None]

#: Why a rewriting fault could not be rendered for an API (it has no way to say it).
_NO_FORM = {
    "content_filter": "this API has no content-filter finish to send",
    "refusal": "this API has no refusal field or stop reason to send",
    "bad_arguments": "this API sends tool arguments as a JSON object "
    "here, never as text that could fail to parse",
}
#: Faults that leave the attempt with the recorded answer (it is only sent differently).
_KEEP_PLAY = frozenset({"slow_first_byte", "stall"})


@dataclass
class Play:
    """The recorded answer; ``fault`` (slow first byte, stall, stream cut, error event) changes
    how it is sent; ``note`` goes into the served exchange's notes."""

    rec: Recorded
    fault: Fault | None = None
    note: str | None = None


@dataclass
class Rewritten:
    """The recorded answer as a rewriting fault changed it, rendered in the API's format; or
    (no ``fault``) a rebuilt answer whose framing looptap inferred, rendered as the request asks
    (``note`` says so on the served exchange)."""

    rec: Recorded
    fault: Fault | None
    rendered: Rendered
    note: str | None = None


@dataclass
class FaultStatus:
    """The API's own error for a status fault (429, 529/503, 500, 400 too long)."""

    rec: Recorded
    fault: Fault
    status: int
    body: Any
    headers: list[tuple[str, str]]


@dataclass
class Reset:
    """The connection is closed before any answer."""

    rec: Recorded
    fault: Fault


@dataclass
class Forward:
    """Passed on to ``base`` (a live upstream or a recorder in front of one) and relayed back.
    ``miss``: the cassette had no answer (new episodes); ``rec``: it had one, but the request is
    past the cursor. ``body``: the request body as sent on (a rewrite: another model)."""

    base: str
    body: bytes
    why: str
    miss: Miss | None = None
    rec: Recorded | None = None
    notes: list[str] = field(default_factory=list)
    #: The target and headers as sent on (``None``: the request's own).
    target: str | None = None
    headers: list[tuple[str, str]] | None = None
    #: The ``Host`` sent (``None``: the base's): a request sent to a forward proxy names its own.
    host: str | None = None
    #: How the answer is continued when the token cap cuts it (a fork's ``--edit continue``), or
    #: ``None``.
    cont: Continuation | None = None
    #: An ``https`` base reached through this forward proxy (``CONNECT``), its TLS verified
    #: against ``trust``: an HTTPS tool's live call through a fork's recorder.
    proxy: str | None = None
    trust: Trust | None = None


@dataclass
class ToolAnswer:
    """A tool's recorded HTTP call answered otherwise (a fork's ``tool_answer`` edit: "what if
    the tool had answered 200")."""

    rec: Recorded
    status: int
    body: bytes
    note: str


@dataclass
class Refused:
    """A request a fork does not send: past its limit of live requests
    (:mod:`cassettes.replay.forking.limit`). Answered with ``error``, its API's error body, with
    ``status`` and ``headers`` (marked not to be retried); ``note`` on the served exchange."""

    status: int
    error: Any
    headers: list[tuple[str, str]]
    note: str
    rec: Recorded | None = None


@dataclass
class Missed:
    """No recorded answer, nowhere to send it: fail closed with the API's error."""

    miss: Miss


Answer = Play | Rewritten | FaultStatus | Reset | Forward | Refused | Missed


class Router(Protocol):
    """A fork's cursor (:class:`cassettes.replay.forking.cursor.Cursor`): the answer for a request
    past it (sent live), or ``None`` (replayed as any other)."""

    #: Requests sent live so far.
    sent: int

    def bind(self, matcher: Matcher, run: str = "the run") -> None: ...

    def route(self, req: Request, found: Recorded | Miss, websocket: bool) -> Answer | None: ...

    def note_lived(self, seq: int | None) -> None: ...

    def admit(self, what: str) -> bool: ...

    def refused(self, req: Request, rec: Recorded | None) -> Refused: ...

    def outgoing(
        self, req: Request, turn: int | None = None
    ) -> tuple[str, bytes, list[str], list[tuple[str, str]] | None]: ...

    def relayed(
        self,
        method: str,
        target: str,
        sent: bytes,
        status: int,
        chunks: list[tuple[float | None, bytes]],
        headers: list[tuple[str, str]],
    ) -> None: ...


class Planner:
    """Decides every answer of one replay server (see the module docstring). ``cursor``, when
    set, is asked first about each request the matcher placed: past it, the request goes live."""

    def __init__(
        self,
        matcher: Matcher,
        faults: FaultPlan | None = None,
        fallback: Fallback | None = None,
        cursor: Router | None = None,
        live_tools: bool = False,
        tool_proxy: str | None = None,
        tool_trust: Trust | None = None,
    ) -> None:
        self.matcher = matcher
        self.faults = faults
        self.fallback = fallback
        #: A fork's cursor (``None``: every request replayed).
        self.cursor = cursor
        #: A tool's request the recording does not answer goes to its live host (a fork's,
        #: ``why``'s branches); else it fails closed.
        self.live_tools = live_tools
        #: The tools' requests sent to their live hosts (``live_tools``).
        self.tools_live = 0
        #: A fork's recorder's forward proxy: a tool's request that goes live is sent through it,
        #: so the branch records it: plain HTTP in absolute form (its own ``Host``), HTTPS in a
        #: ``CONNECT`` tunnel whose TLS the recorder intercepts with its CA (``tool_trust``).
        self.tool_proxy = tool_proxy
        self.tool_trust = tool_trust

    def plan_tool(self, req: Request, url: str) -> Answer | ToolAnswer:
        """The answer to a tool's request to ``url`` (sent to the replay server as to a forward
        proxy): the recorded tool's HTTP call it matches, played; else its live host
        (``live_tools``) or a miss naming the closest recorded call and the tool call it served.
        Neither a fork's cursor nor a fault applies: they are about the model's turns."""
        found = self.matcher.match_tool(req.method, url, req.headers, req.body)
        if isinstance(found, Recorded):
            for e in getattr(self.cursor, "edits", None) or ():
                answer = tool_answer_of(e.value) if e.kind == "tool_answer" else None
                if answer is not None and e.key == str(found.seq):
                    e.applied += 1
                    return ToolAnswer(found, *answer, f"edit {e.label}: answered {answer[0]}")
            return Play(found)
        if not self.live_tools:
            return Missed(found)
        u = urlsplit(url)
        self.tools_live += 1
        headers = [(k, v) for k, v in req.headers if k.lower() not in HOP_BY_HOP]
        # an HTTPS tool's live request: tunnelled through the recorder, trusting its CA only
        # (without that CA, from here, verified as usual, and not in the branch: docs/fork.md)
        through = self.tool_proxy if u.scheme == "http" or self.tool_trust else None
        plain = through if u.scheme == "http" else None
        tunnel = through if u.scheme == "https" else None
        return Forward(
            plain or f"{u.scheme}://{u.netloc}",
            req.body,
            "a tool's call the recording does not answer: sent live"
            + (" (through the recorder)" if through else ""),
            miss=found,
            target=url if plain else req.target,
            headers=headers,
            host=u.netloc if plain else None,
            proxy=tunnel,
            trust=self.tool_trust if tunnel else None,
        )

    def plan(self, req: Request, websocket: bool = False) -> Answer:
        """The answer to ``req`` (for a WebSocket turn: ``websocket``, its answer always
        streamed)."""
        found = self.matcher.match(req.method, req.target, req.headers, req.body)
        if self.cursor is not None:
            live = self.cursor.route(req, found, websocket)
            if live is not None:
                if isinstance(live, Forward) and isinstance(found, Recorded):
                    self.matcher.went_live(found)  # answered live, not from the recording
                return live
        if isinstance(found, Miss):
            base = (
                self.fallback(req.method, req.target, req.body)
                if self.fallback is not None and not websocket
                else None
            )
            if base is not None:
                return Forward(base, req.body, "recorded now", miss=found)
            return Missed(found)
        fault = self.faults.decide(found) if self.faults is not None else None
        if fault is None:
            return self._reframed(req, found) or Play(found)
        return self._faulted(req, found, fault, websocket)

    def _reframed(self, req: Request, rec: Recorded) -> Rewritten | None:
        """A round trip ``looptap import`` rebuilt from a trace that did not say whether the call
        was streamed (``stream`` inferred), asked the other way: its answer rendered as the
        request asks, by the API's own renderer."""
        ex, adapter = rec.exchange, rec.key.adapter
        mark = ex.reconstructed or {}
        if adapter is None or "stream" not in (mark.get("inferred") or ()):
            return None
        url = urlsplit(req.target)
        try:
            body = bounds.loads(req.body) if req.body else None
        except (orjson.JSONDecodeError, ValueError):
            return None
        stream = adapter.is_stream(url, body)
        rt = parse_exchange(ex)
        if stream == rt.stream or rt.response is None or rt.response.error is not None:
            return None
        rendered = adapter.replay.render_answer(rt.response, stream, url, body)
        if rendered is None:
            return None
        how = "streamed" if stream else "as one JSON body"
        return Rewritten(rec, None, rendered, f"the trace did not say how it was framed: {how}")

    def _faulted(self, req: Request, rec: Recorded, fault: Fault, websocket: bool) -> Answer:
        adapter = rec.key.adapter or Provider()
        if fault.kind in REWRITE_KINDS:
            rendered = self.rewritten(req, rec, fault, adapter, stream=True if websocket else None)
            if isinstance(rendered, str):
                return Play(
                    rec, None, f"fault {fault.text} not injected: {rendered}; served as recorded"
                )
            self.matcher.release(rec)  # the next attempt at this request gets the recording
            return Rewritten(rec, fault, rendered)
        if fault.kind not in _KEEP_PLAY:
            self.matcher.release(rec)  # this attempt fails: the next one gets the recording
        if fault.kind == "reset":
            return Reset(rec, fault)
        if fault.kind in STATUS_KINDS:
            status, obj = (
                adapter.replay.fault_bodies.get(fault.kind)
                or Provider.replay.fault_bodies[fault.kind]
            )
            headers = adapter.replay.fault_headers(
                fault.kind, fault.arg if fault.arg is not None else 1.0
            )
            return FaultStatus(rec, fault, status, obj, list(headers))
        return Play(rec, fault)  # slow_first_byte, stall, stream_cut, error_event

    def rewritten(
        self,
        req: Request,
        rec: Recorded,
        fault: Fault,
        adapter: Provider,
        stream: bool | None = None,
    ) -> Rendered | str:
        """The recorded answer as a rewriting ``fault`` changes it, rendered in the API's format
        for ``req`` (streamed when ``stream``, else as the request asks); or why it cannot be made
        (the fault plan notes it, and the recording is served instead)."""

        ex = rec.exchange
        url = urlsplit(req.target)
        try:
            body = bounds.loads(req.body) if req.body else None
        except (orjson.JSONDecodeError, ValueError):
            body = None
        why = "the recorded answer is not a model's answer"
        rt = parse_exchange(ex)
        if (
            ex.status is not None
            and 200 <= ex.status < 300
            and rt.response is not None
            and rt.response.error is None
        ):
            try:
                request = adapter.parse_request(body, url) if isinstance(body, dict) else None
            except Exception:
                # a request the adapter cannot read: only the tool-aware faults need it
                request = None
            new = rewrite_answer(fault, rt.response, request)
            if isinstance(new, str):
                why = new
            else:
                rendered = adapter.replay.render_answer(
                    new, adapter.is_stream(url, body) if stream is None else stream, url, body
                )
                if rendered is not None:
                    return rendered
                why = _NO_FORM.get(fault.kind, "this API has no form for that answer here")
        if self.faults is not None:
            self.faults.skip(why)
        return why
