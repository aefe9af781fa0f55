"""The hand-off of captured round trips to looptap's writer process. No mitmproxy in here: the
addon (:mod:`proxy.addon`) calls a small API, and this module is tested on its own.

What it promises (docs/recorder.md, tests/proxy/test_handoff.py):

* :meth:`Handoff.hand_over` never blocks the event loop. It writes the round trip's frame into
  the writer's pipe at once (:func:`proxy.pipe.write_parts`, non-blocking); what the pipe cannot
  take now waits in this process, oldest first, and is written when the pipe has room (by the
  event loop, or by :meth:`Handoff.flush`). Once in the pipe a round trip lives in the kernel: a
  SIGKILL of the proxy does not lose it. So a round trip handed over before its last byte goes to
  the agent is never lost by a crash of the proxy alone.
* The writer answers in hand-off order (``("ok", n)``, ``("storage_error", msg)``,
  ``("failed", msg)``). A :class:`~proxy.receipt.Receipt` (``hand_over(..., receipt=True)``, the
  ``--durable`` gate) is released by its own round trip's answer — or as soon as the writer can no
  longer answer.
* Every round trip is counted exactly once: :attr:`Handoff.recorded`, :attr:`Handoff.storage_errors`
  (the writer could not store it, or stopped before it did) or :attr:`Handoff.failed_records`
  (it could not be read, or never reached the writer: :meth:`Handoff.not_recorded`); each loss is
  named in :attr:`Handoff.lost` and said through :mod:`proxy.messages` (redacted, one line).
* :meth:`Handoff.flush` waits until the writer has answered for everything handed over;
  :meth:`Handoff.close` flushes, ends the writer (end of file on its pipe) and counts what it never
  stored.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import select
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..cassettes.liveness import POLL, STALL, Progress
from . import messages
from .pipe import SETTLE, FrameReader, enlarge_pipe, frame, write_parts
from .receipt import Receipt, runs_here
from .writer import writer_main  # light: the writer process imports the pipeline, not this one

__all__ = ["Handoff", "HandoffError"]

#: Seconds the writer process may go without progress while it starts (spawn, imports, opening
#: the cassette): it is waited for while it is alive and moving (:mod:`cassettes.liveness`), however
#: long a busy machine makes its start.
START_STALL = STALL


class HandoffError(RuntimeError):
    """The writer could not start, or a round trip could not be handed to it (one line)."""


class WriterProcess(Protocol):
    """What :class:`Handoff` needs of the writer: a ``multiprocessing.Process`` (or a thread, in
    tests)."""

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None: ...


class Pipe(Protocol):
    """One end of a pipe (a ``multiprocessing`` connection): only its file descriptor is used."""

    def fileno(self) -> int: ...

    def close(self) -> None: ...


class Handoff:
    """The proxy's side of the two pipes to one writer process at a time (:meth:`open` …
    :meth:`close`, again with another cassette if need be); its counts add up across them."""

    def __init__(self) -> None:
        self.recorded = 0
        self.storage_errors = 0
        self.failed_records = 0
        #: What was lost, one redacted line each.
        self.lost: list[str] = []
        #: One entry per item handed over and not answered yet, in hand-off order (the writer
        #: answers in that order): its receipt, if it has one, and whether it is a round trip (not
        #: a record beside them: a traced process, the tree). Guarded by :attr:`_done`.
        self._pending: deque[tuple[Receipt | None, bool]] = deque()
        #: The cassette of the running writer, the ``seq`` its first round trip gets (its
        #: ``ready`` answer), and the round trips it answered as stored: what it stored unanswered
        #: is counted from the file when it stops (:meth:`_in_file`).
        self._path: Path | None = None
        self._base: int | None = None
        self._stored_here = 0
        self._done = threading.Condition()
        self._process: WriterProcess | None = None
        self._inbox: Pipe | None = None
        self._outbox: Pipe | None = None
        self._answers = FrameReader()
        self._answers_eof = False
        self._writer_gone = False
        #: Frames (or what is left of them) the pipe could not take yet, oldest first.
        self._overflow: deque[list[memoryview]] = deque()
        #: Guards the pipes, :attr:`_overflow` and :attr:`_answers` (the event loop and a thread in
        #: :meth:`flush` may both pump).
        self._io = threading.Lock()
        #: The event loop that moves frames and answers (set by :meth:`attach`), and whether it
        #: waits for room in the writer's pipe.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing = False

    # -- starting and stopping -----------------------------------------------------------------
    def open(
        self,
        path: Path,
        *,
        fsync: bool = False,
        settle: float = SETTLE,
        redact: tuple[Sequence[str], Sequence[str]] = ((), ()),
        stall: float = START_STALL,
        about: tuple[str, Sequence[str]] = ("", ()),
    ) -> None:
        """Start a writer process on the cassette at ``path`` and return once it can write (a
        round trip held only in this process in the first seconds would be lost by a crash).
        Raises :class:`HandoffError` saying why it could not start."""
        import multiprocessing

        self.close()
        mp = multiprocessing.get_context("spawn")
        in_r, in_w = mp.Pipe(duplex=False)
        out_r, out_w = mp.Pipe(duplex=False)
        enlarge_pipe(in_w.fileno())
        process = mp.Process(
            target=writer_main,
            args=(
                str(path),
                fsync,
                in_r,
                out_w,
                settle,
                (list(redact[0]), list(redact[1])),
                (about[0], list(about[1])),
            ),
            name="looptap-writer",
            daemon=True,
        )
        process.start()
        # Only the writer holds these ends: the proxy's end-of-file is the writer's (and back).
        in_r.close()
        out_w.close()
        try:
            self.connect(process, in_w, out_r, stall=stall, path=path)
        except HandoffError:
            process.kill()
            process.join(timeout=5)
            raise

    def connect(
        self,
        process: WriterProcess,
        inbox: Pipe,
        outbox: Pipe,
        stall: float = START_STALL,
        path: Path | None = None,
    ) -> None:
        """Use a started writer (on the cassette at ``path``, where what it stored is counted
        should it stop without answering): frames go into ``inbox``, its answers come from
        ``outbox``. Waits
        for its ``ready`` answer while the writer is alive and makes progress (its CPU time, its
        children, its reads and writes: :class:`cassettes.liveness.Progress`); raises
        :class:`HandoffError` (both ends closed) when it ended, answered otherwise, or made no
        progress for ``stall`` seconds."""
        self.close()
        os.set_blocking(inbox.fileno(), False)
        os.set_blocking(outbox.fileno(), False)
        reader = FrameReader()
        moving = Progress(getattr(process, "pid", None), stall)
        ready, msg, base = False, "the writer process ended at start-up", None
        while True:
            if select.select([outbox.fileno()], [], [], POLL)[0]:
                if not _read_available(outbox.fileno(), reader):
                    break
                frames = reader.frames()
                if frames:
                    kind, msg = frames[0]
                    ready = kind == "ready"
                    base = msg if ready and isinstance(msg, int) else None
                    break
            elif not process.is_alive():
                break
            elif moving.stalled():
                how = moving.state()
                msg = f"the writer process made no progress for {stall:.0f} s and did not start" + (
                    f" (it is {how})" if how else ""
                )
                break
        if not ready:
            inbox.close()
            outbox.close()
            raise HandoffError(str(msg))
        with self._io:
            self._process, self._inbox, self._outbox, self._answers = process, inbox, outbox, reader
            self._answers_eof = self._writer_gone = False
            self._path, self._base, self._stored_here = path, base, 0
        # Ended at the latest when the interpreter exits, before multiprocessing waits there for
        # its children (registered later, so run earlier): the writer ignores the SIGTERM
        # multiprocessing sends a daemon child, and a recorder stopped before mitmproxy's done
        # hook (a Ctrl-C between the port opening and the ready line) hung at exit for good.
        atexit.register(self.close)
        self.attach()

    @property
    def running(self) -> bool:
        """A writer was started and not closed (it may have died since: hand-offs then fail)."""
        return self._inbox is not None

    def attach(self) -> None:
        """Move frames and answers on the running event loop (reader/writer callbacks, no thread),
        if there is one and it does not already; without one, :meth:`flush` moves them."""
        if self._outbox is None or self._loop is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        with self._io:
            loop.add_reader(self._outbox.fileno(), self._pump)
            if self._overflow and self._inbox is not None:
                loop.add_writer(self._inbox.fileno(), self._pump)
                self._writing = True
            self._loop = loop

    def _detach(self) -> None:
        loop, self._loop = self._loop, None
        writing, self._writing = self._writing, False
        if loop is None:
            return
        try:
            if self._outbox is not None:
                loop.remove_reader(self._outbox.fileno())
            if writing and self._inbox is not None:
                loop.remove_writer(self._inbox.fileno())
        except (RuntimeError, ValueError, OSError):  # closed loop or fd: nothing left to remove
            pass

    def close(self) -> None:
        """Flush, then end the writer (end of file: it stores what it has and exits) and count
        what it never stored. Waiting receipts are released."""
        process = self._process
        if process is None:
            self._give_up(count=False)
            return
        self.flush()
        self._detach()  # from here on this thread does the pumping
        inbox, outbox = self._inbox, self._outbox
        assert inbox is not None and outbox is not None
        # while the writer makes progress (a loaded machine slows it, never ends the wait: a
        # fixed 30 s here counted a slow writer's round trips lost, and a why branch that lost
        # one is no sample); given up once it made none for START_STALL seconds
        pid = getattr(process, "pid", None)
        moving = Progress(pid, START_STALL, extra=lambda: len(self._overflow))
        while (
            self._overflow and not self._writer_gone and process.is_alive() and not moving.stalled()
        ):
            select.select([outbox.fileno()], [inbox.fileno()], [], 0.2)
            self._pump()
        inbox.close()
        moving = Progress(pid, START_STALL)
        while process.is_alive() and not moving.stalled():
            process.join(timeout=POLL)
        self._pump()  # the last answers
        with self._io:
            outbox.close()
            self._process = self._inbox = self._outbox = None
        atexit.unregister(self.close)
        self._give_up()

    # -- handing over ----------------------------------------------------------------------------
    def hand_over(self, item: object, *, receipt: bool = False) -> Receipt | None:
        """Give ``item`` (an :class:`~cassettes.wire.Exchange`) to the writer now, without
        blocking. With ``receipt``, and on a running event loop, returns the :class:`Receipt` its
        answer releases. Raises :class:`HandoffError` (or the pickling error) if it could not be
        given; nothing is counted then (the caller says what was lost: :meth:`not_recorded`)."""
        if self._inbox is None or self._writer_gone:
            raise HandoffError("the writer process has stopped")
        parts = frame(item)
        slip: Receipt | None = None
        if receipt:
            try:
                slip = Receipt(asyncio.get_running_loop())
            except RuntimeError:
                pass
        with self._done:
            # before the write: the writer's answer may come at once
            self._pending.append((slip, not isinstance(item, dict)))
        try:
            self._send(parts)
        except HandoffError:
            with self._done:
                # Nothing after it was handed over (this thread holds the hand-off order).
                self._pending.pop()
            if slip is not None:
                slip.release()
            raise
        return slip

    def not_recorded(self, what: str) -> None:
        """Count a round trip lost before it reached the writer, and say so (``what``: a line
        already made safe, :func:`proxy.messages.safe`)."""
        with self._done:
            self.failed_records += 1
            self.lost.append(what)
            self._done.notify_all()
        messages.error(f"round trip NOT recorded: {what}")

    def _send(self, parts: list[memoryview]) -> None:
        assert self._inbox is not None
        with self._io:
            if not self._overflow:
                try:
                    parts = write_parts(self._inbox.fileno(), parts)
                except OSError:
                    self._writer_gone = True
                    raise HandoffError("the writer process has stopped") from None
                if not parts:
                    return
                if self._loop is not None:
                    self._loop.add_writer(self._inbox.fileno(), self._pump)
                    self._writing = True
            self._overflow.append(parts)

    # -- moving frames and answers ---------------------------------------------------------------
    def _pump(self) -> None:
        """Move what is waiting: overflow frames into the writer's pipe, its answers out of the
        other. Never blocks. Runs on the event loop (reader/writer callbacks) or in
        :meth:`flush`."""
        with self._io:
            self._write_overflow()
            ended = self._read_answers()
            answers = self._answers.frames()
        for kind, msg in answers:
            self._on_answer(kind, msg)
        if ended:  # nothing will answer what waits: the responses held for it go on
            with self._done:
                waiting = [r for r, _trip in self._pending if r is not None]
                # (still counted by flush / close)
                self._pending = deque((None, trip) for _r, trip in self._pending)
                self._done.notify_all()
            for r in waiting:
                r.release()

    def _write_overflow(self) -> None:
        inbox = self._inbox
        if inbox is None:
            return
        while self._overflow and not self._writer_gone:
            try:
                left = write_parts(inbox.fileno(), self._overflow[0])
            except OSError:  # the writer is gone: what it never got is counted by flush or close
                self._writer_gone = True
                break
            if left:
                self._overflow[0] = left
                return
            self._overflow.popleft()
        if self._writing and self._loop is not None:
            self._loop.remove_writer(inbox.fileno())  # all written, or nowhere to write
            self._writing = False

    def _read_answers(self) -> bool:
        """Read what the writer said; ``True`` when its end of the pipe has just closed."""
        outbox = self._outbox
        if outbox is None or self._answers_eof or _read_available(outbox.fileno(), self._answers):
            return False
        self._answers_eof = True
        if self._loop is not None:
            self._loop.remove_reader(outbox.fileno())
        return True

    def _on_answer(self, kind: str, msg: Any) -> None:
        n = msg if kind == "ok" else 1 if kind in ("storage_error", "failed", "side") else 0
        released: list[Receipt] = []
        with self._done:
            for _ in range(min(n, len(self._pending))):
                r, _trip = self._pending.popleft()
                if r is not None:
                    released.append(r)
            if kind == "ok":
                self.recorded += n
                self._stored_here += n
            elif kind == "storage_error":
                self.storage_errors += 1
                self.lost.append(messages.safe(str(msg)))
            elif kind == "failed":
                self.failed_records += 1
                self.lost.append(messages.safe(str(msg)))
            self._done.notify_all()
        for r in released:
            r.release()
        if kind == "storage_error":
            messages.error(f"STORAGE ERROR, round trip not recorded: {msg}")
        elif kind == "failed":
            messages.error(f"round trip NOT recorded: {msg}")

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the writer has answered for every round trip handed over (or is gone: what
        it never answered is then counted as storage errors). From any thread. Without
        ``timeout`` it waits while the writer makes progress (its CPU time, reads and writes,
        answers: :class:`cassettes.liveness.Progress`), so a loaded machine slows it and never
        ends it, and gives up once none came for :data:`START_STALL` seconds; ``timeout`` caps
        it in seconds instead."""
        # On another thread while the event loop moves the answers: wait for it; else pump here.
        waits_for_loop = (
            self._loop is not None and self._loop.is_running() and not runs_here(self._loop)
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        moving = Progress(
            getattr(self._process, "pid", None), START_STALL, extra=lambda: len(self._pending)
        )
        while True:
            with self._done:
                if not self._pending:
                    return
            left = 0.2 if deadline is None else deadline - time.monotonic()
            if left <= 0 or (deadline is None and moving.stalled()):
                return
            if self._process is None or not self._process.is_alive():
                if not waits_for_loop:
                    self._pump()  # its last answers
                self._give_up()
                return
            if waits_for_loop:
                with self._done:
                    self._done.wait(min(left, 0.2))
                continue
            inbox, outbox = self._inbox, self._outbox
            if inbox is None or outbox is None:
                return
            select.select(
                [outbox.fileno()], [inbox.fileno()] if self._overflow else [], [], min(left, 0.2)
            )
            self._pump()

    def _give_up(self, count: bool = True) -> None:
        """Nothing will answer what waits (the writer is gone or closed): release the receipts,
        and count each round trip lost once — in the pipe, the writer stopped before storing it;
        still in this process (the newest hand-offs), it never reached the writer."""
        with self._io:
            never = len(self._overflow)
            self._overflow.clear()
        with self._done:
            waiting, self._pending = self._pending, deque()
        for r, _trip in waiting:
            if r is not None:
                r.release()
        if not count:
            return
        never = min(never, len(waiting))
        reached = [trip for _r, trip in list(waiting)[: len(waiting) - never]]
        unsent = sum(trip for _r, trip in list(waiting)[len(waiting) - never :])
        trips = sum(reached)
        if trips:  # the writer stopped without answering: what it stored is in the file
            stored = min(trips, self._in_file())
            with self._done:
                self.recorded += stored
            if stored:
                messages.emit(
                    f"the writer process stopped; {_trips(stored)} it had not answered for "
                    "are in the cassette (counted from the file)"
                )
            if trips > stored:
                self._count_lost(
                    trips - stored,
                    "the writer process stopped before storing them",
                    f"the writer process stopped; {_trips(trips - stored)} not in the cassette "
                    "(counted from the file)",
                )
        if unsent:
            self._count_lost(
                unsent,
                "never handed to the writer",
                f"{_trips(unsent)} {'was' if unsent == 1 else 'were'} never handed to the writer",
            )

    def _in_file(self) -> int:
        """The round trips the writer stored without answering for them: its round trips in the
        cassette (whole lines, ``seq`` from its first on) less those it answered for; 0 when the
        file cannot be read."""
        if self._path is None or self._base is None:
            return 0
        found = 0
        try:
            with open(self._path, "rb") as f:
                for line in f:
                    m = _EXCHANGE.match(line)
                    if m is not None and line.endswith(b"\n") and int(m[1]) >= self._base:
                        found += 1
        except OSError:
            return 0
        return max(0, found - self._stored_here)

    def _count_lost(self, n: int, why: str, said: str) -> None:
        with self._done:
            self.storage_errors += n
            self.lost.append(f"{_trips(n)}: {why}")
            self._done.notify_all()
        messages.error(f"STORAGE ERROR: {said}")


#: The start of a round trip's line in a cassette as the writer writes it (cassette-format.md).
_EXCHANGE = re.compile(rb'\{"type":"exchange","seq":(\d{1,18})[,}]')


def _read_available(fd: int, reader: FrameReader) -> bool:
    """Feed ``reader`` what the non-blocking ``fd`` holds now; ``False`` once it is at its end
    (the writer is gone)."""
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        reader.feed(data)


def _trips(n: int) -> str:
    """``1 round trip``, ``2 round trips`` (cassettes.hints.count's words: the proxy process
    imports no more of cassettes/ than the pipe's protocol)."""
    return f"{n:,} round trip{'' if n == 1 else 's'}"
