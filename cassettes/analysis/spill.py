"""Tables that keep their recent entries in memory and the rest in a temporary file.

The analysis of a run keeps a few small records per conversation and per turn for as long as a
later turn may continue it (the threader's history hashes, the conversation's record, the checks'
memory of a quiet conversation). A run of a million one-turn conversations would hold a million
of each; a :class:`SpillMap` holds at most ``keep`` of them in memory (the most recently used)
and writes the others, as plain rows (JSON of :mod:`._plain_values`, never a pickle: reading a
row back runs no code of its choosing), to SQLite's own temporary database
(``sqlite3.connect("")``: a file SQLite makes in ``$SQLITE_TMPDIR``, else ``$TMPDIR``, else
``/var/tmp``, mode 0600, and unlinks at once, so that it is gone when the connection closes and
when the process is killed outright: nothing to clean up after a SIGKILL). Nothing is written for
a run small enough to fit: the database is opened on the first spill.

What a table holds is what the analysis derives from the cassette (hashes, ids, counts, titles):
nothing the cassette does not already hold. An entry read back is a copy; the table writes an
entry back when it evicts it, so a caller may change an entry it got — but must not keep it
past the next :meth:`SpillMap.trim` (the analysers trim between round trips, when they hold no
entry). ``evictable`` keeps an entry in memory while something else refers to it, and an entry
JSON cannot hold (a value of a type the :class:`Spill` was not told of, a lone surrogate) stays in
memory too.
"""

from __future__ import annotations

import heapq
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import orjson

from ._plain_values import dump, load

if TYPE_CHECKING:
    import sqlite3

__all__ = ["KEEP", "Spill", "SpillMap"]

K = TypeVar("K", int, str)
V = TypeVar("V")
T = TypeVar("T")

#: Entries a table keeps in memory before it spills the least recently used ones
#: (``LOOPTAP_SPILL_KEEP`` sets another, e.g. a small one to test the spilled path on a small run).
#: An analysis's tables together hold a few KB per conversation kept (its turn records, history
#: hashes, checks' state): 4,096 of them (up to half as many again between trims) are ~40 MB;
#: 20,000 were ~120 MB, all of a 100k run's growth over a 10k one. More conversations active at
#: once than this is rare; past it, the least recently used are read back from disk.
_KEEP = os.environ.get("LOOPTAP_SPILL_KEEP", "").strip()
KEEP = int(_KEEP) if _KEEP.isdigit() and int(_KEEP) > 0 else 4096

#: A table's bloom filter of the keys on disk: 16 bits or more per key (under 0.5 % of false
#: positives with three bits a key), made four times too large when it is made again, from 8 KB to
#: 2 MB (a few % at a few million keys). Made 2 MB at once, it was 2 MB resident per table that
#: spilled at all (every bit is touched): 4 MB of a 100 MB run's first ``show``.
_BLOOM_MIN, _BLOOM_MAX = 1 << 16, 1 << 24
#: Rows written at a time: a row of JSON is longer than a pickle was, and a trim's half of ``keep``
#: held at once raised a 100 MB run's peak by 10 MB (114 MB, against 103 MB with this).
_BATCH = 256


#: What :meth:`SpillMap.get` gives for a key not held, to :meth:`SpillMap.__getitem__`.
_ABSENT: Any = object()


