"""Token-cost growth as chart series: one stacked bar per turn and the cumulative cost line.

The turn's :class:`~cassettes.analysis._model.Segments` split the input by what it carries
(system, tools, user, assistant history, tool results) and say how much of it this turn appended
(``new``, and of it the tool results: ``new_tool_results``, apportioned with the rest, so one
estimator decides every part). A stacked bar needs parts that do not overlap, so ``new`` is taken
out of the categories it came from (the segments are estimates scaled to the reported input; so
is this split). System prompt and
tool schemas are their own parts on every turn, the first one included. Bars stack:
``system + tools + history + tool_results + new == input``, then ``output`` on top.

This is **the** token split of a turn: every view that shows one reads it from here — ``show``'s
growth table and ``show --json`` (``tokens.split``), the inspector's Growth tab, the HTML page's
chart, the MCP ``growth`` tool and the OTel export (``looptap.tokens.split.*``). The raw
:class:`~cassettes.analysis._model.Segments` (``user`` and ``assistant`` apart, ``new`` overlapping
them) are the analysis' working figures and are not shown (issue 43: ``show`` printed them while
the inspector drew this split, and the two disagreed on the same turn).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from ..analysis import Turn

__all__ = ["SPLIT", "GrowthBar", "growth_bars", "split_json"]

#: The split's parts in order: (field and JSON key, column heading in text).
SPLIT: tuple[tuple[str, str], ...] = (
    ("system", "system"),
    ("tools", "tools"),
    ("history", "history"),
    ("tool_results", "results"),
    ("new", "new"),
)


@dataclass(frozen=True, slots=True)
class GrowthBar:
    seq: int
    turn: int
    system: int
    tools: int
    #: User and assistant messages re-sent from earlier turns.
    history: int
    #: Tool results re-sent from earlier turns.
    tool_results: int
    #: What this turn appended (on a conversation's first turn, all its messages).
    new: int
    output: int
    #: Sum of the conversation's known costs so far (``None`` while none is known).
    cumulative_cost: Decimal | None
    #: ``reported`` / ``estimated`` / ``missing`` (the turn's token source).
    source: str
    #: The turn's own cost (``None``: unknown).
    cost: Decimal | None = None
    #: ``cost`` is an estimated price (``~``).
    cost_estimated: bool = False
    #: ``cumulative_cost`` holds an estimated price (``~``).
    cumulative_estimated: bool = False
    #: No split known (a turn whose request was not parsed): ``new`` is the whole input.
    unsplit: bool = False

    @property
    def input(self) -> int:
        return self.system + self.tools + self.history + self.tool_results + self.new


def growth_bars(turns: Iterable[Turn]) -> list[GrowthBar]:
    """The bars of the given turns (usually one conversation's, in order)."""
    out: list[GrowthBar] = []
    for t in turns:
        k = t.tokens
        seg = k.segments
        if seg is None:  # nothing to split by: the whole input is new
            parts = (0, 0, 0, 0, k.input or 0)
        elif t.previous_seq is None and t.index == 0:
            parts = (seg.system, seg.tools, 0, 0, seg.user + seg.assistant + seg.tool_results)
        else:
            # the analysis split re-sent and new parts in one apportioning: they add up
            talk = seg.user + seg.assistant
            new = min(seg.new, talk + seg.tool_results)
            new_results = min(seg.new_tool_results, seg.tool_results, new)
            new_talk = min(new - new_results, talk)
            history, results = talk - new_talk, seg.tool_results - new_results
            parts = (seg.system, seg.tools, history, results, new_talk + new_results)
        out.append(
            GrowthBar(
                t.seq,
                t.index,
                *parts,
                k.output or 0,
                k.cumulative_cost,
                sys.intern(k.source),  # (one string, not a restored turn's copy each)
                k.cost,
                k.price_estimated,
                k.cumulative_estimated,
                unsplit=seg is None,
            )
        )
    return out


def split_json(bar: GrowthBar) -> dict[str, int | bool]:
    """The split as JSON outputs carry it (``show --json``'s ``tokens.split``, the MCP ``growth``
    tool): the five parts, their sum ``input``, and ``estimated`` — always true: the parts are
    estimated from text size and scaled to the reported input (``unsplit``: nothing to split by)."""
    out: dict[str, int | bool] = {name: getattr(bar, name) for name, _ in SPLIT}
    out["input"] = bar.input
    out["estimated"] = True
    if bar.unsplit:
        out["unsplit"] = True
    return out
