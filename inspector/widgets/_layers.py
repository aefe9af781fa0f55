"""The layer panes' base: a scrolling pane with one body, its border the layer's worst finding.

The three panes of the selected turn are each a module: :mod:`inspector.widgets._emission` (E, the
model's emission), :mod:`inspector.widgets._api` (A, the API's verdict) and
:mod:`inspector.widgets._dispatch` (C, the client's dispatch).
"""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.highlighter import ReprHighlighter
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...cassettes.analysis import Finding, Layer, Turn
from ...cassettes.untrusted import clean, clean_line
from ...cassettes.views import layer_findings
from ..badges import SEVERITY_MARK, severity_style
from ..safe import wire_line

__all__ = ["PANE_ITEMS", "LayerPane", "pane_bindings"]

#: Most appended messages, pairings or tool calls a pane draws for one turn (a hostile request can
#: append 100,000; the panes stayed responsive only with a bound).
PANE_ITEMS = 200

_HIGHLIGHT = ReprHighlighter()


def pane_bindings(scope: str) -> list[BindingType]:
    """Keys of a focused pane (the layer panes and the messages), their ids under ``scope``:
    ``j``/``k`` still move the turns, ``esc`` gives focus back to the turn list; the arrows scroll
    the pane."""
    return [
        Binding(
            "j",
            "app.step(1)",
            "Next turn",
            show=False,
            tooltip="Select the next turn (focus stays here)",
            id=f"{scope}.next_turn",
        ),
        Binding(
            "k",
            "app.step(-1)",
            "Previous turn",
            show=False,
            tooltip="Select the previous turn (focus stays here)",
            id=f"{scope}.previous_turn",
        ),
        Binding(
            "escape",
            "app.focus_turns",
            "Turn list",
            show=False,
            tooltip="Focus the turn list again",
            id=f"{scope}.to_list",
        ),
    ]


class LayerPane(VerticalScroll, can_focus=True):
    """A scrolling pane with one body; its border shows the layer and its worst finding."""

    BINDINGS: ClassVar[list[BindingType]] = pane_bindings("pane")

    LAYER: Layer = "E"
    TITLE = ""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = self.TITLE

    def compose(self) -> ComposeResult:
        yield Static(Text("select a turn", style="dim italic"), classes="pane-body")

    def _set(self, parts: list[RenderableType], turn: Turn | None) -> None:
        bodies = self.query(".pane-body")
        if not bodies:  # the pane is being torn down (a worker's message as the app closes)
            return
        bodies.first(Static).update(Group(*parts))
        sev, n = layer_findings(turn.findings)[self.LAYER] if turn is not None else (None, 0)
        self.set_class(sev is not None, "-has-findings")
        self.border_subtitle = (
            f"{SEVERITY_MARK[sev]} {n} finding{'s' if n != 1 else ''}"
            if sev is not None
            else self.quiet(turn)
        )

    def quiet(self, turn: Turn | None) -> str:
        """The subtitle of a pane with no finding of its layer."""
        return "ok"

    def clear(self, note: str) -> None:
        self._set([Text(note, style="dim italic")], None)

    @staticmethod
    def _findings(findings: list[Finding], layer: Layer) -> list[RenderableType]:
        out: list[RenderableType] = []
        for f in findings:
            if f.layer != layer:
                continue
            t = Text()
            t.append(
                f"{SEVERITY_MARK[f.severity]} {clean_line(f.code)}",
                style=severity_style(f.severity),
            )
            t.append(f"  {clean(f.message)}")
            if f.path:
                t.append(f"  at {clean_line(f.path)}", style="dim")
            out.append(t)
        return out

    @staticmethod
    def _kv(rows: list[tuple[str, str | Text]]) -> Table:
        table = Table.grid(padding=(0, 1))
        table.add_column(style="dim", no_wrap=True)
        table.add_column()
        for k, v in rows:
            # A str cell would be read as markup: wire text goes in as Text, highlighted as Rich
            # highlights plain strings (numbers, brackets).
            table.add_row(k, v if isinstance(v, Text) else _HIGHLIGHT(wire_line(v)))
        return table
