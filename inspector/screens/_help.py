"""The help screen: what the inspector shows and every key binding."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..bindings import APP_BINDINGS, HELP_OTHER
from ..widgets import LayerPane, MessagesView, TurnList
from ._search import SearchScreen

__all__ = ["HelpScreen", "key_groups"]

ABOUT = """\
Each turn is one round trip of a conversation. Three layers act in every turn:
  E  the model: text, reasoning, tool calls, whether their arguments fit the schema
  A  the API: status, finish reason, usage, cost, latency, served model, errors
  C  the client: what the request kept, rewrote and appended; results paired with calls
Badges: green = nothing found, cyan = info, yellow = warning, red = error.
The messages pane is the request as the model saw it; ▌ NEW marks what this turn added."""


def key_groups() -> list[tuple[str, list[Binding]]]:
    """Every key, grouped by where it acts: the app's (on every screen) first, then each
    widget's."""

    def keys(bindings: list[BindingType]) -> list[Binding]:
        return [b for b in bindings if isinstance(b, Binding)]

    return [
        ("Run and playback", keys(APP_BINDINGS)),
        ("Turn list", keys(TurnList.BINDINGS)),
        ("Messages", keys(MessagesView.BINDINGS)),
        ("Layer panes", keys(LayerPane.BINDINGS)),
        (
            "Search (/): the query takes every key typed, enter "
            "searches; in the matches enter jumps to the turn",
            keys(SearchScreen.BINDINGS),
        ),
        ("Other", HELP_OTHER),
    ]


class HelpScreen(ModalScreen[None]):
    """Key bindings, taken from the bindings themselves so the list cannot go stale."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape,q,question_mark",
            "dismiss",
            "Close",
            tooltip="Close the help screen",
            id="help.close",
        ),
    ]

    def __init__(self, bindings: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self._groups = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "looptap inspect · help"
            box.border_subtitle = "esc to close"
            yield Static(Text(ABOUT))
            for title, bindings in self._groups:
                table = Table(
                    title=title,
                    title_justify="left",
                    title_style="bold",
                    show_header=False,
                    box=None,
                    padding=(0, 2),
                )
                table.add_column(style="bold cyan", no_wrap=True)
                table.add_column()
                for b in bindings:
                    keys = ", ".join(k.strip() for k in (b.key_display or b.key).split(","))
                    table.add_row(keys, b.tooltip or b.description)
                yield Static(table)
