"""``looptap run``'s closing summary of the run it recorded: round trips, conversations and
turns, findings by layer, tokens and cost, and the command that shows the details."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..cassettes.analysis import analyse
from ..cassettes.hints import command_line, count, looptap_argv
from ..cassettes.reading import open_run
from ..cassettes.views import estimated_note, estimated_why, money

__all__ = ["details_line", "summary_lines"]


def summary_lines(path: Path, before: int = 0) -> list[str]:
    """``looptap run``'s closing summary of the run it recorded into ``path`` (of the round trips
    after the first ``before``, when it appended to an earlier recording)."""
    try:
        if before:  # appended to an earlier recording: this run's round trips only, on their own
            recorded = open_run(path, whole=True, formats=("looptap",))
            exchanges = len(recorded.exchanges) - before
            run = analyse(list(recorded.exchanges)[before:])
        else:
            # Read as `show` reads it: analysed as a stream and kept (docs/kept-analysis.md), never
            # the whole run in memory.
            streamed = open_run(path, formats=("looptap",))
            try:
                exchanges = len(streamed.exchanges)
                run = streamed.analysis
                return _summary(path, before, exchanges, run)
            finally:
                streamed.close()
    except Exception as exc:
        return [f"could not read {path} for the summary: {exc}"]
    return _summary(path, before, exchanges, run)


def _summary(path: Path, before: int, exchanges: int, run: Any) -> list[str]:
    by_layer = Counter(f.layer for f in run.findings if f.severity.value != "info")
    # one pass over the turns (a streamed run restores each from its store as it is read)
    tokens = [t.tokens for t in run.turns.values()]
    priced = [t for t in tokens if t.cost is not None]
    cost = "unknown"
    if priced:
        why = 0
        for t in priced:
            why |= estimated_why(t)
        notes = ([] if len(priced) == len(tokens) else ["some prices unknown"]) + (
            [estimated_note(why).removeprefix("~: ")] if why else []
        )  # one pair of parentheses, whatever is said in it
        cost = money(sum((t.cost for t in priced), Decimal(0)), bool(why)) + (
            f" ({'; '.join(notes)})" if notes else ""
        )
    return [
        f"{count(exchanges, 'round trip')}{' appended' if before else ''} in {path}: "
        f"{count(len(run.conversations), 'conversation')}, {count(len(run.turns), 'turn')}",
        f"findings (warnings and errors) by layer: E {by_layer['E']}, "
        f"A {by_layer['A']}, C {by_layer['C']}",
        f"tokens in {sum(t.input or 0 for t in tokens)}, out {sum(t.output or 0 for t in tokens)}; "
        f"cost {cost}",
        details_line(path),
    ]


def details_line(path: Path) -> str:
    """The last line of the summary: the command that shows the run, as the user runs looptap."""
    return f"details: {command_line([*looptap_argv(), 'show', str(path)])}"
