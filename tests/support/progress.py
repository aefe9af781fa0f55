"""Hang detection by lack of progress, never by wall-clock seconds.

The machine the suite runs on is shared and often busy (load 7-9 on 2 cores): a child that needs
5 s on a quiet machine may need 60 s there. A fixed wall-clock limit then kills a slow but working
child and calls it a hang. Here a child is hung only when it made **no progress** for
:data:`STALL` seconds; progress is any change in

- the CPU time (user + system, with that of its waited-for children) of the child's process tree,
  read from ``/proc/<pid>/stat``, at an average of at least :data:`RATE` of one core since the last
  progress (a hung process whose idle timers or polling threads wake now and then stays below it;
  a working one slowed by a busy machine is far above it);
- the bytes it read or wrote (``rchar``/``wchar`` of ``/proc/<pid>/io``), output included;
- the set of processes in its tree;
- an optional ``progress()`` callable of the caller's (a file's size, a count of records …).

A child spinning in a loop makes "progress" by CPU time, so callers that test for runaway work
give a CPU-time budget (``cpu=``): CPU seconds, unlike wall-clock seconds, do not grow with the
machine's load. A wait that names nothing to watch (:func:`until`, :func:`wait_async` without
``pids``) watches the test's own process and everything it started: the work a test waits for is
done by its threads (a fake upstream, a worker) or its children (a recorder, an agent). An absolute
``ceiling`` is kept only where a caller has no progress signal at all, and says so.

    proc = run([...], capture_output=True, text=True)          # subprocess.run, watched
    rc = wait(popen)                                           # Popen.wait, watched
    out, err = communicate(popen)                              # Popen.communicate, watched
    until(lambda: path.exists(), pids=[popen.pid], what="the ready file")
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = [
    "CEILING",
    "STALL",
    "Hung",
    "Watch",
    "communicate",
    "lines",
    "run",
    "tmux_pids",
    "until",
    "wait",
    "wait_async",
    "wait_screen",
]

T = TypeVar("T")

#: Seconds without any progress after which a child is hung (LOOPTAP_TEST_STALL overrides).
STALL = float(os.environ.get("LOOPTAP_TEST_STALL", "300"))
#: The absolute ceiling of a wait that has no progress signal at all (LOOPTAP_TEST_CEILING).
CEILING = float(os.environ.get("LOOPTAP_TEST_CEILING", "900"))
#: How often a wait wakes to look (not a limit).
POLL = 0.25
#: The least time between two samples of progress: a sample reads /proc/*/stat of every process
#: on the machine (2-3 ms of CPU with a hundred), and a stall is judged over minutes.
SAMPLE = 1.0
#: The least average CPU use (a fraction of one core) that counts as progress by CPU time alone.
RATE = 0.005
_TICK = os.sysconf("SC_CLK_TCK")


class Hung(AssertionError):
    """A child (or a wait) made no progress for :data:`STALL` seconds, or overran its CPU budget."""


def _stat(pid: int | str) -> tuple[int, int] | None:
    """(parent pid, CPU ticks: user + system + waited-for children's) of one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    return int(rest[1]), int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])


def _io(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/io", "rb") as fh:
            fields = dict(line.split(b":", 1) for line in fh.read().splitlines() if b":" in line)
        return int(fields.get(b"rchar", b"0")) + int(fields.get(b"wchar", b"0"))
    except (OSError, ValueError):
        return 0


def tree(roots: Iterable[int]) -> list[int]:
    """``roots`` and every living descendant of theirs."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(name)
            if st is not None:
                children.setdefault(st[0], []).append(int(name))
    out: list[int] = []
    todo = [p for p in roots if os.path.exists(f"/proc/{p}")]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(pids: Iterable[int]) -> float:
    """CPU time of these processes and their descendants, in seconds."""
    return sum((st[1] if (st := _stat(p)) is not None else 0) for p in tree(pids)) / _TICK


class Watch:
    """Samples the progress of some process trees (and of ``progress()``) and says when it
    stopped."""

    def __init__(
        self,
        *pids: int,
        progress: Callable[[], Any] | None = None,
        stall: float = STALL,
        cpu: float | None = None,
        ceiling: float | None = None,
        what: str = "",
    ) -> None:
        self.pids = list(pids)
        self.progress = progress
        self.stall = stall
        self.cpu = cpu
        self.ceiling = ceiling
        self.what = what or (f"process {pids[0]}" if pids else "the wait")
        self._other: Any = None
        self._ticks = 0
        self.started = self._changed = time.monotonic()
        self._every = min(SAMPLE, stall / 4)
        self._sampled = -self._every

    def sample(self) -> tuple[Any, int]:
        """(everything but CPU time, CPU ticks) of the watched trees now."""
        procs = tree(self.pids) if self.pids else []
        ticks = sum((st[1] if (st := _stat(p)) is not None else 0) for p in procs)
        me = os.getpid()
        if me in procs and (st := _stat(f"self/task/{threading.get_native_id()}")) is not None:
            ticks -= st[1]  # this thread only samples: its CPU time is not the watched work
        io = sum(_io(p) for p in procs if p != me)  # this process's own reads include the sampling
        extra = self.progress() if self.progress is not None else None
        return (tuple(sorted(procs)), io, extra), ticks

    def check(self) -> None:
        """Raise :class:`Hung` if nothing moved for ``stall`` seconds, the CPU budget is spent, or
        (only for a wait with no progress signal) the absolute ceiling is passed."""
        now = time.monotonic()
        if now - self._sampled < self._every:
            return
        self._sampled = now
        other, ticks = self.sample()
        cpu = ticks / _TICK
        if other != self._other or ticks - self._ticks >= max(
            1.0, RATE * (now - self._changed) * _TICK
        ):
            self._other, self._ticks, self._changed = other, ticks, now
        if self.cpu is not None and cpu > self.cpu:
            raise Hung(
                f"{self.what} used {cpu:.1f} s of CPU time, more than its budget of {self.cpu:g} s"
            )
        if (self.pids or self.progress is not None) and now - self._changed > self.stall:
            raise Hung(
                f"{self.what} made no progress (CPU time, I/O, processes) for {self.stall:g} s"
            )
        if self.ceiling is not None and now - self.started > self.ceiling:
            raise Hung(
                f"{self.what} did not happen within the absolute ceiling "
                f"of {self.ceiling:g} s (no progress signal)"
            )

    def kill(self) -> None:
        for pid in tree(self.pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def wait(
    proc: subprocess.Popen[Any],
    *,
    stall: float = STALL,
    cpu: float | None = None,
    what: str = "",
    kill: bool = True,
) -> int:
    """``proc.wait()``, raising :class:`Hung` (after killing its tree) if it stops progressing."""
    watch = Watch(proc.pid, stall=stall, cpu=cpu, what=what or _name(proc.args))
    while True:
        try:
            return proc.wait(timeout=POLL)  # a sampling interval, not a limit
        except subprocess.TimeoutExpired:
            pass
        try:
            watch.check()
        except Hung:
            if kill:
                watch.kill()
                proc.wait()
            raise


def communicate(
    proc: subprocess.Popen[Any],
    input: Any = None,
    *,
    stall: float = STALL,
    cpu: float | None = None,
    what: str = "",
) -> tuple[Any, Any]:
    """``proc.communicate(input)``, watched: a child that stops progressing is killed and
    :class:`Hung` raised with the tail of what it wrote."""
    watch = Watch(proc.pid, stall=stall, cpu=cpu, what=what or _name(proc.args))
    while True:
        try:
            return proc.communicate(input, timeout=POLL)  # a sampling interval, not a limit
        except subprocess.TimeoutExpired:
            input = None  # handed over once: a retry that passes it again is refused (ValueError)
        try:
            watch.check()
        except Hung as exc:
            watch.kill()
            out, err = proc.communicate()
            raise Hung(f"{exc}\n--- stdout\n{_tail(out)}\n--- stderr\n{_tail(err)}") from None


def run(
    args: Sequence[Any] | str,
    *,
    input: Any = None,
    capture_output: bool = False,
    check: bool = False,
    stall: float = STALL,
    cpu: float | None = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run` without a wall-clock ``timeout``: the child is watched for
    progress."""
    if "timeout" in kwargs:
        raise TypeError(
            "run() takes no wall-clock timeout: a child is hung only when it stops progressing"
        )
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with subprocess.Popen(args, **kwargs) as proc:
        out, err = communicate(proc, input, stall=stall, cpu=cpu)
        code = proc.poll()
    assert code is not None
    if check and code:
        raise subprocess.CalledProcessError(code, args, out, err)
    return subprocess.CompletedProcess(args, code, out, err)


def until(
    condition: Callable[[], T],
    *,
    pids: Iterable[int] = (),
    progress: Callable[[], Any] | None = None,
    stall: float = STALL,
    ceiling: float | None = None,
    what: str = "",
    interval: float = 0.1,
) -> T:
    """Poll ``condition()`` until it is true and return it. Hung when the watched processes (by
    default this one, its threads and its children) and ``progress()`` stop moving for ``stall``
    seconds; ``ceiling`` is an absolute limit for a caller with no progress signal at all."""
    pids = list(pids) or [os.getpid()]  # nothing named: this process's threads and its children
    watch = Watch(
        *pids, progress=progress, stall=stall, ceiling=ceiling, what=what or "the condition"
    )
    while True:
        value = condition()
        if value:
            return value
        watch.check()
        time.sleep(interval)


async def wait_async(
    awaitable: Awaitable[T],
    *,
    pids: Iterable[int] = (),
    progress: Callable[[], Any] | None = None,
    stall: float = STALL,
    what: str = "",
) -> T:
    """``await awaitable`` with hang detection by progress (of ``pids``, by default this process
    with its threads and children, and of ``progress()``)."""
    task = asyncio.ensure_future(awaitable)
    watch = Watch(
        *(list(pids) or [os.getpid()]),
        progress=progress,
        stall=stall,
        what=what or "the awaited result",
    )
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=POLL)
            if done:
                return task.result()
            watch.check()
    finally:
        if not task.done():
            task.cancel()


def _name(args: Any) -> str:
    if isinstance(args, str | bytes):
        return str(args)[:80]
    return " ".join(str(a) for a in list(args)[:4])[:120]


def _tail(data: Any) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return str(data)[-2000:]


def tmux_pids(tmux: Callable[..., str]) -> list[int]:
    """The tmux server's pid (its tree holds every pane's program), for :func:`until`'s ``pids``."""
    pid = tmux("display-message", "-p", "#{pid}").strip()
    return [int(pid)] if pid.isdigit() else []


def wait_screen(
    capture: Callable[[], str], *texts: str, pids: Iterable[int] = (), what: str = ""
) -> str:
    """The screen ``capture()`` returns, once every one of ``texts`` is on it. Progress: the
    screen changing, or the processes behind it (``pids``: the tmux server's tree) working."""
    last = [""]

    def shown() -> str:
        last[0] = capture()
        return last[0] if all(t in last[0] for t in texts) else ""

    try:
        return until(
            shown,
            pids=pids,
            progress=lambda: last[0],
            interval=0.2,
            what=what or f"{texts!r} on the screen",
        )
    except Hung as exc:
        raise Hung(f"{exc}; {texts!r} never all appeared; the screen was:\n{last[0]}") from None


def lines(
    proc: subprocess.Popen[Any], stream: Any, *, stall: float = STALL, what: str = ""
) -> Iterable[str]:
    """The lines ``proc`` writes to ``stream`` (its stdout or stderr pipe), read straight from the
    file descriptor without blocking past a progress check: hung when ``proc`` stops progressing
    before the next line comes. Ends at end of file."""
    import select

    fd = stream.fileno()
    watch = Watch(proc.pid, stall=stall, what=what or _name(proc.args))
    buf = b""
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.decode("utf-8", "replace") + "\n"
        if select.select([fd], [], [], POLL)[0]:
            data = os.read(fd, 65536)
            if not data:
                if buf:
                    yield buf.decode("utf-8", "replace")
                return
            buf += data
        else:
            watch.check()
