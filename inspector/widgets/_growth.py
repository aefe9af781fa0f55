"""The token-cost growth chart: stacked input segments and output per turn, cumulative cost line."""

from __future__ import annotations

import math
from typing import Any, cast

from rich.color import Color
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from ...cassettes.views import SPLIT, GrowthBar, money

__all__ = ["GrowthChart", "GrowthView"]

#: Most bars drawn at once; longer conversations show a window around the selected turn.
WINDOW = 60

#: Each segment's colour, as a number of the 256-colour palette: drawn by plotext and by the legend
#: from this one table. Not the base 16: Textual paints those with its own theme, in which bright
#: red and bright magenta are one colour (tools and output looked alike). These six follow the
#: Okabe–Ito palette, made to stay apart for the common colour-vision deficiencies; they stay
#: distinct downgraded to 16 colours too (tests/inspector/test_app.py simulates protanopia,
#: deuteranopia and tritanopia and measures the distance of every pair).
SERIES: tuple[tuple[str, int], ...] = (
    ("system", 227),  # yellow
    ("tools", 166),  # vermillion
    ("history", 26),  # blue
    ("tool results", 117),  # sky blue
    ("new input", 35),  # bluish green
    ("output", 176),  # reddish purple
)
#: The cumulative-cost line (braille dots on the right axis): light grey.
COST_COLOUR = 250


def swatch(code: int) -> Style:
    """The Rich style of a palette colour (what the legend and the detail line use)."""
    return Style(color=Color.from_ansi(code), bold=True)


class GrowthChart(PlotextPlot):
    """A stacked bar per turn (input by segment, then output) and the cumulative cost on the right
    axis."""

    def show_bars(self, bars: list[GrowthBar], title: str) -> None:
        plt = self.plt
        plt.clear_figure()
        plt.title(title)
        if not bars:
            plt.title(f"{title}: no turns yet")
            self.refresh()
            return
        xs = [b.turn for b in bars]
        # the input's split (the core's parts, in its order), then the output
        columns = [[getattr(b, field) for b in bars] for field, _ in SPLIT]
        columns.append([b.output for b in bars])
        # textual-plotext's stubs lag plotext 5.3: ``stacked_bar`` takes ``labels`` and a colour per
        # series, ``ylabel`` takes ``yside``.
        loose = cast(Any, plt)
        # No plotext legend (it is drawn over the first bars): GrowthView prints one under the
        # chart.
        loose.stacked_bar(xs, columns, color=[c for _, c in SERIES], width=0.7)
        plt.xlabel("turn")
        plt.ylabel("tokens")
        # Whole tokens and dollars on the axes (plotext's own ticks read 1034.2 and 0.0123).
        top = max(sum(col[i] for col in columns) for i in range(len(bars)))
        ticks = nice_ticks(top)
        loose.yticks(ticks, [token_label(t) for t in ticks])
        loose.ylim(0, ticks[-1])
        _cost_line(loose, xs, bars)
        self.refresh()


def _cost_line(plt: Any, xs: list[int], bars: list[GrowthBar]) -> None:
    """The cumulative cost on the right axis, in dollars (turns without a known cost left out)."""
    costs = [float(b.cumulative_cost) if b.cumulative_cost is not None else None for b in bars]
    known = [(x, c) for x, c in zip(xs, costs, strict=True) if c is not None]
    if not known:
        return
    plt.plot(
        [x for x, _ in known],
        [c for _, c in known],
        yside="right",
        color=COST_COLOUR,
        marker="braille",
    )
    cost_ticks = nice_ticks(max(c for _, c in known))
    plt.yticks(cost_ticks, [dollars(t) for t in cost_ticks], yside="right")
    plt.ylim(0, cost_ticks[-1], yside="right")
    plt.ylabel("cumulative cost (USD)", yside="right")


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Ticks from 0 past ``top`` at a round step (1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    n = math.ceil(top / step - 1e-9)
    return [round(i * step, 12) for i in range(n + 1)]


def token_label(v: float) -> str:
    """A token axis tick: whole tokens, thousands as ``k``."""
    if v >= 10_000:
        return f"{v / 1000:g}k"
    return f"{round(v):,}"


def dollars(v: float) -> str:
    """A cost axis tick in dollars with the digits the step needs (``$0``, ``$0.002``, ``$1.5``)."""
    if v == 0:
        return "$0"
    return "$" + (
        f"{v:.6f}".rstrip("0").rstrip(".") if v < 1 else f"{v:,.2f}".rstrip("0").rstrip(".")
    )


def legend_text() -> Text:
    """The legend, each swatch in its series' colour (from :data:`SERIES`, as the bars are)."""
    legend = Text()
    for i, (name, code) in enumerate(SERIES):
        if i:
            legend.append("  ")
        legend.append("\u2588", style=swatch(code))
        legend.append(f" {name}")
    legend.append("  ")
    legend.append("\u2801\u2802", style=swatch(COST_COLOUR))
    legend.append(" cumulative cost (right axis)")
    return legend


class GrowthView(Vertical):
    """The chart and, under it, the figures of the selected turn."""

    def compose(self) -> ComposeResult:
        yield GrowthChart(id="growth-chart")
        yield Static(legend_text(), id="growth-legend")
        yield Static(id="growth-detail")

    def show_bars(self, bars: list[GrowthBar], selected: int | None, conversation: str) -> None:
        """The bars of one conversation (attributes down); ``selected`` is the selected turn's
        seq."""
        at = next((i for i, b in enumerate(bars) if b.seq == selected), len(bars) - 1)
        lo = max(0, min(at - WINDOW // 2, len(bars) - WINDOW))
        window = bars[lo : lo + WINDOW]
        span = (
            f" (turns {window[0].turn}–{window[-1].turn} of {len(bars)})"
            if len(bars) > WINDOW
            else ""
        )
        self.query_one(GrowthChart).show_bars(
            window, f"token-cost growth · conversation {conversation}{span}"
        )
        detail = self.query_one("#growth-detail", Static)
        if not bars:
            detail.update("")
            return
        b = bars[at]
        split: list[str | tuple[str, Style]] = (
            [f"input {b.input:,} (not split: the request was not parsed)"]
            if b.unsplit
            else [
                f"input {b.input:,} = ",
                *[
                    piece
                    for (field, name), (_, code) in zip(SPLIT, SERIES, strict=False)
                    for piece in ((f"{name} {getattr(b, field):,}", swatch(code)), " · ")
                ][:-1],
            ]
        )
        line = Text.assemble(
            (f"turn {b.turn} (#{b.seq}) ", "bold"),
            *split,
            f"  output {b.output:,}  cost {money(b.cost, b.cost_estimated)}"
            f"  cumulative {money(b.cumulative_cost, b.cumulative_estimated)}",
            (f"  [{b.source}; split by segment estimated]", "dim"),
        )
        detail.update(line)
