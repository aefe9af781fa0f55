"""Search across the run: type, press enter, pick a hit to jump to its turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from cassettes.untrusted import clean_line
from cassettes.views.search import SearchHit
from inspector.safe import wire_line

__all__ = ["SearchScreen"]

Searcher = Callable[[str], list[SearchHit]]


class SearchScreen(ModalScreen[tuple[str, list[SearchHit], SearchHit | None]]):
    """Dismissed with (query, every hit, the chosen hit or None)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", tooltip="Close the search without jumping", id="search.close"),
        Binding("down", "to_hits", "Matches", show=False, tooltip="Move to the list of matches", id="search.hits"),
    ]

    def __init__(self, searcher: Searcher, query: str = "") -> None:
        super().__init__()
        self._searcher = searcher
        self._query = query
        self._hits: list[SearchHit] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="search-box") as box:
            box.border_title = "search the run"
            box.border_subtitle = "enter: search · ↓ then enter: jump · esc: close"
            yield Input(
                value=self._query, placeholder="text, tool name, argument, finding code…", id="search-input"
            )
            yield Static(id="search-summary")
            yield OptionList(id="search-hits")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._query = event.value
        self.query_one("#search-summary", Static).update(Text("searching…", style="dim"))
        self._search(event.value)

    @work(thread=True, exclusive=True, group="search")
    def _search(self, query: str) -> None:
        hits = self._searcher(query)
        self.app.call_from_thread(self._show_hits, query, hits)

    def _show_hits(self, query: str, hits: list[SearchHit]) -> None:
        self._hits = hits
        summary = f"{len(hits)} match{'es' if len(hits) != 1 else ''} for {query!r}" if query else ""
        self.query_one("#search-summary", Static).update(wire_line(summary))
        options = self.query_one("#search-hits", OptionList)
        options.clear_options()
        for i, h in enumerate(hits):
            options.add_option(
                Option(
                    Text.assemble(
                        (clean_line(f"#{h.seq} {h.conversation}/{h.turn} "), "bold"),
                        (clean_line(f"{h.where}: "), "cyan"),
                        wire_line(h.snippet),
                    ),
                    id=str(i),
                )
            )
        if hits:
            options.highlighted = 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.dismiss((self._query, self._hits, self._hits[int(event.option.id)]))

    def action_to_hits(self) -> None:
        """↓ from the input moves to the matches (as the border says), where enter jumps."""
        hits = self.query_one("#search-hits", OptionList)
        if hits.option_count:
            hits.focus()
            if hits.highlighted is None:
                hits.highlighted = 0

    def action_close(self) -> None:
        self.dismiss((self._query, self._hits, None))
