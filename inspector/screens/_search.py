"""Search across the run: type, press enter, pick a hit to jump to its turn.

Two places, two meanings for a letter: in the input every key types (``n`` is part of the query);
once a search is submitted, focus moves to the matches, where ``n``/``N`` (or ``↓``/``↑``) move
to the next / previous match, ``enter`` jumps to its turn and ``/`` goes back to the query. The
border says which keys act where focus is; the help screen lists these bindings as "Search (/)".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ...cassettes.untrusted import clean_line
from ...cassettes.views.search import SearchHit
from ..safe import wire_line

__all__ = ["Matches", "SearchScreen"]

Searcher = Callable[[str], list[SearchHit]]


class Matches:
    """The last search once the dialog closed: its query, its hits and the one ``n``/``N`` is on."""

    def __init__(self) -> None:
        self.query = ""
        self.hits: list[SearchHit] = []
        self.at = -1

    def found(
        self, query: str, hits: list[SearchHit], chosen: SearchHit | None
    ) -> SearchHit | None:
        """What the dialog was dismissed with; the hit chosen in it (if any) becomes the current
        one."""
        self.query, self.hits = query, hits
        if chosen is not None:
            self.at = hits.index(chosen)
        return chosen

    def step(self, direction: int) -> SearchHit | None:
        """The next (``1``) or previous (``-1``) hit, round the ends (``None``: no search yet)."""
        if not self.hits:
            return None
        self.at = (self.at + direction) % len(self.hits)
        return self.hits[self.at]

    def notice(self) -> str:
        """What the playback line says of the current hit."""
        hit = self.hits[self.at]
        return (
            f"match {self.at + 1}/{len(self.hits)} for {self.query!r}: {hit.where}: "
            f"{' '.join(hit.snippet.split())}"
        )


class SearchScreen(ModalScreen[tuple[str, list[SearchHit], SearchHit | None]]):
    """Dismissed with (query, every hit, the chosen hit or None)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape",
            "close",
            "Close",
            tooltip="Close the search without jumping",
            id="search.close",
        ),
        Binding(
            "down",
            "to_hits",
            "Matches",
            show=False,
            tooltip="From the query: move to the list of matches",
            id="search.hits",
        ),
        Binding(
            "n",
            "match(1)",
            "Next match",
            show=False,
            tooltip="In the matches (after enter): the next match",
            id="search.dialog_next",
        ),
        Binding(
            "N",
            "match(-1)",
            "Prev match",
            show=False,
            tooltip="In the matches (after enter): the previous match",
            id="search.dialog_previous",
        ),
        Binding(
            "slash",
            "to_query",
            "Edit query",
            key_display="/",
            show=False,
            tooltip="In the matches: back to the query",
            id="search.edit",
        ),
    ]

    #: What the border says, for where focus is: the query being typed, or the matches.
    KEYS_TYPING = "enter: search · ↓: matches · esc: close"
    KEYS_MATCHES = "n N ↓ ↑: next/prev match · enter: jump · /: query · esc: close"

    def __init__(self, searcher: Searcher, query: str = "") -> None:
        super().__init__()
        self._searcher = searcher
        self._query = query
        self._hits: list[SearchHit] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="search-box") as box:
            box.border_title = "search the run"
            box.border_subtitle = self.KEYS_TYPING
            yield Input(
                value=self._query,
                placeholder="text, tool name, argument, finding code…",
                id="search-input",
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
        summary = (
            f"{len(hits)} match{'es' if len(hits) != 1 else ''} for {query!r}" if query else ""
        )
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
            if self.query_one("#search-input", Input).value == query:  # (not when typing on since)
                options.focus()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The border names the keys that act where focus now is."""
        in_hits = event.widget.id == "search-hits"
        self.query_one("#search-box").border_subtitle = (
            self.KEYS_MATCHES if in_hits else self.KEYS_TYPING
        )

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

    def action_match(self, direction: int) -> None:
        """``n``/``N`` in the matches: the next / previous one (round the ends). In the input the
        keys type (the input takes them before any binding)."""
        hits = self.query_one("#search-hits", OptionList)
        if not hits.option_count:
            return
        hits.focus()
        now = hits.highlighted if hits.highlighted is not None else -direction
        hits.highlighted = (now + direction) % hits.option_count

    def action_to_query(self) -> None:
        """``/`` in the matches: back to the query, to change it."""
        self.query_one("#search-input", Input).focus()

    def action_close(self) -> None:
        self.dismiss((self._query, self._hits, None))
