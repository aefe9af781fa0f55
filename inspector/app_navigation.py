"""Moving through the run: findings, conversations, search, tabs, layers, help, the command palette.

The actions behind the keys (:mod:`inspector.bindings`) that are not playback, the messages the
findings table and the conversation switcher send up, and the Growth and Findings tabs kept
current (redrawn only when shown: they can be large).
"""

from __future__ import annotations

from collections.abc import Iterable

from textual import on
from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import TabbedContent

from cassettes.views.search import SearchHit, search_turns
from inspector.app_playback import AppPlayback
from inspector.bindings import HELP_OTHER
from inspector.layout import VIEWS, View
from inspector.screens.help import HelpScreen
from inspector.screens.search import SearchScreen
from inspector.widgets.badges import LAYERS
from inspector.widgets.conversations import ALL, ConversationSwitcher
from inspector.widgets.findings import FindingsTable
from inspector.widgets.fork import ForkPane
from inspector.widgets.layers import LayerPane
from inspector.widgets.messages import MessagesView
from inspector.widgets.turn_list import TurnList

__all__ = ["AppNavigation"]


class AppNavigation(AppPlayback):
    """The keys and messages that move through the run (other than playback)."""

    # -- layers -----------------------------------------------------------------------------------

    def action_next_layer(self) -> None:
        order: tuple[View, ...] = VIEWS if self.compact else LAYERS
        i = (order.index(self.view) + 1) % len(order) if self.view in order else 0
        self.show_view(order[i])
        self.action_tab("turn")
        if not self.narrow:
            # Wide: the three panes are all shown; ``l`` moves focus into the next one (to scroll
            # it), and the playback line says so (j/k still move the turns, esc goes back).
            self.layer_panes[LAYERS[i]].focus()

    # -- findings, conversations, search, tabs -------------------------------------------------

    def action_finding(self, direction: int) -> None:
        rows = self.turn_list.turns
        i = self.turn_list.cursor + direction
        while 0 <= i < len(rows):
            turn = rows[i]
            if turn.findings:
                self.turn_list.move_to(i)
                self.action_tab("turn")
                self._bring_up_findings(turn, jump=True)
                return
            i += direction
        self.notice = "no further turn with findings in this list"

    @on(FindingsTable.FindingChosen)
    def _finding_chosen(self, message: FindingsTable.FindingChosen) -> None:
        f = message.finding
        self._jump(f.seq, f.conversation)
        if self.narrow:
            self.show_view(f.layer)

    def _jump(self, seq: int | None, conversation: str | None) -> None:
        if seq is None:
            return
        if not self.turn_list.select_seq(seq):
            self._show_conversation(conversation or ALL, select=seq)
        self.action_tab("turn")
        self.turn_list.focus()

    @on(ConversationSwitcher.ConversationChosen)
    def _conversation_chosen(self, message: ConversationSwitcher.ConversationChosen) -> None:
        self._show_conversation(message.conversation)

    def _show_conversation(self, conversation: str, select: int | None = None) -> None:
        self.conversation = conversation
        if self.switcher.value != conversation:
            with self.switcher.prevent(ConversationSwitcher.Changed):
                self.switcher.value = conversation
        seqs = self.index.seqs(conversation)
        self.turn_list.show_conversation = conversation == ALL and len(self.index.conv) > 1
        self.turn_list.set_turns(seqs, self.source.summaries, select=select)
        self.listed = len(seqs)
        self._dirty_findings = self._dirty_growth = True
        self._refresh_tabs()

    def action_all_messages(self) -> None:
        """``a`` from anywhere: every message, parts whole (or folded again); in the compact
        layout the messages tab comes up, so the change is seen."""
        if not self.pane_visible("M"):
            self.show_view("M")
        self.action_tab("turn")
        self.messages.action_toggle_all()

    def action_next_conversation(self) -> None:
        order = [ALL, *self.index.conv]
        i = order.index(self.conversation) if self.conversation in order else 0
        self._show_conversation(order[(i + 1) % len(order)])

    def action_search(self) -> None:
        seqs = list(self.index.order)
        source = self.source

        def searcher(query: str) -> list[SearchHit]:
            return search_turns((source.full_turn(s, remember=False) for s in seqs), query)

        def done(result: tuple[str, list[SearchHit], SearchHit | None] | None) -> None:
            if result is None:
                return
            self._query, self._hits, chosen = result
            if chosen is not None:
                self._hit = self._hits.index(chosen)
                self._jump(chosen.seq, chosen.conversation)

        self.push_screen(SearchScreen(searcher, self._query), done)

    def action_next_hit(self, direction: int) -> None:
        """``n``/``N``: the next match; the playback line says which (one notice, replaced)."""
        if not self._hits:
            self.notice = "no search yet: press / to search"
            return
        self._hit = (self._hit + direction) % len(self._hits)
        hit = self._hits[self._hit]
        self._jump(hit.seq, hit.conversation)
        self.notice = f"match {self._hit + 1}/{len(self._hits)} for {self._query!r}: {hit.where}: {' '.join(hit.snippet.split())}"

    def action_tab(self, tab: str) -> None:
        if tab == "fork" and not self.query("#fork-view"):
            self.notice = "not a branch: 4 shows a forked run (looptap run --from) beside its origin"
            return
        self.tabs.active = tab
        self._refresh_tabs()
        if tab == "findings":
            self.findings_table.focus()
        elif tab == "fork":
            self.query_one("#fork-view", ForkPane).focus()  # o: origin or branch past the cursor
        elif not self.turn_list.has_focus:
            # The growth chart takes no keys; the turn list keeps j/k working under it.
            self.turn_list.focus()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self) -> None:
        self._refresh_tabs()

    def action_help(self) -> None:
        groups = [
            ("Run and playback", [b for b in self.BINDINGS if isinstance(b, Binding)]),
            ("Turn list", [b for b in TurnList.BINDINGS if isinstance(b, Binding)]),
            ("Messages", [b for b in MessagesView.BINDINGS if isinstance(b, Binding)]),
            ("Layer panes", [b for b in LayerPane.BINDINGS if isinstance(b, Binding)]),
            ("Search (/): the query takes every key typed, enter searches; in the matches enter jumps to the turn", [b for b in SearchScreen.BINDINGS if isinstance(b, Binding)]),
            ("Other", HELP_OTHER),
        ]
        self.push_screen(HelpScreen(groups))

    # -- keeping the tabs current -------------------------------------------------------------

    def _refresh_tabs(self) -> None:
        """Redraw the findings table and the chart only when visible (they can be large)."""
        if not self._screen_stack:
            return
        active = self.tabs.active
        # Narrow terminals give the Growth and Findings tabs the whole width (no turn list beside).
        self.screen_stack[0].set_class(active != "turn", "-full-tab")
        if active == "findings" and self._dirty_findings:
            self._dirty_findings = False
            # Every finding of the run (whatever conversation is viewed: a jump switches to it).
            self.findings_table.show_findings(self.index.findings())
        if active == "growth" and self._dirty_growth:
            self._dirty_growth = False
            seq = self.selected
            conv = self.index.growth_conversation(self.summary(seq), self.conversation)
            self.growth_view.show_bars(self.index.bars(conv), seq, conv)

    # -- the command palette --------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Play / pause", "Play the turns at recorded pace", self.action_play_pause)
        yield SystemCommand(
            "Next finding", "Jump to the next turn with a finding", lambda: self.action_finding(1)
        )
        yield SystemCommand(
            "Search the run", "Search text, tool calls, results, findings", self.action_search
        )
        yield SystemCommand(
            "Show the growth chart",
            "Token-cost growth of the conversation",
            lambda: self.action_tab("growth"),
        )
        yield SystemCommand(
            "Show the findings", "Every finding of the run", lambda: self.action_tab("findings")
        )
        yield SystemCommand(
            "Next conversation", "Cycle through the run's conversations", self.action_next_conversation
        )
