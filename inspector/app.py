"""The inspector app: reads a run in a worker, shows it turn by turn, plays it back.

Data flow (STYLE.md): the app owns the run being read (an :class:`inspector.source.TurnSource`,
which holds the turns' summaries: the app keeps only seq indexes into them) and hands each widget
what it shows (attributes down); widgets report what the user did with their own messages
(``TurnList.TurnSelected``, ``FindingsTable.FindingChosen`` …, messages up). Every disk read runs
in a thread worker — reading the run, restoring the selected turn and the results its next turn
sent, re-reading its full history — and every worker failure ends in
:meth:`InspectorApp.on_worker_state_changed`. The status and playback lines are reactives computed
from the app's reactive state (:attr:`InspectorApp.run_state`, :attr:`InspectorApp.play_state`).
Playback's timing is decided by :class:`inspector.playback.Playback` (no Textual); the app applies
its decisions to the widgets. The key bindings are listed in :mod:`inspector.bindings`.

Three layouts, by terminal size (``inspector.tcss``): wide (three layer panes side by side), narrow
(under 120 columns: the layer panes as tabs) and compact (under 100 columns or 28 rows: the turn
list above one pane at full width, the messages one of its tabs).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import ClassVar, Literal, assert_never

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.filter import LineFilter
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static, Tab, TabbedContent, TabPane, Tabs
from textual.worker import Worker, WorkerState, get_current_worker

from cassettes.analysis.model import Finding, Layer, McpCall, Turn
from cassettes.errors import CassetteError
from cassettes.models import NormalisedRequest, ToolResult
from cassettes.reading.incremental import Batch
from cassettes.storage.store import being_written
from cassettes.untrusted import clean, clean_line
from cassettes.views.search import SearchHit, search_turns
from cassettes.views.summary import TurnSummary
from cassettes.views.timeline import TimelinePoint, text_timeline
from inspector.bindings import APP_BINDINGS, HELP_OTHER
from inspector.playback import Advance, Clock, Decision, Playback, Reveal, StreamEnded, StreamStarted
from inspector.safe import UntrustedFilter
from inspector.screens.help import HelpScreen
from inspector.screens.search import SearchScreen
from inspector.source import TurnSource, open_source
from inspector.widgets.badges import LAYERS, SEVERITY_MARK, worst
from inspector.widgets.conversations import ALL, ConversationSwitcher
from inspector.widgets.findings import FindingsTable, FindingsView
from inspector.widgets.growth import GrowthView
from inspector.widgets.keys import KeyBar
from inspector.widgets.layers import ApiPane, DispatchPane, EmissionPane, LayerPane
from inspector.widgets.messages import MessagesView
from inspector.widgets.status import PlaybackBar, PlayState, RunState, RunStatus
from inspector.widgets.turn_list import TurnList, turn_width

__all__ = ["InspectorApp", "build_app"]

#: Bytes read before the first screen is drawn (small, so it appears at once), then per batch.
FIRST_STEP = 256 * 1024
STEP = 4 * 1024 * 1024
#: Seconds between looks at a live recording for new records.
POLL = 0.25
#: Seconds between screen updates while a file is read (the first batch is shown at once).
SHOW_EVERY = 1.0
#: The layer tabs (narrow and compact layouts): long labels, and the short ones used when the long
#: ones do not all fit. ``M`` (the messages) is a tab only in the compact layout.
View = Literal["M", "E", "A", "C"]
VIEWS: tuple[View, ...] = ("M", "E", "A", "C")
TAB_LABEL: dict[View, tuple[str, str]] = {
    "M": ("Messages", "Msgs"),
    "E": ("E emission", "E"),
    "A": ("A API verdict", "A"),
    "C": ("C client", "C"),
}
#: Below these sizes the layout folds (see ``inspector.tcss``): under NARROW columns the E, A and
#: C panes are tabs; under COMPACT_WIDTH columns or COMPACT_HEIGHT rows the turn list goes above
#: one pane at full width; under TINY_* only the list and that pane remain.
NARROW = 120
COMPACT_WIDTH, COMPACT_HEIGHT = 100, 28
TINY_WIDTH, TINY_HEIGHT = 70, 20
#: The turn list's width: what its rows need, within these bounds (a share of the terminal).
LIST_MIN, LIST_SHARE = 30, 0.42

_RANK = {None: 0, "info": 1, "warning": 2, "error": 3}


class InspectorApp(App[None]):
    """``looptap inspect``: a recorded run, turn by turn."""

    CSS_PATH = "inspector.tcss"
    TITLE = "looptap inspect"

    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

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

    class RunRead(Message):
        """The reader worker read another batch of the run."""

        def __init__(self, batch: Batch, progress: float | None) -> None:
            super().__init__()
            self.batch = batch
            self.progress = progress

    class RunCompleted(Message):
        """The whole file was read and the end-of-run checks ran."""

    class ChildExited(Message):
        """``looptap run --inspect``: the recorded command exited with this status."""

        def __init__(self, status: int) -> None:
            super().__init__()
            self.status = status

    class RecorderClosed(Message):
        """The recorder closed the file being followed: the recording is over."""

    class TurnShown(Message):
        """The selected turn restored from the store, with what its next turn sent back."""

        def __init__(
            self, seq: int, turn: Turn, results: dict[str, ToolResult] | None, runs: dict[str, McpCall]
        ) -> None:
            super().__init__()
            self.seq = seq
            self.turn = turn
            self.results = results
            self.runs = runs

    class TurnLoaded(Message):
        """The selected turn was re-read in full: its request and its text timeline."""

        def __init__(
            self, seq: int, request: NormalisedRequest | None, timeline: list[TimelinePoint]
        ) -> None:
            super().__init__()
            self.seq = seq
            self.request = request
            self.timeline = timeline

    def __init__(
        self, path: str | Path, *, live: bool = False, clock: Clock = time.monotonic, child_status: str | Path | None = None
    ) -> None:
        super().__init__()
        self.path = Path(path)
        #: ``looptap run --inspect``: where the recorder writes the command's exit status.
        self.child_status = Path(child_status) if child_status is not None else None
        self.clock = clock
        self.source: TurnSource = open_source(self.path)
        # Seq indexes into the source's summaries (the one copy of the turns): recording order,
        # and each conversation's turns.
        self._order: list[int] = []
        self._conv: dict[str, list[int]] = {}
        self._pos: dict[int, int] = {}  # each seq's place in recording order
        self.conversation = ALL
        #: The turn whose full request and timeline were read (``None``: the selected one is loading).
        self._loaded: int | None = None
        self.playback = Playback(clock)
        # search
        self._query = ""
        self._hits: list[SearchHit] = []
        self._hit = -1
        self._dirty_findings = True
        self._dirty_growth = True
        self._switcher_convs = -1
        self._repeated: set[int] = set()
        self._untrusted_filter = UntrustedFilter()
        #: The pane shown in the narrow and compact layouts (``M``: the messages, compact only).
        self.view: View = "E"
        self.set_reactive(InspectorApp.live, live)

    # -- the widgets ---------------------------------------------------------------------------------

    @cached_property
    def turn_list(self) -> TurnList:
        return self.query_one(TurnList)

    @cached_property
    def messages(self) -> MessagesView:
        return self.query_one(MessagesView)

    @cached_property
    def pane_e(self) -> EmissionPane:
        return self.query_one(EmissionPane)

    @cached_property
    def pane_a(self) -> ApiPane:
        return self.query_one(ApiPane)

    @cached_property
    def pane_c(self) -> DispatchPane:
        return self.query_one(DispatchPane)

    @cached_property
    def layer_panes(self) -> dict[Layer, LayerPane]:
        return {"E": self.pane_e, "A": self.pane_a, "C": self.pane_c}

    @cached_property
    def layer_tabs(self) -> Tabs:
        return self.query_one("#layer-tabs", Tabs)

    @cached_property
    def tabs(self) -> TabbedContent:
        return self.query_one("#tabs", TabbedContent)

    @cached_property
    def switcher(self) -> ConversationSwitcher:
        return self.query_one(ConversationSwitcher)

    @cached_property
    def findings_table(self) -> FindingsTable:
        return self.query_one(FindingsTable)

    @cached_property
    def growth_view(self) -> GrowthView:
        return self.query_one(GrowthView)

    @cached_property
    def sidebar(self) -> Vertical:
        return self.query_one("#sidebar", Vertical)

    @cached_property
    def error_view(self) -> Static:
        return self.query_one("#error-view", Static)

    @property
    def turns(self) -> list[TurnSummary]:
        """Every turn read so far, in recording order (from the source's summaries)."""
        summaries = self.source.summaries
        return [summaries[s] for s in self._order]

    @property
    def conv_turns(self) -> dict[str, list[int]]:
        """Each conversation's turns (seqs), in order."""
        return self._conv

    def summary(self, seq: int | None) -> TurnSummary | None:
        return self.source.summaries.get(seq) if seq is not None else None

    # -- the output boundary (inspector/safe.py) -----------------------------------------------

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the one that strips any control a widget let through."""
        return [*super().get_line_filters(), self._untrusted_filter]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Toasts carry file and wire text (problems, error messages, search queries): cleaned,
        and never read as markup, whatever the caller asks."""
        super().notify(clean(message), title=clean_line(title), severity=severity, timeout=timeout, markup=False)

    # -- layout -----------------------------------------------------------------------------------

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

    def on_resize(self, event: events.Resize) -> None:
        w, h = event.size
        compact = w < COMPACT_WIDTH or h < COMPACT_HEIGHT
        self.screen_stack[0].set_class(w < NARROW and not compact, "-narrow")
        self.screen_stack[0].set_class(compact, "-compact")
        self.screen_stack[0].set_class(w < TINY_WIDTH or h < TINY_HEIGHT, "-tiny")
        if compact:
            self.layer_tabs.show("layer-M")
        else:
            self.layer_tabs.hide("layer-M")
            if self.view == "M":
                self.show_view("E")
        self._fit_sidebar()
        self._label_tabs()

    def _layout(self, name: str) -> bool:
        # (messages still queued when the app closes find no screen)
        return bool(self._screen_stack) and self.screen_stack[0].has_class(name)

    @property
    def narrow(self) -> bool:
        """One pane at a time (the narrow or the compact layout)."""
        return self._layout("-narrow") or self._layout("-compact")

    @property
    def compact(self) -> bool:
        return self._layout("-compact")

    def _fit_sidebar(self) -> None:
        """The turn list as wide as its rows need (finish whole), within a share of the terminal;
        what is left of a long finish is shortened by whole words (``turn_line``)."""
        if self.compact:
            self.sidebar.styles.width = None
            return
        width = self.size.width
        # Rows of the first and the latest turns tell the widths well enough (a row's width varies
        # with its finish and token counts only); looking at every turn of a huge run would not pay.
        seqs = self.turn_list.seqs
        sample = seqs[:200] + seqs[-200:] if len(seqs) > 400 else seqs
        summaries = self.source.summaries
        need = max((turn_width(summaries[s], self.turn_list.show_conversation) for s in sample), default=40)
        cap = int(width * LIST_SHARE) if width < NARROW else 56
        self.sidebar.styles.width = max(LIST_MIN, min(need + 2, cap))

    # -- the layer panes: side by side, or (narrow, compact) one at a time under tabs --------------

    def show_view(self, view: View) -> None:
        """Make ``view``'s pane the one shown in the narrow and compact layouts (its tab active)."""
        self.view = view
        if not self._screen_stack:
            return
        for layer, pane in self.layer_panes.items():
            pane.set_class(layer == view, "-shown")
        self.screen_stack[0].set_class(view == "M", "-messages-shown")
        if self.layer_tabs.active != f"layer-{view}":
            self.layer_tabs.active = f"layer-{view}"

    def pane_visible(self, view: View) -> bool:
        if view == "M":
            return not self.compact or self.view == "M"
        return not self.narrow or self.view == view

    @on(Tabs.TabActivated, "#layer-tabs")
    def _layer_tab(self, event: Tabs.TabActivated) -> None:
        event.stop()  # not the main tabs
        # Activations arrive as messages: one the app itself caused before a later change of
        # ``active`` is stale, and would undo that change.
        if event.tab.id != self.layer_tabs.active or not self._screen_stack:
            return
        if event.tab.id and event.tab.id.startswith("layer-"):
            view = event.tab.id.removeprefix("layer-")
            if view in VIEWS and view != self.view:
                self.show_view(view)  # type: ignore[arg-type]

    def action_next_layer(self) -> None:
        order: tuple[View, ...] = VIEWS if self.compact else LAYERS
        i = (order.index(self.view) + 1) % len(order) if self.view in order else 0
        self.show_view(order[i])
        self.action_tab("turn")
        if not self.narrow:
            # Wide: the three panes are all shown; ``l`` moves focus into the next one (to scroll
            # it), and the playback line says so (j/k still move the turns, esc goes back).
            self.layer_panes[LAYERS[i]].focus()

    def action_focus_turns(self) -> None:
        self.turn_list.focus()

    def _focus_moved(self, widget: Widget | None) -> None:
        """Say where focus is when it is not on the turn list (keys then act on that pane)."""
        if widget is None or widget is self.turn_list or self.screen is not self.screen_stack[0]:
            if self.notice.startswith("focus:"):
                self.notice = ""
            return
        name = {"pane-e": "E pane", "pane-a": "A pane", "pane-c": "C pane", "messages": "messages"}.get(widget.id or "")
        if name is not None:
            self.notice = f"focus: {name} · ↑↓ scroll · j/k turns · esc list"
        elif self.notice.startswith("focus:"):
            self.notice = ""

    def _label_tabs(self, turn: TurnSummary | None = None) -> None:
        """Each layer tab says its layer's findings (``E ✖1``); the long labels if they all fit the
        tab strip, else the short ones, so every layer's count is always on screen."""
        turn = turn if turn is not None else self.summary(self.selected)
        findings = turn.findings if turn is not None else []
        marks: dict[View, str] = {"M": ""}
        for layer in LAYERS:
            sev = worst(findings, layer)
            n = sum(1 for f in findings if f.layer == layer)
            marks[layer] = f" {SEVERITY_MARK[sev]}{n}" if sev is not None else " ok"
        shown = [v for v in VIEWS if v != "M" or self.compact]
        room = (self.layer_tabs.size.width or self.size.width) - 2
        # Each tab takes its label and two cells of padding.
        long = sum(len(TAB_LABEL[v][0] + marks[v]) + 2 for v in shown)
        pick = 0 if long <= room else 1
        for v in VIEWS:
            label = TAB_LABEL[v][pick] + (marks[v] if v != "M" else "")
            self.layer_tabs.query_one(f"#layer-{v}", Tab).label = label

    def _bring_up_findings(self, turn: TurnSummary, *, jump: bool = False) -> None:
        """One pane at a time: a turn whose findings are in another layer than the one shown brings
        that layer up (the worst first) — a warning or an error always, any finding when the shown
        layer has none. ``jump`` (``f``, a finding chosen): even from the messages tab."""
        if not self.narrow or (self.view == "M" and not jump):
            return

        def level(layer: Layer) -> int:
            return _RANK[worst(turn.findings, layer)]

        best = max(LAYERS, key=lambda x: (level(x), -LAYERS.index(x)))
        if level(best) == 0:
            return
        current = level(self.view) if self.view != "M" else 0
        if (level(best) >= 2 and level(best) > current) or current == 0:
            self.show_view(best)

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

    # -- the status and playback lines (computed from the reactive state) ----------------------------

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
            name=self.path.name,
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

    def _sync_playback(self) -> None:
        """Copy :class:`Playback`'s state (plain Python) into the reactives."""
        self.playing = self.playback.playing
        self.speed = self.playback.speed
        self.streaming = self.playback.streaming

    # -- reading the run (worker) ----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="reader", exit_on_error=False, name="reader")
    def _read_run(self) -> None:
        worker = get_current_worker()
        run = self.source
        step = FIRST_STEP
        held: Batch | None = None  # read but not yet shown
        shown_at = 0.0
        while not worker.is_cancelled:
            if self.live and not self.path.exists():
                # `looptap run --inspect` may start the inspector before the recorder's first write.
                time.sleep(POLL)
                continue
            # Looked at before reading: a writer that closed the file wrote its last record first.
            closed = self.live and self.child_status is None and not being_written(self.path)
            batch = run.step(step)
            step = STEP
            if held is not None:
                held.turns.extend(batch.turns)
                held.records += batch.records
                held.problems.extend(batch.problems)
                held.at_end = batch.at_end
                batch = held
            progress = None if batch.at_end else run.progress()
            now = time.monotonic()
            # Every update of the screen takes the interpreter from the reader: while a big file
            # is read, show what was read a few times a second, not after every block.
            if not batch.at_end and not batch.problems and now - shown_at < SHOW_EVERY and shown_at:
                held = batch
                continue
            held = None
            if batch.records or batch.problems or batch.at_end:
                shown_at = now
                self.post_message(self.RunRead(batch, progress))
            if batch.at_end:
                if not self.live:
                    run.finish()
                    self.post_message(self.RunCompleted())
                    return
                status = self._child_exit()
                if status is not None or (closed and self.path.stat().st_size > 0):
                    # The recorded command exited (the recorder wrote its last record before the
                    # status) or the recorder closed the file: one more read, then it is complete.
                    last = run.step(STEP)
                    if last.records or last.problems:
                        self.post_message(self.RunRead(last, None))
                    run.finish()
                    self.post_message(self.ChildExited(status) if status is not None else self.RecorderClosed())
                    self.post_message(self.RunCompleted())
                    return
                time.sleep(POLL)

    def on_inspector_app_run_read(self, message: RunRead) -> None:
        if not self._screen_stack:
            return  # (read as the app closed)
        batch = message.batch
        self.progress = message.progress
        first = not self._order
        summaries = self.source.summaries
        fresh: list[int] = []
        findings = 0
        for t in batch.turns:
            if t.seq in self._pos:
                self._repeat(t.seq)
                continue
            self._pos[t.seq] = len(self._order)
            self._order.append(t.seq)
            self._conv.setdefault(t.conversation, []).append(t.seq)
            findings += len(t.findings)
            fresh.append(t.seq)
        self.finding_count += findings  # one reactive change a batch, not one a turn
        if fresh:
            self._dirty_findings = self._dirty_growth = True
            shown = [s for s in fresh if self.conversation in (ALL, summaries[s].conversation)]
            if first:
                self.turn_list.show_conversation = len(self._conv) > 1
                self.turn_list.set_turns(self._order if self.conversation == ALL else self._conv.get(self.conversation, []), summaries)
            else:
                if len(self._conv) > 1 and self.conversation == ALL:
                    self.turn_list.show_conversation = True
                self.turn_list.extend(shown)
            # The switcher's labels carry turn counts; rebuilding them for every batch of a big
            # file costs more than it tells: only when a conversation appears, live, or at the end.
            if self.live or batch.at_end or len(self._conv) != self._switcher_convs:
                self._update_switcher()
            self._refresh_selected_results(fresh)
            self.listed = len(self.turn_list.seqs)
            self.position = self.turn_list.cursor
            if first or self.live:
                self._fit_sidebar()
        for p in batch.problems:
            self.notify(str(p), title="damaged record skipped", severity="warning", timeout=8)
        self._counts()
        self._refresh_tabs()
        if self.waiting and fresh:
            # Playing at the end of a live recording: the awaited turn came (following, the list
            # has already moved to it).
            self.waiting = False
            if not self.turn_list.following:
                self._apply(Advance())
        if not self._order and batch.at_end:
            if self.live:
                note = "no turns yet: waiting for the first turn of the recording…"
            else:
                note = "no LLM turns in this file"
            self.messages.show_note(note)

    def _repeat(self, seq: int) -> None:
        """A seq the run reported twice (records appended again): the source keeps the later
        record; the list keeps one row, which shows it (the row, the status and the detail read
        the same summary)."""
        if not self._repeated:
            self.notify(
                f"turn #{seq} appears twice in this file: each seq shows its last record",
                title="repeated turns",
                severity="warning",
                timeout=12,
            )
        self._repeated.add(seq)
        # The later record may belong to another conversation: move the seq there.
        turn = self.source.summaries[seq]
        for conv, seqs in self._conv.items():
            if seq in seqs and conv != turn.conversation:
                seqs.remove(seq)
                self._conv.setdefault(turn.conversation, []).append(seq)
                break
        self._conv = {c: s for c, s in self._conv.items() if s}
        self._dirty_findings = self._dirty_growth = True
        self.turn_list.refresh()
        if self.selected == seq:
            self._load_panes(seq)

    def _counts(self) -> None:
        self.conversation_count = len(self._conv)
        self.turn_count = len(self._order)
        self.problem_count = len(self.source.problems)
        self.torn = any(p.kind == "torn" for p in self.source.problems)

    def _update_switcher(self) -> None:
        self._switcher_convs = len(self._conv)
        convs = self.source.conversations()
        # The switcher lists the conversations the list can show (a repeated seq moves turns).
        counted = [c for c in convs if c.id in self._conv]
        self.switcher.show_conversations(counted, len(self._order))

    def _child_exit(self) -> int | None:
        """The recorded command's exit status, once the recorder wrote it (reader thread)."""
        if self.child_status is None:
            return None
        try:
            text = self.child_status.read_text().strip()
        except OSError:
            return None
        try:
            return int(text)
        except ValueError:
            return None

    def on_inspector_app_child_exited(self, message: ChildExited) -> None:
        if not self._screen_stack:
            return  # (a worker's message as the app closed)
        self.live = False
        self.exit_status = message.status
        self.notify(
            f"The recorded command exited with status {message.status}; the recording is complete.",
            title="run ended",
            severity="information" if message.status == 0 else "warning",
        )
        self._end_wait()

    def on_inspector_app_recorder_closed(self, message: RecorderClosed) -> None:
        if not self._screen_stack:
            return  # (a worker's message as the app closed)
        self.live = False
        self.recorder_closed = True
        self.notify("The recorder closed the file; the recording is complete.", title="recording ended")
        self._end_wait()

    def _end_wait(self) -> None:
        if self.waiting:
            self.waiting = False
            self._apply(self.playback.pause())
            self._sync_playback()

    def on_inspector_app_run_completed(self, message: RunCompleted) -> None:
        if not self._screen_stack:
            return  # (a worker's message as the app closed)
        self.complete = True
        self.progress = None
        self._update_switcher()
        torn = [p for p in self.source.problems if p.kind == "torn"]
        if torn:
            self.notify(
                f"{torn[0]}. Showing the {self.source.records} complete round trips.",
                title="truncated file",
                severity="warning",
                timeout=10,
            )
        # The end-of-run checks may have added findings to any turn.
        summaries = self.source.summaries
        self.finding_count = sum(len(summaries[s].findings) for s in self._order)
        self._counts()
        self._dirty_findings = self._dirty_growth = True
        self.turn_list.refresh()
        if self.selected is not None:
            self._load_panes(self.selected)
            self._label_tabs()
        self._refresh_tabs()

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
            self._show_failure(text)
        else:
            self.notify(text, title="could not read the turn", severity="error", timeout=10)

    def _show_failure(self, text: str) -> None:
        self.failed = text
        hint = ""
        if "not a looptap cassette" in text:
            hint = "\n\nA vcrpy / pytest-recording YAML file can be converted with `looptap import FILE`."
        self.error_view.update(
            Text.assemble(
                (clean(f"Cannot inspect {self.path}\n\n"), "bold"), clean(text), hint, ("\n\nPress q to quit.", "dim")
            )
        )
        self.screen_stack[0].add_class("-failed")
        self.notify(text, title="cannot read the run", severity="error", timeout=15)

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
        self._loaded = None
        self._load_panes(turn.seq)
        self._load_turn(turn.seq)
        self._dirty_growth = True
        self._refresh_tabs()

    def _next_seq(self, turn: TurnSummary) -> int | None:
        """The conversation's next turn (the one that sent this turn's tool results back)."""
        summaries = self.source.summaries
        return next((s for s in self._conv.get(turn.conversation, []) if summaries[s].previous_seq == turn.seq), None)

    @work(thread=True, exclusive=True, group="panes", exit_on_error=False, name="panes")
    def _load_panes(self, seq: int) -> None:
        """The selected turn from the store (a temp-file read, zlib, validation) and the tool results
        its next turn sent back: disk reads, so in a worker."""
        turn = self.summary(seq)
        if turn is None:
            return
        nxt = self._next_seq(turn)
        full = self.source.full_turn(seq)
        results: dict[str, ToolResult] | None = None
        if nxt is not None:
            results = {
                p.tool_result.call_id or "": p.tool_result
                for m in self.source.full_turn(nxt).c.appended
                for p in m.parts
                if p.tool_result is not None
            }
        runs = {c.call_id: c for c in self.source.mcp_calls() if c.call_id and c.model_seq == seq}
        if not get_current_worker().is_cancelled:
            self.post_message(self.TurnShown(seq, full, results, runs))

    def on_inspector_app_turn_shown(self, message: TurnShown) -> None:
        if not self._screen_stack:
            return  # (a worker's message as the app closed)
        if message.seq != self.selected:
            return
        self.pane_e.show_turn(message.turn, message.results, message.runs)
        self.pane_a.show_turn(message.turn)
        self.pane_c.show_turn(message.turn)

    def _refresh_selected_results(self, new_seqs: list[int]) -> None:
        """A live run grew: the selected turn may now have its next turn (and its results)."""
        seq = self.selected
        summaries = self.source.summaries
        if seq is not None and any(summaries[s].previous_seq == seq for s in new_seqs):
            self._load_panes(seq)

    @work(thread=True, exclusive=True, group="turn", exit_on_error=False, name="turn")
    def _load_turn(self, seq: int) -> None:
        ex, rt = self.source.by_seq(seq)
        timeline = text_timeline(ex, rt)
        if not get_current_worker().is_cancelled:
            self.post_message(self.TurnLoaded(seq, rt.request, timeline))

    def on_inspector_app_turn_loaded(self, message: TurnLoaded) -> None:
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
            self.messages.show_request(message.request, turn.appended_from)
        self._apply(self.playback.turn_loaded(message.timeline))
        self._sync_playback()

    # -- playback: inspector/playback.py decides, this applies its decisions to the widgets -------

    def _apply(self, decision: Decision) -> None:
        """Show what :class:`Playback` decided."""
        if decision is None:
            pass
        elif isinstance(decision, StreamStarted):
            # One pane at a time: the text streams where it can be seen.
            if not self.pane_visible("E"):
                self.show_view("E")
            self.pane_e.reveal = 0
            self._ticker.resume()
        elif isinstance(decision, Reveal):
            self.pane_e.reveal = decision.chars
        elif isinstance(decision, StreamEnded):
            self.pane_e.reveal = None
        elif isinstance(decision, Advance):
            if not self._move(1):
                if self.live:
                    # The end of a recording still being written: wait for its next turn.
                    self.waiting = True
                else:
                    self._apply(self.playback.pause())
                    self.notice = "end of the turn list"
        else:
            assert_never(decision)
        self._sync_playback()

    def _tick(self) -> None:
        self._apply(self.playback.tick())
        if not self.playback.active:
            self._ticker.pause()

    def _move(self, delta: int) -> bool:
        target = self.turn_list.cursor + delta
        if not 0 <= target < len(self.turn_list.seqs):
            return False
        self.turn_list.move_to(target)
        return True

    def action_play_pause(self) -> None:
        if not self._order:
            return
        if self.waiting:
            self.waiting = False
            self._apply(self.playback.pause())
            return
        loaded = self._loaded == self.selected
        decision = self.playback.toggle(loaded)
        if self.playback.playing:
            self._ticker.resume()
        self._apply(decision)

    def action_step(self, delta: int) -> None:
        self._move(delta)

    def action_turn(self, delta: int) -> None:
        """``j``/``k`` from a pane: the turn list moves, focus stays."""
        self._move(delta)

    def action_speed(self, direction: int) -> None:
        self.playback.change_speed(direction)
        self._sync_playback()

    def action_restream(self) -> None:
        if self._loaded is None or self._loaded != self.selected:
            self.notice = "the turn is still loading"
        elif not self.playback.timeline:
            self.notice = "this turn's text was not streamed with timings: nothing to re-stream"
        else:
            self._apply(self.playback.start_stream())

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
        seqs = self._order if conversation == ALL else self._conv.get(conversation, [])
        self.turn_list.show_conversation = conversation == ALL and len(self._conv) > 1
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
        order = [ALL, *self._conv]
        i = order.index(self.conversation) if self.conversation in order else 0
        self._show_conversation(order[(i + 1) % len(order)])

    def action_search(self) -> None:
        seqs = list(self._order)
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
        self.tabs.active = tab
        self._refresh_tabs()
        if tab == "findings":
            self.findings_table.focus()
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
            ("Other", HELP_OTHER),
        ]
        self.push_screen(HelpScreen(groups))

    # -- keeping the views current -------------------------------------------------------------

    def _shown_findings(self) -> list[Finding]:
        """Every finding of the run (whatever conversation is viewed: a jump switches to it)."""
        summaries = self.source.summaries
        return [f for s in self._order for f in summaries[s].findings]

    def _refresh_tabs(self) -> None:
        """Redraw the findings table and the chart only when visible (they can be large)."""
        if not self._screen_stack:
            return
        active = self.tabs.active
        # Narrow terminals give the Growth and Findings tabs the whole width (no turn list beside).
        self.screen_stack[0].set_class(active != "turn", "-full-tab")
        if active == "findings" and self._dirty_findings:
            self._dirty_findings = False
            self.findings_table.show_findings(self._shown_findings())
        if active == "growth" and self._dirty_growth:
            self._dirty_growth = False
            seq = self.selected
            turn = self.summary(seq)
            conv = (
                turn.conversation
                if turn is not None
                else (self.conversation if self.conversation != ALL else next(iter(self._conv), ""))
            )
            summaries = self.source.summaries
            bars = [summaries[s].bar for s in self._conv.get(conv, [])]
            self.growth_view.show_bars(bars, seq, conv)


def build_app(
    path: str | Path, *, live: bool = False, clock: Clock | None = None, child_status: str | Path | None = None
) -> InspectorApp:
    """The inspector for one cassette (``live``: follow a recording still being written, until the
    recorder closes the file or the file ``child_status`` holds the recorded command's exit status)."""
    return InspectorApp(path, live=live, clock=clock or time.monotonic, child_status=child_status)
