"""The one gate (docs/redaction.md, "One gate"): what looptap writes of what it saw — a cassette's
lines, a traced process, a working tree's contents kept, the agent's output a ``why`` branch
keeps — is :class:`Redacted`, bytes only the redactor makes (``Redactor.seal`` in
:mod:`cassettes.recording`), and the writers of those files take nothing else: a plain ``bytes``
is refused with a ``TypeError`` before anything is written.

tests/test_write_gate.py walks the product's source: ``Redacted(…)`` is made only in
``cassettes/recording/``, and a new place that opens a file to write fails the test unless it
writes through these writers or is listed there with why what it writes is no recording of its
own (a CA key, a lock, an export made from a cassette that was sealed when written).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["LINE", "Redacted", "copy_sealed", "sealed", "write_sealed"]

#: The longest piece of a stream :func:`copy_sealed` reads as one line.
LINE = 1 << 20


class Redacted(bytes):
    """Bytes the redactor passed (made only by ``cassettes.recording``)."""

    __slots__ = ()


def sealed(data: object) -> Redacted:
    """``data`` if the redactor passed it; else a ``TypeError`` (a writer's first line)."""
    if not isinstance(data, Redacted):
        raise TypeError(
            f"looptap writes only what its redactor passed (Redacted), not {type(data).__name__}"
        )
    return data


def write_sealed(path: str | Path, data: Redacted) -> bool:
    """Write ``data`` to a new file at ``path`` (mode 0600, never through a link, never over a
    file): ``False`` when one is there already. Raises ``OSError``."""
    data = sealed(data)
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return True


def copy_sealed(src: BinaryIO, dst: BinaryIO, seal: Callable[[bytes], Redacted]) -> None:
    """Copy ``src`` (a process's output) to ``dst`` a line at a time (:data:`LINE` bytes at
    most), each as ``seal`` passes it, until ``src`` ends; a failure to write stops the copy but
    never the reading, so the process is never blocked on a full pipe. A line longer than that
    is sealed a piece at a time, each piece cut before the run of a key's characters it ends in
    (carried to the next piece): a key the cut fell in is sealed whole, never as two pieces no
    rule knows."""
    writing = True
    held = b""
    for piece in iter(lambda: src.readline(LINE), b""):
        line, held = held + piece, b""
        if len(piece) == LINE and not piece.endswith(b"\n"):
            run = _RUN.search(line, max(0, len(line) - _RUN_MAX))
            if run is not None and run.start() > max(0, len(line) - _RUN_MAX):
                line, held = line[: run.start()], line[run.start() :]
        if writing and line:
            writing = _write(dst, seal(line))
    if writing and held:
        _write(dst, seal(held))


#: A run of a key's characters at the end of a piece, and the longest one carried.
_RUN = re.compile(rb"[A-Za-z0-9_+/=.~-]+\Z")
_RUN_MAX = 4096


def _write(dst: BinaryIO, data: Redacted) -> bool:
    """``data`` written and flushed; ``False`` when it could not be (the copy writes no more)."""
    try:
        dst.write(sealed(data))
        dst.flush()
    except OSError:
        return False
    return True
