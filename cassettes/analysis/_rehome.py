"""A handed loop re-read (docs/threading.md, "Handoffs read again"): a later request proves that
turns read as one conversation's were another agent's loop, handed the run by a transfer call
(the threader's :attr:`~.threading.Link.rehome`). They leave the conversation for one of their
own, ``handoff`` under the transferring turn; the conversation goes on from the transfer. Done
once, when the evidence comes: the moved turns are renumbered from 0, their findings with them,
and what followed only from reading them as the conversation's next steps (the prompt cache
broken by the new agent's system prompt and tools) is withdrawn."""

from __future__ import annotations

from . import codes as codes
from ._context import ConversationState
from ._model import Conversation, Finding, MessageCounts, Turn
from ._state import AnalyserState, turn_findings
from .threading import Link

__all__ = ["place", "rehome"]


def rehome(st: AnalyserState, link: Link) -> None:
    """Move the turns ``link.rehome`` names (threader turn ids, first and last, of
    ``link.conversation``) to the conversation ``link.rehomed_to``, a handoff under
    ``link.previous``."""
    if link.rehome is None or link.rehomed_to is None or link.previous is None:
        return
    old, new = link.conversation, link.rehomed_to
    first = st.seq_of_tid[link.rehome[0]]
    parent = st.seq_of_tid[link.previous]
    where = st.records.get(old)
    state = st.convs.get(old)
    if where is None or state is None:
        return
    record = st.conversations.record(where)
    turns = record.turns
    at = next((i for i in range(len(turns) - 1, -1, -1) if turns[i] == first), None)
    if at is None:
        return
    moved = turns[at:]
    del turns[at:]
    st.records[new] = st.conversations.append(
        Conversation.model_construct(
            id=new,
            family=record.family,
            turns=moved,
            label=None,
            title=record.title,
            parent_seq=parent,
            branch="handoff",
        )
    )
    st.handed_off.add(parent)
    offset = state.first + at
    _move_state(st, old, new, state, len(turns), len(moved))
    for k, seq in enumerate(moved):
        _renumber(st, seq, new, k, offset, first_turn=k == 0)


def _move_state(
    st: AnalyserState, old: str, new: str, state: ConversationState, kept: int, moved: int
) -> None:
    """The loop's latest turn's context goes with it, and a shallow copy of the checks' memory
    (for its end-of-run checks: the loop is over); the conversation starts again from its turn
    before the transfer and keeps its memory as it was read (no copy that grows with the run:
    a supervisor of 500 rounds moves 500 loops)."""
    back = ConversationState(
        old, state.family, count=state.first + kept, first=state.first, state=state.state
    )
    state.state = dict(state.state)
    state.id, state.count, state.first = new, moved, 0
    for ctx in state.turns:
        ctx.index = moved - 1
    st.convs[new] = state
    st.convs[old] = back
    latest = st.latest.get(old)
    if latest is not None:
        st.latest[new] = latest
        del st.latest[old]
    if old in st.histories:
        st.histories[new] = st.histories.pop(old)
    parked = st.parked.get(old)
    if parked is not None:
        st.parked[new] = parked
        del st.parked[old]


def _renumber(st: AnalyserState, seq: int, new: str, k: int, offset: int, first_turn: bool) -> None:
    """Turn ``seq`` is now the ``k``-th of ``new`` (it was the ``k + offset``-th of the
    conversation it left): its place and its findings' say so; the first one's cache break
    (the new agent's system prompt and tools) no longer follows from anything."""
    st.moved[seq] = (new, k, first_turn)
    turn = st.result.turns.get(seq) if st.keep_turns else None
    if turn is not None:
        place(turn, st.moved[seq])
    findings = turn_findings(st, seq)
    if findings is None:
        return
    if first_turn:
        findings[:] = [f for f in findings if f.code != codes.CACHE_PREFIX_BROKEN]
    for f in findings:
        _refile(f, new, k, offset)


def place(turn: Turn, where: tuple[str, int, bool]) -> None:
    """Put ``turn`` where a later request re-read it (``where``: its conversation, its index,
    whether it is that conversation's first turn): the one place a moved turn is made to say so,
    for the analysis kept whole and for a turn a reader restores from its store. A first turn
    follows no request of its conversation: nothing it sent is *as before* or *changed* and
    nothing was dropped (every message is its own, as on any conversation's first turn)."""
    turn.conversation, turn.index = where[0], where[1]
    if not where[2]:
        return
    turn.previous_seq = None
    n = turn.c.counts
    if n is not None:
        turn.c.counts = MessageCounts(sent=n.sent, new=n.sent)


def _refile(f: Finding, new: str, k: int, offset: int) -> None:
    f.conversation, f.turn = new, k
    if f.related_turn is not None:
        f.related_turn = f.related_turn - offset if f.related_turn >= offset else None
