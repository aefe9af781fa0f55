"""The end-of-run pass (:func:`finish`): the end-of-run checks on each conversation's last turn
(run when it was parked, for a parked one: :mod:`._parking`), their findings added to the turns
they concern, and the run's findings in order."""

from __future__ import annotations

from collections.abc import Iterable

from . import codes as codes
from . import dispatch as dispatch
from ._judgement import FINAL_CHECKS, run_check
from ._model import Finding, RunAnalysis
from ._provenance import weigh_tool_answers
from ._state import AnalyserState, settle_rendered, turn_findings
from .spill import SpillMap

__all__ = ["finish"]

#: The latest turn of each conversation, by seq: its findings (the list end-of-run checks add to)
#: and its position.
_Last = SpillMap[int, tuple[list[Finding], int]]


def finish(state: AnalyserState) -> RunAnalysis:
    """Run the end-of-run checks and return the analysis (once, after the last round trip)."""
    result = state.result
    settle_rendered(state)  # (the rendered side calls no summary came from: hand-offs)
    # the calls still awaiting their result at the end: every tool HTTP call read
    weigh_tool_answers(state.tools.awaiting.items(), state.tools, lambda s: turn_findings(state, s))
    # Live conversations first; a parked one's as its turn comes (in order).
    last: _Last = SpillMap(state.spill, state.keep, lambda _, v: not v[0])
    for conv_id, conv in list(state.convs.hot_items()):
        for ctx in conv.turns:
            last[ctx.seq] = (ctx.turn.findings, state.latest[conv_id][1])
    for conv_id in state.conversations.ids():
        for f in _final_findings(state, conv_id, last):
            _apply_final(state, f, last)
        last.trim()
    if state.keep_turns:
        found = [f for t in result.turns.values() for f in t.findings]
        # the failed API calls that are no model call (an embedding's 404): on no turn
        found += [f for s, (_, fs) in state.flagged.items() if s not in result.turns for f in fs]
    else:
        ordered = sorted(state.flagged.values(), key=lambda p: p[0])
        found = [f for _, fs in ordered for f in fs]
    _carry(found)
    result.findings = dispatch.ordered_findings(found)
    return result


def _carry(found: list[Finding]) -> None:
    """A report of a loop is linked by its check to the first repeated call of the loop, on an
    earlier round trip (``C.loop_reported_not_stopped``, info under ``E.repeated_call``): that
    cause carries the report's warning, as a cause carries what it caused on its own round trip
    (:func:`~cassettes.analysis.dispatch._roots.fold_root_causes`). Changed in place: the turns'
    lists hold the same findings."""
    causes = {
        (d["caused_by"], d.get("caused_by_conversation", f.conversation), d.get("caused_by_seq"))
        for f in found
        if f.code == codes.LOOP_REPORTED_NOT_STOPPED and (d := f.details).get("caused_by")
    }
    if not causes:
        return
    carried = codes.ROWS[codes.LOOP_REPORTED_NOT_STOPPED].severity
    for f in found:
        if (
            (f.code, f.conversation, f.seq) in causes
            and not dispatch.is_consequence(f)
            and f.severity.rank < carried.rank
        ):
            f.severity = carried


def _final_findings(state: AnalyserState, conv_id: str, last: _Last) -> Iterable[Finding]:
    """What the end-of-run checks found on one conversation (run when it was parked, if it
    was)."""
    if conv_id in state.parked:
        parked = state.parked.peek(conv_id)  # one with findings to add to is in memory
        last[parked.seq] = (parked.findings, state.latest.peek(conv_id)[1])
        state.result.errors.extend(parked.errors or ())
        return [f for f in parked.final or () if not _handed_over(state, f)]
    conv = state.convs.peek(conv_id)
    return [
        f
        for final in FINAL_CHECKS
        for f in run_check(final, conv, state.result.errors)
        if not _handed_over(state, f)
    ]


def _handed_over(state: AnalyserState, f: Finding) -> bool:
    """``f`` says a turn's calls were left pending, but the turn handed the run to another
    agent, which went on (a ``handoff`` conversation branched from it)."""
    return f.code == codes.STOPPED_WITH_PENDING_CALLS and f.seq in state.handed_off


def _apply_final(state: AnalyserState, f: Finding, last: _Last) -> None:
    """Add an end-of-run finding to its turn's findings."""
    target = state.result.turns.get(f.seq) if f.seq is not None else None
    latest = last.get(f.seq) if target is None and f.seq is not None else None
    findings = (
        target.findings if target is not None else (latest[0] if latest is not None else None)
    )
    if findings is None:
        return
    findings.append(f)
    findings[:] = dispatch.ordered_findings(findings)  # in place: the list its readers hold
    # (an empty list ``last`` spilled and read back is a copy: the one held from now on)
    held = state.flagged.get(f.seq) if f.seq is not None else None
    if not state.keep_turns and f.seq is not None and latest is not None:
        if held is None or held[1] is not findings:
            state.flagged[f.seq] = (latest[1], findings)
