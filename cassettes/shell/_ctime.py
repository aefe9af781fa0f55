"""Whether a file changed since an instant, by its inode's change time (``st_ctime_ns``): the
kernel sets it at every change of the file's contents or inode (a write, a chmod, a new link, a
rename) from its own clock, and no call lets a user set it (unlike ``mtime``). So the recorder's
start need only list the tree's names: a file's first ``lstat``, taken later, is its start's when
its ctime is older than the start's instant (docs/shell-file-tools.md, "The start").

Trusted only on the local filesystems listed in :data:`CTIME_KEPT` (each stamps ctime from the
kernel's clock at nanoseconds); on a network or FUSE filesystem (the server's clock, or none:
nfs, cifs, 9p, ``fuse.*``), one with coarser stamps (ext2/ext3, vfat: whole seconds, or a
creation time) or one that cannot be told, the start takes each file's ``lstat`` as before."""

from __future__ import annotations

import os
import re
import time

__all__ = ["CTIME_KEPT", "filesystem", "instant", "stamped_from"]

#: Local filesystems whose ctime the kernel keeps at nanoseconds from its own clock.
CTIME_KEPT = frozenset("ext4 xfs btrfs tmpfs overlay f2fs bcachefs zfs ramfs".split())
#: Bytes of ``/proc/self/mountinfo`` read at most (past it: not told, every file stat'd).
MOUNTINFO = 4 << 20
#: The clock the kernel stamps file times by: the coarse realtime clock (it lags the fine one
#: by up to a tick; since Linux 6.13 a stamp may be finer, never behind it),
#: ``CLOCK_REALTIME_COARSE`` (5 on Linux: Python 3.11 does not name it).
_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)
#: Half-milliseconds :func:`stamped_from` waits at most for the coarse clock (10 ticks at 100 Hz).
_TICKS = 200
_OCTAL = re.compile(r"\\([0-7]{3})")


def instant() -> int:
    """The start's instant: just past now on the fine realtime clock (ns). A change made before
    it is stamped before it (a stamp is the coarse clock's or a finer reading, never ahead of
    the fine clock); one made once :func:`stamped_from` returns it is stamped at or after it."""
    return time.time_ns() + 1


def stamped_from(since: int) -> int:
    """``since`` once the kernel's coarse clock, which stamps a change's ctime, has reached it
    (at most a tick: 4 ms at 250 Hz; the start's walk runs first, so mostly no wait at all);
    past a bound, or with no coarse clock, the coarse clock's reading (conservative: a change
    in the last tick before it then counts as after it)."""
    for _ in range(_TICKS):
        try:
            now = time.clock_gettime_ns(_COARSE)
        except OSError:
            return since
        if now >= since:
            return since
        time.sleep(0.0005)
    return now


def filesystem(root: str, mountinfo: str | None = None) -> str | None:
    """The type of the filesystem holding ``root``: the mount whose point is the longest that
    contains it (the last mounted there when several are), read from ``mountinfo`` (the text of
    ``/proc/self/mountinfo``, read when not given); ``None`` when it cannot be told."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", "rb") as f:
                raw = f.read(MOUNTINFO + 1)
        except OSError:
            return None
        if len(raw) > MOUNTINFO:
            return None
        mountinfo = raw.decode(errors="replace")
    path = os.path.realpath(root)
    best, kind = -1, None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split(" ")
        if not sep or len(fields) < 5 or not tail:
            continue
        point = _OCTAL.sub(lambda m: chr(int(m[1], 8)), fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best:
            best, kind = len(point), tail.split(" ", 1)[0]
    return kind
