"""A handed loop re-read (docs/threading.md, "Handoffs read again"): a later request proves that
turns read as one conversation's were another agent's loop, handed the run by a transfer call
(the threader's :attr:`~.threading.Link.rehome`). They leave the conversation for one of their
own, ``handoff`` under the transferring turn; the conversation goes on from the transfer. Done
once, when the evidence comes: the moved turns are renumbered from 0, their findings with them,
and what followed only from reading them as the conversation's next steps (the prompt cache
broken by the new agent's system prompt and tools) is withdrawn."""

from __future__ import annotations

from . import _retention as retention
from . import _tokens as tokens
from . import codes as codes
from . import dispatch
from ._context import ConversationState, TurnContext
from ._judgement import slim
from ._model import Conversation, Finding
from ._parking import place
from ._state import AnalyserState, turn_findings
from .threading import Link

__all__ = ["rehome", "rejoin"]


def rehome(st: AnalyserState, link: Link) -> None:
    """Move the turns ``link.rehome`` names (threader turn ids, first and last, of
    ``link.conversation``) to the conversation ``link.rehomed_to``: a handoff under
    ``link.previous``, or (``link.rehome_branch`` ``None``) a conversation of its own that was
    never this one's (docs/threading.md, "Provider evidence first")."""
    if link.rehome is None or link.rehomed_to is None or link.previous is None:
        return
    old, new = link.conversation, link.rehomed_to
    first = st.seq_of_tid[link.rehome[0]]
    handed = link.rehome_branch is not None
    parent = st.seq_of_tid[link.previous] if handed else None
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
            branch=link.rehome_branch,
        )
    )
    if parent is not None:
        st.handed_off.add(parent)
    offset = state.first + at
    _move_state(st, old, new, state, len(turns), len(moved))
    for k, seq in enumerate(moved):
        _renumber(st, seq, new, k, offset, first_turn=k == 0, opens=not handed)


def rejoin(st: AnalyserState, link: Link) -> None:
    """A side call asked in place (``link.rejoined``: its threader turn id, its conversation,
    the link it would have had) that this request proves was the next turn of
    ``link.conversation`` (docs/threading.md, a question merged into the last message): its
    turn joins that conversation after the turn it was asked over, its C layer read again
    against that turn (what it kept, the answer it did not echo), and its own conversation's
    record goes (it is the run's newest: the threader moves only then). Costs the one turn."""
    if link.rejoined is None:
        return
    tid, side, alt = link.rejoined
    seq = st.seq_of_tid[tid]
    conv = st.convs.get(link.conversation)
    own = st.convs.get(side)
    at = st.records.get(side)
    latest = st.latest.get(side)
    ctx = retention.context(st, tid)
    before = retention.context(st, alt.previous) if alt.previous is not None else None
    if conv is None or own is None or at is None or latest is None or ctx is None:
        return
    if at != len(st.conversations) - 1 or st.conversations.record(at).turns != [seq]:
        return
    st.conversations.pop()
    del st.records[side], st.convs[side], st.latest[side]
    st.conversations.record(st.records[conv.id]).turns.append(seq)
    st.histories.pop(side, None)
    index = conv.count
    conv.count += 1
    ctx.conv, ctx.index, ctx.prev = conv, index, before
    if before is not None and before.messages:
        _read_again(st, seq, ctx, alt, latest[1])
    ctx.prev = None
    retention.make_latest(st, conv.id, tid, latest[1], ctx)
    conv.turns[:] = [ctx]
    st.moved[seq] = (conv.id, index, False)
    turn = st.result.turns.get(seq) if st.keep_turns else None
    if turn is not None:
        place(turn, st.moved[seq])
    for f in turn_findings(st, seq) or ():
        _refile(f, conv.id, index, 0)


def _read_again(st: AnalyserState, seq: int, ctx: TurnContext, alt: Link, pos: int) -> None:
    """The C layer of turn ``seq`` read again against ``ctx.prev`` (as ``alt`` links them): its
    counts and what it kept, and the history checks' findings added to its own; its tokens
    too (the history it re-sent, its cost in the conversation's running total)."""
    assert ctx.prev is not None
    held = st.result.turns.get(seq) if st.keep_turns else None
    work = held if held is not None else ctx.turn.model_copy()
    ctx.turn = work
    work.previous_seq = ctx.prev.seq
    work.c = dispatch.build(ctx, alt)
    work.tokens = tokens.build(ctx)  # (its history split against that turn, its cost added)
    found = [f for check in dispatch.REREAD for f in check(ctx)]
    findings = turn_findings(st, seq)
    if findings is None:
        findings = work.findings = []
        if not st.keep_turns:
            st.flagged[seq] = (pos, findings)
    findings[:] = dispatch.ordered_findings(dispatch.fold_root_causes(ctx, [*findings, *found]))
    if held is None:
        st.reread[seq] = (work.previous_seq, work.c, work.tokens)
        ctx.turn = slim(work)


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


def _renumber(
    st: AnalyserState, seq: int, new: str, k: int, offset: int, first_turn: bool, opens: bool
) -> None:
    """Turn ``seq`` is now the ``k``-th of ``new`` (it was the ``k + offset``-th of the
    conversation it left): its place and its findings' say so; the first one's cache break
    (the new agent's system prompt and tools) no longer follows from anything, nor (``opens``:
    it opens a conversation of its own) what it was judged to have kept or changed of a turn
    before it."""
    st.moved[seq] = (new, k, first_turn)
    turn = st.result.turns.get(seq) if st.keep_turns else None
    if turn is not None:
        place(turn, st.moved[seq])
    findings = turn_findings(st, seq)
    if findings is None:
        return
    if first_turn:
        findings[:] = [
            f
            for f in findings
            if f.code != codes.CACHE_PREFIX_BROKEN
            and not (opens and f.related_turn is not None and f.related_turn < offset)
        ]
    for f in findings:
        _refile(f, new, k, offset)


def _refile(f: Finding, new: str, k: int, offset: int) -> None:
    f.conversation, f.turn = new, k
    if f.related_turn is not None:
        f.related_turn = f.related_turn - offset if f.related_turn >= offset else None
