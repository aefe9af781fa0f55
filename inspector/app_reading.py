"""Reading the run, applied: the reader worker (:mod:`inspector.reader` reads), what it posts shown.

Each batch read puts its turns in the index and the list (those of the conversation viewed), its
counts in the status line and its damaged records in notices; a live recording ends when the
recorder closes the file or the recorded command exits; at the end of the file the end-of-run
checks' findings are shown, and a branch's origin is read (the fork worker). Every worker's
failure ends in :meth:`AppReading.on_worker_state_changed`.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.widgets import TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from cassettes.errors import CassetteError
from cassettes.untrusted import clean
from inspector.app_navigation import AppNavigation
from inspector.playback import Advance
from inspector.reader import ChildExited, RecorderClosed, RunCompleted, RunRead, read_run
from inspector.widgets.conversations import ALL
from inspector.widgets.fork import ForkPane, ForkRead, read_fork

__all__ = ["AppReading"]


class AppReading(AppNavigation):
    """The run read in a worker, batch by batch, and shown as it comes."""

    # -- reading the run (worker) ----------------------------------------------------------------

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
        if not self._screen_stack:
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
        self.messages.show_note(note)

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

    def on_recorder_closed(self, message: RecorderClosed) -> None:
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

    def on_run_completed(self, message: RunCompleted) -> None:
        if not self._screen_stack:
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
        if not self._screen_stack:
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
