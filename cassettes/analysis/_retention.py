"""What the analyser keeps of the turns it analysed (see :mod:`._analyser`'s docstring): the latest
turn's context of each conversation, the parsed histories of the most recently active ones, and
recent round trips to parse a later request against; functions over an
:class:`~._state.AnalyserState`. A context that was dropped is read again (:func:`context`)."""

from __future__ import annotations

from ..parsing import RoundTrip
from . import _parking as parking
from ._context import TurnContext
from ._mcp import put
from ._state import AnalyserState

__all__ = ["context", "make_latest", "release_history", "remember"]


def remember(state: AnalyserState, seq: int, rt: RoundTrip, tid: int | None) -> None:
    """Keep ``rt`` among the recent round trips a later request may be parsed against."""
    put(state.rts, seq, (rt, tid), 4 * state.active)


def context(state: AnalyserState, tid: int) -> TurnContext | None:
    """The context of an earlier turn, read again if it was released."""
    ctx = state.contexts.get(tid)
    if ctx is not None or state.reload is None or not 0 <= tid < len(state.seq_of_tid):
        return ctx
    parked = parking.unpark(state, tid)
    if parked is not None:
        return parked
    ex, rt, turn = parking.reloaded(state, state.seq_of_tid[tid])
    assert rt.request is not None
    conv = state.convs[turn.conversation]
    msgs = rt.request.messages
    return TurnContext(turn.seq, rt, ex, conv, turn.index, None, msgs, turn, len(msgs))


def make_latest(state: AnalyserState, conv: str, tid: int, pos: int, ctx: TurnContext) -> None:
    """``ctx`` (turn ``tid``, at position ``pos``) is the latest of ``conv``: the one it
    supersedes is dropped, and the conversations that went quiet release their histories (and
    are parked, :func:`._parking.park`)."""
    before = state.latest.get(conv)
    state.latest[conv] = (tid, pos)
    if before is not None:
        # Superseded: a later turn reaches it again only through a previous_response_id
        # (read again when possible). A fork leaves it behind without taking it as prev.
        old = (
            state.contexts.pop(before[0], None)
            if state.reload is not None
            else state.contexts.get(before[0])
        )
        if old is not None and old is not ctx.prev:
            release_history(state, old)
    state.contexts[tid] = ctx
    state.histories.pop(conv, None)
    state.histories[conv] = ctx
    while len(state.histories) > state.active:
        _, quiet = state.histories.popitem(last=False)
        release_history(state, quiet)
        if quiet is not ctx:  # (the turn being added is parked once it is settled, if ever)
            parking.park(state, quiet)


def release_history(state: AnalyserState, ctx: TurnContext) -> None:
    """Drop a turn's parsed history, keeping its length: once the turn after it was checked
    (no check looks two turns back), or when its conversation went quiet (a continuation is
    threaded by the hashes the threader keeps, and parsed in full). A long run would otherwise
    hold one full message list per turn, or per conversation."""
    ctx.messages = []
    if ctx.seq in state.owned:
        state.owned.discard(ctx.seq)
        if ctx.rt.request is not None:
            ctx.rt.request.messages = []
            ctx.rt.forget_history_base()
    state.rts.pop(ctx.seq, None)
