"""The token-cost growth chart: stacked input segments and output per turn, cumulative cost line."""

from __future__ import annotations

from typing import Any, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from cassettes.growth import GrowthBar

__all__ = ["GrowthChart", "GrowthView"]

#: Most bars drawn at once; longer conversations show a window around the selected turn.
WINDOW = 60

SERIES = (
    ("system", "yellow"),
    ("tools", "orange"),
    ("history", "blue"),
    ("tool results", "cyan"),
    ("new input", "green"),
    ("output", "magenta"),
)


class GrowthChart(PlotextPlot):
    """A stacked bar per turn (input by segment, then output) and the cumulative cost on the right axis."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._bars: list[GrowthBar] = []

    def show_bars(self, bars: list[GrowthBar], title: str) -> None:
        self._bars = bars
        plt = self.plt
        plt.clear_figure()
        plt.title(title)
        if not bars:
            plt.title(f"{title}: no turns yet")
            self.refresh()
            return
        xs = [b.turn for b in bars]
        columns = [
            [b.system for b in bars],
            [b.tools for b in bars],
            [b.history for b in bars],
            [b.tool_results for b in bars],
            [b.new for b in bars],
            [b.output for b in bars],
        ]
        # textual-plotext's stubs lag plotext 5.3: ``stacked_bar`` takes ``labels`` and a colour per
        # series, ``ylabel`` takes ``yside``.
        loose = cast(Any, plt)
        # No plotext legend (it is drawn over the first bars): GrowthView prints one under the chart.
        loose.stacked_bar(xs, columns, color=[c for _, c in SERIES], width=0.7)
        plt.xlabel("turn")
        plt.ylabel("tokens")
        costs = [float(b.cumulative_cost) if b.cumulative_cost is not None else None for b in bars]
        known = [(x, c) for x, c in zip(xs, costs, strict=True) if c is not None]
        if known:
            plt.plot(
                [x for x, _ in known], [c for _, c in known], yside="right", color="red", marker="braille"
            )
            loose.ylabel("cumulative cost (USD)", yside="right")
        self.refresh()


class GrowthView(Vertical):
    """The chart and, under it, the figures of the selected turn."""

    def compose(self) -> ComposeResult:
        yield GrowthChart(id="growth-chart")
        legend = Text(
            "  ".join(f"\u2588 {name}" for name, _ in SERIES) + "  \u2801\u2802 cumulative cost (right axis)"
        )
        for i, (_, colour) in enumerate(SERIES):
            start = sum(len(f"\u2588 {n}  ") for n, _ in SERIES[:i])
            legend.stylize(colour if colour != "orange" else "dark_orange", start, start + 1)
        legend.stylize(
            "red",
            len(legend) - len("\u2801\u2802 cumulative cost (right axis)"),
            len(legend) - len(" cumulative cost (right axis)"),
        )
        yield Static(legend, id="growth-legend")
        yield Static(id="growth-detail")

    def show_bars(self, bars: list[GrowthBar], selected: int | None, conversation: str) -> None:
        """The bars of one conversation (attributes down); ``selected`` is the selected turn's seq."""
        at = next((i for i, b in enumerate(bars) if b.seq == selected), len(bars) - 1)
        lo = max(0, min(at - WINDOW // 2, len(bars) - WINDOW))
        window = bars[lo : lo + WINDOW]
        span = f" (turns {window[0].turn}–{window[-1].turn} of {len(bars)})" if len(bars) > WINDOW else ""
        self.query_one(GrowthChart).show_bars(
            window, f"token-cost growth · conversation {conversation}{span}"
        )
        detail = self.query_one("#growth-detail", Static)
        if not bars:
            detail.update("")
            return
        b = bars[at]
        cost = "unknown" if b.cumulative_cost is None else f"${b.cumulative_cost:.4f}"
        line = Text.assemble(
            (f"turn {b.turn} (#{b.seq}) ", "bold"),
            f"input {b.input:,} = ",
            *[
                piece
                for name, value, style in (
                    ("system", b.system, "yellow"),
                    ("tools", b.tools, "dark_orange"),
                    ("history", b.history, "blue"),
                    ("results", b.tool_results, "cyan"),
                    ("new", b.new, "green"),
                )
                for piece in ((f"{name} {value:,}", style), " · ")
            ][:-1],
            f"  output {b.output:,}  cumulative {cost}",
            (f"  [{b.source}; split by segment estimated]", "dim"),
        )
        detail.update(line)
