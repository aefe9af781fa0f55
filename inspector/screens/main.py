"""The inspector's main screen: one run, read in workers, shown turn by turn, played back.

Data flow (STYLE.md): the screen owns the run being read (an :class:`inspector.source.TurnSource`,
which holds the turns' summaries: the screen keeps only seq indexes into them, a
:class:`inspector.turns.TurnIndex`) and hands each widget what it shows (attributes down); widgets
report what the user did with their own messages (``TurnList.TurnSelected``,
``FindingsTable.FindingChosen`` …, messages up). The widgets own their state: the turn list its
rows and cursor, the :class:`inspector.widgets.turn_pane.TurnPane` the pane that is up, the
messages view its scroll, the emission pane what it reveals. Every disk read runs in one of this
screen's thread workers — reading the run (:mod:`inspector.reader` reads), a branch's origin,
restoring the selected turn and the results its next turn sent, re-reading its full history
(:mod:`inspector.selected` reads) — and every worker failure ends in :meth:`on_worker_state_changed`.
The status and playback lines are reactives computed from this screen's reactive state
(``run_state``, ``play_state``); :class:`inspector.playback.Playback` decides what playback does
next and this screen applies it; :mod:`inspector.layout` decides the layout.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import ClassVar, assert_never

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from cassettes.errors import CassetteError
from cassettes.untrusted import clean
from cassettes.views.search import SearchHit, search_turns
from cassettes.views.summary import TurnSummary
from inspector.bindings import APP_BINDINGS, HELP_OTHER
from inspector.layout import FOCUS_NAMES, VIEWS, View, layout_classes, sidebar_width, width_sample
from inspector.playback import Advance, Clock, Decision, Playback, Reveal, StreamEnded, StreamStarted
from inspector.reader import ChildExited, RecorderClosed, RunCompleted, RunRead, read_run
from inspector.screens.help import HelpScreen
from inspector.screens.search import Matches, SearchScreen
from inspector.selected import TurnLoaded, TurnShown
from inspector.source import TurnSource, open_source
from inspector.turns import TurnIndex
from inspector.widgets.badges import LAYERS
from inspector.widgets.conversations import ALL, ConversationSwitcher
from inspector.widgets.findings import FindingsTable, FindingsView
from inspector.widgets.fork import ForkPane, ForkRead, read_fork
from inspector.widgets.growth import GrowthView
from inspector.widgets.keys import KeyBar
from inspector.widgets.layers import LayerPane
from inspector.widgets.messages import MessagesView
from inspector.widgets.status import PlaybackBar, PlayState, RunState, RunStatus
from inspector.widgets.turn_list import TurnList, turn_width
from inspector.widgets.turn_pane import TurnPane

__all__ = ["MainScreen", "PanesReader", "TurnReader"]

#: What the selected turn's two workers call (:func:`inspector.selected.read_panes`, ``read_turn``).
PanesReader = Callable[[TurnSource, TurnIndex, int], TurnShown | None]
TurnReader = Callable[[TurnSource, int], TurnLoaded]


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

    #: Runs while playing or re-streaming (started paused when the screen is mounted).
    _ticker: Timer

    #: The help screen's groups besides the app's keys (listed under "Run and playback").
    HELP_GROUPS: ClassVar[list[tuple[str, list[Binding]]]] = [
        ("Turn list", [b for b in TurnList.BINDINGS if isinstance(b, Binding)]),
        ("Messages", [b for b in MessagesView.BINDINGS if isinstance(b, Binding)]),
        ("Layer panes", [b for b in LayerPane.BINDINGS if isinstance(b, Binding)]),
        ("Search (/): the query takes every key typed, enter searches; in the matches enter jumps to the turn", [b for b in SearchScreen.BINDINGS if isinstance(b, Binding)]),
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
        self.path = path
        #: ``looptap run --inspect``: where the recorder writes the command's exit status.
        self.child_status = child_status
        self.source: TurnSource = open_source(path, live=live)
        # Seq indexes into the source's summaries (the one copy of the turns).
        self.index = TurnIndex(self.source)
        self.conversation = ALL
        self._read_panes = read_panes
        self._read_turn = read_turn
        #: The turn whose full request and timeline were read (``None``: the selected one is loading).
        self.request_of: int | None = None
        #: The turn whose E, A and C panes are drawn (read by another worker than the request).
        self.panes_of: int | None = None
        self.playback = Playback(clock)
        self.matches = Matches()
        self._dirty_findings = True
        self._dirty_growth = True
        self._switcher_convs = -1
        self._repeated: set[int] = set()
        self.set_reactive(MainScreen.live, live)

    # -- the screen ----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunStatus(id="run-status").data_bind(state=MainScreen.run_state)
        with Horizontal(id="main"):
            with Vertical(id="sidebar"):
                yield ConversationSwitcher(id="conversations")
                yield TurnList(id="turn-list")
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
        waiting = self.live and not self.path.exists()
        self.turn_pane.show_note(
            f"waiting for {self.path.name} to be created…" if waiting else f"reading {self.path.name}…"
        )
        self.watch(self, "focused", self._focus_moved)
        # Runs only while playing or re-streaming: an idle timer would take the GIL from the reader.
        self._ticker = self.set_interval(1 / 30, self._tick, pause=True)
        self._read_run()

    # -- the widgets ---------------------------------------------------------------------------------

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

    def summary(self, seq: int | None) -> TurnSummary | None:
        return self.source.summaries.get(seq) if seq is not None else None

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

    # -- the three layouts, by terminal size (inspector/layout.py decides) --------------------------

    def fit(self, size: Size) -> None:
        """Wide, narrow or compact, for a terminal of ``size`` (the app passes each new size)."""
        classes = layout_classes(*size)
        for name, on_ in classes.items():
            self.set_class(on_, name)
        self.turn_pane.fit(compact=classes["-compact"])
        self._fit_sidebar()
        self._label_tabs()

    @property
    def narrow(self) -> bool:
        """One pane at a time (the narrow or the compact layout)."""
        return self.has_class("-narrow") or self.has_class("-compact")

    @property
    def compact(self) -> bool:
        return self.has_class("-compact")

    def _fit_sidebar(self) -> None:
        """The turn list as wide as its rows need (finish whole), within a share of the terminal;
        what is left of a long finish is shortened by whole words (``turn_line``)."""
        if self.compact:
            self.sidebar.styles.width = None
            return
        summaries = self.source.summaries
        sample = width_sample(self.turn_list.seqs)
        need = max((turn_width(summaries[s], self.turn_list.show_conversation) for s in sample), default=40)
        self.sidebar.styles.width = sidebar_width(self.app.size.width, need)

    def show_view(self, view: View) -> None:
        """Make ``view``'s pane the one shown in the narrow and compact layouts."""
        self.turn_pane.show_view(view)

    def pane_visible(self, view: View) -> bool:
        return self.turn_pane.pane_visible(view, narrow=self.narrow, compact=self.compact)

    def _label_tabs(self, turn: TurnSummary | None = None) -> None:
        turn = turn if turn is not None else self.summary(self.selected)
        findings = turn.findings if turn is not None else []
        self.turn_pane.label_tabs(findings, compact=self.compact, width=self.app.size.width)

    def _bring_up_findings(self, turn: TurnSummary, *, jump: bool = False) -> None:
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

    # -- the selected turn: two workers read it (inspector/selected.py) ----------------------------

    @on(TurnList.TurnSelected)
    def _turn_selected(self, message: TurnList.TurnSelected) -> None:
        turn = self.summary(message.seq)
        if turn is None or not self.is_attached:
            return
        self.selected = turn.seq
        self.position = self.turn_list.cursor
        self.listed = len(self.turn_list.seqs)
        self.following = self.turn_list.following
        self._apply(self.playback.turn_selected())
        self._sync_playback()
        self._label_tabs(turn)
        self._bring_up_findings(turn)
        self.turn_pane.show_note(f"loading turn #{turn.seq}…")
        self.request_of = self.panes_of = None
        self._load_panes(turn.seq)
        self._load_turn(turn.seq)
        self._dirty_growth = True
        self._refresh_tabs()

    @work(thread=True, exclusive=True, group="panes", exit_on_error=False, name="panes")
    def _load_panes(self, seq: int) -> None:
        """The selected turn from the store and the tool results its next turn sent back: disk
        reads, so in a worker."""
        shown = self._read_panes(self.source, self.index, seq)
        if shown is not None and not get_current_worker().is_cancelled:
            self.post_message(shown)

    def on_turn_shown(self, message: TurnShown) -> None:
        if not self.is_attached:
            return  # (a worker's message as the app closed)
        if message.seq != self.selected:
            return
        self.turn_pane.show_panes(message.turn, message.results, message.runs)
        self.panes_of = message.seq

    @work(thread=True, exclusive=True, group="turn", exit_on_error=False, name="turn")
    def _load_turn(self, seq: int) -> None:
        loaded = self._read_turn(self.source, seq)
        if not get_current_worker().is_cancelled:
            self.post_message(loaded)

    def on_turn_loaded(self, message: TurnLoaded) -> None:
        if not self.is_attached:
            return  # (a worker's message as the app closed)
        if message.seq != self.selected:
            return
        turn = self.summary(message.seq)
        if turn is None:
            return
        self.request_of = message.seq
        self.turn_pane.show_request(message.request, message.seq, turn.appended_from, message.edits)
        self._apply(self.playback.turn_loaded(message.timeline))
        self._sync_playback()

    # -- playback: inspector/playback.py decides, this applies its decisions to the widgets -------

    def _apply(self, decision: Decision) -> None:
        """Show what :class:`Playback` decided."""
        pane_e = self.turn_pane.pane_e
        if decision is None:
            pass
        elif isinstance(decision, StreamStarted):
            # One pane at a time: the text streams where it can be seen.
            if not self.pane_visible("E"):
                self.show_view("E")
            pane_e.reveal = 0
            self._ticker.resume()
        elif isinstance(decision, Reveal):
            pane_e.reveal = decision.chars
        elif isinstance(decision, StreamEnded):
            pane_e.reveal = None
        elif isinstance(decision, Advance):
            self._advance()
        else:
            assert_never(decision)
        self._sync_playback()

    def _advance(self) -> None:
        """The turn's dwell is over: the next turn, or (none) wait for it live, or pause."""
        if self._move(1):
            return
        if self.live:
            # The end of a recording still being written: wait for its next turn.
            self.waiting = True
        else:
            self._apply(self.playback.pause())
            self.notice = "end of the turn list"

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
        if not self.index.order:
            return
        if self.waiting:
            self.waiting = False
            self._apply(self.playback.pause())
            return
        loaded = self.request_of == self.selected
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
        if self.request_of is None or self.request_of != self.selected:
            self.notice = "the turn is still loading"
        elif not self.playback.timeline:
            self.notice = "this turn's text was not streamed with timings: nothing to re-stream"
        else:
            self._apply(self.playback.start_stream())

    def _sync_playback(self) -> None:
        """Copy :class:`Playback`'s state (plain Python) into the reactives."""
        self.playing = self.playback.playing
        self.speed = self.playback.speed
        self.streaming = self.playback.streaming

    # -- layers, findings, conversations, search, tabs -----------------------------------------

    def action_next_layer(self) -> None:
        order: tuple[View, ...] = VIEWS if self.compact else LAYERS
        view = self.turn_pane.view
        i = (order.index(view) + 1) % len(order) if view in order else 0
        self.show_view(order[i])
        self.action_tab("turn")
        if not self.narrow:
            # Wide: the three panes are all shown; ``l`` moves focus into the next one (to scroll
            # it), and the playback line says so (j/k still move the turns, esc goes back).
            self.turn_pane.layer_panes[LAYERS[i]].focus()

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
        self.turn_pane.messages.action_toggle_all()

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
            chosen = self.matches.found(*result)
            if chosen is not None:
                self._jump(chosen.seq, chosen.conversation)

        self.app.push_screen(SearchScreen(searcher, self.matches.query), done)

    def action_next_hit(self, direction: int) -> None:
        """``n``/``N``: the next match; the playback line says which (one notice, replaced)."""
        hit = self.matches.step(direction)
        if hit is None:
            self.notice = "no search yet: press / to search"
            return
        self._jump(hit.seq, hit.conversation)
        self.notice = self.matches.notice()

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
        keys = ("Run and playback", [b for b in APP_BINDINGS if isinstance(b, Binding)])
        self.app.push_screen(HelpScreen([keys, *self.HELP_GROUPS]))

    def _refresh_tabs(self) -> None:
        """Redraw the findings table and the chart only when visible (they can be large)."""
        if not self.is_attached:
            return
        active = self.tabs.active
        # Narrow terminals give the Growth and Findings tabs the whole width (no turn list beside).
        self.set_class(active != "turn", "-full-tab")
        if active == "findings" and self._dirty_findings:
            self._dirty_findings = False
            # Every finding of the run (whatever conversation is viewed: a jump switches to it).
            self.findings_table.show_findings(self.index.findings())
        if active == "growth" and self._dirty_growth:
            self._dirty_growth = False
            seq = self.selected
            conv = self.index.growth_conversation(self.summary(seq), self.conversation)
            self.growth_view.show_bars(self.index.bars(conv), seq, conv)

    # -- reading the run (worker): inspector/reader.py reads, these show what it posts ------------

    @work(thread=True, exclusive=True, group="reader", exit_on_error=False, name="reader")
    def _read_run(self) -> None:
        worker = get_current_worker()
        read_run(
            self.source,
            self.path,
            live=self.live,
            child_status=self.child_status,
            post=self.post_message,
            cancelled=lambda: worker.is_cancelled,
        )

    def on_run_read(self, message: RunRead) -> None:
        if not self.is_attached:
            return  # (read as the app closed)
        batch = message.batch
        self.progress = message.progress
        first = not self.index.order
        added = self.index.add(batch.turns)
        for seq in added.repeated:
            self._repeat(seq)
        fresh = added.fresh
        self.finding_count += added.findings  # one reactive change a batch, not one a turn
        if fresh:
            self._show_fresh(fresh, first=first, at_end=batch.at_end)
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
        if not self.index.order and batch.at_end:
            self._note_no_turns()

    def _note_no_turns(self) -> None:
        """All of the file there is was read, and it holds no turn (yet, live)."""
        if self.live:
            note = "no turns yet: waiting for the first turn of the recording…"
        else:
            note = "no LLM turns in this file"
        self.turn_pane.show_note(note)

    def _show_fresh(self, fresh: list[int], *, first: bool, at_end: bool) -> None:
        """Turns read for the first time: into the list (those of the conversation viewed)."""
        self._dirty_findings = self._dirty_growth = True
        self._list_fresh(fresh, first=first)
        # The switcher's labels carry turn counts; rebuilding them for every batch of a big
        # file costs more than it tells: only when a conversation appears, live, or at the end.
        if self.live or at_end or len(self.index.conv) != self._switcher_convs:
            self._update_switcher()
        self._refresh_selected_results(fresh)
        self.listed = len(self.turn_list.seqs)
        self.position = self.turn_list.cursor
        if first or self.live:
            self._fit_sidebar()

    def _list_fresh(self, fresh: list[int], *, first: bool) -> None:
        """The first batch lists the conversation viewed; later ones append its fresh turns."""
        multi = len(self.index.conv) > 1
        if first:
            self.turn_list.show_conversation = multi
            self.turn_list.set_turns(self.index.seqs(self.conversation), self.source.summaries)
        else:
            if multi and self.conversation == ALL:
                self.turn_list.show_conversation = True
            summaries = self.source.summaries
            self.turn_list.extend([s for s in fresh if self.conversation in (ALL, summaries[s].conversation)])

    def _repeat(self, seq: int) -> None:
        """A seq the run reported twice (records appended again): the source keeps the later
        record; the list keeps one row, which shows it (the row, the status and the detail read
        the same summary; the index moved it to its later record's conversation)."""
        if not self._repeated:
            self.notify(
                f"turn #{seq} appears twice in this file: each seq shows its last record",
                title="repeated turns",
                severity="warning",
                timeout=12,
            )
        self._repeated.add(seq)
        self._dirty_findings = self._dirty_growth = True
        self.turn_list.refresh()
        if self.selected == seq:
            self._load_panes(seq)

    def _refresh_selected_results(self, new_seqs: list[int]) -> None:
        """A live run grew: the selected turn may now have its next turn (and its results)."""
        seq = self.selected
        summaries = self.source.summaries
        if seq is not None and any(summaries[s].previous_seq == seq for s in new_seqs):
            self._load_panes(seq)

    def _counts(self) -> None:
        self.conversation_count = len(self.index.conv)
        self.turn_count = len(self.index.order)
        self.problem_count = len(self.source.problems)
        self.torn = any(p.kind == "torn" for p in self.source.problems)

    def _update_switcher(self) -> None:
        self._switcher_convs = len(self.index.conv)
        convs = self.source.conversations()
        # The switcher lists the conversations the list can show (a repeated seq moves turns).
        counted = [c for c in convs if c.id in self.index.conv]
        self.switcher.show_conversations(counted, len(self.index.order))

    def on_child_exited(self, message: ChildExited) -> None:
        if not self.is_attached:
            return  # (a worker's message as the app closed)
        self.live = False
        self.exit_status = message.status
        self.notify(
            f"The recorded command exited with status {message.status}; the recording is complete.",
            title="run ended",
            severity="information" if message.status == 0 else "warning",
        )
        self._end_wait()

    def on_recorder_closed(self, message: RecorderClosed) -> None:
        if not self.is_attached:
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

    def on_run_completed(self, message: RunCompleted) -> None:
        if not self.is_attached:
            return  # (a worker's message as the app closed)
        self.complete = True
        self.progress = None
        self._update_switcher()
        self._read_fork()
        torn = [p for p in self.source.problems if p.kind == "torn"]
        if torn:
            self.notify(
                f"{torn[0]}. Showing the {self.source.records} complete round trips.",
                title="truncated file",
                severity="warning",
                timeout=10,
            )
        # The end-of-run checks may have added findings to any turn.
        self.finding_count = self.index.finding_count()
        self._counts()
        self._dirty_findings = self._dirty_growth = True
        self.turn_list.refresh()
        if self.selected is not None:
            self._load_panes(self.selected)
            self._label_tabs()
        self._refresh_tabs()

    # -- a branch beside its origin (inspector/widgets/fork.py draws what the core computes) ------

    @work(thread=True, exclusive=True, group="fork", exit_on_error=False, name="fork")
    def _read_fork(self) -> None:
        read = read_fork(self.path)
        if read is not None and not get_current_worker().is_cancelled:
            self.post_message(read)

    async def on_fork_read(self, message: ForkRead) -> None:
        if not self.is_attached:
            return  # (a worker's message as the app closed)
        if not self.query("#fork-view"):
            await self.tabs.add_pane(TabPane("Fork", ForkPane(id="fork-view"), id="fork"))
            self.notice = "this run is a branch: 4 shows it beside its origin"
        self.query_one("#fork-view", ForkPane).show_view(message.view, message.note)

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
            hint = "\n\nA vcrpy / pytest-recording YAML file can be converted with `looptap import FILE`."
        self.error_view.update(
            Text.assemble(
                (clean(f"Cannot inspect {self.path}\n\n"), "bold"), clean(text), hint, ("\n\nPress q to quit.", "dim")
            )
        )
        self.add_class("-failed")
        self.notify(text, title="cannot read the run", severity="error", timeout=15)

