"""Cassette files: append-only writing and forgiving reading. Which records go in (redacted,
delta-encoded, with the writer's parse of the response) is the recording pipeline's job
(:mod:`cassettes.recording.pipeline`); this module knows lines and records, not providers or
parses.

**Writing.** Each round trip becomes one JSON line, written with a single ``write`` on a file
opened ``O_APPEND`` as soon as the round trip completes (optionally ``fsync``-ed). A process killed
at any moment leaves at worst one torn last line; every earlier line is whole. Reopening a
cassette appends to it; a torn tail is sealed off with a newline first, never overwritten.

**Reading.** The header decides the format version (older → migrated, newer → refused with a clear
error). A torn last line is reported and skipped; a corrupt line in the middle is reported and
skipped; a record that cannot be rebuilt (e.g. its history base was lost) is reported and
skipped. Reading never raises for damaged content — only for a file that is not a looptap
cassette at all, is newer than this looptap, or cannot be opened.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ..errors import CassetteFormatError, CassetteIOError, NewerFormatError
from ..wire import Exchange
from ._codec import (
    check_header,
    dumps_record,
    header_record,
    loads_record,
    migrate,
    record_to_exchange,
)
from ._delta import HistoryDecoder
from ._gate import Redacted, sealed
from ._paths import open_append

__all__ = [
    "CassetteFile",
    "Problem",
    "being_written",
    "exchange_record",
    "is_cassette",
    "read_header",
]


@dataclass
class Problem:
    """Something wrong with one line of a cassette; the rest of the file still loads."""

    line: int
    kind: str  # "torn" | "corrupt" | "unreadable" | "unknown-record"
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class RecordFile:
    """A looptap cassette's records, decoded and held in memory: what :func:`read_records` gives
    (the storage layer's own reading, for appending to a cassette and for tests of the format).
    A run is read with :func:`cassettes.open_run`, which gives a :class:`~cassettes.Run`."""

    path: str
    header: dict[str, Any]
    exchanges: list[Exchange] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    format_version: int = 0


def private_open(path: str | Path, *, append: bool = False) -> BinaryIO:
    """``path`` opened for writing, created with mode 0600 (it holds recorded prompts, like the
    cassette): created with the mode, so there is no moment when others can read it, and an
    existing file is narrowed to 0600 before anything is written. Never through a link, and
    only a regular file of this user (storage/_paths.py): anything else raises
    :class:`~cassettes.storage._paths.UnsafePath`."""
    fd, _ = open_append(path, "the file")
    os.fchmod(fd, 0o600)
    if not append:
        os.ftruncate(fd, 0)  # (opened to append: every write lands at the end, from 0 on)
    return os.fdopen(fd, "ab" if append else "wb")


def write_private(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a file readable by its owner only (see :func:`private_open`)."""
    with private_open(path) as f:
        f.write(data)


def open_regular(path: str | Path, *, follow: bool = True) -> BinaryIO:
    """``path`` opened for reading, refused unless it is a regular file: a device, a FIFO or a
    socket (``/dev/zero``, ``/dev/stdin``) would never end. ``follow=False``: a link is refused
    too (``O_NOFOLLOW``). Raises :class:`CassetteIOError`. The one way looptap opens a file that
    someone else may have put in its place (a cassette, a kept analysis, a branch's header)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:  # without blocking: a FIFO opens at once, and is refused below
        f = os.fdopen(os.open(path, flags), "rb")
    except OSError as exc:
        err = CassetteIOError(f"cannot open {path}: {exc.strerror or exc}")
        err.errno = exc.errno  # (a caller may tell a missing file from the rest)
        raise err from None
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        f.close()
        raise CassetteIOError(
            f"{path}: not a regular file (a device, pipe or socket is never read)"
        )
    return f


def iter_lines(path: str | Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without newline, has_newline) for each line of the file."""
    f = open_regular(path)
    with f:
        for n, line in enumerate(f, start=1):
            if line.endswith(b"\n"):
                yield n, line[:-1].rstrip(b"\r"), True
            else:
                yield n, line, False


def read_header(path: str | Path, raw: bytes) -> tuple[dict[str, Any], int]:
    """The header on a cassette's first line and its format version; raises
    :class:`CassetteFormatError` when the line is not a looptap header (or a newer one)."""
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a BOM added by an editor
    try:
        header = loads_record(raw)
    except orjson.JSONDecodeError:
        raise CassetteFormatError(
            f"{path}: not a looptap cassette (the first line is not JSON)"
        ) from None
    try:
        version = check_header(header)
    except CassetteFormatError as exc:
        raise type(exc)(f"{path}: {exc}") from None
    return header, version


def is_cassette(path: str | Path) -> bool:
    """Whether ``path`` is a regular file that starts with a looptap cassette header (its first
    line, read without following a link and at most 1 MiB of it): a file looptap may replace or
    append to when a user names it again (storage/_paths.py)."""
    try:
        with open_regular(path, follow=False) as f:
            first = f.readline(1 << 20)
    except OSError:
        return False
    try:
        read_header(path, first.rstrip(b"\r\n"))
    except NewerFormatError:
        return True  # a newer looptap's: still looptap's
    except CassetteFormatError:
        return False
    return True


def exchange_record(
    path: str | Path, raw: bytes, n: int, version: int, *, torn: bool = False
) -> dict[str, Any] | Problem | None:
    """Line ``n`` (after the header) of the cassette at ``path`` as an exchange record migrated to
    this format, the :class:`Problem` it is skipped for, or ``None`` for a blank line or another
    kind of record (a note). ``torn``: the line has no newline, so JSON that does not parse is a
    torn last record. A second header raises :class:`CassetteFormatError`, naming ``path``."""
    if not raw.strip():
        return None
    try:
        rec = loads_record(raw)
    except orjson.JSONDecodeError as exc:
        if torn:
            return Problem(
                n,
                "torn",
                f"torn last record ({len(raw)} bytes, the writer was interrupted); skipped",
            )
        return Problem(n, "corrupt", f"corrupt record ({exc}); skipped")
    except CassetteFormatError as exc:
        return Problem(n, "corrupt", f"{exc}; skipped")
    if not isinstance(rec, dict):
        return Problem(n, "corrupt", "record is not a JSON object; skipped")
    try:
        rec = migrate(rec, version)
    except CassetteFormatError as exc:
        return Problem(n, "unreadable", f"{exc}; skipped")
    if rec.get("type") != "exchange":
        if rec.get("type") == "header":
            # Two cassettes joined (`cat a.jsonl b.jsonl > c.jsonl`): read as one, they would show
            # two runs' seqs twice over and pair turns across them. Refused whole, never skipped.
            raise CassetteFormatError(
                f"{path}: line {n} is a second cassette header: this file is several cassettes "
                "joined one after another (cat a.jsonl b.jsonl > c.jsonl?); looptap reads one run "
                "per file: keep the files apart and name each, or record further round trips into "
                "one cassette with -o +FILE"
            )
        if rec.get("type") not in ("note", "process", "files"):  # (process, files: cassettes/shell)
            return Problem(n, "unknown-record", f"unknown record type {rec.get('type')!r}; skipped")
        return None
    return rec


def read_records(path: str | Path) -> RecordFile:
    """Every record of the looptap cassette at ``path`` decoded into memory, with the damage found
    (lower level than :func:`cassettes.open_run`, which reads any format, as a stream)."""
    lines = iter_lines(path)
    first = next(lines, None)
    if first is None:
        raise CassetteFormatError(f"{path}: empty file, not a looptap cassette")
    header, version = read_header(path, first[1])
    cas = RecordFile(path=str(path), header=header, format_version=version)
    decoder = HistoryDecoder()
    for n, raw, has_nl in lines:
        rec = exchange_record(path, raw, n, version, torn=not has_nl)
        if rec is None:
            continue
        if isinstance(rec, Problem):
            cas.problems.append(rec)
            continue
        try:
            ex = record_to_exchange(rec, decoder)
        except CassetteFormatError as exc:
            cas.problems.append(Problem(n, "unreadable", f"{exc}; skipped"))
            continue
        cas.exchanges.append(ex)
    return cas


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def being_written(path: str | Path) -> bool:
    """Whether a looptap writer (:class:`CassetteFile`: a recorder, the pytest plugin) has ``path``
    open right now: it holds a shared ``flock`` from opening the file until closing it, released by
    the kernel if the writer dies. ``False`` for a missing file, a file nobody writes, or a file
    system without ``flock``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases the lock if it was taken
    return False


class CassetteFile:
    """A cassette file open for appending whole records: a new file gets its header, an existing
    one has a torn tail sealed off with a newline (never overwritten). Each record goes out in one
    ``write`` on a file opened ``O_APPEND`` (``fsync``-ed if asked); a record only partly written
    (a full disk) is taken back, so the file ends with whole records. Not thread-safe: the
    recording pipeline (:class:`cassettes.recording.pipeline.CassetteWriter`) serialises its
    appends."""

    def __init__(
        self, path: str | Path, meta: dict[str, Any] | None = None, fsync: bool = False
    ) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._torn = False
        # Created exclusively, or an existing regular file of this user opened without following
        # a link (a link, a device, a FIFO, a directory is refused): storage/_paths.py.
        self._fd, _ = open_append(self.path, "the cassette")
        # A shared lock held while the file is open for writing (released when it is closed or
        # the writer dies): :func:`being_written` tells a reader that a recording is in progress.
        try:
            fcntl.flock(self._fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            pass  # a file system without flock: readers then see it as not being written
        existing = os.fstat(self._fd).st_size > 0
        if existing:
            if not self._ends_with_newline():
                self._write(b"\n")  # seal a torn tail so it stays one skipped line
        else:
            self._write(dumps_record(header_record(meta, _now_iso())))

    def _ends_with_newline(self) -> bool:
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            return os.pread(fd, 1, os.fstat(fd).st_size - 1) == b"\n"
        finally:
            os.close(fd)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if self.fsync:
            os.fsync(self._fd)

    def append(self, data: Redacted) -> None:
        """Append one encoded record (a line) the redactor passed (:mod:`._gate`); on failure take
        back what reached the file."""
        line: bytes = sealed(data)
        if self._torn:
            line = b"\n" + line  # keep a partial line left by an earlier failure separate
        start = -1
        try:
            start = os.lseek(self._fd, 0, os.SEEK_END)
            self._write(line)
            self._torn = False
        except OSError as exc:
            # Take back whatever part of this record reached the file (a full disk, a file
            # size limit), so the cassette ends with whole records; if even that fails, the
            # partial line stays and the next record starts on a line of its own.
            self._torn = True
            if start >= 0:
                try:
                    os.ftruncate(self._fd, start)
                    self._torn = line.startswith(b"\n")
                except OSError:
                    pass
            raise CassetteIOError(f"cannot write to {self.path}: {exc.strerror or exc}") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> CassetteFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
