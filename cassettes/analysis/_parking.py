"""Parking: a conversation that went quiet on a run with a ``reload`` hook gives up its latest
turn's context (the parsed round trip: a few KB of models), read again if the conversation goes
on. The checks' memory of it stays with the conversation's state (spilled with it), and the
end-of-run checks run on it as it stands when it is parked, their findings applied by
:func:`._final_pass.finish` unless a later turn continues it. So a run of a million one-turn
conversations keeps a small record per conversation, not a parsed round trip each. A failed
latest turn is not parked (the check of its retry reads the failed attempt's timing, which is not
stored)."""

from __future__ import annotations

from ..models import NormalisedRequest
from ..parsing import RoundTrip
from ..wire import Exchange
from ._context import TurnContext
from ._judgement import FINAL_CHECKS, NO_EXCHANGE, failed, run_check, slim
from ._model import MessageCounts, Turn
from ._state import AnalyserState, Parked, conversation_of

__all__ = ["inherit", "park", "place", "placed", "reloaded", "unpark"]


def inherit(poll: NormalisedRequest, polled: NormalisedRequest) -> None:
    """A poll read as a model call (``RoundTrip.polled``) sends nothing of its own: it stands for
    the call it polls, whose model, instructions, tools and settings it takes (so its calls are
    checked against the tools offered, and the next request's tools compare with the same)."""
    poll.model = poll.model or polled.model
    poll.system, poll.tools, poll.params = (
        list(polled.system),
        list(polled.tools),
        dict(polled.params),
    )
    poll.tool_choice, poll.tool_choice_mode = polled.tool_choice, polled.tool_choice_mode


def park(state: AnalyserState, ctx: TurnContext) -> None:
    """Drop the context of a conversation's latest turn that went quiet; kept when it cannot be
    read again as it stands."""
    conv, rt = ctx.conv, ctx.rt
    if (
        state.reload is None
        or ctx.prev is not None
        or failed(rt)
        or conv.turns != [ctx]
        or conv.id in state.parked
    ):
        return
    latest = state.latest.get(conv.id)
    if latest is None or state.contexts.get(latest[0]) is not ctx:
        return
    errors: list[str] = []
    final = [f for check in FINAL_CHECKS for f in run_check(check, conv, errors)]
    state.parked[conv.id] = Parked(
        latest[0], ctx.seq, ctx.turn.findings, final or None, errors or None
    )
    del state.contexts[latest[0]]
    conv.turns = []


def place(turn: Turn, where: tuple[str, int, bool]) -> None:
    """Put ``turn`` where a later request re-read it (``where``: its conversation, its index,
    whether it is that conversation's first turn): the one place a moved turn is made to say so,
    for the analysis kept whole and for a turn a reader restores from its store. A first turn
    follows no request of its conversation: nothing it sent is *as before* or *changed* and
    nothing was dropped (every message is its own, as on any conversation's first turn). What
    the turn appended and paired stays as first read (the history is not parsed again)."""
    turn.conversation, turn.index = where[0], where[1]
    if not where[2]:
        return
    turn.previous_seq = None
    n = turn.c.counts  # (no earlier request of its own it kept, echoed or managed)
    first = {"link": "start", "kept": 0, "rewritten": 0, "echoed_assistant": None, "context": None}
    if n is not None:
        first["counts"] = MessageCounts(sent=n.sent, new=n.sent)
    turn.c = turn.c.model_copy(update=first)


def placed(state: AnalyserState, turn: Turn) -> Turn:
    """``turn`` (restored from a store) put where a later request re-read it, when one did
    (:func:`place`: its conversation, index, previous turn and counts; a C layer read again
    against another previous turn, :func:`._rehome.rejoin`)."""
    where = state.moved.get(turn.seq)
    if where is not None:
        place(turn, where)
    reread = state.reread.get(turn.seq)
    if reread is not None:
        turn.previous_seq, turn.c, turn.tokens = reread
        flagged = state.flagged.get(turn.seq)
        turn.findings = flagged[1] if flagged is not None else []
    return turn


def reloaded(state: AnalyserState, seq: int) -> tuple[Exchange, RoundTrip, Turn]:
    """A turn's round trip read again, as the analysis first read it: a poll read as a model
    call with what it took from the call it polls (:func:`inherit`); the turn where a later
    request put it (:func:`placed`: a turn moved to another conversation is read there)."""
    assert state.reload is not None
    ex, rt, turn = state.reload(seq)
    placed(state, turn)
    if rt.polled and rt.request is not None and turn.previous_seq is not None:
        polled = state.reload(turn.previous_seq)[1].request
        if polled is not None:
            inherit(rt.request, polled)
    return ex, rt, turn


def unpark(state: AnalyserState, tid: int) -> TurnContext | None:
    """The context of a parked conversation's latest turn, read again, as it stood when it was
    parked (history released, exchange dropped), and the conversation live again."""
    assert state.reload is not None
    conv_id = conversation_of(state, tid)
    parked = state.parked.get(conv_id or "")
    if conv_id is None or parked is None or parked.tid != tid:
        return None
    seq = state.seq_of_tid[tid]
    _, rt, turn = reloaded(state, seq)
    assert rt.request is not None
    del state.parked[conv_id]
    conv = state.convs[conv_id]
    if not state.keep_turns:
        turn = slim(turn)
        turn.findings = parked.findings
    n = len(rt.request.messages)
    rt.request.messages = []  # as the analyser releases a quiet conversation's latest history
    rt.forget_history_base()
    ctx = TurnContext(
        seq, rt, NO_EXCHANGE, conv, turn.index, None, [], turn, n, mcp=state.mcp,
        repeats=state.repeats,
    )  # fmt: skip
    conv.turns[:] = [ctx]
    state.contexts[tid] = ctx
    return ctx