class Spill:
    """One temporary SQLite database shared by the tables of one analysis (opened on first use);
    ``classes``: the classes their values may hold (:mod:`._plain_values`), by name; ``cache``:
    KiB of SQLite's page cache (memory of this process: a file of blocks written once and read
    back through a cache of its own needs little)."""

    def __init__(self, classes: Mapping[str, type] | None = None, cache: int = 2000) -> None:
        self.classes: Mapping[str, type] = classes or {}
        self._cache = cache
        self._db: sqlite3.Connection | None = None
        self._tables = 0
        self._made: set[str] = set()  # the tables made in the database

    def table(self) -> str:
        self._tables += 1
        return f"t{self._tables}"

    def db(self, table: str) -> sqlite3.Connection:
        if self._db is None:
            import sqlite3

            self._db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=OFF")
            self._db.execute("PRAGMA synchronous=OFF")
            self._db.execute("PRAGMA temp_store=FILE")
            self._db.execute(f"PRAGMA cache_size=-{int(self._cache)}")
        if table not in self._made:
            self._db.execute(f"CREATE TABLE {table} (k PRIMARY KEY, v BLOB) WITHOUT ROWID")
            self._made.add(table)
        return self._db

    def write(self, table: str, rows: Iterable[tuple[Any, bytes]]) -> None:
        """Rows (key, value) to ``table``, in one transaction: in autocommit mode every row was a
        commit of its own (ten times the time for a batch of 10,000, the analysis's largest single
        cost at 1 GB)."""
        import sqlite3

        try:  # no room on disk (for the table, or its rows): said as an OSError
            db = self.db(table)
            db.execute("BEGIN")
            try:
                db.executemany(f"INSERT INTO {table} (k, v) VALUES (?, ?)", rows)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise OSError(f"the temporary store of this analysis: {exc}") from exc

    def value(self, table: str, key: Any) -> bytes | None:
        """The value of ``key`` in ``table`` (``None``: none)."""
        row = self.db(table).execute(f"SELECT v FROM {table} WHERE k = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def rows(self, table: str) -> Iterator[tuple[Any, bytes]]:
        """Every row of ``table``, in the order of its keys."""
        return iter(self.db(table).execute(f"SELECT k, v FROM {table} ORDER BY k"))

    @property
    def used(self) -> bool:
        """Whether anything was spilled to disk."""
        return self._db is not None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()  # (and SQLite's file with it)
        self._db = None
        self._made.clear()


class SpillMap(MutableMapping[K, V], Generic[K, V]):
    """A mapping of int or str keys holding its ``keep`` most recently used entries in memory and
    the others in ``spill`` (see the module docstring). Iteration order is not insertion order."""

    def __init__(
        self,
        spill: Spill | None = None,
        keep: int = KEEP,
        evictable: Callable[[K, V], bool] | None = None,
    ) -> None:
        self._spill = spill if spill is not None else Spill()
        self._table = self._spill.table()
        self._hot: dict[K, V] = {}
        self._keep = keep
        self._evictable: Callable[[K, V], bool] | None = evictable
        self._cold = 0  # entries on disk
        self._limit = keep  # trim writes nothing until more entries than this are in memory
        self._bloom: bytearray | None = None  # keys spilled (made on the first spill)
        self._mask = 0  # the bloom filter's bits, less one

    # -- the bloom filter: most lookups of a key never spilled do not reach the file -------------
    def _bits(self, key: K) -> tuple[int, int, int]:
        h, mask = hash(key) & 0xFFFFFFFFFFFFFFFF, self._mask
        return h & mask, (h >> 24) & mask, ((h >> 40) ^ (h * 0x9E3779B1)) & mask

    def _maybe_cold(self, key: K) -> bool:
        bloom = self._bloom
        if bloom is None or not self._cold:
            return False
        return all(bloom[b >> 3] & (1 << (b & 7)) for b in self._bits(key))

    def _mark(self, key: K) -> None:
        assert self._bloom is not None
        for b in self._bits(key):
            self._bloom[b >> 3] |= 1 << (b & 7)

    def _read(self, key: K, take: bool) -> tuple[bool, V | None]:
        if not self._maybe_cold(key):
            return False, None
        row = self._spill.value(self._table, key)
        if row is None:
            return False, None
        if take:
            self._spill.db(self._table).execute(f"DELETE FROM {self._table} WHERE k = ?", (key,))
            self._cold -= 1
        value: V = load(orjson.loads(row), self._spill.classes)
        return True, value

    # -- the mapping -------------------------------------------------------------------------
    def __getitem__(self, key: K) -> V:
        got = self.get(key, _ABSENT)
        if got is _ABSENT:
            raise KeyError(key)
        return got  # type: ignore[no-any-return]

    @overload
    def get(self, key: K, default: None = None) -> V | None: ...
    @overload
    def get(self, key: K, default: V | T) -> V | T: ...
    def get(self, key: K, default: Any = None) -> Any:
        """``self[key]`` (made recently used), else ``default``: what ``Mapping.get`` does, without
        raising and catching a ``KeyError`` for each key not held (the analysis asks a few dozen
        times per turn)."""
        hot = self._hot
        if key in hot:
            value = hot.pop(key)
            hot[key] = value  # most recently used last
            return value
        found, got = self._read(key, take=True)
        if not found:
            return default
        hot[key] = got  # type: ignore[assignment]
        return got

    def peek(self, key: K) -> V:
        """The entry, read without making it recently used (a copy when it is on disk: for
        reading)."""
        if key in self._hot:
            return self._hot[key]
        found, value = self._read(key, take=False)
        if not found:
            raise KeyError(key)
        return value  # type: ignore[return-value]

    def __contains__(self, key: object) -> bool:
        if key in self._hot:
            return True
        if not isinstance(key, (int, str)) or not self._maybe_cold(key):  # type: ignore[arg-type]
            return False
        db = self._spill.db(self._table)
        return db.execute(f"SELECT 1 FROM {self._table} WHERE k = ?", (key,)).fetchone() is not None

    def __setitem__(self, key: K, value: V) -> None:
        hot = self._hot
        if key in hot:
            del hot[key]
        elif self._maybe_cold(key):
            self._read(key, take=True)
        hot[key] = value

    def __delitem__(self, key: K) -> None:
        if key in self._hot:
            del self._hot[key]
            return
        found, _ = self._read(key, take=True)
        if not found:
            raise KeyError(key)

    def __len__(self) -> int:
        return len(self._hot) + self._cold

    def __iter__(self) -> Iterator[K]:
        yield from list(self._hot)
        if self._cold:
            db = self._spill.db(self._table)
            yield from [k for (k,) in db.execute(f"SELECT k FROM {self._table}")]

    def clear(self) -> None:
        self._hot.clear()
        if self._cold:
            self._spill.db(self._table).execute(f"DELETE FROM {self._table}")
        self._cold = 0
        self._bloom = None

    def hot_items(self) -> Iterator[tuple[K, V]]:
        """The entries held in memory (every entry ``evictable`` refuses to spill is among them)."""
        return iter(list(self._hot.items()))

    def entries(self) -> Iterator[tuple[K, V]]:
        """Every entry in the order of its keys, those on disk read in one query (copies, for
        reading), none made recently used."""
        hot = sorted(self._hot.items(), key=lambda e: e[0])
        if not self._cold:
            return iter(hot)
        classes = self._spill.classes
        cold = ((k, load(orjson.loads(v), classes)) for k, v in self._spill.rows(self._table))
        return heapq.merge(hot, cold, key=lambda e: e[0])

    def dumped(self) -> Iterator[tuple[K, Any]]:
        """Every entry in the order of its keys as :func:`dump` gives it, for writing as JSON:
        those on disk as they were written (their JSON, an ``orjson.Fragment``: never read into
        objects to be written again)."""
        classes = self._spill.classes
        hot = ((k, dump(v, classes)) for k, v in sorted(self._hot.items(), key=lambda e: e[0]))
        if not self._cold:
            return hot
        cold = ((k, orjson.Fragment(v)) for k, v in self._spill.rows(self._table))
        return heapq.merge(hot, cold, key=lambda e: e[0])

    def trim(self) -> None:
        """Write the least recently used entries beyond ``keep`` to disk (those ``evictable``
        allows). Call only when no caller holds an entry it may still change."""
        hot = self._hot
        if len(hot) <= self._limit:  # (called for every table on every turn: the common case first)
            return
        over = len(hot) - self._keep
        # Half of ``keep`` at a time, so a table at its limit does not write on every call.
        over += self._keep // 2
        out: list[tuple[K, bytes]] = []
        ok, classes = self._evictable, self._spill.classes
        for key in list(itertools.islice(iter(hot), over)):
            if len(out) >= _BATCH:
                self._write(out)
                out = []
            value = hot[key]
            row = None
            if ok is None or ok(key, value):
                try:
                    row = orjson.dumps(dump(value, classes))
                except TypeError:  # (orjson's JSONEncodeError is one)
                    pass
            if row is None:  # still referred to, or no plain row: kept, as recently used
                hot[key] = hot.pop(key)
                continue
            del hot[key]
            out.append((key, row))
        # (past entries ``evictable`` kept, so that a table of many such is not scanned each time)
        self._limit = max(self._keep, len(hot) + self._keep // 2)
        if out:
            self._write(out)

    def _write(self, out: list[tuple[K, bytes]]) -> None:
        """Rows to the table, in one transaction."""
        cold = self._cold + len(out)
        if self._bloom is None or 16 * cold > self._mask + 1 < _BLOOM_MAX:  # (too full: larger)
            self._rebloom(64 * cold)
        for key, _ in out:
            self._mark(key)
        self._spill.write(self._table, out)
        self._cold += len(out)

    def _rebloom(self, bits: int) -> None:
        """Make the bloom filter again, of at least ``bits`` bits (a power of two within
        :data:`_BLOOM_MIN` and :data:`_BLOOM_MAX`), from the keys on disk."""
        size = _BLOOM_MIN
        while size < min(bits, _BLOOM_MAX):
            size *= 2
        self._bloom, self._mask = bytearray(size // 8), size - 1
        if self._cold:
            db = self._spill.db(self._table)
            for (key,) in db.execute(f"SELECT k FROM {self._table}"):
                self._mark(key)
