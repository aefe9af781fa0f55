"""The state of a run's analysis after its last round trip, as plain data (JSON), and an analyser
standing there again: what a grown file is continued from (docs/kept-analysis.md, "A file that
grew"). Taken just before the end-of-run pass, since that pass's findings say "the run ended
here", and a continued run redoes it over the continued state.

What the next round trip needs, and no more: what threading knows (:mod:`.threading`'s
``threads_state``), each conversation's checks' memory and turn count, the latest turn of each
live conversation (its place only: its round trip is read again from the file, with
``reload``, as a parked one is), the parked conversations, the MCP links, the referenced items and
polled deliveries, and the findings the end-of-run pass may add to (those of each conversation's
latest turn, as they stood before it). What is kept of every turn (its findings, the
conversations, the run's MCP calls) is in the kept analysis' rows already. The recent round trips
a request is parsed against are not kept: a request whose base is gone is parsed whole, to the
same parse. Read back only into the analyser's own types, and checked against the run
(``ValueError`` when it does not check out: the run is then analysed afresh)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ._analyser import RunAnalyser
from ._context import ConversationState, RunRepeats, TurnContext
from ._items import Deliveries, ItemReferences
from ._judgement import NO_EXCHANGE, slim
from ._mcp import McpLinker
from ._model import Finding, McpCall, RunAnalysis
from ._parking import reloaded
from ._plain_values import dump, load
from ._records import Conversations
from ._state import CLASSES, RENDERED_PENDING, AnalyserState, Parked
from ._tool_http import ToolHttpLinker
from .threading import restore_threads, threads_state

__all__ = ["capture", "restore"]

#: The version of the state's layout: another is not continued from.
#: 3: the tools' HTTP links, the run's first repeated call (RunRepeats), the threads' summaries.
#: 4: the tools' HTTP links keyed by conversation and call id, with the calls whose wait ended.
#: 5: the threads' recent requests' rendered texts and what their side calls were given; the
#: rendered side calls no summary came from yet.
#: 6: the threads' side calls asked in place (a later request may prove one a turn).
#: 7: the recent requests' rendered texts end with the turn's answer (a summariser fed a history
#: as text is given it too).
VERSION = 7

_CLASSES = CLASSES
#: The analyser's tables of plain values, as their attributes.
_OWN = {
    "mcp": McpLinker,
    "tools": ToolHttpLinker,
    "items": ItemReferences,
    "delivered": Deliveries,
    "repeats": RunRepeats,
}


def capture(analyser: RunAnalyser) -> dict[str, Any]:
    """The analyser's state after its last round trip, before its end-of-run pass, as JSON-able
    data (``TypeError`` when some of it cannot be: the run is then not continued)."""
    st = analyser.state
    if st.reload is None or st.keep_turns:
        raise TypeError("only an analyser that reloads its turns and keeps none is continued")
    tids = {id(ctx): tid for tid, ctx in st.contexts.items()}
    lasts = [ctx.seq for ctx in st.contexts.values()]

    # The tables are iterators, written a line at a time (:func:`._plain_values.lines`): a
    # conversation's state is read back from the spill and written, never all held at once.
    # ``lasts`` grows as ``parked`` is written, before ``flagged`` (written after it) reads it,
    # and is written itself with the head, last.
    def parked() -> Iterator[list[Any]]:
        for conv_id, p in st.parked.entries():
            lasts.append(p.seq)
            yield [conv_id, p.tid, p.seq, dump(p.final, _CLASSES), p.errors]

    def convs() -> Iterator[list[Any]]:
        for _, c in st.convs.entries():
            turns = [tids[id(ctx)] for ctx in c.turns]  # (KeyError: not a latest turn)
            yield [c.id, c.family, c.count, c.first, dump(c.state, _CLASSES), turns]

    def flagged() -> Iterator[list[Any]]:
        return ([s, st.flagged[s][0], dump(st.flagged[s][1], _CLASSES)]
                for s in lasts if s in st.flagged)  # fmt: skip

    return {
        "version": VERSION, "first_index": analyser.first_index, "pos": st.pos,
        "handed_off": sorted(st.handed_off), "seq_of_tid": st.seq_of_tid.tolist(),
        "rendered": [[tid, conv, *st.asking[tid]] for tid, conv in st.rendered.items()],
        "summarisers": [list(ask) for ask in st.summarisers],
        "owned": sorted(st.owned), "errors": list(st.result.errors),
        "latest": [[c, *at] for c, at in st.latest.entries()],
        "contexts": [[tid, _context(ctx)] for tid, ctx in st.contexts.items()],
        "histories": list(st.histories), "convs": convs(), "parked": parked(),
        "flagged": flagged(), "lasts": lasts, "mcp_calls": dump(st.result.mcp_calls, _CLASSES),
        **{name: {k: dump(v, _CLASSES) for k, v in _kept(getattr(st, name)).items()}
           for name in _OWN},
        "threads": threads_state(st.threader),
    }  # fmt: skip


def _kept(table: object) -> dict[str, Any]:
    """What is kept of one of :data:`_OWN`'s tables: its attributes but its indexes (named
    ``_…``: made again from the rest)."""
    return {k: v for k, v in vars(table).items() if not k.startswith("_")}


def _context(ctx: TurnContext) -> dict[str, Any]:
    """A turn's context as its place and what was released of it (its round trip is read again)."""
    req = ctx.rt.request
    return {
        "seq": ctx.seq, "conv": ctx.conv.id, "index": ctx.index, "n": ctx.n_messages,
        "messages": bool(ctx.messages), "request": len(req.messages) if req is not None else None,
        "started": ctx.started, "ended": ctx.ended, "retry_after": ctx.retry_after,
        "prev": _context(ctx.prev) if ctx.prev is not None else None,
    }  # fmt: skip


