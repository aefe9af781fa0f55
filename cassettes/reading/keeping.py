"""Who is keeping a cassette's analysis: the recorder's claim, so that a reader waits for the
keeper that is finishing instead of analysing the same run beside it (docs/kept-analysis.md).

The recorder's writer (``proxy/writer.py``) starts a keeper (``proxy/keeper.py``) that analyses the
run as it is recorded; after a clean stop the keeper reads the rest, runs the end-of-run checks and
keeps the analysis. A ``looptap show`` (or ``looptap run``'s closing summary) that starts in that
window would find nothing kept yet and analyse the whole run itself, on a core of its own, while
the keeper, a few seconds from done, does the same at the lowest priority. So the writer takes a
*claim* when it starts the keeper: an exclusive ``flock`` on ``NAME.keeping`` beside the kept
analysis (same directory, same ``NAME``), held through one open file that the keeper inherits. The
claim file holds one line, rewritten in place: the state, the cassette's size, the bytes the keeper
has read and the keeper's process id.

- ``recording``: the recording goes on; a reader does not wait (the file still grows: what is kept
  at its end is for other bytes).
- ``finishing SIZE`` (then ``checking``): the writer stopped cleanly with the cassette at
  ``SIZE`` bytes and told the keeper so; a reader of a cassette of exactly that size waits
  (:func:`wait`) until the claim is released, then takes the kept analysis if it checks out
  (checked as any other: a claim only makes a reader wait, it never makes one trust anything).
- released: the keeper has kept the analysis, given up or died (the kernel releases a ``flock``
  with the last process holding it: a SIGKILLed keeper leaves no stale claim).

A reader waits while the keeper makes progress (the bytes it has read, its state, its CPU time)
and gives up after :data:`STALL` seconds without any (or ten times that with CPU time alone),
analysing the run itself: a keeper that hangs costs a reader that long, never a wrong or a
missing result. While it waits it lifts the keeper out
of ``SCHED_IDLE`` where the system allows it (the recording is over: the keeper is what the user
now waits for), so a busy machine does not starve it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

__all__ = ["STALL", "Claim", "State", "claim_path", "read_state", "wait"]

#: Seconds a reader waits for a keeper that shows no progress before analysing the run itself.
STALL = 20.0
#: Seconds between two looks at a claim a reader waits for.
POLL = 0.05
#: What a claim can say, in order: the recording goes on; it stopped and the keeper reads the rest;
#: the keeper runs the end-of-run checks and writes the analysis down.
_STATES = ("recording", "finishing", "checking")
#: The states a reader waits in (the recording is over).
_FINISHING = _STATES[1:]
#: The state line's size (fixed: it is rewritten in place, and a reader reads it whole).
LINE = 96


class State(NamedTuple):
    """What a claim says: ``recording`` or ``finishing``, the cassette's size when the recording
    stopped (0 while it goes on), the bytes the keeper has read, and the keeper's process id."""

    state: str
    size: int
    read: int
    pid: int


def claim_path(cassette: str | Path) -> Path | None:
    """The claim file of the cassette at this path (``None``: no cache directory)."""
    from cassettes.reading import kept

    where = kept.location(cassette)
    return where.with_suffix(".keeping") if where is not None else None


def _encode(state: State) -> bytes:
    line = f"{state.state} {state.size} {state.read} {state.pid}".encode()
    return line.ljust(LINE - 1) + b"\n"


def _decode(data: bytes) -> State | None:
    parts = data.split()
    if len(parts) != 4 or parts[0].decode("ascii", "replace") not in _STATES:
        return None
    if not all(p.isdigit() and len(p) <= 20 for p in parts[1:]):
        return None
    return State(parts[0].decode(), int(parts[1]), int(parts[2]), int(parts[3]))


