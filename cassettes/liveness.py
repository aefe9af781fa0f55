"""Whether a process that looptap starts and waits for is still moving: a start is waited for while
the process is alive and makes progress, never for a fixed number of seconds (on a busy machine,
at a load average of 25 on 2 cores, a writer that needs 3 s on a quiet one needed more than 60).

:class:`Progress` watches a process and its descendants. Progress is any change of

- the CPU time (user + system, with that of waited-for children) of the process tree, read from
  ``/proc/<pid>/stat``: a process that imports, opens files or computes advances it however slowly
  it is scheduled; a stopped one (``SIGSTOP``), one blocked for good, does not;
- the set of processes in the tree (a child started), the bytes the tree read or wrote
  (``/proc/<pid>/io``);
- what the caller counts as progress (``extra``: the bytes the process said, a file's size).

A start has failed only when the process ended, or made no progress for :data:`STALL` seconds.
Where ``/proc`` cannot be read (another system), nothing but ``extra`` moves, and the stall is
counted from the start: the fixed limit it replaces.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable

__all__ = ["POLL", "STALL", "Progress"]

#: Seconds without any progress after which a starting process has failed.
STALL = 60.0
#: How often progress is sampled while waiting (not a limit).
POLL = 0.25


def _stat(pid: int | str) -> tuple[int, str, int] | None:
    """(parent pid, state letter, CPU ticks: user + system + waited-for children's) of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        ticks = int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])
        return int(rest[1]), rest[0].decode("ascii", "replace"), ticks
    except (IndexError, ValueError):
        return None


def _io(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/io", "rb") as fh:
            fields = dict(line.split(b":", 1) for line in fh.read().splitlines() if b":" in line)
        return int(fields.get(b"rchar", b"0")) + int(fields.get(b"wchar", b"0"))
    except (OSError, ValueError):
        return 0


def _tree(root: int) -> list[int]:
    """``root`` and its living descendants (``[]``: ``root`` is gone or ``/proc`` unreadable)."""
    if not os.path.exists(f"/proc/{root}"):
        return []
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [root]
    for name in names:
        if name.isdigit():
            st = _stat(name)
            if st is not None:
                children.setdefault(st[0], []).append(int(name))
    out: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out


class Progress:
    """The progress of the process ``pid`` (``None``: not known, only ``extra`` moves) and its
    descendants since this was made; :meth:`stalled` once none for ``stall`` seconds."""

    def __init__(
        self,
        pid: int | None,
        stall: float = STALL,
        extra: Callable[[], Hashable] | None = None,
    ) -> None:
        self.pid = pid
        self.stall = stall
        self.extra = extra
        self._mark = self._now()
        self._since = time.monotonic()

    def _now(self) -> Hashable:
        pids = _tree(self.pid) if self.pid is not None else []
        stats = [_stat(p) for p in pids]
        return (
            tuple(pids),
            sum(st[2] for st in stats if st is not None),
            sum(_io(p) for p in pids),
            self.extra() if self.extra is not None else None,
        )

    def stalled(self) -> bool:
        """Whether no progress was seen for ``stall`` seconds (sampled now)."""
        mark, now = self._now(), time.monotonic()
        if mark != self._mark:
            self._mark, self._since = mark, now
            return False
        return now - self._since >= self.stall

    def state(self) -> str:
        """How the process is, for a message: ``stopped`` (``SIGSTOP``), ``running``, ``sleeping``,
        ``waiting for the disk``, or ``""`` when not known."""
        st = _stat(self.pid) if self.pid is not None else None
        names = {"T": "stopped", "t": "stopped", "R": "running", "S": "sleeping"}
        return "" if st is None else names.get(st[1], {"D": "waiting for the disk"}.get(st[1], ""))
