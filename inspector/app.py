"""The inspector app: reads a run in a worker, shows it turn by turn, plays it back.

Data flow (STYLE.md): the app owns the run being read (an :class:`inspector.source.TurnSource`,
which holds the turns' summaries: the app keeps only seq indexes into them) and hands each widget
what it shows (attributes down); widgets report what the user did with their own messages
(``TurnList.TurnSelected``, ``FindingsTable.FindingChosen`` …, messages up). Every disk read runs
in a thread worker — reading the run, restoring the selected turn and the results its next turn
sent, re-reading its full history — and every worker failure ends in
:meth:`inspector.app_reading.AppReading.on_worker_state_changed`. The status and playback lines
are reactives computed from the app's reactive state (``run_state``, ``play_state``). The key
bindings are listed in :mod:`inspector.bindings`.

:class:`InspectorApp` is built in parts, each a module, each using only the parts below it:

- :mod:`inspector.app_base` — the run, the reactive state and the status lines computed from it,
  an accessor for each widget, the output boundary;
- :mod:`inspector.app_panes` — the three layouts applied (:mod:`inspector.layout` decides);
- :mod:`inspector.app_playback` — playback applied (:mod:`inspector.playback` decides);
- :mod:`inspector.app_navigation` — findings, conversations, search, tabs, help, the command palette;
- :mod:`inspector.app_reading` — the reader and fork workers and what they post
  (:mod:`inspector.reader` reads), worker failures;
- this module — the screen the app composes, its start, and the selected turn: its two workers
  (:mod:`inspector.selected` reads) and what they post.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Static, Tab, TabbedContent, TabPane, Tabs
from textual.worker import get_current_worker

from inspector.app_reading import AppReading
from inspector.bindings import APP_BINDINGS
from inspector.layout import TAB_LABEL, VIEWS
from inspector.playback import Clock
from inspector.selected import TurnLoaded, TurnShown, read_panes, read_turn
from inspector.widgets.conversations import ConversationSwitcher
from inspector.widgets.findings import FindingsView
from inspector.widgets.growth import GrowthView
from inspector.widgets.keys import KeyBar
from inspector.widgets.layers import ApiPane, DispatchPane, EmissionPane
from inspector.widgets.messages import MessagesView
from inspector.widgets.status import PlaybackBar, RunStatus
from inspector.widgets.turn_list import TurnList

__all__ = ["InspectorApp", "build_app"]


class InspectorApp(AppReading):
    """``looptap inspect``: a recorded run, turn by turn."""

    CSS_PATH = "inspector.tcss"
    TITLE = "looptap inspect"

    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

    # -- the screen ----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunStatus(id="run-status").data_bind(state=InspectorApp.run_state)
        with Horizontal(id="main"):
            with Vertical(id="sidebar"):
                yield ConversationSwitcher(id="conversations")
                yield TurnList(id="turn-list")
            with TabbedContent(id="tabs", initial="turn"):
                with TabPane("Turn", id="turn"):
                    yield MessagesView(id="messages")
                    yield Tabs(*(Tab(TAB_LABEL[x][0], id=f"layer-{x}") for x in VIEWS), id="layer-tabs")
                    with Horizontal(id="layers"):
                        yield EmissionPane(id="pane-e")
                        yield ApiPane(id="pane-a")
                        yield DispatchPane(id="pane-c")
                with TabPane("Growth", id="growth"):
                    yield GrowthView(id="growth-view")
                with TabPane("Findings", id="findings"):
                    yield FindingsView(id="findings-view")
        yield Static(id="error-view")
        yield PlaybackBar(id="playback").data_bind(state=InspectorApp.play_state)
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.turn_list.focus()
        # Clicks and ``l`` switch the layer tabs; focus stays where the user is (the turn list).
        self.layer_tabs.can_focus = False
        self.show_view(self.view)
        waiting = self.live and not self.path.exists()
        self.messages.show_note(
            f"waiting for {self.path.name} to be created…" if waiting else f"reading {self.path.name}…"
        )
        self.watch(self.screen, "focused", self._focus_moved)
        # Runs only while playing or re-streaming: an idle timer would take the GIL from the reader.
        self._ticker = self.set_interval(1 / 30, self._tick, pause=True)
        self._read_run()

    # -- the selected turn -------------------------------------------------------------------------

    @on(TurnList.TurnSelected)
    def _turn_selected(self, message: TurnList.TurnSelected) -> None:
        turn = self.summary(message.seq)
        if turn is None or not self._screen_stack:
            return
        self.selected = turn.seq
        self.position = self.turn_list.cursor
        self.listed = len(self.turn_list.seqs)
        self.following = self.turn_list.following
        self._apply(self.playback.turn_selected())
        self._sync_playback()
        self._label_tabs(turn)
        self._bring_up_findings(turn)
        self.messages.show_note(f"loading turn #{turn.seq}…")
        self._loaded = self._panes_of = None
        self._load_panes(turn.seq)
        self._load_turn(turn.seq)
        self._dirty_growth = True
        self._refresh_tabs()

    @work(thread=True, exclusive=True, group="panes", exit_on_error=False, name="panes")
    def _load_panes(self, seq: int) -> None:
        """The selected turn from the store and the tool results its next turn sent back: disk
        reads, so in a worker."""
        shown = read_panes(self.source, self.index, seq)
        if shown is not None and not get_current_worker().is_cancelled:
            self.post_message(shown)

    def on_turn_shown(self, message: TurnShown) -> None:
        if not self._screen_stack:
            return  # (a worker's message as the app closed)
        if message.seq != self.selected:
            return
        self.pane_e.show_turn(message.turn, message.results, message.runs)
        self.pane_a.show_turn(message.turn)
        self.pane_c.show_turn(message.turn)
        self._panes_of = message.seq

    @work(thread=True, exclusive=True, group="turn", exit_on_error=False, name="turn")
    def _load_turn(self, seq: int) -> None:
        loaded = read_turn(self.source, seq)
        if not get_current_worker().is_cancelled:
            self.post_message(loaded)

    def on_turn_loaded(self, message: TurnLoaded) -> None:
        if not self._screen_stack:
            return  # (a worker's message as the app closed)
        if message.seq != self.selected:
            return
        turn = self.summary(message.seq)
        if turn is None:
            return
        self._loaded = message.seq
        if message.request is None:
            self.messages.show_note(f"turn #{message.seq}: the request could not be parsed")
        else:
            self.messages.show_request(message.request, turn.appended_from, edits=message.edits)
        self._apply(self.playback.turn_loaded(message.timeline))
        self._sync_playback()


def build_app(
    path: str | Path, *, live: bool = False, clock: Clock | None = None, child_status: str | Path | None = None
) -> InspectorApp:
    """The inspector for one cassette (``live``: follow a recording still being written, until the
    recorder closes the file or the file ``child_status`` holds the recorded command's exit status)."""
    return InspectorApp(path, live=live, clock=clock or time.monotonic, child_status=child_status)
