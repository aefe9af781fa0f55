"""Work on each round trip of an analysed run spread over the machine's cores, the results handed
on in recording order (``Run.each_pair``; docs/kept-analysis.md, "Using the machine's cores").

What a command does with each round trip once the run is analysed (``looptap show``'s printing
pass: the round trip read again from disk, its parse and turn restored from the reader's stores,
its printed view made) needs nothing of the other round trips: it is done by worker processes,
:data:`CHUNK` round trips a task, while this process takes the results in order and does what must
stay in order (printing, the growth table, what a branch's first turn tolerated).

* **Workers.** ``len(os.sched_getaffinity(0))`` of them (the cores this process may run on), none
  when the load average says those cores are busy already (:func:`busy`), or
  ``LOOPTAP_WORKERS``; ``LOOPTAP_WORKERS=1`` keeps everything in this process. A run of fewer
  than :data:`MIN_RECORDS` round trips (``LOOPTAP_PARALLEL_MIN``) is done here: starting
  processes would cost more than it saves. So is a run not read from a looptap cassette, or not
  read to its end (a recording followed live), and any run where there is no ``/proc/self/fd``
  (not Linux).
* **Forked, not spawned.** A worker is a fork of this process taken once the analysis is done:
  it has the reader as it stands (index, stores, analysis) without a byte being sent, imports
  nothing (``show`` has imported neither textual nor mitmproxy), and reads the cassette and the
  reader's stores through file descriptions of its own (``RunReader.reopen``). It ignores
  SIGINT (Ctrl-C stops this process, which ends the workers) and exits by ``os._exit``.
* **Bounded.** Task ``i`` goes to worker ``i mod n``; each worker has at most :data:`AHEAD`
  tasks sent and not yet taken back, so what waits in memory is a few tasks' results (the
  printed views of ``n * AHEAD * CHUNK`` round trips), however long the run.
* **Never a wrong result, never a hang.** A worker that dies (its sentinel is ready before its
  result) or raises ends the pool: the workers are killed and the round trips from the first one
  not yet handed on are done in this process, as without workers (so an error that is the run's,
  a record changed on disk, is raised here as it would be). The results handed on before are the
  same function's on the same round trips.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from cassettes.parsing.roundtrip import RoundTrip
    from cassettes.reading.incremental import RunReader
    from cassettes.reading.run import Reader
    from cassettes.wire.exchange import Exchange

__all__ = ["AHEAD", "CHUNK", "MIN_RECORDS", "Each", "busy", "mapped", "min_records", "workers"]

T = TypeVar("T")

#: What is done to each round trip (in a worker process: it must change nothing this process
#: reads after, and return something that pickles).
Each = Callable[["Exchange", "RoundTrip"], T]

#: Round trips a task.
CHUNK = 256
#: Tasks each worker has been sent and whose results were not yet taken back.
AHEAD = 2
#: Fewer round trips than this are done in this process (``LOOPTAP_PARALLEL_MIN``).
MIN_RECORDS = 2048


def workers() -> int:
    """How many worker processes: ``LOOPTAP_WORKERS`` when it is a number (``0`` and ``1``: none,
    the work is done in this process); else the cores this process may run on, unless the
    machine's load average (1 minute) is as high as that (:func:`busy`): then none."""
    raw = os.environ.get("LOOPTAP_WORKERS", "").strip()
    if raw.isdigit():
        return max(int(raw), 1)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not Linux)
        cores = os.cpu_count() or 1
    return 1 if busy(cores) else cores


def busy(cores: int) -> bool:
    """The machine's cores are taken already: its load average over the last minute is at least
    ``cores``. Workers would then share the time this process gets (the scheduler shares a
    session's processes as one) and cost it more: each round trip's result is pickled, sent and
    unpickled, and a worker runs slower beside another (measured in docs/kept-analysis.md)."""
    try:
        return os.getloadavg()[0] >= cores
    except OSError:  # (no load average: unknown, taken as idle)
        return False


def min_records() -> int:
    """Round trips a run must have for its work to be spread: :data:`MIN_RECORDS`, or
    ``LOOPTAP_PARALLEL_MIN``."""
    raw = os.environ.get("LOOPTAP_PARALLEL_MIN", "").strip()
    return int(raw) if raw.isdigit() else MIN_RECORDS


def mapped(reader: Reader, each: Each[T]) -> Generator[T, None, None]:
    """``each(exchange, round trip)`` of every round trip the reader read, in recording order: in
    worker processes when the run is large enough and the reader is a settled
    :class:`~cassettes.reading.incremental.RunReader` (see the module docstring), else here, over
    the reader's own pass (``reader.pairs``)."""
    # (a RunReader has ``settled``; a run held in memory, reading.held, has not)
    # (a fork reopens the stores through /proc/self/fd: RunReader.reopen)
    if not getattr(reader, "settled", False) or not os.path.isdir("/proc/self/fd"):
        return (each(ex, rt) for ex, rt in reader.pairs)
    run = cast("RunReader", reader)
    n = workers() if len(run.source) >= max(min_records(), 1) else 1
    if n < 2:
        return (each(ex, rt) for ex, rt in reader.pairs)
    return _Pool(run, each, n).results()


