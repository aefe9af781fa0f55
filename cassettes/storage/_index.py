"""Reading a cassette file a piece at a time: its records, their offsets, and request bodies
rebuilt.

:func:`cassettes.storage._store.read_records` loads a whole run at once. A viewer of a 1 GB
cassette, or of one a recorder is still appending to, needs something else:

* :class:`RecordIndex` reads newly *completed* lines (a line the writer has not finished is left
  alone until its newline arrives; :meth:`RecordIndex.close_tail` reports it as torn once the file
  is known to be finished) and keeps the byte offset of every record, eight bytes each, so any
  record can be read again later without holding it.
* :class:`RequestBodies` rebuilds request bodies stored as history deltas against their base
  request, which is held in a small LRU cache of recent bodies; a base that fell out of the cache
  is rebuilt from disk through the offsets. Memory no longer grows with (turns × history length).

Damage is reported as :class:`~cassettes.storage._store.Problem` entries exactly as the batch reader
does; only a file that is not a looptap cassette (or is newer) raises. What drives the analysis over
these records, batch by batch, is :class:`cassettes.reading.RunReader`.
"""

from __future__ import annotations

import os
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .. import interrupts
from ..errors import CassetteFormatError, CassetteIOError
from ..wire import Exchange
from ._codec import loads_record, migrate, record_to_exchange
from ._delta import HistoryDecoder
from ._store import Problem, exchange_record, open_regular, read_header
from ._validation import check_exchange_record

__all__ = ["BLOCK", "BODY_CACHE", "SHELL_PLACES", "RecordIndex", "RequestBodies", "shell_line"]

#: How many bytes are read from the file at a time.
BLOCK = 4 * 1024 * 1024
#: Lines of the shell tracer's records (``process``, ``files``, its ``processes`` note:
#: cassettes/shell) whose place an index keeps; past that it keeps none, and a reader of them
#: goes through the file a line at a time.
SHELL_PLACES = 1 << 16
#: Request bodies kept for rebuilding delta-encoded requests (the most recently used ones).
BODY_CACHE = 128


def shell_line(raw: bytes) -> bool:
    """Whether a line that is no exchange may be one of the shell tracer's records (its type or
    note near its start, as the writer puts them; cassettes/shell reads and checks it)."""
    head = raw[:200]
    return b'"process' in head or b'"files"' in head