class Claim:
    """The claim on one cassette's keeping: taken by the writer (:meth:`take`), inherited by the
    keeper (:meth:`inherited`); released when the last process holding its file closes it."""

    def __init__(self, fd: int, state: State) -> None:
        self.fd = fd
        self._state = state

    @classmethod
    def take(cls, cassette: str | Path, pid: int = 0) -> Claim | None:
        """The claim on ``cassette``'s keeping, in state ``recording``; ``None`` when it cannot be
        taken (no cache directory, a claim another recorder holds, a file that is not a regular
        file of this user): the keeper then runs unclaimed, and readers do not wait for it."""
        path = claim_path(cassette)
        if path is None:
            return None
        fd = -1
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600
            )
            st = os.fstat(fd)
            if not (st.st_mode & 0o170000 == 0o100000 and st.st_uid == os.geteuid()):
                raise OSError("not a regular file of this user")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            claim = cls(fd, State("recording", 0, 0, pid))
            claim._write()
            return claim
        except OSError:
            if fd >= 0:
                os.close(fd)
            return None

    @classmethod
    def inherited(cls, fd: int) -> Claim | None:
        """The claim whose file descriptor the writer passed to this process (the keeper)."""
        try:
            state = _decode(os.pread(fd, LINE, 0))
        except OSError:
            return None
        if state is None:
            return None
        claim = cls(fd, state._replace(pid=os.getpid()))
        claim._write()
        return claim

    def _write(self) -> None:
        with contextlib.suppress(OSError):  # a claim only ever saves a reader time
            os.pwrite(self.fd, _encode(self._state), 0)

    def keeper(self, pid: int) -> None:
        """The keeper's process id (the writer, once it has started it)."""
        self._state = self._state._replace(pid=pid)
        self._write()

    def finishing(self, size: int) -> None:
        """The recording stopped cleanly with the cassette at ``size`` bytes: readers of a
        cassette of that size wait for the keeper from now on."""
        self._state = self._state._replace(state="finishing", size=size)
        self._write()

    def progress(self, read: int) -> None:
        """The keeper has read ``read`` bytes (any change is progress to a waiting reader)."""
        if read != self._state.read:
            self._state = self._state._replace(read=read)
            self._write()

    def step(self, state: str) -> None:
        """The keeper moved on to ``state`` (``checking``: the end-of-run checks, then keeping)
        after a clean stop."""
        assert state in _FINISHING
        if self._state.state in _FINISHING:  # (a claim still recording says nothing more)
            self._state = self._state._replace(state=state)
            self._write()

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        """Let go of this process's hold (the claim is released with the last one)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def read_state(cassette: str | Path) -> State | None:
    """What the claim on ``cassette`` says while one is held; ``None`` when none is."""
    with _opened(cassette) as fd:
        return _said(fd) if fd is not None else None


@contextlib.contextmanager
def _opened(cassette: str | Path) -> Iterator[int | None]:
    """The claim file of ``cassette``, open to read (``None``: there is none)."""
    path = claim_path(cassette)
    fd = -1
    if path is not None:
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        yield fd if fd >= 0 else None
    finally:
        if fd >= 0:
            os.close(fd)


def _said(fd: int) -> State | None:
    """What a claim says while it is held (``None``: released, or unreadable)."""
    try:
        return _decode(os.pread(fd, LINE, 0)) if _held(fd) else None
    except OSError:
        return None


def _held(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _cpu(pid: int) -> int | None:
    """The process' CPU time so far (clock ticks; Linux), ``None`` where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read(4096).rsplit(b")", 1)[-1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def _lift(pid: int) -> None:
    """Out of ``SCHED_IDLE`` (or nice 19) for the keeper the user now waits for, where the
    system lets this process do it (its owner with the right limit or capability); else as it
    was."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, pid, 0)


def wait(cassette: str | Path, size: int) -> bool:
    """Wait for the keeper finishing the analysis of ``cassette`` (``size`` bytes), if one is:
    until its claim is released, or :data:`STALL` seconds pass without progress. ``True`` when
    there was one and it finished (its analysis may now be taken); ``False`` otherwise."""
    with _opened(cassette) as fd:
        state = _said(fd) if fd is not None else None
        if (
            fd is None
            or state is None
            or state.state not in _FINISHING
            or state.size != size
            or state.pid == os.getpid()
        ):
            return False
        return _until_released(fd, state)


def _until_released(fd: int, state: State) -> bool:
    """Wait while the claim at ``fd`` is held and its keeper progresses (see :func:`wait`)."""
    try:
        _lift(state.pid)
        said_last: State | None = state
        cpu_last = _cpu(state.pid)
        moved = worked = time.monotonic()
        while _held(fd):
            now, cpu = _decode(os.pread(fd, LINE, 0)), _cpu(state.pid)
            clock = time.monotonic()
            if now != said_last:
                said_last, moved, worked = now, clock, clock
            elif cpu != cpu_last:
                cpu_last, worked = cpu, clock
            # No progress at all for STALL seconds, or only CPU time (a step that said nothing)
            # for ten times that: analysed here instead.
            if clock - worked > STALL or clock - moved > 10 * STALL:
                return False
            time.sleep(POLL)
        return True
    except OSError:
        return False
