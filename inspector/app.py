"""The inspector app: reads a run in a worker, shows it turn by turn, plays it back.

Data flow (STYLE.md): the app owns the run being read (a :class:`cassettes.views.incremental.IncrementalRun`)
and hands each widget what it shows (attributes down); widgets report what the user did with
their own messages (``TurnList.TurnSelected``, ``FindingsTable.FindingChosen`` …, messages up).
Disk IO runs in thread workers — reading the run, re-reading the selected turn in full — and every
worker failure ends in :meth:`InspectorApp.on_worker_state_changed`. Playback's timing is decided by
:class:`inspector.playback.Playback` (no Textual); the app applies its decisions to the widgets.
The key bindings are listed in :mod:`inspector.bindings`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar, assert_never

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.filter import LineFilter
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, Static, Tab, TabbedContent, TabPane, Tabs
from textual.worker import Worker, WorkerState, get_current_worker

from cassettes.analysis.model import Finding, Layer, McpCall
from cassettes.errors import CassetteError
from cassettes.parsing.models import NormalisedRequest, ToolResult
from cassettes.untrusted import clean, clean_line
from cassettes.views.incremental import Batch, IncrementalRun
from cassettes.views.search import SearchHit, search_turns
from cassettes.views.summary import TurnSummary
from cassettes.views.timeline import TimelinePoint, text_timeline
from inspector.bindings import APP_BINDINGS, HELP_OTHER
from inspector.playback import Advance, Clock, Decision, Playback, Reveal, StreamEnded, StreamStarted
from inspector.safe import UntrustedFilter
from inspector.screens.help import HelpScreen
from inspector.screens.search import SearchScreen
from inspector.widgets.badges import LAYERS, SEVERITY_MARK, worst
from inspector.widgets.conversations import ALL, ConversationSwitcher
from inspector.widgets.findings import FindingsTable, FindingsView
from inspector.widgets.growth import GrowthView
from inspector.widgets.layers import ApiPane, DispatchPane, EmissionPane, LayerPane
from inspector.widgets.messages import MessagesView
from inspector.widgets.status import PlaybackBar, RunStatus
from inspector.widgets.turn_list import TurnList

__all__ = ["InspectorApp", "build_app"]

#: Bytes read before the first screen is drawn (small, so it appears at once), then per batch.
FIRST_STEP = 256 * 1024
STEP = 4 * 1024 * 1024
#: Seconds between looks at a live recording for new records.
POLL = 0.25
#: Seconds between screen updates while a file is read (the first batch is shown at once).
SHOW_EVERY = 1.0
#: The narrow layout's layer tabs.
LAYER_TAB = {"E": "E emission", "A": "A API verdict", "C": "C client"}
#: Below these sizes the layout folds (see ``inspector.tcss``): under NARROW columns the E, A and
#: C panes are tabs, one shown at a time at full width.
NARROW = 120
TINY_WIDTH, TINY_HEIGHT = 70, 20


class InspectorApp(App[None]):
    """``looptap inspect``: a recorded run, turn by turn."""

    CSS_PATH = "inspector.tcss"
    TITLE = "looptap inspect"

    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

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
        self.live = live
        #: ``looptap run --inspect``: where the recorder writes the command's exit status, and that
        #: status once it did (the run then reads as ended, not "live").
        self.child_status = Path(child_status) if child_status is not None else None
        self.exit_status: int | None = None
        self.clock = clock
        self.source = IncrementalRun(self.path)
        self.turns: list[TurnSummary] = []
        self.by_seq: dict[int, TurnSummary] = {}
        self.conv_turns: dict[str, list[TurnSummary]] = {}
        self.conversation = ALL
        self.complete = False
        self.progress: float | None = 0.0
        self.failed: str | None = None
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
        self._untrusted_filter = UntrustedFilter()
        #: The layer pane shown in the narrow layout.
        self.layer: Layer = "E"

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
        yield RunStatus(id="run-status")
        with Horizontal(id="main"):
            with Vertical(id="sidebar"):
                yield ConversationSwitcher(id="conversations")
                yield TurnList(id="turn-list")
            with TabbedContent(id="tabs", initial="turn"):
                with TabPane("Turn", id="turn"):
                    yield MessagesView(id="messages")
                    yield Tabs(*(Tab(LAYER_TAB[x], id=f"layer-{x}") for x in LAYERS), id="layer-tabs")
                    with Horizontal(id="layers"):
                        yield EmissionPane(id="pane-e")
                        yield ApiPane(id="pane-a")
                        yield DispatchPane(id="pane-c")
                with TabPane("Growth", id="growth"):
                    yield GrowthView(id="growth-view")
                with TabPane("Findings", id="findings"):
                    yield FindingsView(id="findings-view")
        yield Static(id="error-view")
        yield PlaybackBar(id="playback")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(TurnList).focus()
        # Clicks and ``l`` switch the layer tabs; focus stays where the user is (the turn list).
        self.query_one("#layer-tabs", Tabs).can_focus = False
        self.show_layer(self.layer)
        waiting = self.live and not self.path.exists()
        self.query_one(MessagesView).show_note(
            f"waiting for {self.path.name} to be created…" if waiting else f"reading {self.path.name}…"
        )
        self._show_status()
        self._show_playback()
        # Runs only while playing or re-streaming: an idle timer would take the GIL from the reader.
        self._ticker = self.set_interval(1 / 30, self._tick, pause=True)
        self._read_run()

    def on_resize(self, event: events.Resize) -> None:
        w, h = event.size
        self.screen.set_class(w < NARROW, "-narrow")
        self.screen.set_class(w < TINY_WIDTH or h < TINY_HEIGHT, "-tiny")
        self.query_one(Footer).compact = w < NARROW

    # -- the layer panes: side by side, or (narrow) one at a time under tabs ----------------------

    @property
    def narrow(self) -> bool:
        return self.screen.has_class("-narrow")

    def _layer_panes(self) -> list[LayerPane]:
        return [self.query_one(EmissionPane), self.query_one(ApiPane), self.query_one(DispatchPane)]

    def show_layer(self, layer: Layer) -> None:
        """Make ``layer``'s pane the one shown in the narrow layout (its tab active)."""
        self.layer = layer
        for pane in self._layer_panes():
            pane.set_class(pane.LAYER == layer, "-shown")
        tabs = self.query_one("#layer-tabs", Tabs)
        if tabs.active != f"layer-{layer}":
            tabs.active = f"layer-{layer}"

    @on(Tabs.TabActivated, "#layer-tabs")
    def _layer_tab(self, event: Tabs.TabActivated) -> None:
        event.stop()  # not the main tabs
        if event.tab.id and event.tab.id.startswith("layer-"):
            layer = event.tab.id.removeprefix("layer-")
            if layer in LAYERS and layer != self.layer:
                self.show_layer(layer)  # type: ignore[arg-type]

    def action_next_layer(self) -> None:
        i = (LAYERS.index(self.layer) + 1) % len(LAYERS)
        self.show_layer(LAYERS[i])
        self.action_tab("turn")
        if not self.narrow:
            self._layer_panes()[i].focus()

    def _label_layers(self, turn: TurnSummary) -> None:
        """The layer tabs carry each layer's findings; in the narrow layout, a turn with a warning or
        an error in a layer other than the one shown brings that layer up (the worst first)."""
        tabs = self.query_one("#layer-tabs", Tabs)
        for layer in LAYERS:
            sev = worst(turn.findings, layer)
            n = sum(1 for f in turn.findings if f.layer == layer)
            label = LAYER_TAB[layer] + (f" {SEVERITY_MARK[sev]}{n}" if sev is not None else " ok")
            tabs.query_one(f"#layer-{layer}", Tab).label = label
        rank = {None: 0, "info": 1, "warning": 2, "error": 3}

        def level(layer: Layer) -> int:
            return rank[worst(turn.findings, layer)]

        best = max(LAYERS, key=lambda x: (level(x), -LAYERS.index(x)))
        if level(best) >= 2 and level(best) > level(self.layer):
            self.show_layer(best)

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
            batch = run.step(step)
            step = STEP
            if held is not None:
                held.turns.extend(batch.turns)
                held.records += batch.records
                held.problems.extend(batch.problems)
                held.at_end = batch.at_end
                batch = held
            size = run.index.size()
            progress = None if batch.at_end else (run.index.consumed / size if size else None)
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
                if status is not None:
                    # The recorded command exited and the recorder wrote its last record before
                    # the status: one more read, then the run is complete.
                    last = run.step(STEP)
                    if last.records or last.problems:
                        self.post_message(self.RunRead(last, None))
                    run.finish()
                    self.post_message(self.ChildExited(status))
                    self.post_message(self.RunCompleted())
                    return
                time.sleep(POLL)

    def on_inspector_app_run_read(self, message: RunRead) -> None:
        batch = message.batch
        self.progress = message.progress
        first = not self.turns
        for t in batch.turns:
            self.turns.append(t)
            self.by_seq[t.seq] = t
            self.conv_turns.setdefault(t.conversation, []).append(t)
        if batch.turns:
            self._dirty_findings = self._dirty_growth = True
            shown = [t for t in batch.turns if self.conversation in (ALL, t.conversation)]
            turn_list = self.query_one(TurnList)
            turn_list.extend(shown)
            if first:
                turn_list.show_conversation = len(self.conv_turns) > 1
            elif len(self.conv_turns) > 1 and self.conversation == ALL:
                turn_list.show_conversation = True
            # The switcher's labels carry turn counts; rebuilding them for every batch of a big
            # file costs more than it tells: only when a conversation appears, live, or at the end.
            if self.live or batch.at_end or len(self.conv_turns) != self._switcher_convs:
                self._update_switcher()
            self._refresh_selected_results(batch.turns)
        for p in batch.problems:
            self.notify(str(p), title="damaged record skipped", severity="warning", timeout=8)
        self._refresh_tabs()
        self._show_status()
        self._show_playback()
        if not self.turns and batch.at_end:
            note = (
                "waiting for the first turn of the recording…" if self.live else "no LLM turns in this file"
            )
            self.query_one(MessagesView).show_note(note)

    def _update_switcher(self) -> None:
        self._switcher_convs = len(self.conv_turns)
        self.query_one(ConversationSwitcher).show_conversations(
            self.source.analysis.conversations, len(self.turns)
        )

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
        self.live = False
        self.exit_status = message.status
        self._show_status()
        self.notify(
            f"The recorded command exited with status {message.status}; the recording is complete.",
            title="run ended",
            severity="information" if message.status == 0 else "warning",
        )

    def on_inspector_app_run_completed(self, message: RunCompleted) -> None:
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
        self._dirty_findings = self._dirty_growth = True
        self.query_one(TurnList).refresh()
        seq = self.query_one(TurnList).selected_seq
        if seq is not None:
            self._show_turn_panes(self.by_seq[seq])
        self._refresh_tabs()
        self._show_status()

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
        view = self.query_one("#error-view", Static)
        view.update(
            Text.assemble(
                (clean(f"Cannot inspect {self.path}\n\n"), "bold"), clean(text), hint, ("\n\nPress q to quit.", "dim")
            )
        )
        self.screen.add_class("-failed")
        self.notify(text, title="cannot read the run", severity="error", timeout=15)
        self._show_status()

    # -- the selected turn -------------------------------------------------------------------------

    @on(TurnList.TurnSelected)
    def _turn_selected(self, message: TurnList.TurnSelected) -> None:
        turn = self.by_seq.get(message.seq)
        if turn is None:
            return
        self._apply(self.playback.turn_selected())
        self._show_turn_panes(turn)
        self._label_layers(turn)
        self.query_one(MessagesView).show_note(f"loading turn #{turn.seq}…")
        self._loaded = None
        self._load_turn(turn.seq)
        self._dirty_growth = True
        self._refresh_tabs()
        self._show_playback()

    def _show_turn_panes(self, turn: TurnSummary) -> None:
        full = self.source.full_turn(turn.seq)  # the reader keeps summaries; the full turn is stored
        self.query_one(EmissionPane).show_turn(full, self._next_results(turn), self._mcp_runs(turn.seq))
        self.query_one(ApiPane).show_turn(full)
        self.query_one(DispatchPane).show_turn(full)

    def _mcp_runs(self, seq: int) -> dict[str, McpCall]:
        """The MCP tools/call round trips that ran the calls of turn ``seq``, by call id."""
        return {c.call_id: c for c in self.source.analysis.mcp_calls.values() if c.call_id and c.model_seq == seq}

    def _next_results(self, turn: TurnSummary) -> dict[str, ToolResult] | None:
        """Tool results the conversation's next turn sent back, by call id (``None``: no next turn)."""
        conv = self.conv_turns.get(turn.conversation, [])
        nxt = next((t for t in conv if t.previous_seq == turn.seq), None)
        if nxt is None:
            return None
        return {
            p.tool_result.call_id or "": p.tool_result
            for m in self.source.full_turn(nxt.seq).c.appended
            for p in m.parts
            if p.tool_result is not None
        }

    def _refresh_selected_results(self, new_turns: list[TurnSummary]) -> None:
        """A live run grew: the selected turn may now have its next turn (and its results)."""
        seq = self.query_one(TurnList).selected_seq
        if seq is not None and any(t.previous_seq == seq for t in new_turns):
            turn = self.by_seq[seq]
            self.query_one(EmissionPane).show_turn(self.source.full_turn(seq), self._next_results(turn), self._mcp_runs(seq))

    @work(thread=True, exclusive=True, group="turn", exit_on_error=False, name="turn")
    def _load_turn(self, seq: int) -> None:
        ex, rt = self.source.by_seq(seq)
        timeline = text_timeline(ex, rt)
        if not get_current_worker().is_cancelled:
            self.post_message(self.TurnLoaded(seq, rt.request, timeline))

    def on_inspector_app_turn_loaded(self, message: TurnLoaded) -> None:
        if message.seq != self.query_one(TurnList).selected_seq:
            return
        turn = self.by_seq[message.seq]
        self._loaded = message.seq
        note = "" if message.request is not None else "the request could not be parsed"
        if message.request is None:
            self.query_one(MessagesView).show_note(f"turn #{message.seq}: {note}")
        else:
            self.query_one(MessagesView).show_request(message.request, turn.appended_from)
        self._apply(self.playback.turn_loaded(message.timeline))

    # -- playback: inspector/playback.py decides, this applies its decisions to the widgets -------

    @property
    def playing(self) -> bool:
        return self.playback.playing

    @property
    def speed(self) -> float:
        return self.playback.speed

    def _apply(self, decision: Decision) -> None:
        """Show what :class:`Playback` decided."""
        if decision is None:
            return
        if isinstance(decision, StreamStarted):
            self.query_one(EmissionPane).reveal = 0
            self._ticker.resume()
            self._show_playback()
        elif isinstance(decision, Reveal):
            self.query_one(EmissionPane).reveal = decision.chars
        elif isinstance(decision, StreamEnded):
            self.query_one(EmissionPane).reveal = None
            self._show_playback()
        elif isinstance(decision, Advance):
            if not self._move(1):
                self._apply(self.playback.pause())
                self.notify("end of the turn list", title="playback")
                self._show_playback()
        else:
            assert_never(decision)

    def _tick(self) -> None:
        self._apply(self.playback.tick())
        if not self.playback.active:
            self._ticker.pause()

    def _move(self, delta: int) -> bool:
        turn_list = self.query_one(TurnList)
        target = turn_list.cursor + delta
        if not 0 <= target < len(turn_list.turns):
            return False
        turn_list.cursor = target
        return True

    def action_play_pause(self) -> None:
        if not self.turns:
            return
        loaded = self._loaded == self.query_one(TurnList).selected_seq
        decision = self.playback.toggle(loaded)
        if self.playback.playing:
            self._ticker.resume()
        self._apply(decision)
        self._show_playback()

    def action_step(self, delta: int) -> None:
        self._move(delta)

    def action_speed(self, direction: int) -> None:
        self.playback.change_speed(direction)
        self._show_playback()

    def action_restream(self) -> None:
        if self._loaded is None or self._loaded != self.query_one(TurnList).selected_seq:
            self.notify("the turn is still loading", severity="warning")
        elif not self.playback.timeline:
            self.notify(
                "this turn's text was not streamed with recorded timings, so there is nothing to re-stream",
                title="re-stream",
            )
        else:
            self._apply(self.playback.start_stream())

    # -- findings, conversations, search, tabs -------------------------------------------------

    def action_finding(self, direction: int) -> None:
        turn_list = self.query_one(TurnList)
        rows = turn_list.turns
        i = turn_list.cursor + direction
        while 0 <= i < len(rows):
            if rows[i].findings:
                turn_list.cursor = i
                self.action_tab("turn")
                return
            i += direction
        self.notify("no further turn with findings in this list", title="findings")

    @on(FindingsTable.FindingChosen)
    def _finding_chosen(self, message: FindingsTable.FindingChosen) -> None:
        self._jump(message.finding.seq, message.finding.conversation)

    def _jump(self, seq: int | None, conversation: str | None) -> None:
        if seq is None:
            return
        turn_list = self.query_one(TurnList)
        if not turn_list.select_seq(seq):
            self._show_conversation(conversation or ALL, select=seq)
        self.action_tab("turn")
        turn_list.focus()

    @on(ConversationSwitcher.ConversationChosen)
    def _conversation_chosen(self, message: ConversationSwitcher.ConversationChosen) -> None:
        self._show_conversation(message.conversation)

    def _show_conversation(self, conversation: str, select: int | None = None) -> None:
        self.conversation = conversation
        switcher = self.query_one(ConversationSwitcher)
        if switcher.value != conversation:
            with switcher.prevent(ConversationSwitcher.Changed):
                switcher.value = conversation
        turns = self.turns if conversation == ALL else self.conv_turns.get(conversation, [])
        turn_list = self.query_one(TurnList)
        turn_list.show_conversation = conversation == ALL and len(self.conv_turns) > 1
        turn_list.set_turns(turns, select=select)
        self._dirty_findings = self._dirty_growth = True
        self._refresh_tabs()
        self._show_playback()

    def action_all_messages(self) -> None:
        """``a`` from anywhere: the messages pane says "press a to show all" wherever focus is."""
        self.query_one(MessagesView).action_toggle_all()

    def action_next_conversation(self) -> None:
        order = [ALL, *self.conv_turns]
        i = order.index(self.conversation) if self.conversation in order else 0
        self._show_conversation(order[(i + 1) % len(order)])

    def action_search(self) -> None:
        seqs = [t.seq for t in self.turns]
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
        if not self._hits:
            self.notify("no search yet: press / to search", title="search")
            return
        self._hit = (self._hit + direction) % len(self._hits)
        hit = self._hits[self._hit]
        self.notify(
            f"{self._hit + 1}/{len(self._hits)} · {hit.where}: {hit.snippet}",
            title=f"match for {self._query!r}",
        )
        self._jump(hit.seq, hit.conversation)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self._refresh_tabs()
        if tab == "findings":
            self.query_one(FindingsTable).focus()
        elif tab == "turn" and not self.query_one(TurnList).has_focus:
            self.query_one(TurnList).focus()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self) -> None:
        self._refresh_tabs()

    def action_help(self) -> None:
        groups = [
            ("Run and playback", [b for b in self.BINDINGS if isinstance(b, Binding)]),
            ("Turn list", [b for b in TurnList.BINDINGS if isinstance(b, Binding)]),
            ("Messages", [b for b in MessagesView.BINDINGS if isinstance(b, Binding)]),
            ("Other", HELP_OTHER),
        ]
        self.push_screen(HelpScreen(groups))

    # -- keeping the views current -------------------------------------------------------------

    def _shown_findings(self) -> list[Finding]:
        """Every finding of the run (whatever conversation is viewed: a jump switches to it)."""
        return [f for t in self.turns for f in t.findings]

    def _refresh_tabs(self) -> None:
        """Redraw the findings table and the chart only when visible (they can be large)."""
        active = self.query_one(TabbedContent).active
        # Narrow terminals give the Growth and Findings tabs the whole width (no turn list beside).
        self.screen.set_class(active != "turn", "-full-tab")
        if active == "findings" and self._dirty_findings:
            self._dirty_findings = False
            self.query_one(FindingsTable).show_findings(self._shown_findings())
        if active == "growth" and self._dirty_growth:
            self._dirty_growth = False
            seq = self.query_one(TurnList).selected_seq
            turn = self.by_seq.get(seq) if seq is not None else None
            conv = (
                turn.conversation
                if turn is not None
                else (self.conversation if self.conversation != ALL else next(iter(self.conv_turns), ""))
            )
            bars = [t.bar for t in self.conv_turns.get(conv, [])]
            self.query_one(GrowthView).show_bars(bars, seq, conv)

    def _show_status(self) -> None:
        problems = len(self.source.problems)
        note = ""
        if self.failed:
            note = "cannot read this file"
        elif any(p.kind == "torn" for p in self.source.problems):
            note = "truncated: the last record was cut off"
        elif self.exit_status is not None:
            note = f"ended (exit {self.exit_status})"
        findings = sum(len(t.findings) for t in self.turns)
        self.query_one(RunStatus).show(
            self.path.name,
            len(self.conv_turns),
            len(self.turns),
            findings,
            None if self.complete or self.live else self.progress,
            problems,
            self.live,
            note,
        )

    def _show_playback(self) -> None:
        turn_list = self.query_one(TurnList)
        seq = turn_list.selected_seq
        turn = self.by_seq.get(seq) if seq is not None else None
        label = f"#{turn.seq} {turn.conversation}/turn {turn.index}" if turn is not None else ""
        self.query_one(PlaybackBar).show(
            self.playback.playing,
            self.playback.speed,
            turn_list.cursor,
            len(turn_list.turns),
            self.playback.streaming,
            label,
        )


def build_app(
    path: str | Path, *, live: bool = False, clock: Clock | None = None, child_status: str | Path | None = None
) -> InspectorApp:
    """The inspector for one cassette (``live``: follow a recording still being written, until the
    file ``child_status`` holds the recorded command's exit status)."""
    return InspectorApp(path, live=live, clock=clock or time.monotonic, child_status=child_status)