class RecordIndex:
    """The complete records of a cassette file and their byte offsets, read incrementally.

    ``poll`` reads what was appended since the last call and returns the new records as
    ``(line number, record)`` pairs; records that cannot be read become :attr:`problems`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.header: dict[str, Any] | None = None
        self.format_version = 0
        self.problems: list[Problem] = []
        #: Byte offset and length of every exchange record, in file order.
        self.offsets: array[int] = array("q")
        self.lengths: array[int] = array("q")
        #: seq of each exchange record (parallel to ``offsets``).
        self.seqs: array[int] = array("q")
        # seq → position, only for records whose seq is not their position (a recorder numbers
        # them 0, 1, 2…, so this stays empty and a million records cost 24 bytes each).
        self._pos_of_seq: dict[int, int] = {}
        self._pos = 0  # bytes consumed (always at a line start)
        self._line = 0  # lines consumed
        # bytes of a line whose newline has not arrived yet (grown in place: a long line costs
        # its length once, not once per block read)
        self._pending = bytearray()
        #: The last record, when :meth:`close_tail` found it complete without its newline.
        self.tail: list[tuple[int, dict[str, Any]]] = []
        #: A hash fed every byte :meth:`poll` reads, in order, a whole line at a time (a kept
        #: analysis names the bytes it is the analysis of: ``cassettes.reading._analysis_cache``);
        #: ``None``: not hashed.
        self.digest: Any = None
        #: Bytes fed to :attr:`digest`.
        self.hashed = 0
        #: Byte offset and length of each line that may be a shell tracer's record
        #: (:func:`shell_line`), in file order, so cassettes/shell reads those lines and not the
        #: file; ``None`` past :data:`SHELL_PLACES` of them.
        self.shell: list[tuple[int, int]] | None = []

    def snapshot(self) -> dict[str, Any]:
        """The index as read to its end, as plain data (JSON, and its three arrays), for a kept
        analysis (:meth:`restore` stands there again)."""
        return {
            "header": self.header, "format_version": self.format_version,
            "problems": [[p.line, p.kind, p.message] for p in self.problems],
            "offsets": self.offsets, "lengths": self.lengths, "seqs": self.seqs,
            "tail": self.tail, "pos_of_seq": list(self._pos_of_seq.items()),
            "pos": self._pos, "line": self._line, "shell": self.shell,
        }  # fmt: skip

    def restore(self, state: dict[str, Any]) -> None:
        """Stand where :meth:`snapshot` was taken."""
        self.header, self.format_version = state["header"], state["format_version"]
        self.problems = [Problem(line, kind, message) for line, kind, message in state["problems"]]
        self.offsets, self.lengths, self.seqs = state["offsets"], state["lengths"], state["seqs"]
        self.tail = [(n, record) for n, record in state["tail"]]
        self._pos_of_seq = {seq: pos for seq, pos in state["pos_of_seq"]}
        self._pos, self._line = state["pos"], state["line"]
        shell = state["shell"]
        self.shell = None if shell is None else [(at, n) for at, n in shell]

    @property
    def consumed(self) -> int:
        """Bytes of the file read so far (whole lines only)."""
        return self._pos

    @property
    def pending(self) -> int:
        """Bytes of an unfinished last line (a writer mid-record, or a torn tail)."""
        return len(self._pending)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return self._pos

    def __len__(self) -> int:
        return len(self.offsets)

    def position(self, seq: int) -> int | None:
        """Index in :attr:`offsets` of the record with this seq, if it was read (the last one
        when a seq repeats)."""
        i = self._pos_of_seq.get(seq)
        if i is not None:
            return i
        return seq if 0 <= seq < len(self.seqs) and self.seqs[seq] == seq else None

    def poll(self, max_bytes: int | None = None) -> list[tuple[int, dict[str, Any]]]:
        """New complete exchange records since the last call (at most about ``max_bytes`` read).

        Raises :class:`CassetteFormatError` when the first line is not a looptap header (or a newer
        one), and :class:`CassetteIOError` when the file cannot be read.
        """
        interrupts.check()  # a Ctrl-C swallowed during start-up stops a long read here
        f = open_regular(self.path)
        out: list[tuple[int, dict[str, Any]]] = []
        with f:
            size = os.fstat(f.fileno()).st_size
            if size < self._pos + len(self._pending):
                raise CassetteIOError(
                    f"{self.path} shrank from {self._pos + len(self._pending)} to {size} bytes "
                    "while it was being read (replaced or truncated by another program); open it "
                    "again"
                )
            f.seek(self._pos + len(self._pending))
            budget = max_bytes if max_bytes is not None else -1
            while budget != 0:
                block = f.read(BLOCK if budget < 0 else min(BLOCK, budget))
                if not block:
                    break
                if budget > 0:
                    budget = max(0, budget - len(block))
                data: bytes | bytearray = block
                scan = len(self._pending)  # no newline in what is pending
                if scan:
                    self._pending += block
                    data = self._pending
                start = 0
                while True:
                    nl = data.find(b"\n", max(start, scan))
                    if nl < 0:
                        break
                    self._line_done(bytes(data[start:nl]), self._pos, out)
                    self._pos += nl + 1 - start
                    start = nl + 1
                # whole lines only: the hash ends where reading did
                if self.digest is not None and start:
                    self.digest.update(data[:start])
                    self.hashed += start
                if start or data is block:
                    self._pending = bytearray(data[start:])
        return out

    def _line_done(self, raw: bytes, offset: int, out: list[tuple[int, dict[str, Any]]]) -> None:
        self._line += 1
        n = self._line
        raw = raw.rstrip(b"\r")
        if self.header is None:
            self._read_header(raw)
            return
        rec = exchange_record(self.path, raw, n, self.format_version)
        if rec is None:
            if self.shell is not None and shell_line(raw):
                self.shell.append((offset, len(raw)))
                if len(self.shell) > SHELL_PLACES:
                    self.shell = None
            return
        if isinstance(rec, Problem):
            self.problems.append(rec)
            return
        try:
            check_exchange_record(rec)
        except CassetteFormatError as exc:
            self.problems.append(Problem(n, "unreadable", f"{exc}; skipped"))
            return
        seq = rec.get("seq")
        if not isinstance(seq, int):
            seq = len(self.offsets)
            rec["seq"] = seq
        pos = len(self.offsets)
        if seq == pos:
            self._pos_of_seq.pop(seq, None)
        else:
            self._pos_of_seq[seq] = pos
        self.offsets.append(offset)
        self.lengths.append(len(raw))
        self.seqs.append(seq)
        out.append((n, rec))

    def _read_header(self, raw: bytes) -> None:
        self.header, self.format_version = read_header(self.path, raw)

    def close_tail(self) -> Problem | None:
        """The file is finished: an unfinished last line is a torn record (reported, skipped).

        Raises :class:`CassetteFormatError` when the file held no header at all."""
        pending = bytes(self._pending)  # (one copy of the line at a time: the other let go)
        self._pending = bytearray()
        if self.digest is not None and pending:
            self.digest.update(pending)
            self.hashed += len(pending)
        if self.header is None:
            head = pending
            if not head.strip():
                raise CassetteFormatError(f"{self.path}: empty file, not a looptap cassette")
            self._pos += len(head)
            self._read_header(head)
            return None
        if not pending.strip():
            self._pending = bytearray(pending)  # blank: kept, as a writer may go on after it
            return None
        try:  # a complete record that only lacks its newline (a file edited or cut by hand) is kept
            complete = isinstance(loads_record(pending.rstrip(b"\r")), dict)
        except (orjson.JSONDecodeError, CassetteFormatError):
            complete = False
        if complete:
            out: list[tuple[int, dict[str, Any]]] = []
            self._line_done(pending, self._pos, out)
            self._pos += len(pending)
            self.tail = out
            return None
        p = Problem(
            self._line + 1,
            "torn",
            f"torn last record ({len(pending)} bytes, the writer was interrupted); skipped",
        )
        self.problems.append(p)
        self._pos += len(pending)
        self._line += 1
        return p

    def read_record(self, seq: int) -> dict[str, Any]:
        """The record with this seq, read again from disk (it must have been polled)."""
        i = self.position(seq)
        if i is None:
            raise KeyError(seq)
        return self.record_at(i)

    def record_at(
        self, pos: int, *, changed: str = "", fh: BinaryIO | None = None
    ) -> dict[str, Any]:
        """The record at position ``pos`` in reading order, read again from disk (only from a
        regular file: one swapped for a FIFO meanwhile is an error, not a wait; ``changed``: said
        after the error if it is no object; ``fh``: read through this handle on the file, kept
        open by the caller)."""
        seq = self.seqs[pos]
        if fh is not None:
            fh.seek(self.offsets[pos])
            raw = fh.read(self.lengths[pos])
        else:
            with open_regular(self.path) as f:
                f.seek(self.offsets[pos])
                raw = f.read(self.lengths[pos])
        rec = loads_record(raw.rstrip(b"\r").removeprefix(b"\xef\xbb\xbf"))
        if not isinstance(rec, dict):
            raise CassetteFormatError(f"record {seq} is not a JSON object{changed}")
        rec = migrate(rec, self.format_version)
        rec.setdefault("seq", seq)
        return rec


def _delta_base(rec: dict[str, Any]) -> int | None:
    body = (rec.get("request") or {}).get("body")
    if isinstance(body, dict) and isinstance(body.get("delta"), dict):
        base = body["delta"].get("base")
        return base if isinstance(base, int) else None
    return None


class RequestBodies:
    """Rebuilds request bodies, delta-encoded or not, keeping only recent ones in memory."""

    def __init__(self, index: RecordIndex, capacity: int = BODY_CACHE) -> None:
        self.index = index
        self.capacity = capacity
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._broken: set[int] = set()  # records whose body could not be rebuilt

    def _remember(self, seq: int, body: Any) -> None:
        self._cache[seq] = body
        self._cache.move_to_end(seq)
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)

    def _base_body(self, seq: int) -> Any:
        """The request body of ``seq``, from the cache or rebuilt from disk (iteratively)."""
        chain: list[dict[str, Any]] = []
        cur: int | None = seq
        while cur is not None and cur not in self._cache:
            if cur in self._broken:  # known not to rebuild: do not walk its chain again (quadratic)
                raise CassetteFormatError(
                    f"history delta refers to round trip {cur}, which could not be rebuilt"
                )
            try:
                rec = self.index.read_record(cur)
            except KeyError:
                raise CassetteFormatError(
                    f"history delta refers to round trip {cur}, which is missing or unreadable"
                ) from None
            chain.append(rec)
            cur = _delta_base(rec)
            if len(chain) > len(self.index) + 1:
                raise CassetteFormatError(f"history deltas of round trip {seq} form a cycle")
        body = self._cache[cur] if cur is not None else None
        for rec in reversed(chain):
            try:
                body = self._decode(rec, cur, body).request_json()
            except CassetteFormatError:
                self._broken.add(rec["seq"])
                raise
            cur = rec["seq"]
        self._cache.move_to_end(seq)
        return body

    def _decode(
        self, rec: dict[str, Any], base_seq: int | None, base_body: Any, checked: bool = False
    ) -> Exchange:
        decoder = HistoryDecoder()
        if base_seq is not None:
            decoder.remember(base_seq, base_body)
        ex = record_to_exchange(rec, decoder, checked=checked)
        if isinstance(ex.seq, int):
            self._remember(ex.seq, ex.request_json())
        return ex

    def rebuild(self, rec: dict[str, Any], checked: bool = False) -> Exchange:
        """The exchange of a record; raises :class:`CassetteFormatError` when it cannot be rebuilt
        (``checked``: the index's poll already checked the record)."""
        base = _delta_base(rec)
        try:
            return self._decode(
                rec, base, self._base_body(base) if base is not None else None, checked
            )
        except CassetteFormatError:
            if isinstance(rec.get("seq"), int):
                self._broken.add(rec["seq"])
            raise
