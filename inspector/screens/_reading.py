"""The run on disk: :class:`RunReading`, the main screen's invisible widget that reads it.

It holds the run being read (the core's :class:`cassettes.reading.Run`, which holds the turns'
summaries; the reading keeps only seq indexes into them, a :class:`inspector.turns.TurnIndex`),
the run's state as reactives (read so far, live, complete, the counts; :attr:`RunReading.run_state`
is what the status line shows) and runs every thread worker that reads from disk: the run
(:mod:`inspector.reader` reads), a branch's origin, and the selected turn's two reads
(:mod:`inspector.selected` reads). The workers' messages (``RunRead``, ``RunCompleted``,
``ChildExited``, ``RecorderClosed``, ``ForkRead``, ``TurnShown``, ``TurnLoaded``) bubble up to the
screen, which hands this widget what is the run's (:meth:`RunReading.took` …: the index, the
counts; it calls nothing of the screen) and shows the rest in the same handler, so what is read
and what is shown never differ between two messages. A worker's failure ends here, in
:meth:`RunReading.on_worker_state_changed`; the run's posts :class:`RunReading.Failed`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.worker import Worker, WorkerState, get_current_worker

from ...cassettes.errors import CassetteError
from ...cassettes.hints import count
from ...cassettes.reading import Run, open_run
from ...cassettes.views import TurnSummary
from .. import selected
from ..reader import ChildExited, RunRead, read_run
from ..turns import Added, TurnIndex
from ..widgets import RunState, read_fork

__all__ = ["RunReading"]


class RunReading(Widget):
    """One run, read by thread workers (shows nothing itself: the status line shows its state)."""

    DEFAULT_CSS = "RunReading { display: none; }"

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

    run_state: reactive[RunState] = reactive(RunState)

    @dataclass
    class Failed(Message):
        """The run cannot be shown: why."""

        text: str

    def __init__(self, path: Path, *, live: bool, child_status: Path | None) -> None:
        super().__init__()
        self.path = path
        #: ``looptap run --inspect``: where the recorder writes the command's exit status.
        self.child_status = child_status
        # A finished run takes the analysis kept by an earlier reader (docs/kept-analysis.md).
        self.source: Run = open_run(path, follow=True, cache=not live)
        # Seq indexes into the source's summaries (the one copy of the turns).
        self.index = TurnIndex(self.source)
        #: The turn selected in the list (its two reads are running or done).
        self.selected: int | None = None
        #: The turn whose full request and timeline are shown (``None``: the selected one is
        #: loading); the screen sets it once shown.
        self.request_of: int | None = None
        #: The turn whose E, A and C panes are drawn (read by another worker than the request).
        self.panes_of: int | None = None
        self._repeated: set[int] = set()
        self.set_reactive(RunReading.live, live)

    def summary(self, seq: int | None) -> TurnSummary | None:
        return self.source.summaries.get(seq) if seq is not None else None

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

    # -- the run (worker): inspector/reader.py reads, these take in what it posts -----------------

    def start(self) -> None:
        self._work(self._read_run, "reader")

    def _work(self, read: Callable[[], None], name: str) -> None:
        """``read`` in a thread worker, the one of its group: a new one cancels the one before;
        its failure ends in :meth:`on_worker_state_changed`."""
        self.run_worker(
            read, name=name, group=name, exclusive=True, exit_on_error=False, thread=True
        )

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

    def took(self, message: RunRead) -> Added:
        """A batch the reader worker read: into the index; what it added."""
        batch = message.batch
        self.progress = message.progress
        added = self.index.add(batch.turns)
        for seq in added.repeated:
            self._repeat(seq)
        self.finding_count += added.findings  # one reactive change a batch, not one a turn
        self._refresh_selected_results(added.fresh)
        for p in batch.problems:
            self.notify(str(p), title="damaged record skipped", severity="warning", timeout=8)
        self._counts()
        return added

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
        if self.selected == seq:
            self.load_panes(seq)

    def _refresh_selected_results(self, new_seqs: list[int]) -> None:
        """A live run grew: the selected turn may now have its next turn (and its results)."""
        seq = self.selected
        summaries = self.source.summaries
        if seq is not None and any(summaries[s].previous_seq == seq for s in new_seqs):
            self.load_panes(seq)

    def _counts(self) -> None:
        self.conversation_count = len(self.index.conv)
        self.turn_count = len(self.index.order)
        self.problem_count = len(self.source.damage)
        self.torn = any(p.kind == "torn" for p in self.source.damage)

    def child_exited(self, message: ChildExited) -> None:
        # said by the status line ("ended (exit N)") and the player's notice, never by a toast
        # drawn over the panes
        self.live = False
        self.exit_status = message.status

    def file_closed(self) -> None:
        self.live = False
        self.recorder_closed = True

    def completed(self) -> None:
        """The whole file was read and the end-of-run checks ran."""
        self.complete = True
        self.progress = None
        self._work(self._read_fork, "fork")
        torn = [p for p in self.source.damage if p.kind == "torn"]
        if torn:
            self.notify(
                f"{torn[0]}. Showing the {count(self.source.records, 'complete round trip')}.",
                title="truncated file",
                severity="warning",
                timeout=10,
            )
        # The end-of-run checks may have added findings to any turn.
        self.finding_count = self.index.finding_count()
        self._counts()
        if self.selected is not None:
            self.load_panes(self.selected)

    def _read_fork(self) -> None:
        """A branch beside its origin (inspector/widgets/_fork.py draws what the core computes)."""
        read = read_fork(self.path)
        if read is not None and not get_current_worker().is_cancelled:
            self.post_message(read)

    # -- the selected turn: two workers read it (inspector/selected.py) ----------------------------

    def load_selected(self, seq: int) -> None:
        self.selected = seq
        self.request_of = self.panes_of = None
        self.load_panes(seq)
        self._work(lambda: self._load_turn(seq), "turn")

    def load_panes(self, seq: int) -> None:
        """The selected turn from the store and the tool results its next turn sent back: disk
        reads, so in a worker."""
        self._work(lambda: self._load_panes(seq), "panes")

    def _load_panes(self, seq: int) -> None:
        shown = selected.read_panes(self.source, self.index, seq)
        if shown is not None and not get_current_worker().is_cancelled:
            self.post_message(shown)

    def _load_turn(self, seq: int) -> None:
        loaded = selected.read_turn(self.source, seq)
        if not get_current_worker().is_cancelled:
            self.post_message(loaded)

    # -- worker failures: every worker's failure ends here --------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        exc = event.worker.error
        if isinstance(exc, CassetteError | OSError):
            text = str(exc)
        else:
            text = f"{type(exc).__name__}: {exc} (a bug in looptap: please report it)"
        if event.worker.name == "reader":
            self.post_message(self.Failed(text))
        else:
            self.notify(text, title="could not read the turn", severity="error", timeout=10)
