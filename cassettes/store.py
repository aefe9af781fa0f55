"""Cassette files: append-only writing and forgiving reading.

**Writing.** Each round trip becomes one JSON line, written with a single ``write`` on a file
opened ``O_APPEND`` as soon as the round trip completes (optionally ``fsync``-ed). A process killed
at any moment leaves at worst one torn last line; every earlier line is whole. Redaction runs
before encoding, so a secret never reaches the file. Reopening a cassette appends to it; a torn
tail is sealed off with a newline first, never overwritten.

**Reading.** The header decides the format version (older → migrated, newer → refused with a clear
error). A torn last line is reported and skipped; a corrupt line in the middle is reported and
skipped; a record that cannot be rebuilt (e.g. its history base was lost) is reported and
skipped. Reading never raises for damaged content — only for a file that is not a looptap
cassette at all, is newer than this looptap, or cannot be opened.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import orjson

from cassettes import providers
from cassettes.codec import (
    HistoryDecoder,
    HistoryEncoder,
    check_header,
    depth_safe_record,
    dumps_record,
    exchange_to_record,
    header_record,
    loads_record,
    migrate,
    record_to_exchange,
)
from cassettes.errors import CassetteFormatError, CassetteIOError
from cassettes.exchange import Exchange
from cassettes.redact import Redactor
from cassettes.roundtrip import RoundTrip, parse_all, parse_exchange

__all__ = ["Cassette", "CassetteWriter", "Problem", "iter_lines", "read_cassette"]

#: How many recent round trips the writer keeps as bases for incremental parsing.
_RECENT = 64


@dataclass
class Problem:
    """Something wrong with one line of a cassette; the rest of the file still loads."""

    line: int
    kind: str  # "torn" | "corrupt" | "unreadable" | "unknown-record"
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class Cassette:
    path: str
    header: dict[str, Any]
    exchanges: list[Exchange] = field(default_factory=list)
    #: The derived views stored with each exchange (``None`` where absent).
    stored_views: list[dict[str, Any] | None] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    format_version: int = 0

    def roundtrips(self) -> list[RoundTrip]:
        """The derived view of every exchange, recomputed from the raw (incrementally: a request
        that extends an earlier one is parsed for what it appended)."""
        return parse_all(self.exchanges)


def private_open(path: str | Path, *, append: bool = False) -> BinaryIO:
    """``path`` opened for writing, created with mode 0600 (it holds recorded prompts, like the
    cassette): created with the mode, so there is no moment when others can read it, and an
    existing file is narrowed to 0600 before anything is written."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        pass
    return os.fdopen(fd, "ab" if append else "wb")


