"""A command's progress line while it reads a large run (``looptap show``, ``textconv``,
``export``, ``diff``): a 1 GB run takes minutes to read and analyse, and a command that prints
nothing for that long looks hung.

The line goes to stderr, only when stderr is a terminal (and not ``TERM=dumb``) and stdout is not a
pipe (a pager such as ``less`` would share the terminal with it). It appears after :data:`AFTER`
seconds (a run read faster shows none), is rewritten in place at most every :data:`EVERY` seconds,
fits the terminal's width, and is erased once the run is read, so what the command prints next
starts on a clean line. It is written beneath the CLI's guard of stderr (its erase and carriage
return are controls), so the one field that is not looptap's own, the file's name, is shown with its
controls made visible first (``untrusted.clean_line``).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from ..hints import count
from ..untrusted import SafeTextStream, clean_line

#: Seconds before the line first appears, and between two of its updates.
AFTER = 1.0
EVERY = 0.25

_ERASE = "\r\x1b[K"


class ReadingLine:
    """The progress callback of ``open_run(path, progress=...)``: one line, rewritten in place."""

    def __init__(self, name: str, err: IO[str]) -> None:
        self._name = clean_line(name)
        self._err = err
        self._next = time.monotonic() + AFTER
        #: Whether the line is on the terminal now (written and not yet erased).
        self.shown = False

    def __call__(self, read: int, size: int, records: int) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + EVERY
        share = (
            f"{min(read * 100 // size, 100)} % ({_mb(read)} of {_mb(size)})"
            if size > 0
            else _mb(read)
        )
        text = f"looptap: reading {self._name}: {share}, {count(records, 'round trip')}"
        self._err.write(_ERASE + _fit(text, _columns(self._err) - 1))
        self._err.flush()
        self.shown = True

    def erase(self) -> None:
        if self.shown:
            self._err.write(_ERASE)
            self._err.flush()
            self.shown = False


def _columns(err: IO[str]) -> int:
    """The terminal's width, from stderr's own terminal (stdout may be a file)."""
    try:
        return os.get_terminal_size(err.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size().columns


def _mb(n: int) -> str:
    """Bytes in decimal units (1 MB = 10^6 bytes), as ``ls -lh --si`` and the docs' figures."""
    if n < 1_000_000:
        return f"{n / 1e3:,.0f} kB"
    return f"{n / 1e6:,.0f} MB" if n >= 10_000_000 else f"{n / 1e6:,.1f} MB"


def _fit(text: str, columns: int) -> str:
    """``text`` cut to ``columns`` terminal cells (a wide character takes two), ending in ``…``
    when cut: a line that wrapped could not be erased."""
    if len(text) <= columns and text.isascii():
        return text
    import unicodedata

    out: list[str] = []
    used = 0
    for ch in text:
        w = 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        if used + w > columns - 1:
            return "".join(out) + "…"
        out.append(ch)
        used += w
    return text


def wanted(err: IO[str], out: IO[str]) -> bool:
    """Whether a progress line may be shown: stderr is a terminal that takes the erase sequence
    (not ``TERM=dumb``: Emacs' shell, some log collectors) and stdout is not a pipe."""
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return err.isatty() and not stat.S_ISFIFO(os.fstat(out.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # a stream without a file (a test's capture)
        return False


@contextmanager
def reading_line(
    name: str, err: IO[str] | None = None, out: IO[str] | None = None
) -> Iterator[ReadingLine | None]:
    """A :class:`ReadingLine` for reading the run called ``name`` (``None`` where no line may be
    shown: see :func:`wanted`), erased when the block ends, an error included."""
    err = sys.stderr if err is None else err
    out = sys.stdout if out is None else out
    if not wanted(err, out):
        yield None
        return
    if isinstance(err, SafeTextStream):  # the CLI's guard would show the line's controls as text
        err = err.unguarded
    line = ReadingLine(name, err)
    try:
        yield line
    finally:
        line.erase()
