"""The printed views kept with a kept analysis (docs/kept-analysis.md): what ``show``'s printing
pass made of each round trip (``views``), and the text it printed of them (``texts``: its lines
after the title, when nothing was filtered), kept as rows bound to the analysis they were made
from (:class:`ViewsWriter`) and read back by the next reader of the same bytes (:func:`views`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from . import _database
from ._analysis_cache import disabled
from ._stores import TurnStore, json_lines

__all__ = ["KINDS", "ViewsWriter", "views"]

#: What is kept (a JSON value each, in order): the table of its rows and its ``run`` flag.
KINDS = {"views": ("views", "views_done"), "texts": ("texts", "texts_done")}


class ViewsWriter:
    """Keeps each round trip's printed view (a JSON-able object) as a printing pass makes them, in
    compressed blocks of JSON lines (a :class:`~._stores.TurnStore`, as full turns are kept), then
    as rows bound to the kept analysis they were made from (its generation): :meth:`commit` once the
    pass went through every round trip. Never raises: a view that cannot be kept ends the
    keeping."""

    def __init__(self, cassette: Path, generation: bytes, kind: str = "views") -> None:
        self._cassette, self._generation = cassette, generation
        self._table, self._done = KINDS[kind]
        self._store: TurnStore | None = TurnStore()

    def add(self, view: Any) -> None:
        if self._store is None:
            return
        try:
            self._store.put_data(orjson.dumps(view, option=orjson.OPT_APPEND_NEWLINE))
        except (OSError, TypeError, orjson.JSONEncodeError, sqlite3.Error):
            self.abandon()

    def commit(self) -> None:
        if self._store is None:
            return
        try:
            self._store.flush()
            self._keep(self._store)
        except (OSError, sqlite3.Error):
            pass
        finally:
            self.abandon()

    def _keep(self, store: TurnStore) -> None:
        opened = _database.existing(self._cassette)
        if opened is None:
            return
        db = opened[1]
        try:
            db.execute("BEGIN IMMEDIATE")
            if db.execute("SELECT 1 FROM run WHERE generation = ?", (self._generation,)).fetchone():
                db.execute(f"DELETE FROM {self._table}")  # (a table of ours: KINDS)
                db.executemany(
                    f"INSERT INTO {self._table} (data) VALUES (?)",
                    ((data,) for _, data in store.blocks()),
                )
                db.execute(f"UPDATE run SET {self._done} = 1")
            db.execute("COMMIT")
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
            db.close()

    def abandon(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def views(cassette: Path, generation: bytes, kind: str = "views") -> Iterator[Any] | None:
    """The printed views (``kind``: :data:`KINDS`) kept for the kept analysis ``generation``, one
    by one, in order; ``None`` when there are none. Read in one transaction (a snapshot). Never
    raises."""
    table, done = KINDS[kind]
    if disabled():
        return None
    opened = _database.existing(cassette)
    if opened is None:
        return None
    db = opened[1]
    try:
        db.execute("BEGIN")
        row = db.execute(f"SELECT {done} FROM run WHERE generation = ?", (generation,))
        if row.fetchone() != (1,):
            db.execute("COMMIT")
            db.close()
            return None
    except sqlite3.Error:
        db.close()
        return None
    return _each_view(db, table)


def _each_view(db: sqlite3.Connection, table: str) -> Iterator[Any]:
    try:  # (a cursor steps a row at a time: a compressed block of 256 KB of views each)
        yield from json_lines(db.execute(f"SELECT ord, data FROM {table} ORDER BY ord"))
    finally:
        with contextlib.suppress(sqlite3.Error):
            db.execute("COMMIT")
        db.close()