def write_private(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a file readable by its owner only (see :func:`private_open`)."""
    with private_open(path) as f:
        f.write(data)


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for reading, refused unless it is a regular file: a device, a FIFO or a
    socket (``/dev/zero``, ``/dev/stdin``) would never end. Raises :class:`CassetteIOError`."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise CassetteIOError(f"cannot open {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        f.close()
        raise CassetteIOError(f"{path}: not a regular file (a device, pipe or socket is never read)")
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


def read_cassette(path: str | Path) -> Cassette:
    lines = iter_lines(path)
    first = next(lines, None)
    if first is None:
        raise CassetteFormatError(f"{path}: empty file, not a looptap cassette")
    _, head, _ = first
    head = head.removeprefix(b"\xef\xbb\xbf")  # a BOM added by an editor
    try:
        header = loads_record(head)
    except orjson.JSONDecodeError:
        raise CassetteFormatError(f"{path}: not a looptap cassette (the first line is not JSON)") from None
    try:
        version = check_header(header)
    except CassetteFormatError as exc:
        raise type(exc)(f"{path}: {exc}") from None
    cas = Cassette(path=str(path), header=header, format_version=version)
    decoder = HistoryDecoder()
    for n, raw, has_nl in lines:
        if not raw.strip():
            continue
        try:
            rec = loads_record(raw)
        except orjson.JSONDecodeError as exc:
            if not has_nl:
                cas.problems.append(Problem(n, "torn", f"torn last record ({len(raw)} bytes, the writer was interrupted); skipped"))
            else:
                cas.problems.append(Problem(n, "corrupt", f"corrupt record ({exc}); skipped"))
            continue
        except CassetteFormatError as exc:
            cas.problems.append(Problem(n, "corrupt", f"{exc}; skipped"))
            continue
        if not isinstance(rec, dict):
            cas.problems.append(Problem(n, "corrupt", "record is not a JSON object; skipped"))
            continue
        try:
            rec = migrate(rec, version)
        except CassetteFormatError as exc:
            cas.problems.append(Problem(n, "unreadable", f"{exc}; skipped"))
            continue
        if rec.get("type") != "exchange":
            if rec.get("type") not in ("note", "header"):
                cas.problems.append(Problem(n, "unknown-record", f"unknown record type {rec.get('type')!r}; skipped"))
            continue
        try:
            ex = record_to_exchange(rec, decoder)
        except CassetteFormatError as exc:
            cas.problems.append(Problem(n, "unreadable", f"{exc}; skipped"))
            continue
        cas.exchanges.append(ex)
        derived = rec.get("derived")
        cas.stored_views.append(derived if isinstance(derived, dict) else None)
    return cas


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class CassetteWriter:
    """Appends round trips to a cassette file. Thread-safe; one line per ``append``."""

    def __init__(
        self,
        path: str | Path,
        meta: dict[str, Any] | None = None,
        redactor: Redactor | None = None,
        fsync: bool = False,
    ) -> None:
        from cassettes.view import roundtrip_json

        self._view = roundtrip_json
        self.path = Path(path)
        self.redactor = redactor or Redactor()
        self.fsync = fsync
        self._lock = threading.Lock()
        self._encoder = HistoryEncoder()
        self._recent: dict[int, RoundTrip] = {}  # the latest round trips, bases for incremental parsing
        self._seq = 0
        self._torn = False
        existing = self.path.exists() and self.path.stat().st_size > 0
        if existing:
            self._resume()
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise CassetteIOError(f"cannot open {self.path} for writing: {exc.strerror or exc}") from None
        if existing:
            if not self._ends_with_newline():
                self._write(b"\n")  # seal a torn tail so it stays one skipped line
        else:
            self._write(dumps_record(header_record(meta, _now_iso())))

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def _resume(self) -> None:
        """Rebuild the history-delta state from an existing cassette, to append to it."""
        cas = read_cassette(self.path)
        for ex in cas.exchanges:
            body = ex.request_json()
            if isinstance(body, dict) and ex.seq is not None and not ex.request_json_cut:
                self._encoder.encode(ex.seq, body, self._history_key(ex, body))
            self._seq = max(self._seq, (ex.seq or 0) + 1)
        self._seq = max(self._seq, len(cas.exchanges) + len(cas.problems))

    @staticmethod
    def _history_key(ex: Exchange, body: dict[str, Any]) -> str | None:
        try:
            adapter = providers.detect(ex.method, urlsplit(ex.url), body)
        except ValueError:
            adapter = None
        return adapter.history_key(body) if adapter is not None else None

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if self.fsync:
            os.fsync(self._fd)

    def _encode_request(self, ex: Exchange, seq: int) -> tuple[dict[str, Any] | None, RoundTrip | None]:
        """Encode the request body (history delta when it extends an earlier request) and return
        that earlier round trip when it is at hand, so only the appended part gets parsed."""
        body = ex.request_json()
        if not isinstance(body, dict) or ex.request_json_cut:
            return None, None  # (a body cut at the walk bound is stored raw: exchange_to_record)
        form = self._encoder.encode(seq, body, self._history_key(ex, body))
        delta = form.get("delta")
        if delta is None:
            return form, None
        ex.history_delta = {"base": delta["base"], "keep": delta["keep"], "appended": len(delta["append"])}
        if delta.get("rewritten"):
            ex.history_delta["rewritten"] = True
        return form, self._recent.get(delta["base"])

    def append(self, ex: Exchange) -> RoundTrip:
        """Redact, analyse and write one round trip; returns its derived view."""
        with self._lock:
            seq = self._seq
            self._seq += 1
            clean = self.redactor.exchange(ex)
            clean.seq = seq
            try:
                form, base = self._encode_request(clean, seq)
            except orjson.JSONEncodeError:
                # History items nested deeper than orjson writes cannot be hashed for the delta
                # encoding: the body is stored whole (raw, see depth_safe_record) instead.
                form, base = None, None
            rt = parse_exchange(clean, base)
            # A base for a later request needs only the request side: keeping the response too
            # held up to _RECENT whole responses (a 100 MB stream each) in the writer's memory.
            self._recent[seq] = rt.model_copy(update={"response": None}) if rt.response is not None else rt
            while len(self._recent) > _RECENT:
                self._recent.pop(next(iter(self._recent)))
            rec = exchange_to_record(clean, seq, derived=self._view(rt, clean), request_form=form)
            try:
                data = dumps_record(rec)
            except orjson.JSONEncodeError:
                data = dumps_record(depth_safe_record(rec, clean))
            if self._torn:
                data = b"\n" + data  # keep a partial line left by an earlier failure separate
            start = -1
            try:
                start = os.lseek(self._fd, 0, os.SEEK_END)
                self._write(data)
                self._torn = False
            except OSError as exc:
                # Take back whatever part of this record reached the file (a full disk, a file
                # size limit), so the cassette ends with whole records; if even that fails, the
                # partial line stays and the next record starts on a line of its own.
                self._torn = True
                if start >= 0:
                    try:
                        os.ftruncate(self._fd, start)
                        self._torn = data.startswith(b"\n")
                    except OSError:
                        pass
                raise CassetteIOError(f"cannot write to {self.path}: {exc.strerror or exc}") from None
            return rt

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