def _bad(what: str) -> ValueError:
    return ValueError(f"the analysis' state to continue from: {what} do not check out")


def restore(
    analyser: RunAnalyser,
    data: Any,
    result: RunAnalysis,
    flagged: dict[int, tuple[int, list[Finding]]],
) -> None:
    """Stand the new ``analyser`` (nothing added yet) where :func:`capture` gave ``data``, with
    the kept analysis ``result`` (its conversations, MCP calls) and its findings by turn
    ``flagged`` (after the end-of-run pass: its latest turns' are put back as they stood
    before). ``ValueError`` when ``data`` does not check out (the analyser is then unusable)."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise _bad("the version")
    try:
        _restore(analyser, data, result, flagged)
    except (KeyError, TypeError, IndexError, AttributeError, AssertionError) as exc:
        raise _bad(f"the tables ({type(exc).__name__})") from None


def _restore(
    analyser: RunAnalyser,
    data: dict[str, Any],
    result: RunAnalysis,
    flagged: dict[int, tuple[int, list[Finding]]],
) -> None:
    st = analyser.state
    assert st.pos == 0 and st.reload is not None and not st.keep_turns
    st.threader.close()
    st.threader = restore_threads(data["threads"], st.keep)
    n = len(st.threader.turns)
    analyser.first_index, st.pos = _int(data["first_index"]), _int(data["pos"])
    st.seq_of_tid.extend(_ints(data["seq_of_tid"]))
    if len(st.seq_of_tid) != n:
        raise _bad("the turns")
    st.handed_off, st.owned = set(_ints(data["handed_off"])), set(_ints(data["owned"]))
    _result(st, data, result, flagged)
    _rendered(st, data["rendered"], n)
    _summarisers(st, data["summarisers"])
    for name, cls in _OWN.items():
        table, values = cls(), data[name]
        if set(values) != set(_kept(table)):
            raise _bad(name)
        for k, v in values.items():
            got = load(v, _CLASSES)
            if type(got) is not type(getattr(table, k)):
                raise _bad(name)
            setattr(table, k, got)
        if isinstance(table, ToolHttpLinker):
            table.reindex()
        setattr(st, name, table)
    st.mcp.early.update(  # (an early call is the run's MCP call, changed in place when linked)
        (s, (st.result.mcp_calls.get(s, c), side, a)) for s, (c, side, a) in st.mcp.early.items()
    )
    for conv_id, t, at in data["latest"]:
        if not (type(conv_id) is str and 0 <= _int(t) < n and type(at) is int):
            raise _bad("the latest turns")
        st.latest[conv_id] = (t, at)
        st.latest.trim()
    _conversations(analyser, st, data)


def _result(
    st: AnalyserState,
    data: dict[str, Any],
    result: RunAnalysis,
    flagged: dict[int, tuple[int, list[Finding]]],
) -> None:
    """The kept analysis as it stood before the end-of-run pass: its errors, the findings of
    the turns that pass may add to."""
    errors = data["errors"]
    if not isinstance(errors, list) or not all(type(e) is str for e in errors):
        raise _bad("the errors")
    calls = load(data["mcp_calls"], _CLASSES)
    if not isinstance(calls, dict) or not all(type(c) is McpCall for c in calls.values()):
        raise _bad("the MCP calls")
    conversations = Conversations(result.conversations, spill=st.spill, keep=st.keep)
    st.result = result.model_copy(
        update={"errors": errors, "findings": [], "turns": {}, "mcp_calls": calls,
                "conversations": conversations}
    )  # fmt: skip
    st.conversations = conversations
    for i, conv_id in enumerate(conversations.ids()):
        st.records[conv_id] = i
        st.records.trim()
    st.flagged = dict(flagged)
    for s in _ints(data["lasts"]):
        st.flagged.pop(s, None)
    for s, pos, found in data["flagged"]:
        findings = load(found, _CLASSES)
        if not all(type(f) is Finding for f in findings) or type(pos) is not int:
            raise _bad("the findings")
        st.flagged[_int(s)] = (pos, findings)


def _rendered(st: AnalyserState, data: Any, n: int) -> None:
    """The rendered side calls no summary came from yet: side calls again (the kept analysis
    read them as hand-offs when the run ended there; a request appended may carry their
    answer)."""
    if not isinstance(data, list) or len(data) > RENDERED_PENDING:
        raise _bad("the rendered side calls")
    for item in data:
        if not isinstance(item, list) or len(item) != 4:
            raise _bad("the rendered side calls")
        tid, conv_id, tools, key = item
        if not (0 <= _int(tid) < n and type(conv_id) is str and conv_id in st.records):
            raise _bad("the rendered side calls")
        st.rendered[tid] = conv_id
        st.asking[tid] = (_int(tools), _int(key))
        record = st.conversations.record(st.records[conv_id])
        record.branch = "side_call"
        st.relabelled.update(record.turns)


def _summarisers(st: AnalyserState, data: Any) -> None:
    """How the rendered side calls a carried answer proved summarisers asked."""
    if not isinstance(data, list) or len(data) > RENDERED_PENDING:
        raise _bad("the summarisers")
    for ask in data:
        if len(_ints(ask)) != 2:
            raise _bad("the summarisers")
        st.summarisers[(ask[0], ask[1])] = None


def _conversations(analyser: RunAnalyser, st: AnalyserState, data: dict[str, Any]) -> None:
    """Each conversation's state, its latest turn's context read again, and the parked ones."""
    contexts = {_int(t): raw for t, raw in data["contexts"]}
    for conv_id, family, count, first, memory, turns in data["convs"]:
        state = load(memory, _CLASSES)
        if not (type(conv_id) is str and type(family) is str and isinstance(state, dict)):
            raise _bad("the conversations")
        conv = ConversationState(conv_id, family, count=_int(count), first=_int(first),
                                 state=state)  # fmt: skip
        st.convs[conv_id] = conv
        for tid in turns:
            ctx = _context_of(st, contexts[tid], conv, last=True)
            conv.turns.append(ctx)
            st.contexts[tid] = ctx
    for conv_id in data["histories"]:
        (ctx,) = st.convs[conv_id].turns
        st.histories[conv_id] = ctx
    if len(st.contexts) != len(contexts):
        raise _bad("the latest turns")
    _parked(st, data["parked"])
    st.convs.trim()


def _parked(st: AnalyserState, parked: Any) -> None:
    """The parked conversations: what the end-of-run checks found when they were parked."""
    for conv_id, tid, seq, final, errors in parked:
        if not (conv_id in st.convs and st.seq_of_tid[tid] == seq):
            raise _bad("the parked conversations")
        final = load(final, _CLASSES)
        st.parked[conv_id] = Parked(
            tid, seq, _findings(st, seq, conv_id),
            final if final is None or all(type(f) is Finding for f in final) else [],
            errors if errors is None or all(type(e) is str for e in errors) else None,
        )  # fmt: skip
        st.parked.trim()


def _findings(st: AnalyserState, seq: int, last_of: str | None) -> list[Finding]:
    """The list of a turn's findings the analysis holds: for the latest turn of a conversation
    (``last_of``), one the end-of-run pass may add to, held with the findings by turn (so the
    summary a reader makes of it, before that pass, shows what the pass adds, as in one pass)."""
    found = st.flagged.get(seq)
    if found is None and last_of is not None:
        found = st.flagged[seq] = (st.latest[last_of][1], [])
    return found[1] if found is not None else []


def _context_of(
    st: AnalyserState, raw: Mapping[str, Any], conv: ConversationState, last: bool = False
) -> TurnContext:
    """A latest turn's context (``last``; else the failed attempt one retries), its round trip
    read again and released as it was."""
    seq = _int(raw["seq"])
    _, rt, turn = reloaded(st, seq)
    req = rt.request
    if req is None or raw["conv"] != conv.id or turn.conversation != conv.id:
        raise _bad("the latest turns")
    st.items.resolve(req.messages)
    if raw["request"] == 0:
        req.messages = []
        rt.forget_history_base()
    elif raw["request"] != len(req.messages) or raw["n"] != len(req.messages):
        raise _bad("the latest turns")
    turn = slim(turn)
    turn.findings = _findings(st, seq, conv.id if last else None)
    prev = raw["prev"]
    ctx = TurnContext(
        seq, rt, NO_EXCHANGE, conv, _int(raw["index"]),
        _context_of(st, prev, conv if prev["conv"] == conv.id else st.convs[prev["conv"]])
        if prev is not None
        else None,
        req.messages if raw["messages"] else [], turn, _int(raw["n"]),
        _float(raw["started"]), _float(raw["ended"]), _float(raw["retry_after"]),
        mcp=st.mcp, repeats=st.repeats,
    )  # fmt: skip
    return ctx


def _int(x: Any) -> int:
    if type(x) is not int:
        raise _bad("the numbers")
    return x


def _ints(xs: Any) -> list[int]:
    if not isinstance(xs, list) or not all(type(x) is int for x in xs):
        raise _bad("the numbers")
    return xs


def _float(x: Any) -> float | None:
    if x is not None and type(x) not in (int, float):
        raise _bad("the times")
    return None if x is None else float(x)
