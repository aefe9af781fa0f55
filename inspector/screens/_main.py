"""The inspector's main screen: one run, read in workers, shown turn by turn, played back.

Data flow (STYLE.md; Textual's "attributes down, messages up"): the screen composes the parts,
each a widget that owns its concept and its state — the run being read and every worker that
reads it (:class:`inspector.screens._reading.RunReading`, invisible; its reactive ``run_state`` is
what the status line shows), the sidebar (the conversation listed and the turn list), the Turn tab
(:class:`inspector.widgets.TurnPane`: the pane that is up, the layer tabs), the Growth,
Findings and Fork tabs, and playback with its line (:class:`inspector.screens._player.Player`).
None of them knows this screen: each reports with its own messages (``TurnList.TurnSelected``,
``Player.TurnPlayed``, the workers' ``RunRead``, ``TurnLoaded`` …), and this screen
hands the others what follows (attributes down). The keys (the app's bindings) call the actions
below; the last search is :attr:`MainScreen.matches`. :mod:`inspector.layout` decides the layout.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane

from ...cassettes.views import TurnSummary
from ...cassettes.views.search import SearchHit, search_turns
from ..layout import FOCUS_NAMES, api_quiet, layout_classes
from ..playback import Clock
from ..reader import ChildExited, RunRead
from ..selected import TurnLoaded, TurnShown
from ..widgets import (
    ErrorView,
    FindingsTable,
    FindingsView,
    ForkPane,
    ForkRead,
    GrowthView,
    KeyBar,
    RunState,
    RunStatus,
    RunTabs,
    Sidebar,
    TurnList,
    TurnPane,
)
from ._player import Player
from ._reading import RunReading
from ._search import Matches, SearchScreen

__all__ = ["MainScreen"]


class MainScreen(Screen[None]):
    """The run: the turn list beside the selected turn, the Growth, Findings and Fork tabs."""

    def __init__(
        self,
        path: Path,
        *,
        live: bool,
        clock: Clock,
        child_status: Path | None,
    ) -> None:
        super().__init__()
        self.reading = RunReading(path, live=live, child_status=child_status)
        self.turn_pane = TurnPane("Turn", id="turn")
        self.player = Player(clock, self.turn_pane, id="playback")
        self.matches = Matches()

    # -- the screen --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self.reading
        yield RunStatus(id="run-status")
        with Horizontal(id="main"):
            yield Sidebar(self.reading.index, id="sidebar")
            with RunTabs(self.reading.index, id="tabs"):
                yield self.turn_pane
                with TabPane("Growth", id="growth"):
                    yield GrowthView(id="growth-view")
                with TabPane("Findings", id="findings"):
                    yield FindingsView(id="findings-view")
        yield ErrorView(id="error-view")
        yield self.player
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.fit(self.app.size)
        self.turn_list.focus()
        self.turn_pane.show_view(self.turn_pane.view)
        path = self.reading.path
        waiting = self.reading.live and not path.exists()
        self.turn_pane.show_note(
            f"waiting for {path.name} to be created…" if waiting else f"reading {path.name}…"
        )
        self.player.live = self.reading.live
        self.watch(self.reading, "run_state", self._run_state)
        self.watch(self, "focused", self._focus_moved)
        self.reading.start()

    @cached_property
    def sidebar(self) -> Sidebar:
        return self.query_one(Sidebar)

    @cached_property
    def turn_list(self) -> TurnList:
        return self.query_one(TurnList)

    @cached_property
    def tabs(self) -> RunTabs:
        return self.query_one(RunTabs)

    # -- the three layouts, by terminal size (inspector/layout.py decides) -------------------------

    def fit(self, size: Size) -> None:
        """Wide, narrow or compact, for a terminal of ``size`` (the app passes each new size)."""
        classes = layout_classes(*size)
        for name, on_ in classes.items():
            self.set_class(on_, name)
        self.turn_pane.fit(narrow=classes["-narrow"], compact=classes["-compact"])
        self.fit_sidebar()
        self.label_tabs()

    def fit_sidebar(self) -> None:
        self.sidebar.fit(compact=self.turn_pane.compact, width=self.app.size.width)

    def label_tabs(self, turn: TurnSummary | None = None) -> None:
        turn = turn if turn is not None else self.reading.summary(self.reading.selected)
        findings = turn.findings if turn is not None else []
        api = api_quiet(turn.status, turn.error) if turn is not None else "ok"
        self.turn_pane.label_tabs(findings, width=self.app.size.width, api=api)

    # -- focus and the status line -----------------------------------------------------------------

    def _run_state(self, state: RunState) -> None:
        self.query_one(RunStatus).state = state

    def _focus_moved(self, widget: Widget | None) -> None:
        """Say where focus is when it is not on the turn list (keys then act on that pane)."""
        player = self.player
        if widget is None or widget is self.turn_list or self.app.screen is not self:
            if player.notice.startswith("focus:"):
                player.notice = ""
            return
        name = FOCUS_NAMES.get(widget.id or "")
        if name is not None:
            player.notice = f"focus: {name} · ↑↓ scroll · j/k turns · esc list"
        elif player.notice.startswith("focus:"):
            player.notice = ""

    # -- what the widgets report -------------------------------------------------------------------

    @on(TurnList.TurnSelected)
    def _turn_selected(self, message: TurnList.TurnSelected) -> None:
        turn = self.reading.summary(message.seq)
        if turn is None or not self.is_attached:
            return
        turn_list = self.turn_list
        self.player.turn_selected(
            turn,
            position=turn_list.cursor,
            total=len(turn_list.seqs),
            following=turn_list.following,
        )
        self.label_tabs(turn)
        self.turn_pane.bring_up(turn.findings)
        self.turn_pane.show_note(f"loading turn #{turn.seq}…")
        self.reading.load_selected(turn.seq)
        self.tabs.turn_selected(turn.seq)

    @on(FindingsTable.FindingChosen)
    def _finding_chosen(self, message: FindingsTable.FindingChosen) -> None:
        f = message.finding
        self.jump(f.seq, f.conversation)
        if self.turn_pane.narrow:
            self.turn_pane.show_view(f.layer)

    def on_sidebar_conversation_shown(self, message: Sidebar.ConversationShown) -> None:
        self.player.total = message.count
        self.tabs.conversation_shown(message.conversation)

    @on(TabbedContent.TabActivated)
    def _tab_activated(self) -> None:
        # Narrow terminals give the Growth and Findings tabs the whole width (no list beside).
        self.set_class(self.tabs.active != "turn", "-full-tab")

    def on_player_turn_played(self) -> None:
        if not self.turn_list.step(1):
            self.player.ran_out()

    # -- what the workers post (bubbled up through the reading, which takes its part first) -------

    def on_run_read(self, message: RunRead) -> None:
        if not self.is_attached:  # (not read as the app closed)
            return
        reading = self.reading
        first = not reading.index.order
        added = reading.took(message)
        fresh = added.fresh
        if added.repeated:
            self.turn_list.refresh()
        if fresh:
            self.sidebar.add_fresh(
                fresh, first=first, live=reading.live, at_end=message.batch.at_end
            )
            self.player.total = len(self.turn_list.seqs)
            self.player.position = self.turn_list.cursor
            if first or reading.live:
                self.fit_sidebar()
        if fresh or added.repeated:
            self.tabs.run_changed()
        if self.player.waiting and fresh:
            # Playing at the end of a live recording: the awaited turn came (following, the list
            # has already moved to it).
            self.player.turn_came(following=self.turn_list.following)
        if not reading.index.order and message.batch.at_end:
            # All of the file there is was read, and it holds no turn (yet, live).
            self.turn_pane.show_note(
                "no turns yet: waiting for the first turn of the recording…"
                if reading.live
                else "no LLM turns in this file"
            )

    def on_run_completed(self) -> None:
        if not self.is_attached:
            return
        self.reading.completed()
        self.sidebar.update_switcher()
        self.turn_list.refresh()
        if self.reading.selected is not None:
            self.label_tabs()
        self.tabs.run_changed()

    def on_child_exited(self, message: ChildExited) -> None:
        if self.is_attached:
            self.reading.child_exited(message)
            self.player.end_wait()
            self.player.notice = f"run ended: the command exited with status {message.status}"

    def on_recorder_closed(self) -> None:
        if self.is_attached:
            self.reading.file_closed()
            self.player.end_wait()
            self.player.notice = "recording ended: the recorder closed the file"

    def on_run_reading_failed(self, message: RunReading.Failed) -> None:
        self.show_failure(message.text)

    async def on_fork_read(self, message: ForkRead) -> None:
        if self.is_attached and await self.tabs.show_fork(message.view, message.note):
            self.player.notice = "this run is a branch: 4 shows it beside its origin"

    def on_turn_shown(self, message: TurnShown) -> None:
        if self.is_attached and message.seq == self.reading.selected:
            self.turn_pane.show_panes(
                message.turn,
                message.results,
                message.runs,
                message.answered,
                message.shell,
                message.shell_answered,
            )
            self.reading.panes_of = message.seq

    def on_turn_loaded(self, message: TurnLoaded) -> None:
        turn = self.reading.summary(message.seq)
        if not self.is_attached or message.seq != self.reading.selected or turn is None:
            return
        self.reading.request_of = message.seq
        self.turn_pane.show_request(
            message.request, message.seq, turn.appended_from, message.edits, message.reconstructed
        )
        self.player.turn_loaded(message.timeline)

    # -- the keys (the app's bindings call these) --------------------------------------------------

    def action_tab(self, tab: str) -> None:
        if tab == "fork" and not self.tabs.forked:
            self.player.notice = (
                "not a branch: 4 shows a forked run (looptap run --from) beside its origin"
            )
            return
        self.tabs.active = tab
        self._tab_activated()
        self.tabs.redraw()
        if tab == "findings":
            self.query_one(FindingsTable).focus()
        elif tab == "fork":
            self.query_one("#fork-view", ForkPane).focus()  # o: origin or branch past the cursor
        elif not self.turn_list.has_focus:
            # The growth chart takes no keys; the turn list keeps j/k working under it.
            self.turn_list.focus()

    def action_focus_turns(self) -> None:
        self.turn_list.focus()

    def next_layer(self) -> None:
        self.action_tab("turn")
        self.turn_pane.next_layer()

    def all_messages(self) -> None:
        self.action_tab("turn")
        self.turn_pane.toggle_all_messages()

    def finding(self, direction: int) -> None:
        """``f`` / ``F``: the next turn below / above with a finding, in the list's order, round
        past the end (the sidebar moves there; each notice fits 80 columns)."""
        found = self.sidebar.next_finding(direction)
        if found is None:
            self.player.notice = "no turn in this list has findings"
            return
        turn, wrapped = found
        if wrapped:
            key, end = ("f", "top") if direction > 0 else ("F", "bottom")
            self.player.notice = f"{key}: wrapped round to the {end}"
        self.action_tab("turn")
        self.turn_pane.bring_up(turn.findings, jump=True)

    def jump(self, seq: int | None, conversation: str | None) -> None:
        if seq is None:
            return
        self.sidebar.jump(seq, conversation)
        self.action_tab("turn")
        self.turn_list.focus()

    def search(self) -> None:
        matches = self.matches
        seqs, source = list(self.reading.index.order), self.reading.source

        def search(query: str) -> list[SearchHit]:  # in the dialog's worker: every turn, in full
            return search_turns((source.full_turn(s, remember=False) for s in seqs), query)

        def done(result: tuple[str, list[SearchHit], SearchHit | None] | None) -> None:
            chosen = matches.found(*result) if result is not None else None
            if chosen is not None:
                self.jump(chosen.seq, chosen.conversation)

        self.app.push_screen(SearchScreen(search, matches.query), done)

    def next_hit(self, direction: int) -> None:
        """``n``/``N``: the next match; the playback line says which (one notice, replaced)."""
        hit = self.matches.step(direction)
        if hit is None:
            self.player.notice = "no search yet: press / to search"
            return
        self.jump(hit.seq, hit.conversation)
        self.player.notice = self.matches.notice()

    # -- the run cannot be shown -------------------------------------------------------------------

    def show_failure(self, text: str) -> None:
        """The run cannot be shown: why, instead of the panes."""
        self.reading.failed = text
        self.query_one(ErrorView).show(self.reading.path, text)
        self.add_class("-failed")
        self.notify(text, title="cannot read the run", severity="error", timeout=15)
