"""Reading the run in a thread worker: what was read reaches the app as messages.

The loop decides when to show what it read (the first batch at once, then a few times a second
while a big file is read, since every screen update takes the interpreter from the reader) and
when a recording followed live is over (the recorded command exited, or the recorder closed the
file). It runs in :meth:`inspector.screens._reading.RunReading.start`'s worker; the screen applies
the messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from ..cassettes.reading import Batch, Run
from ..cassettes.storage import being_written

__all__ = ["ChildExited", "RunRead", "read_run"]

#: Bytes read before the first screen is drawn (small, so it appears at once), then per batch.
FIRST_STEP = 256 * 1024
STEP = 4 * 1024 * 1024
#: Seconds between looks at a live recording for new records.
POLL = 0.25
#: Seconds between screen updates while a file is read (the first batch is shown at once).
SHOW_EVERY = 1.0


@dataclass
class RunRead(Message):
    """The reader worker read another batch of the run."""

    batch: Batch
    progress: float | None


class RunCompleted(Message):
    """The whole file was read and the end-of-run checks ran."""


@dataclass
class ChildExited(Message):
    """``looptap run --inspect``: the recorded command exited with this status."""

    status: int


class RecorderClosed(Message):
    """The recorder closed the file being followed: the recording is over."""


def child_exit(status_file: Path | None) -> int | None:
    """The recorded command's exit status, once the recorder wrote it (reader thread)."""
    if status_file is None:
        return None
    try:
        text = status_file.read_text().strip()
    except OSError:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _joined(held: Batch, batch: Batch) -> Batch:
    """A batch read but not yet shown, with the one read after it."""
    held.turns.extend(batch.turns)
    held.records += batch.records
    held.problems.extend(batch.problems)
    held.at_end = batch.at_end
    return held


def _hold(batch: Batch, now: float, shown_at: float) -> bool:
    """Keep ``batch`` for the next screen update: a big file is still being read, nothing went
    wrong, and the screen was updated less than :data:`SHOW_EVERY` ago."""
    return (
        not batch.at_end and not batch.problems and now - shown_at < SHOW_EVERY and bool(shown_at)
    )


def _recording_over(
    source: Run,
    path: Path,
    child_status: Path | None,
    closed: bool,
    post: Callable[[Message], object],
) -> bool:
    """At the end of a live recording's file: if the recorded command exited (the recorder wrote
    its last record before the status) or the recorder closed the file, read once more, finish
    the run and say so."""
    status = child_exit(child_status)
    if status is None and not (closed and path.stat().st_size > 0):
        return False
    last = source.step(STEP)
    if last.records or last.problems:
        post(RunRead(last, None))
    source.finish()
    post(ChildExited(status) if status is not None else RecorderClosed())
    post(RunCompleted())
    return True


def read_run(
    source: Run,
    path: Path,
    *,
    live: bool,
    child_status: Path | None,
    post: Callable[[Message], object],
    cancelled: Callable[[], bool],
) -> None:
    """Read ``source`` to its end (``live``: until the recording is over), posting what was read."""
    step = FIRST_STEP
    held: Batch | None = None  # read but not yet shown
    shown_at = 0.0
    while not cancelled():
        if live and not path.exists():
            # `looptap run --inspect` may start the inspector before the recorder's first write.
            time.sleep(POLL)
            continue
        # Looked at before reading: a writer that closed the file wrote its last record first.
        closed = live and child_status is None and not being_written(path)
        batch = source.step(step)
        step = STEP
        if held is not None:
            batch = _joined(held, batch)
        progress = None if batch.at_end else source.progress()
        now = time.monotonic()
        if _hold(batch, now, shown_at):
            held = batch
            continue
        held = None
        if batch.records or batch.problems or batch.turns or batch.at_end:
            shown_at = now
            post(RunRead(batch, progress))
        if batch.at_end:
            if not live:
                source.finish()
                post(RunCompleted())
                return
            if _recording_over(source, path, child_status, closed, post):
                return
            time.sleep(POLL)
