"""The inspector's main screen: one run, read in workers, shown turn by turn, played back.

Data flow (STYLE.md): the screen holds three plain objects, each one concept — the run being read
and every worker that reads it (:class:`inspector.screens.reading.RunReading`), playback
(:class:`inspector.screens.player.Player`) and the moves between layers, findings, conversations
and search matches (:class:`inspector.screens.navigation.Navigation`); each states what it needs of
this screen in its own module (``ReadingScreen``, ``PlayerScreen``, ``NavigationScreen``: public
members only) and none imports this one. The screen hands each widget what it shows (attributes
down); widgets report what the user did with their own messages
(``TurnList.TurnSelected``, ``FindingsTable.FindingChosen`` …, messages up), which this screen
passes on. The widgets own their state: the :class:`inspector.widgets.sidebar.Sidebar` the
conversation listed, the turn list its rows and cursor, the
:class:`inspector.widgets.turn_pane.TurnPane` the pane that is up, the messages view its scroll,
the emission pane what it reveals. Every worker failure ends in :meth:`on_worker_state_changed`.
The status and playback lines are reactives computed from this screen's reactive state
(``run_state``, ``play_state``); :mod:`inspector.layout` decides the layout.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.geometry import Size
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from cassettes.errors import CassetteError
from cassettes.untrusted import clean
from cassettes.views.summary import TurnSummary
from inspector.bindings import APP_BINDINGS, HELP_OTHER
from inspector.layout import FOCUS_NAMES, View, layout_classes
from inspector.playback import Clock
from inspector.reader import ChildExited, RecorderClosed, RunCompleted, RunRead
from inspector.screens.help import HelpScreen
from inspector.screens.navigation import Navigation
from inspector.screens.player import Player
from inspector.screens.reading import PanesReader, RunReading, TurnReader
from inspector.screens.search import SearchScreen
from inspector.selected import TurnLoaded, TurnShown
from inspector.widgets.conversations import ConversationSwitcher
from inspector.widgets.findings import FindingsTable, FindingsView
from inspector.widgets.fork import ForkPane, ForkRead
from inspector.widgets.growth import GrowthView
from inspector.widgets.keys import KeyBar
from inspector.widgets.layers import LayerPane
from inspector.widgets.messages import MessagesView
from inspector.widgets.sidebar import Sidebar
from inspector.widgets.status import PlaybackBar, PlayState, RunState, RunStatus
from inspector.widgets.turn_list import TurnList
from inspector.widgets.turn_pane import TurnPane

__all__ = ["MainScreen", "PanesReader", "TurnReader"]


class MainScreen(Screen[None]):
    """The run: the turn list beside the selected turn, the Growth, Findings and Fork tabs."""

    # -- reactive state: the status and playback lines are computed from it ------------------------

    #: Following a recording still being written.
    live: reactive[bool] = reactive(False)
    #: The whole file was read and the end-of-run checks ran.
    complete: reactive[bool] = reactive(False)
    #: Share of the file read (``None``: unknown or done).
    progress: reactive[float | None] = reactive(0.0)
    #: Why the run cannot be shown (``None``: it can).
    failed: reactive[str | None] = reactive(None)
    #: ``looptap run --inspect``: the recorded command's exit status once it exited.
    exit_status: reactive[int | None] = reactive(None)
    #: The recorder closed the file (a recording followed live has ended).
    recorder_closed: reactive[bool] = reactive(False)
    conversation_count: reactive[int] = reactive(0)
    turn_count: reactive[int] = reactive(0)
    finding_count: reactive[int] = reactive(0)
    problem_count: reactive[int] = reactive(0)
    torn: reactive[bool] = reactive(False)
    #: The selected turn's seq, its place in the list and the list's length.
    selected: reactive[int | None] = reactive(None)
    position: reactive[int] = reactive(0)
    listed: reactive[int] = reactive(0)
    playing: reactive[bool] = reactive(False)
    speed: reactive[float] = reactive(1.0)
    streaming: reactive[bool] = reactive(False)
    #: Playing at the end of a live recording: the next turn is awaited.
    waiting: reactive[bool] = reactive(False)
    following: reactive[bool] = reactive(False)
    #: The latest short notice (a search match, where focus is): one at a time, replaced.
    notice: reactive[str] = reactive("")

    run_state: reactive[RunState] = reactive(RunState)
    play_state: reactive[PlayState] = reactive(PlayState)

    #: The help screen's groups besides the app's keys (listed under "Run and playback").
    HELP_GROUPS: ClassVar[list[tuple[str, list[Binding]]]] = [
        ("Turn list", [b for b in TurnList.BINDINGS if isinstance(b, Binding)]),
        ("Messages", [b for b in MessagesView.BINDINGS if isinstance(b, Binding)]),
        ("Layer panes", [b for b in LayerPane.BINDINGS if isinstance(b, Binding)]),
        (
            "Search (/): the query takes every key typed, enter "
            "searches; in the matches enter jumps to the turn",
            [b for b in SearchScreen.BINDINGS if isinstance(b, Binding)],
        ),
        ("Other", HELP_OTHER),
    ]

    def __init__(
        self,
        path: Path,
        *,
        live: bool,
        clock: Clock,
        child_status: Path | None,
        read_panes: PanesReader,
        read_turn: TurnReader,
    ) -> None:
        super().__init__()
        self.reading = RunReading(
            self,
            path,
            live=live,
            child_status=child_status,
            read_panes=read_panes,
            read_turn=read_turn,
        )
        self.player = Player(self, clock)
        self.navigation = Navigation(self)
        self._dirty_findings = True
        self._dirty_growth = True
        self.set_reactive(MainScreen.live, live)

    # -- the screen --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunStatus(id="run-status").data_bind(state=MainScreen.run_state)
        with Horizontal(id="main"):
            yield Sidebar(self.reading.index, id="sidebar")
            with TabbedContent(id="tabs", initial="turn"):
                yield TurnPane("Turn", id="turn")
                with TabPane("Growth", id="growth"):
                    yield GrowthView(id="growth-view")
                with TabPane("Findings", id="findings"):
                    yield FindingsView(id="findings-view")
        yield Static(id="error-view")
        yield PlaybackBar(id="playback").data_bind(state=MainScreen.play_state)
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.fit(self.app.size)
        self.turn_list.focus()
        self.turn_pane.show_view(self.turn_pane.view)
        path = self.reading.path
        waiting = self.live and not path.exists()
        self.turn_pane.show_note(
            f"waiting for {path.name} to be created…" if waiting else f"reading {path.name}…"
        )
        self.watch(self, "focused", self._focus_moved)
        self.player.start()
        self.reading.start()

    # -- the widgets -------------------------------------------------------------------------------

    @cached_property
    def sidebar(self) -> Sidebar:
        return self.query_one(Sidebar)

    @cached_property
    def turn_list(self) -> TurnList:
        return self.query_one(TurnList)

    @cached_property
    def turn_pane(self) -> TurnPane:
        return self.query_one(TurnPane)

    @cached_property
    def tabs(self) -> TabbedContent:
        return self.query_one("#tabs", TabbedContent)

    @cached_property
    def error_view(self) -> Static:
        return self.query_one("#error-view", Static)

    def summary(self, seq: int | None) -> TurnSummary | None:
        return self.reading.source.summaries.get(seq) if seq is not None else None

    # -- the status and playback lines (computed from the reactive state) --------------------------

    def compute_run_state(self) -> RunState:
        note = ""
        if self.failed:
            note = "cannot read this file"
        elif self.torn:
            note = "truncated: the last record was cut off"
        elif self.exit_status is not None:
            note = f"ended (exit {self.exit_status})"
        elif self.recorder_closed:
            note = "recording ended"
        return RunState(
            name=self.reading.path.name,
            conversations=self.conversation_count,
            turns=self.turn_count,
            findings=self.finding_count,
            progress=None if self.complete or self.live else self.progress,
            problems=self.problem_count,
            live=self.live,
            note=note,
        )

    def compute_play_state(self) -> PlayState:
        turn = self.summary(self.selected)
        label = f"#{turn.seq} {turn.conversation}/turn {turn.index}" if turn is not None else ""
        return PlayState(
            playing=self.playing,
            speed=self.speed,
            position=self.position,
            total=self.listed,
            streaming=self.streaming,
            label=label,
            waiting=self.waiting,
            following=self.following and self.live,
            notice=self.notice,
        )

    # -- the three layouts, by terminal size (inspector/layout.py decides) -------------------------

    def fit(self, size: Size) -> None:
        """Wide, narrow or compact, for a terminal of ``size`` (the app passes each new size)."""
        classes = layout_classes(*size)
        for name, on_ in classes.items():
            self.set_class(on_, name)
        self.turn_pane.fit(compact=classes["-compact"])
        self.fit_sidebar()
        self.label_tabs()

    @property
    def narrow(self) -> bool:
        """One pane at a time (the narrow or the compact layout)."""
        return self.has_class("-narrow") or self.has_class("-compact")

    @property
    def compact(self) -> bool:
        return self.has_class("-compact")

    def fit_sidebar(self) -> None:
        self.sidebar.fit(compact=self.compact, width=self.app.size.width)

    def show_view(self, view: View) -> None:
        """Make ``view``'s pane the one shown in the narrow and compact layouts."""
        self.turn_pane.show_view(view)

    def pane_visible(self, view: View) -> bool:
        return self.turn_pane.pane_visible(view, narrow=self.narrow, compact=self.compact)

    def label_tabs(self, turn: TurnSummary | None = None) -> None:
        turn = turn if turn is not None else self.summary(self.selected)
        findings = turn.findings if turn is not None else []
        self.turn_pane.label_tabs(findings, compact=self.compact, width=self.app.size.width)

    def bring_up_findings(self, turn: TurnSummary, *, jump: bool = False) -> None:
        self.turn_pane.bring_up(turn.findings, narrow=self.narrow, jump=jump)

    # -- focus: said in the playback line when it is not on the turn list ----------------------

    def action_focus_turns(self) -> None:
        self.turn_list.focus()

    def _focus_moved(self, widget: Widget | None) -> None:
        """Say where focus is when it is not on the turn list (keys then act on that pane)."""
        if widget is None or widget is self.turn_list or self.app.screen is not self:
            if self.notice.startswith("focus:"):
                self.notice = ""
            return
        name = FOCUS_NAMES.get(widget.id or "")
        if name is not None:
            self.notice = f"focus: {name} · ↑↓ scroll · j/k turns · esc list"
        elif self.notice.startswith("focus:"):
            self.notice = ""

    # -- what the widgets report -------------------------------------------------------------------

    @on(TurnList.TurnSelected)
    def _turn_selected(self, message: TurnList.TurnSelected) -> None:
        turn = self.summary(message.seq)
        if turn is None or not self.is_attached:
            return
        self.selected = turn.seq
        self.position = self.turn_list.cursor
        self.listed = len(self.turn_list.seqs)
        self.following = self.turn_list.following
        self.player.turn_selected()
        self.label_tabs(turn)
        self.bring_up_findings(turn)
        self.turn_pane.show_note(f"loading turn #{turn.seq}…")
        self.reading.load_selected(turn.seq)
        self._dirty_growth = True
        self.refresh_tabs()

    @on(FindingsTable.FindingChosen)
    def _finding_chosen(self, message: FindingsTable.FindingChosen) -> None:
        self.navigation.finding_chosen(message)

    @on(ConversationSwitcher.ConversationChosen)
    def _conversation_chosen(self, message: ConversationSwitcher.ConversationChosen) -> None:
        self.navigation.show_conversation(message.conversation)

    @on(TabbedContent.TabActivated)
    def _tab_activated(self) -> None:
        self.refresh_tabs()

    # -- what the workers post (inspector/screens/reading.py shows it) -----------------------------

    def on_run_read(self, message: RunRead) -> None:
        if self.is_attached:  # (not read as the app closed)
            self.reading.run_read(message)

    def on_child_exited(self, message: ChildExited) -> None:
        if self.is_attached:  # (not a worker's message as the app closed)
            self.reading.child_exited(message)

    def on_recorder_closed(self, message: RecorderClosed) -> None:
        if self.is_attached:
            self.reading.recorder_closed(message)

    def on_run_completed(self, message: RunCompleted) -> None:
        if self.is_attached:
            self.reading.run_completed(message)

    async def on_fork_read(self, message: ForkRead) -> None:
        if self.is_attached:
            await self.reading.fork_read(message)

    def on_turn_shown(self, message: TurnShown) -> None:
        if self.is_attached:
            self.reading.turn_shown(message)

    def on_turn_loaded(self, message: TurnLoaded) -> None:
        if self.is_attached:
            self.reading.turn_loaded(message)

    # -- the keys (the app's bindings call these) ------------------------------------------------

    def action_tab(self, tab: str) -> None:
        if tab == "fork" and not self.query("#fork-view"):
            self.notice = (
                "not a branch: 4 shows a forked run (looptap run --from) beside its origin"
            )
            return
        self.tabs.active = tab
        self.refresh_tabs()
        if tab == "findings":
            self.query_one(FindingsTable).focus()
        elif tab == "fork":
            self.query_one("#fork-view", ForkPane).focus()  # o: origin or branch past the cursor
        elif not self.turn_list.has_focus:
            # The growth chart takes no keys; the turn list keeps j/k working under it.
            self.turn_list.focus()

    def action_help(self) -> None:
        keys = ("Run and playback", [b for b in APP_BINDINGS if isinstance(b, Binding)])
        self.app.push_screen(HelpScreen([keys, *self.HELP_GROUPS]))

    # -- the Growth and Findings tabs: redrawn when shown, if the run changed ---------------------

    def dirty(self) -> None:
        """The run changed: the findings table and the chart are redrawn when next shown."""
        self._dirty_findings = self._dirty_growth = True

    def refresh_tabs(self) -> None:
        """Redraw the findings table and the chart only when visible (they can be large)."""
        if not self.is_attached:
            return
        active = self.tabs.active
        # Narrow terminals give the Growth and Findings tabs the whole width (no turn list beside).
        self.set_class(active != "turn", "-full-tab")
        index = self.reading.index
        if active == "findings" and self._dirty_findings:
            self._dirty_findings = False
            # Every finding of the run (whatever conversation is viewed: a jump switches to it).
            self.query_one(FindingsTable).show_findings(index.findings())
        if active == "growth" and self._dirty_growth:
            self._dirty_growth = False
            seq = self.selected
            conv = index.growth_conversation(self.summary(seq), self.sidebar.conversation)
            self.query_one(GrowthView).show_bars(index.bars(conv), seq, conv)

    # -- worker failures: every worker's failure ends here --------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures end up."""
        if event.state != WorkerState.ERROR:
            return
        exc = event.worker.error
        if isinstance(exc, CassetteError | OSError):
            text = str(exc)
        else:
            text = f"{type(exc).__name__}: {exc} (a bug in looptap: please report it)"
        if event.worker.name == "reader":
            self.show_failure(text)
        else:
            self.notify(text, title="could not read the turn", severity="error", timeout=10)

    def show_failure(self, text: str) -> None:
        """The run cannot be shown: why, instead of the panes."""
        self.failed = text
        hint = ""
        if "not a looptap cassette" in text:
            hint = (
                "\n\nA vcrpy / pytest-recording YAML file can "
                "be converted with `looptap import FILE`."
            )
        self.error_view.update(
            Text.assemble(
                (clean(f"Cannot inspect {self.reading.path}\n\n"), "bold"),
                clean(text),
                hint,
                ("\n\nPress q to quit.", "dim"),
            )
        )
        self.add_class("-failed")
        self.notify(text, title="cannot read the run", severity="error", timeout=15)
