"""Moving about the run on the main screen: to a layer, a finding, a conversation, a search match.

:class:`Navigation` holds the last search (:class:`inspector.screens.search.Matches`) and carries
out the keys that move the selection or the view (``l``, ``f``/``F``, ``c``, ``/``, ``n``/``N``,
``a``) and a finding chosen in the Findings tab, through the screen's sidebar, Turn tab and tabs.
What it needs of the screen is :class:`NavigationScreen` (public members only; the main screen is
one).
"""

from __future__ import annotations

from typing import Protocol

from textual.app import App

from cassettes.analysis.dispatch import ordered_findings
from cassettes.views.search import SearchHit, search_turns
from cassettes.views.summary import TurnSummary
from inspector.layout import VIEWS, View
from inspector.screens.search import Matches, SearchScreen
from inspector.source import TurnSource
from inspector.turns import TurnIndex
from inspector.widgets.badges import LAYERS
from inspector.widgets.conversations import ALL
from inspector.widgets.findings import FindingsTable
from inspector.widgets.sidebar import Sidebar
from inspector.widgets.turn_list import TurnList
from inspector.widgets.turn_pane import TurnPane

__all__ = ["Navigation", "NavigationReading", "NavigationScreen"]


class NavigationReading(Protocol):
    """What a search reads of the run (:class:`inspector.screens.reading.RunReading` is one)."""

    @property
    def index(self) -> TurnIndex: ...

    @property
    def source(self) -> TurnSource: ...


class NavigationScreen(Protocol):
    """What navigation needs of its screen: its widgets, layout, tabs and notice."""

    listed: int
    notice: str

    @property
    def app(self) -> App[object]: ...

    @property
    def reading(self) -> NavigationReading: ...

    @property
    def sidebar(self) -> Sidebar: ...

    @property
    def turn_list(self) -> TurnList: ...

    @property
    def turn_pane(self) -> TurnPane: ...

    @property
    def narrow(self) -> bool: ...

    @property
    def compact(self) -> bool: ...

    def show_view(self, view: View) -> None: ...

    def pane_visible(self, view: View) -> bool: ...

    def bring_up_findings(self, turn: TurnSummary, *, jump: bool = False) -> None: ...

    def action_tab(self, tab: str) -> None: ...

    def dirty(self) -> None: ...

    def refresh_tabs(self) -> None: ...


class Navigation:
    """The main screen's moves between layers, findings, conversations and search matches."""

    def __init__(self, screen: NavigationScreen) -> None:
        self.screen = screen
        self.matches = Matches()

    def next_layer(self) -> None:
        screen = self.screen
        order: tuple[View, ...] = VIEWS if screen.compact else LAYERS
        view = screen.turn_pane.view
        i = (order.index(view) + 1) % len(order) if view in order else 0
        screen.show_view(order[i])
        screen.action_tab("turn")
        if not screen.narrow:
            # Wide: the three panes are all shown; ``l`` moves focus into the next one (to scroll
            # it), and the playback line says so (j/k still move the turns, esc goes back).
            screen.turn_pane.layer_panes[LAYERS[i]].focus()

    def finding(self, direction: int) -> None:
        """``f`` / ``F``: the next / previous turn with a finding in the order of the findings
        (the core's: root causes by severity, each followed by what it caused), among the turns
        listed; from a turn without one, ``f`` starts at the worst and ``F`` at the last."""
        screen = self.screen
        rows = screen.turn_list.turns
        found = ordered_findings(f for t in rows for f in t.findings)
        walk = list(dict.fromkeys(f.seq for f in found if f.seq is not None))
        here = screen.turn_list.selected_seq
        if here in walk:
            i = walk.index(here) + direction
        else:
            i = 0 if direction > 0 else len(walk) - 1
        if not 0 <= i < len(walk) or not screen.turn_list.select_seq(walk[i]):
            screen.notice = "no further turn with findings in this list"
            return
        screen.action_tab("turn")
        screen.bring_up_findings(rows[screen.turn_list.cursor], jump=True)

    def finding_chosen(self, message: FindingsTable.FindingChosen) -> None:
        f = message.finding
        self.jump(f.seq, f.conversation)
        if self.screen.narrow:
            self.screen.show_view(f.layer)

    def jump(self, seq: int | None, conversation: str | None) -> None:
        if seq is None:
            return
        screen = self.screen
        if not screen.turn_list.select_seq(seq):
            self.show_conversation(conversation or ALL, select=seq)
        screen.action_tab("turn")
        screen.turn_list.focus()

    def show_conversation(self, conversation: str, select: int | None = None) -> None:
        screen = self.screen
        screen.listed = screen.sidebar.show_conversation(conversation, select=select)
        screen.dirty()
        screen.refresh_tabs()

    def next_conversation(self) -> None:
        self.show_conversation(self.screen.sidebar.next_conversation())

    def all_messages(self) -> None:
        """``a`` from anywhere: every message, parts whole (or folded again); in the compact
        layout the messages tab comes up, so the change is seen."""
        screen = self.screen
        if not screen.pane_visible("M"):
            screen.show_view("M")
        screen.action_tab("turn")
        screen.turn_pane.messages.action_toggle_all()

    def search(self) -> None:
        seqs = list(self.screen.reading.index.order)
        source = self.screen.reading.source

        def searcher(query: str) -> list[SearchHit]:
            return search_turns((source.full_turn(s, remember=False) for s in seqs), query)

        def done(result: tuple[str, list[SearchHit], SearchHit | None] | None) -> None:
            if result is None:
                return
            chosen = self.matches.found(*result)
            if chosen is not None:
                self.jump(chosen.seq, chosen.conversation)

        self.screen.app.push_screen(SearchScreen(searcher, self.matches.query), done)

    def next_hit(self, direction: int) -> None:
        """``n``/``N``: the next match; the playback line says which (one notice, replaced)."""
        hit = self.matches.step(direction)
        if hit is None:
            self.screen.notice = "no search yet: press / to search"
            return
        self.jump(hit.seq, hit.conversation)
        self.screen.notice = self.matches.notice()
