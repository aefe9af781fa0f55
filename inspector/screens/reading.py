"""The run the main screen shows, and every worker that reads it from disk.

:class:`RunReading` holds the run being read (an :class:`inspector.source.TurnSource`, which holds
the turns' summaries; the reading keeps only seq indexes into them, a
:class:`inspector.turns.TurnIndex`) and starts the screen's thread workers: reading the run
(:mod:`inspector.reader` reads), a branch's origin, restoring the selected turn and the results its
next turn sent, re-reading its full history (:mod:`inspector.selected` reads). The workers post to
the screen; the screen hands each message here, and this shows what it says through the screen's
widgets and reactive state. A worker's failure ends in the screen's ``on_worker_state_changed``.
What it needs of the screen is :class:`ReadingScreen` (public members only; the main screen is
one), and of its player :class:`ReadingPlayer`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from textual.css.query import DOMQuery
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane
from textual.worker import Worker, get_current_worker

from cassettes.hints import count
from cassettes.views.summary import TurnSummary
from cassettes.views.timeline import TimelinePoint
from inspector.reader import ChildExited, RecorderClosed, RunCompleted, RunRead, read_run
from inspector.selected import TurnLoaded, TurnShown
from inspector.source import TurnSource, open_source
from inspector.turns import TurnIndex
from inspector.widgets.fork import ForkPane, ForkRead, read_fork
from inspector.widgets.sidebar import Sidebar
from inspector.widgets.turn_list import TurnList
from inspector.widgets.turn_pane import TurnPane

__all__ = ["PanesReader", "ReadingPlayer", "ReadingScreen", "RunReading", "TurnReader"]

#: What the selected turn's two workers call (:func:`inspector.selected.read_panes`, ``read_turn``).
PanesReader = Callable[[TurnSource, TurnIndex, int], TurnShown | None]
TurnReader = Callable[[TurnSource, int], TurnLoaded]

W = TypeVar("W", bound=Widget)


class ReadingPlayer(Protocol):
    """What the reading tells playback (:class:`inspector.screens.player.Player` is one)."""

    def turn_came(self, *, following: bool) -> None: ...

    def end_wait(self) -> None: ...

    def turn_loaded(self, timeline: Sequence[TimelinePoint]) -> None: ...


class ReadingScreen(Protocol):
    """What the reading needs of its screen: its workers and messages, its run reactives, its
    widgets and tabs, and its player."""

    live: bool
    complete: bool
    progress: float | None
    exit_status: int | None
    recorder_closed: bool
    conversation_count: int
    turn_count: int
    finding_count: int
    problem_count: int
    torn: bool
    selected: int | None
    position: int
    listed: int
    waiting: bool
    notice: str

    @property
    def player(self) -> ReadingPlayer: ...

    @property
    def sidebar(self) -> Sidebar: ...

    @property
    def turn_list(self) -> TurnList: ...

    @property
    def turn_pane(self) -> TurnPane: ...

    @property
    def tabs(self) -> TabbedContent: ...

    def summary(self, seq: int | None) -> TurnSummary | None: ...

    def fit_sidebar(self) -> None: ...

    def label_tabs(self, turn: TurnSummary | None = None) -> None: ...

    def dirty(self) -> None: ...

    def refresh_tabs(self) -> None: ...

    def query(self, selector: str) -> DOMQuery[Widget]: ...

    def query_one(self, selector: str, expect_type: type[W]) -> W: ...

    def run_worker(
        self,
        work: Callable[[], None],
        name: str,
        group: str,
        *,
        exclusive: bool,
        exit_on_error: bool,
        thread: bool,
    ) -> Worker[None]: ...

    def post_message(self, message: Message) -> bool: ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
    ) -> None: ...


class RunReading:
    """One run, read by the main screen's workers."""

    def __init__(
        self,
        screen: ReadingScreen,
        path: Path,
        *,
        live: bool,
        child_status: Path | None,
        read_panes: PanesReader,
        read_turn: TurnReader,
    ) -> None:
        self.screen = screen
        self.path = path
        #: ``looptap run --inspect``: where the recorder writes the command's exit status.
        self.child_status = child_status
        self.source: TurnSource = open_source(path, live=live)
        # Seq indexes into the source's summaries (the one copy of the turns).
        self.index = TurnIndex(self.source)
        self._read_panes = read_panes
        self._read_turn = read_turn
        #: The turn whose full request and timeline were read (``None``: the selected one is
        #: loading).
        self.request_of: int | None = None
        #: The turn whose E, A and C panes are drawn (read by another worker than the request).
        self.panes_of: int | None = None
        self._repeated: set[int] = set()

    # -- the run (worker): inspector/reader.py reads, these show what it posts --------------------

    def start(self) -> None:
        self._work(self._read_run, "reader")

    def _work(self, read: Callable[[], None], name: str) -> None:
        """``read`` in a thread worker of the screen, the one of its group: a new one cancels the
        one before; its failure ends in the screen's ``on_worker_state_changed``."""
        self.screen.run_worker(
            read, name=name, group=name, exclusive=True, exit_on_error=False, thread=True
        )

    def _read_run(self) -> None:
        worker = get_current_worker()
        read_run(
            self.source,
            self.path,
            live=self.screen.live,
            child_status=self.child_status,
            post=self.screen.post_message,
            cancelled=lambda: worker.is_cancelled,
        )

    def run_read(self, message: RunRead) -> None:
        screen = self.screen
        batch = message.batch
        screen.progress = message.progress
        first = not self.index.order
        added = self.index.add(batch.turns)
        for seq in added.repeated:
            self._repeat(seq)
        fresh = added.fresh
        screen.finding_count += added.findings  # one reactive change a batch, not one a turn
        if fresh:
            self._show_fresh(fresh, first=first, at_end=batch.at_end)
        for p in batch.problems:
            screen.notify(str(p), title="damaged record skipped", severity="warning", timeout=8)
        self._counts()
        screen.refresh_tabs()
        if screen.waiting and fresh:
            # Playing at the end of a live recording: the awaited turn came (following, the list
            # has already moved to it).
            screen.player.turn_came(following=screen.turn_list.following)
        if not self.index.order and batch.at_end:
            self._note_no_turns()

    def _note_no_turns(self) -> None:
        """All of the file there is was read, and it holds no turn (yet, live)."""
        if self.screen.live:
            note = "no turns yet: waiting for the first turn of the recording…"
        else:
            note = "no LLM turns in this file"
        self.screen.turn_pane.show_note(note)

    def _show_fresh(self, fresh: list[int], *, first: bool, at_end: bool) -> None:
        """Turns read for the first time: into the list (those of the conversation viewed)."""
        screen = self.screen
        screen.dirty()
        screen.sidebar.add_fresh(fresh, first=first, live=screen.live, at_end=at_end)
        self._refresh_selected_results(fresh)
        screen.listed = len(screen.turn_list.seqs)
        screen.position = screen.turn_list.cursor
        if first or screen.live:
            screen.fit_sidebar()

    def _repeat(self, seq: int) -> None:
        """A seq the run reported twice (records appended again): the source keeps the later
        record; the list keeps one row, which shows it (the row, the status and the detail read
        the same summary; the index moved it to its later record's conversation)."""
        if not self._repeated:
            self.screen.notify(
                f"turn #{seq} appears twice in this file: each seq shows its last record",
                title="repeated turns",
                severity="warning",
                timeout=12,
            )
        self._repeated.add(seq)
        self.screen.dirty()
        self.screen.turn_list.refresh()
        if self.screen.selected == seq:
            self.load_panes(seq)

    def _refresh_selected_results(self, new_seqs: list[int]) -> None:
        """A live run grew: the selected turn may now have its next turn (and its results)."""
        seq = self.screen.selected
        summaries = self.source.summaries
        if seq is not None and any(summaries[s].previous_seq == seq for s in new_seqs):
            self.load_panes(seq)

    def _counts(self) -> None:
        screen = self.screen
        screen.conversation_count = len(self.index.conv)
        screen.turn_count = len(self.index.order)
        screen.problem_count = len(self.source.problems)
        screen.torn = any(p.kind == "torn" for p in self.source.problems)

    def child_exited(self, message: ChildExited) -> None:
        screen = self.screen
        screen.live = False
        screen.exit_status = message.status
        screen.notify(
            f"The recorded command exited with status {message.status}; the recording is complete.",
            title="run ended",
            severity="information" if message.status == 0 else "warning",
        )
        screen.player.end_wait()

    def recorder_closed(self, message: RecorderClosed) -> None:
        screen = self.screen
        screen.live = False
        screen.recorder_closed = True
        screen.notify(
            "The recorder closed the file; the recording is complete.", title="recording ended"
        )
        screen.player.end_wait()

    def run_completed(self, message: RunCompleted) -> None:
        screen = self.screen
        screen.complete = True
        screen.progress = None
        screen.sidebar.update_switcher()
        self._work(self._read_fork, "fork")
        torn = [p for p in self.source.problems if p.kind == "torn"]
        if torn:
            screen.notify(
                f"{torn[0]}. Showing the {count(self.source.records, 'complete round trip')}.",
                title="truncated file",
                severity="warning",
                timeout=10,
            )
        # The end-of-run checks may have added findings to any turn.
        screen.finding_count = self.index.finding_count()
        self._counts()
        screen.dirty()
        screen.turn_list.refresh()
        if screen.selected is not None:
            self.load_panes(screen.selected)
            screen.label_tabs()
        screen.refresh_tabs()

    # -- a branch beside its origin (inspector/widgets/fork.py draws what the core computes) ------

    def _read_fork(self) -> None:
        read = read_fork(self.path)
        if read is not None and not get_current_worker().is_cancelled:
            self.screen.post_message(read)

    async def fork_read(self, message: ForkRead) -> None:
        screen = self.screen
        if not screen.query("#fork-view"):
            await screen.tabs.add_pane(TabPane("Fork", ForkPane(id="fork-view"), id="fork"))
            screen.notice = "this run is a branch: 4 shows it beside its origin"
        screen.query_one("#fork-view", ForkPane).show_view(message.view, message.note)

    # -- the selected turn: two workers read it (inspector/selected.py) ----------------------------

    def load_selected(self, seq: int) -> None:
        self.request_of = self.panes_of = None
        self.load_panes(seq)
        self._work(lambda: self._load_turn(seq), "turn")

    def load_panes(self, seq: int) -> None:
        """The selected turn from the store and the tool results its next turn sent back: disk
        reads, so in a worker."""
        self._work(lambda: self._load_panes(seq), "panes")

    def _load_panes(self, seq: int) -> None:
        shown = self._read_panes(self.source, self.index, seq)
        if shown is not None and not get_current_worker().is_cancelled:
            self.screen.post_message(shown)

    def turn_shown(self, message: TurnShown) -> None:
        if message.seq != self.screen.selected:
            return
        self.screen.turn_pane.show_panes(message.turn, message.results, message.runs)
        self.panes_of = message.seq

    def _load_turn(self, seq: int) -> None:
        loaded = self._read_turn(self.source, seq)
        if not get_current_worker().is_cancelled:
            self.screen.post_message(loaded)

    def turn_loaded(self, message: TurnLoaded) -> None:
        screen = self.screen
        if message.seq != screen.selected:
            return
        turn = screen.summary(message.seq)
        if turn is None:
            return
        self.request_of = message.seq
        screen.turn_pane.show_request(
            message.request, message.seq, turn.appended_from, message.edits
        )
        screen.player.turn_loaded(message.timeline)
