"""What a check sees: one turn, its conversation, and the turn before it.

Checks are plain functions ``check(ctx) -> Iterable[Finding]`` listed per layer in its module's
``CHECKS`` (:mod:`cassettes.analysis._emission`, :mod:`cassettes.analysis._api`,
:mod:`cassettes.analysis.dispatch` …), gathered in :data:`cassettes.analysis._judgement.CHECKS`;
each of the agent's own rules in force is one more (:mod:`cassettes.analysis._rule_check`).
Each finding is made by :meth:`TurnContext.finding` with its code's constant
(:mod:`cassettes.analysis.codes`).
They run in recording order, once per generation round trip, after the turn's E/A/C layers are
built. A check that needs memory across turns keeps it in ``ctx.conv.state`` under its own key.
Checks never raise out: the runner catches and reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..models import FinishReason, Message, NormalisedRequest, NormalisedResponse, ToolSpec
from ..parsing import RoundTrip
from ..wire import Exchange, MissNote, read_miss
from ._mcp import McpLinker
from ._message_keys import MessageKeys
from ._model import CallCheck, Finding, Turn
from ._tool_http import ToolHttpLinker
from .codes import ROWS, severity_of

__all__ = [
    "CLIENT_KINDS",
    "Check",
    "ConversationState",
    "FinalCheck",
    "RunRepeats",
    "TurnContext",
    "call_label",
    "clipped",
    "failed",
    "provider_detail",
    "short",
]

#: Call kinds the client executes (and so must have offered).
CLIENT_KINDS = ("function", "custom")


@dataclass(eq=False)
class ConversationState:
    id: str
    family: str
    #: The conversation's most recent turn (earlier ones are released as the run goes on).
    turns: list[TurnContext] = field(default_factory=list)
    #: The number of the next turn (its index): :attr:`first`, then one more per turn analysed.
    count: int = 0
    #: The number of its first turn: 0, or a fork branch's origin turn at the cursor
    #: (:mod:`cassettes.reading._branch`).
    first: int = 0
    #: Free-form memory for checks, keyed by the check's code.
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunRepeats:
    """The run's first repeated call (``E.repeated_call``): its round trip and conversation, what
    an agent's report of a loop in another conversation folds under (an orchestrator reports the
    loop the agents it directs are in: ``C.loop_reported_not_stopped``)."""

    first: list[Any] = field(default_factory=list)  # [seq, conversation id], or empty


@dataclass(eq=False)
class TurnContext:
    seq: int
    rt: RoundTrip
    ex: Exchange
    conv: ConversationState
    #: Position in the conversation, from 0.
    index: int
    prev: TurnContext | None
    #: The request's full normalised history (``rt.request.messages``); emptied once no check
    #: can need it (two turns later, or when the conversation goes quiet).
    messages: list[Message]
    #: The turn being built: e/a/c layers are filled before the checks run.
    turn: Turn
    #: Length of the history, kept when ``messages`` is released.
    n_messages: int = 0
    #: Kept from a failed attempt's exchange for the check of its retry (the exchange itself is
    #: released): when it ended (epoch seconds) and the wait its response asked for (seconds).
    started: float | None = None
    ended: float | None = None
    retry_after: float | None = None
    #: What the run's MCP tool servers listed and answered so far, linked to the model's calls.
    mcp: McpLinker = field(default_factory=McpLinker)
    #: What the tools' HTTP calls linked to the model's calls got (cassettes.analysis._tool_http).
    tool_http: ToolHttpLinker | None = None
    #: The run's first repeated call (:class:`RunRepeats`), shared by every turn of the run.
    repeats: RunRepeats = field(default_factory=RunRepeats)
    #: The messages' keys and the answers' messages, each made once (the threader's memo:
    #: :class:`~._message_keys.MessageKeys`).
    keys: MessageKeys = field(default_factory=MessageKeys)
    #: For each call of the previous answer (by position), the id the client echoed it under in
    #: this request (the C layer's, :func:`cassettes.analysis.dispatch.build`).
    echo_ids: dict[int, str] = field(default_factory=dict)
    #: A rewrite that also trimmed: this request's changed messages and the previous request's
    #: dropped ones, by index (:func:`cassettes.analysis.dispatch._rewrites.trimmed_and_changed`).
    trim_beside: tuple[list[int], list[int]] | None = None

    @property
    def request(self) -> NormalisedRequest | None:
        return self.rt.request

    @property
    def response(self) -> NormalisedResponse | None:
        return self.rt.response

    @property
    def replay_miss(self) -> MissNote | None:
        """The replay server's note when this round trip is its answer to a request the cassette
        could not answer (looptap's own error, not the API's: layer C,
        ``C.diverged_from_recording``)."""
        return read_miss(self.ex)

    @property
    def tools(self) -> list[ToolSpec]:
        return self.rt.request.tools if self.rt.request else []

    @property
    def history_key(self) -> str:
        return (self.rt.request.history_key if self.rt.request else None) or "messages"

    def finding(
        self,
        code: str,
        message: str,
        *,
        grade: str | None = None,
        path: str | None = None,
        tool_call_id: str | None = None,
        related_turn: int | None = None,
        **details: Any,
    ) -> Finding:
        """A finding of ``code`` (a constant of :mod:`cassettes.analysis.codes`) on this turn: its
        layer and severity are its row's; a check that grades names the fact that holds
        (``grade``), which the row weighs (one it does not grade is a bug: refused)."""
        row = ROWS[code]
        severity = severity_of(code, grade)
        # looptap replay --fault made the API fail here, or rewrote what the model said: never the
        # API's or the model's own doing. (How the client then coped, C, is the client's.)
        injected = self.ex.response_header("x-looptap-fault") if row.layer != "C" else None
        if injected:
            message = f"[injected by looptap: {injected}] {message}"
            details["injected"] = injected
        return Finding(
            code=code,
            layer=row.layer,
            severity=severity,
            message=message,
            conversation=self.conv.id,
            turn=self.index,
            seq=self.seq,
            path=path,
            tool_call_id=tool_call_id,
            related_turn=related_turn,
            details=details,
        )


def failed(rt: RoundTrip) -> bool:
    """The round trip brought no whole answer: a transport error, an error status or body, an
    answer cut short, or none."""
    r = rt.response
    return (
        bool(rt.transport_error)
        or (rt.status or 0) >= 400
        or r is None
        or r.error is not None
        or r.complete is False
    )


def overflowed(rt: RoundTrip) -> bool:
    """The API refused the request as longer than the model's context window (its family's
    context-length error: :attr:`~cassettes.providers.Profile.overflow_errors`), the error a
    framework answers by trimming or summarising its history."""
    err = rt.response.error if rt.response is not None else None
    if err is None or (rt.status or 0) != 400:
        return False
    from .. import providers  # (the registry: not on the import path of every analysis)

    p = providers.by_family(rt.family)
    code = " ".join(b for b in (err.type, err.code) if b)
    return p is not None and p.profile.is_overflow_error(code, err.message)


def cut_call(rt: RoundTrip) -> bool:
    """The answer ended at the token cap with a tool call in it (its arguments cut)."""
    r = rt.response
    return (
        r is not None
        and r.finish_reason == FinishReason.TRUNCATED_LENGTH
        and any(p.tool_call is not None for p in r.parts)
    )


def short(text: str | None, n: int = 80) -> str:
    """``text`` squashed to one line of at most ``n`` characters (an ellipsis where cut)."""
    t = " ".join((text or "").split())
    return t if len(t) <= n else t[: n - 1] + "…"


def call_label(c: CallCheck) -> str:
    return f"`{c.name}`" + (f" (call {c.id})" if c.id else "")


def clipped(value: Any, limit: int = 60) -> str:
    """``value`` as compact JSON (its ``repr`` when not JSON), at most ``limit`` characters."""
    try:
        s = orjson.dumps(value).decode()
    except TypeError:
        s = repr(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def provider_detail(resp: NormalisedResponse | None, key: str) -> Any:
    """A provider detail of a response by key, up to two levels deep (``finishMessage``,
    ``blockReasonMessage``, ``safetyRatings`` …), or ``None``."""
    if resp is None or not resp.provider_details:
        return None
    stack: list[tuple[Any, int]] = [(resp.provider_details, 0)]
    while stack:
        d, depth = stack.pop()
        if not isinstance(d, dict):
            continue
        if d.get(key) is not None:
            return d[key]
        if depth < 2:
            stack.extend((v, depth + 1) for v in d.values() if isinstance(v, dict))
    return None


Check = Callable[[TurnContext], Iterable[Finding]]
#: Runs once per conversation after the last turn (e.g. "stopped while tool calls were pending").
FinalCheck = Callable[[ConversationState], Iterable[Finding]]