def _tasks(reader: RunReader) -> list[tuple[int, int]]:
    """The index positions, :data:`CHUNK` round trips a task (records skipped as unreadable are
    skipped in each)."""
    end = len(reader.index)
    return [(lo, min(lo + CHUNK, end)) for lo in range(0, end, CHUNK)]


def _serve(
    reader: RunReader, each: Each[Any], conn: Connection, others: list[Connection]
) -> None:
    """A worker: reads a task (positions ``lo`` to ``hi``), sends back ``("ok", results)`` or
    ``("error", what)``; stops at ``None`` or when the parent's end of the pipe is closed (it
    closes ``others``, the parent's ends of the workers forked before it, so that each worker
    sees its own pipe close when the parent ends)."""
    import gc
    import signal

    for other in others:
        other.close()
    # What the parent made is left out of this process's collections: a full collection would walk
    # (and so copy, page by page) every object of the run's analysis, for nothing.
    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        reader.reopen()
    except OSError as exc:  # (said to the parent, which does the work itself)
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    again = reader.reread()
    skipped = reader.source.skipped
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        lo, hi = task
        try:
            out = [each(*again.pair_at(pos)) for pos in range(lo, hi) if pos not in skipped]
        except Exception as exc:  # this process does the task again, and says what is wrong
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            return
        conn.send(("ok", out))


class _Pool(Generic[T]):
    """Worker processes forked from this one, each with a pipe (see the module docstring)."""

    def __init__(self, reader: RunReader, each: Each[T], n: int) -> None:
        self._reader, self._each = reader, each
        self._tasks = _tasks(reader)
        self._n = min(n, len(self._tasks))
        self._procs: list[BaseProcess] = []
        self._conns: list[Connection] = []
        #: Why the workers were given up (``None``: they were not).
        self.failed: str | None = None

    def _start(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        sys.stdout.flush()  # (a fork copies what is buffered: flushed once, here)
        sys.stderr.flush()
        for _ in range(self._n):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=_serve,
                args=(self._reader, self._each, theirs, [*self._conns, mine]),
                daemon=True,
            )
            proc.start()
            theirs.close()
            self._procs.append(proc)
            self._conns.append(mine)

    def _take(self, k: int) -> list[T] | None:
        """The results of task ``k`` (from worker ``k mod n``), ``None`` when that worker died or
        failed (:attr:`failed` says why)."""
        from multiprocessing.connection import wait

        w = k % self._n
        conn, proc = self._conns[w], self._procs[w]
        # Its result, or its end: whichever comes first (never a wait on a dead process).
        ready = wait([conn, proc.sentinel])
        if conn not in ready:
            self.failed = f"worker process {proc.pid} ended (exit code {proc.exitcode})"
            return None
        try:
            status, value = conn.recv()
        except (EOFError, OSError) as exc:  # died while sending
            self.failed = f"worker process {proc.pid} ended ({type(exc).__name__})"
            return None
        if status != "ok":
            self.failed = f"worker process {proc.pid} failed: {value}"
            return None
        out: list[T] = value
        return out

    def _send(self, k: int) -> None:
        if k < len(self._tasks):
            try:
                self._conns[k % self._n].send(self._tasks[k])
            except OSError:  # a worker gone: seen by _take
                pass

    def _stop(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
            except OSError:
                pass
            conn.close()
        for proc in self._procs:
            proc.join(timeout=1.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._procs, self._conns = [], []

    def results(self) -> Generator[T, None, None]:
        """The results, task by task, in order; the rest done here once the workers failed."""
        k = 0  # the first task whose results were not handed on
        done = False  # every task's results were taken back
        try:
            try:
                self._start()
            except OSError as exc:  # no process to be had (EAGAIN …): all of it here
                self.failed = f"no worker process could be started: {exc}"
            if self.failed is None:
                for j in range(self._n * AHEAD):
                    self._send(j)
            while self.failed is None and k < len(self._tasks):
                got = self._take(k)
                if got is None:
                    break
                self._send(k + self._n * AHEAD)
                k += 1
                done = k == len(self._tasks)
                yield from got
        finally:
            if not done:  # failed, or stopped early (Ctrl-C, a closed pipe): no clean stop
                for proc in self._procs:
                    proc.kill()
            self._stop()
        if k < len(self._tasks):  # the workers failed: the rest here, as without them
            yield from self._here(self._tasks[k][0])

    def _here(self, start: int) -> Iterator[T]:
        again = self._reader.reread()
        skipped = self._reader.source.skipped
        try:
            for pos in range(start, len(self._reader.index)):
                if pos not in skipped:
                    yield self._each(*again.pair_at(pos))
        finally:
            again.close()
