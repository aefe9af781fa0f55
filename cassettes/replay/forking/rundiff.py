"""Where two runs of the same agent diverge, by conversation, turn and layer (``looptap diff``).

Conversations are paired in the order they started, turns by their index in the conversation.
For each pair of turns: the requests are compared the way replay matches them (:class:`Comparing`:
ids and timestamps normalised, and, as ``looptap replay`` has them, the built-in volatile detectors
— each run's with its own working directory and home — and the project's rules; the differences
attributed to the client's dispatch, layer C; a difference only in what the matching tolerates is
listed as tolerated, :mod:`cassettes.matching`, not as a divergence), then what the
model emitted (text, tool calls, refusal: layer E, compared as emitted: a date the model wrote
otherwise is something it said otherwise) and what the API reported (status, finish reason, error,
completeness: layer A). Token counts and latencies differ on every real run and are not divergences.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...analysis import RunAnalysis, Turn
from ...hints import count
from ...matching import (
    IGNORED,
    Change,
    RequestKey,
    Rules,
    Tolerated,
    VolatileSpans,
    attribute,
    bare_text,
    json_diff,
    recorded,
    rules_of_args,
    this_process,
    tolerated,
    tool_result_changes,
)
from ...reading import Relation, header_time, read_entries
from ...wire import Exchange
from ..live.edits import edit_notes
from ._forkchanges import Folding, fork_changes
from ._lineup import (
    Comparing,
    Lineup,
    conversation_pairs,
    emitted,
    lined_up,
    reported,
    turns_of,
)
from .divergence import Divergence, Divergences, Pair

if TYPE_CHECKING:
    from ...reading import Run

__all__ = ["branch_diff", "comparing", "comparing_files"]


def comparing(
    rules: Rules | None, header_a: Any, header_b: Any, volatile: bool = True
) -> Comparing:
    """How ``looptap diff A B`` compares requests: as ``looptap replay A`` matches them — the
    ``rules`` (:func:`~cassettes.matching.rules_of_args`: the project's for A's cassette, as the
    replay finds them, with the command line's), and
    the built-in detectors unless turned off (``volatile=False``: ``--no-volatile``; or the
    project's ``volatile = false``). The detectors, one set for both sides (a text both hold is
    scanned once), know the working directories and homes both headers name (``meta.cwd``,
    ``meta.home``) — as a fork's prefix knows the recording's and its own: a branch's requests
    hold the origin's paths too, in the answers served from it — and where a header does not
    say, this process's (as a replay reads a recording made before the fields existed)."""
    if not volatile or (rules is not None and rules.volatile is False):
        return Comparing(None, rules or None)
    cwd, home = this_process()
    (cwd_a, home_a), (cwd_b, home_b) = recorded(header_a), recorded(header_b)
    here = [cwd] if cwd else []
    cwds = [*(cwd_a or here), *(cwd_b or here)]
    homes = [*(home_a or [home]), *(home_b or [home])]
    spans = VolatileSpans(
        cwds[0] if cwds else None, homes[0], cwds[1:], homes[1:], header_time(header_a)
    )
    return Comparing(spans, rules or None)


def comparing_files(cassette_a: str | Path, header_a: Any, header_b: Any) -> Comparing:
    """:func:`comparing` for two cassettes and no command line (MCP, the inspector): the
    project's rules for A's, the detectors unless the project turns them off."""
    return comparing(rules_of_args(None, cassette_a), header_a, header_b)


def fork_lined_up(
    rel: Relation, a: Any, b: Any, notes: list[str], *, compare: Comparing
) -> list[Divergence]:
    """B (opened ``b``), a branch forked from A (opened ``a``) as ``rel`` says (its header names
    A as its origin, checked by the digest it keeps: :func:`cassettes.reading.relate`; an
    origin changed since the fork is refused by the caller): the divergences lined up from the
    cursor (:func:`branch_diff`); ``notes`` gets the lines saying how."""
    found = branch_diff(a, b, rel.branch, rel.meta, compare=compare)
    cursor = rel.meta.get("cursor")
    where = cursor.get("text") if isinstance(cursor, dict) else None
    notes.append(
        f"B is a branch of A forked at {where}: lined up from the cursor; the prefix is A's, "
        "served from it (equal by construction)"
    )
    notes.extend(found.said)
    return found.divergences


@dataclass(frozen=True)
class _Runs:
    """The two analysed runs a diff compares: ``exa``/``exb`` give a round trip's exchange by
    seq; ``compare``: how their requests are compared; ``sink``: where what was tolerated goes."""

    ra: RunAnalysis
    rb: RunAnalysis
    exa: Callable[[int], Exchange]
    exb: Callable[[int], Exchange]
    compare: Comparing
    sink: Divergences


def diff_analysed(
    ra: RunAnalysis,
    rb: RunAnalysis,
    exa: Callable[[int], Exchange],
    exb: Callable[[int], Exchange],
    *,
    compare: Comparing,
) -> Divergences:
    """The divergences of two analysed runs; ``exa``/``exb`` give a round trip's exchange by seq;
    ``compare``: how their requests are compared (:func:`comparing`; what it tolerates goes to
    ``tolerated``). At most :data:`~cassettes.replay.forking.divergence.MAX_DIVERGENCES` are kept;
    ``left_out`` counts the others."""
    out = Divergences()
    runs = _Runs(ra, rb, exa, exb, compare, out)
    for ca, cb, offset in conversation_pairs(ra, rb):
        if ca is None or cb is None:
            present = ca or cb
            assert present is not None
            who, other = ("A", "B") if ca is not None else ("B", "A")
            message = (
                f"run {who} has a conversation run {other} never started "
                f"({count(len(present.turns), 'turn')})"
            )
            out.add([Divergence("C", message, ca.id if ca else None, cb.id if cb else None)])
            continue
        out.add(_diff_conversation(runs, ca.turns, cb.turns, ca.id, cb.id, offset))
    return out


def _diff_conversation(
    runs: _Runs,
    ta: list[int],
    tb: list[int],
    ida: str,
    idb: str,
    offset: int = 0,
    fork: dict[str, Any] | None = None,
) -> Iterator[Divergence]:
    """The divergences of two conversations turn by turn (``ta``/``tb``: their seqs; ``offset``:
    the turn index of their first, as its run numbers it: a branch, its origin's numbers), as
    they are found. With ``fork`` (B is a branch of A: its ``meta.origin``), what the fork itself
    changed is labelled as the fork's (:func:`fork_changes`) and the differences that follow fold
    under the change they follow from (:class:`Folding`); a branch forked with ``--prefix
    tolerant`` tolerates a request that differs only in tool results, as its prefix did."""
    folding = Folding() if fork is not None else None
    results = fork is not None and fork.get("prefix") == "tolerant"
    for k in range(min(len(ta), len(tb))):
        xa, xb = runs.exa(ta[k]), runs.exb(tb[k])
        found = _diff_turn(runs, Pair(ida, idb, k + offset, ta[k], tb[k]), xa, xb, results)
        if fork is not None and folding is not None:
            found = folding.fold(fork_changes(found, xa, xb, fork), k + offset)
        # not held while the caller takes this turn's divergences: a turn's bodies can be huge
        del xa, xb
        yield from found
    if len(ta) != len(tb):
        longer, who = (ta, "A") if len(ta) > len(tb) else (tb, "B")
        n = abs(len(ta) - len(tb))
        k = min(len(ta), len(tb))
        yield Divergence(
            "C",
            f"run {who} went on for {n} more turn{'s' if n > 1 else ''} (from turn {k + offset}); "
            f"the other stopped after turn {k + offset - 1}",
            ida,
            idb,
            k + offset,
            longer[k] if who == "A" else None,
            longer[k] if who == "B" else None,
        )


def _diff_turn(
    runs: _Runs, at: Pair, xa: Exchange, xb: Exchange, results: bool
) -> list[Divergence]:
    """One pair of turns: the request (layer C, as replay matches; what the matching tolerates
    goes to the sink, and with ``results`` a request that differs only in tool results too), what
    the model emitted (E) and what the API reported (A)."""
    turn_a, turn_b = runs.ra.turns[at.sa], runs.rb.turns[at.sb]
    out = _request_divergences(runs, at, xa, xb, _new_client_findings(turn_a, turn_b), results)
    for layer, view, what in (
        ("E", emitted, "the model emitted something else"),
        ("A", reported, "the API reported something else"),
    ):
        ch = json_diff(view(turn_a), view(turn_b), ("response",))
        if ch:
            fields = ", ".join(dict.fromkeys(str(c.path[1]) for c in ch if len(c.path) > 1))
            out.append(at.divergence(layer, f"{what} ({fields})", ch[0].where, ch))
    if xb.edits:
        for d in out:  # a C divergence inside an item the fork's edit rewrote is that edit
            d.edited_b = edit_notes(xb.edits, d.path) if d.layer == "C" else []
    return out


def _new_client_findings(turn_a: Turn, turn_b: Turn) -> list[str]:
    """The client-dispatch findings (warnings and errors) run B has at a turn and run A has not."""
    known = {f.code for f in turn_a.findings}
    return [
        f"{f.code}: {f.message}"
        for f in turn_b.findings
        if f.layer == "C" and f.severity.value != "info" and f.code not in known
    ]


def _request_divergences(
    runs: _Runs, at: Pair, xa: Exchange, xb: Exchange, said: list[str], results: bool
) -> list[Divergence]:
    """How two requests differ as replay matches them (each divergence with its body changes), the
    first C divergence carrying ``said`` (B's new client findings at this turn). A difference only
    in what the matching tolerates is no divergence: it goes to the sink (with ``results``,
    requests that differ only in tool results too)."""
    ka, kb = runs.compare.key(xa), runs.compare.key(xb)
    changes = json_diff(ka.body, kb.body) if ka.is_json and kb.is_json else []
    if ka.spans or kb.spans:
        changes += _marked_apart(ka, kb, changes)
    spans = _tolerated_spans(ka, kb, changes)
    found = tool_result_changes(ka, kb, changes) if results and changes else None
    if found is not None:
        # (the spans elsewhere: as the prefix lists them, Matcher.in_position)
        items = {t.path[:2] for t in found}
        runs.sink.tolerate(at, [t for t in spans if t.path[:2] not in items] + found)
        return []
    runs.sink.tolerate(at, spans)
    if changes and (ka.spans or kb.spans):
        changes = [_as_sent(c, ka, kb) for c in changes]
    return _attributed(at, ka, kb, changes, said)


def _attributed(
    at: Pair, ka: RequestKey, kb: RequestKey, changes: list[Change], said: list[str]
) -> list[Divergence]:
    """The differences of two requests as divergences, by the layer each group implicates; the
    first C divergence carries ``said``."""
    out: list[Divergence] = []
    for v in attribute(ka, kb, changes):
        mine = (
            [c for c in changes if c.where.startswith(v.path)]
            if v.path not in ("(url)", "(body)")
            else []
        )
        d = at.divergence(
            v.layer, v.message, v.path, mine or changes[:3], dict(ka.ids), dict(kb.ids)
        )
        if v.layer == "C" and said:
            d.findings_b, said = said, []  # once per turn, on its first C divergence
        out.append(d)
    return out


def _under(path: tuple[Any, ...], changed: list[tuple[Any, ...]]) -> bool:
    return any(path[: len(p)] == p for p in changed)


def _tolerated_spans(ka: RequestKey, kb: RequestKey, changes: list[Change]) -> list[Tolerated]:
    """Where two requests differ only in a tolerated span
    (:func:`cassettes.matching.tolerated`), outside the values that differ anyway
    (``changes``: there the spans need not pair up); none when the body diff was cut short (what
    lies past it is not known to be equal)."""
    if (not ka.spans and not kb.spans) or len(changes) >= _DIFF_LIMIT:
        return []
    found = tolerated(ka.spans, kb.spans)
    if not changes:
        return found
    changed = [c.path for c in changes]
    return [t for t in found if not _under(t.path, changed)]


#: What :func:`~cassettes.matching.json_diff` lists at most.
_DIFF_LIMIT = 1000


def _marks(key: RequestKey) -> dict[tuple[Any, ...], list[str]]:
    out: dict[tuple[Any, ...], list[str]] = {}
    for s in key.spans:
        if s.detector != IGNORED:
            out.setdefault(s.path, []).append(s.detector)
    return out


def _marked_apart(ka: RequestKey, kb: RequestKey, changes: list[Change]) -> list[Change]:
    """The values equal as compared whose spans differ — a request that says ``<date>``
    literally is not the one that had a date there (the replay's digest tells them apart): each a
    change of the values as sent. Fail closed: what the spans do not pair up is not tolerated."""
    ma, mb = _marks(ka), _marks(kb)
    if ma == mb:
        return []
    changed = [c.path for c in changes]
    out = []
    for path in dict.fromkeys([*ma, *mb]):
        if ma.get(path) != mb.get(path) and not _under(path, changed):
            out.append(Change(path, "changed", _at(ka.raw, path), _at(kb.raw, path)))
    return out


_MISSING = object()


def _at(raw: Any, path: tuple[Any, ...]) -> Any:
    """The value at ``path`` in a request body as sent (:data:`_MISSING` where there is none)."""
    for p in path:
        if isinstance(raw, dict) and isinstance(p, str) and p in raw:
            raw = raw[p]
        elif isinstance(raw, list) and isinstance(p, int) and 0 <= p < len(raw):
            raw = raw[p]
        else:
            return _MISSING
    return raw


def _as_sent(c: Change, ka: RequestKey, kb: RequestKey) -> Change:
    """``c`` with each value that holds a span (``<date>``, ``<cwd>``, a rule's replacement) shown
    as the run sent it, where the body as sent has a value of the same kind at that path (a
    content list compared as its one text part: that text); other values as compared."""

    def sent(key: RequestKey, value: Any) -> Any:
        if not any(s.path[: len(c.path)] == c.path for s in key.spans):
            return value
        got = _at(key.raw, c.path)
        if isinstance(value, str):
            got = bare_text(got)
        return got if type(got) is type(value) else value

    return replace(
        c,
        expected=sent(ka, c.expected) if c.kind != "added" else None,
        actual=sent(kb, c.actual) if c.kind != "removed" else None,
    )


@dataclass
class ForkDiff:
    """A branch beside its origin, lined up once from the cursor (:func:`branch_diff`)."""

    divergences: Divergences
    #: Lines that say how the two were lined up.
    said: list[str]
    #: Every turn of the branch lined up with the origin's (:func:`turns_of`).
    turns: list[tuple[str, int, int | None, int]]


def branch_diff(
    a: Run, b: Run, path_b: str | Path, meta: dict[str, Any], *, compare: Comparing
) -> ForkDiff:
    """How the branch ``b`` (the file ``path_b``, whose header's ``meta.origin`` is ``meta``)
    differs from its origin ``a``, the one way ``looptap diff``, the inspector's Fork tab and MCP's
    ``fork_diff`` see it: with what the fork noted after the run (the prefix's tolerated, where
    ``@divergence`` went live: :func:`~cassettes.reading.with_notes`), the origin's turns at
    the cursor as the fork sent them (a chained turn self-contained:
    :func:`~cassettes.replay.live.chains.as_sent_live`, so the rewrite is no difference of the
    client), lined up once (:func:`~cassettes.replay.forking._lineup.lined_up`)."""
    origin, exa, lineup = lined_up(a, b, path_b, meta, compare)
    runs = _Runs(a.analysis, b.analysis, exa, b.exchange_by_seq, compare, Divergences())
    return ForkDiff(runs.sink, _diff_fork(runs, origin, lineup), turns_of(lineup))


def _diff_fork(runs: _Runs, origin: dict[str, Any], lineup: Lineup) -> list[str]:
    """A branch (``runs.rb``, forked from ``runs.ra`` at ``origin``'s cursor) as ``lineup`` lined it
    up from the cursor (:func:`~cassettes.replay.forking._lineup.lined_up`: each conversation of the
    branch continues the origin's conversation whose turn at the cursor its first request is
    closest to); the turns before the cursor are the origin's (served from it, equal by
    construction) and are not compared; past it the requests are compared as ``runs.compare`` says
    (:func:`comparing`); the divergences go to ``runs.sink``. Returns the lines that say how the
    two were lined up."""
    pairs, lone, free = lineup
    out = runs.sink
    said: list[str] = []
    # the prefix's, as the fork noted it; then past the cursor
    out.tolerated = read_entries(origin.get("tolerated"))
    for cb in lone:
        out.append(
            Divergence(
                "C",
                "the branch has a conversation past the cursor that no conversation of the origin "
                f"continues ({count(len(cb.turns), 'turn')})",
                None,
                cb.id,
            )
        )
    for cid, seqs, turn, cb in pairs:
        said.append(
            f"conversation {cid} (A) ↔ {cb.id} (B): lined up from the cursor at turn {turn} "
            f"({'turn 0' if turn == 1 else f'turns 0-{turn - 1}'} served from A)"
            if turn
            else f"conversation {cid} (A) ↔ {cb.id} (B): live from its first turn"
        )
        out.extend(_diff_conversation(runs, seqs, cb.turns, cid, cb.id, turn, origin))
    for cid, (seqs, turn) in free.items():
        out.append(
            Divergence(
                "C",
                f"conversation {cid} reached the cursor (turn {turn}) in A but has no turn past it "
                "in the branch: the agent stopped before it",
                cid,
                None,
                turn,
                seqs[0],
            )
        )
    gone_live = {cid for cid, *_ in pairs} | set(free)
    replayed = [str(c.id) for c in runs.ra.conversations if str(c.id) not in gone_live]
    if replayed:
        said.append(
            "replayed in full from A (not past the cursor, equal by construction): "
            f"{', '.join(replayed[:20])}"
        )
    return said
