"""A looptap cassette's round trips read a piece at a time: the one reader of a cassette's records
that every reader of a run is built on.

:class:`RecordSource` owns the offset index (:class:`~cassettes.storage._index.RecordIndex`) and the
request bodies rebuilt from history deltas (:class:`~cassettes.storage._index.RequestBodies`): it
reads the records a file gained (:meth:`RecordSource.poll`), rebuilds their exchanges and skips
(and reports) those that cannot be rebuilt (:meth:`RecordSource.take`), and reads any of them again
from disk by position (:meth:`RecordSource.exchange_at`). Memory holds a few integers per record
and a bounded cache of bodies, never the run.

Built on it: the reader behind :class:`cassettes.Run` for a looptap cassette
(:class:`~cassettes.reading.RunReader`, and its passes over the run again), the replay
server's recordings (:mod:`cassettes.matching`) and the pytest plugin's session
recording (:mod:`cassettes.replay.testing.recorder`). A second thread reads through a
:meth:`RecordSource.fork`: the same index, a cache of bodies of its own. The whole-file decoding for
appending and for tests of the format stays :func:`~cassettes.storage._store.read_records` (one
history decoder for the file, with the file-wide bound on what deltas rebuild).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import CassetteFormatError
from ..wire import Exchange
from ._index import BODY_CACHE, RecordIndex, RequestBodies
from ._store import Problem, open_regular

__all__ = ["RecordSource"]

#: Records as the index reads them: (line number, record).
Polled = list[tuple[int, dict[str, Any]]]
#: Said after the error when the bytes at a record's offset are no record any more.
_CHANGED = " (the file changed while it was read)"


class RecordSource:
    """The exchange records of a looptap cassette, by position in the file (read so far).

    A record that cannot be rebuilt (its history base lost) is reported in :attr:`problems` as
    ``unreadable`` and skipped: :attr:`skipped` holds its position, and :meth:`positions`,
    ``len()`` and :meth:`nth` count only the readable ones. ``keep_open``: re-reads go through one
    file handle kept open (a pass over the whole run), else the file is opened for each.
    """

    def __init__(
        self,
        path: str | Path,
        body_cache: int = BODY_CACHE,
        *,
        index: RecordIndex | None = None,
        skipped: set[int] | None = None,
        keep_open: bool = False,
    ) -> None:
        self.index = index if index is not None else RecordIndex(path)
        self.bodies = RequestBodies(self.index, body_cache)
        #: Positions of the records that could not be rebuilt (shared with every fork).
        self.skipped: set[int] = skipped if skipped is not None else set()
        self._keep_open = keep_open
        self._fh: BinaryIO | None = None
        # Re-reads may come from a thread other than the one reading ahead (a server's, a viewer's).
        self._lock = threading.Lock()

    def fork(self, body_cache: int = BODY_CACHE, *, keep_open: bool = False) -> RecordSource:
        """The same records for another reader (a viewer's thread, a pass over the run again):
        the same index and skipped records, a cache of bodies (and file handle) of its own."""
        return RecordSource(
            self.index.path, body_cache, index=self.index, skipped=self.skipped, keep_open=keep_open
        )

    @property
    def path(self) -> Path:
        return self.index.path

    @property
    def problems(self) -> list[Problem]:
        """Damage found so far (torn, corrupt, unreadable …): the index's and :meth:`take`'s."""
        return self.index.problems

    # -- reading ahead -------------------------------------------------------------------------
    def poll(self, max_bytes: int | None = None) -> Polled:
        """The complete records the file gained (see :meth:`RecordIndex.poll`)."""
        return self.index.poll(max_bytes)

    def close_tail(self) -> Polled:
        """The file is finished: a torn last record is reported; a complete one lacking only its
        newline is returned, to be taken like the others."""
        self.index.close_tail()
        return self.index.tail

    def rebuild(self, rec: dict[str, Any], checked: bool = False) -> Exchange:
        """The exchange of a record (:class:`CassetteFormatError` when it cannot be rebuilt)."""
        return self.bodies.rebuild(rec, checked=checked)

    def take(self, recs: Polled, first: int) -> Iterator[tuple[int, Exchange]]:
        """``(position, exchange)`` of each record :meth:`poll` just gave (``first``: the position
        of the first one); one that cannot be rebuilt is a problem (``unreadable``) and skipped."""
        for k, (line, rec) in enumerate(recs):
            try:
                ex = self.bodies.rebuild(rec, checked=True)
            except CassetteFormatError as exc:
                self.index.problems.append(Problem(line, "unreadable", f"{exc}; skipped"))
                self.skipped.add(first + k)
                continue
            yield first + k, ex

    # -- the records read so far, by position --------------------------------------------------
    def __len__(self) -> int:
        """Readable records read so far."""
        return len(self.index) - len(self.skipped)

    def positions(self) -> Iterator[int]:
        """The positions of the readable records, in file order."""
        skipped = self.skipped
        return (i for i in range(len(self.index)) if i not in skipped)

    def nth(self, k: int) -> int:
        """The position of the ``k``-th readable record (from 0)."""
        pos = k
        for s in sorted(self.skipped):
            if s > pos:
                break
            pos += 1
        return pos

    def exchange_at(self, pos: int, changed: str = _CHANGED) -> Exchange:
        """The exchange at position ``pos``, read again from disk (``changed``: said after the error
        when the bytes there are no record any more)."""
        with self._lock:
            if not self._keep_open:
                rec = self.index.record_at(pos, changed=changed)
            else:
                if self._fh is None:
                    self._fh = open_regular(self.index.path)
                rec = self.index.record_at(pos, fh=self._fh, changed=changed)
            return self.bodies.rebuild(rec)

    def exchange_by_seq(self, seq: int) -> Exchange:
        """The exchange with this seq (the last one when a seq repeats), read again from disk;
        ``KeyError`` when none was read."""
        with self._lock:
            return self.bodies.rebuild(self.index.read_record(seq))

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
