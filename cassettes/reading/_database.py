"""The SQLite database a run's analysis is kept in (:mod:`._analysis_cache` has its rows,
docs/kept-analysis.md): where it is, its schema, and how it is opened (a regular file only) or
made anew, replacing one that is old, foreign or damaged; and the printed views kept with a run's
rows (:func:`keep_views`, :func:`views`). One database per cassette path in the
cache directory (``$LOOPTAP_CACHE_DIR``, else ``$XDG_CACHE_HOME/looptap/analyses``, else
``~/.cache/looptap/analyses``; directory 0700, file 0600: one found looser is made 0700, one of
another user's not used). SQLite's own locking lets readers and
writers of the same database run at once: a writer replaces every row in one transaction, a
reader reads in one (write-ahead log: a snapshot)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..storage import UnsafePath, check_dir
from ._stores import Unsealed, as_sealed, json_lines

__all__ = [
    "APPLICATION_ID",
    "KINDS",
    "SCHEMA",
    "TABLES",
    "existing",
    "fresh",
    "keep_views",
    "location",
    "note",
    "reading",
    "remove",
    "views",
]

#: The rows' layout (``PRAGMA user_version``): another one is not read, and is replaced.
#: 5: a model call's kept view without its turn's layers and tokens (``_snapshot.bare``).
SCHEMA = 5
#: ``PRAGMA application_id`` of a looptap database (a foreign one is replaced).
APPLICATION_ID = 0x4C54_4B41  # "LTKA"

_CREATE = """
CREATE TABLE run (
    id INTEGER PRIMARY KEY CHECK (id = 1), generation BLOB NOT NULL, analyser TEXT NOT NULL,
    size INTEGER NOT NULL, sha256 BLOB NOT NULL, reading TEXT NOT NULL, offsets BLOB NOT NULL,
    lengths BLOB NOT NULL, seqs BLOB NOT NULL, analysis TEXT NOT NULL, views_done INTEGER,
    texts_done INTEGER
);
CREATE TABLE conversations (ord INTEGER PRIMARY KEY, id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE turns (
    ord INTEGER PRIMARY KEY, seq INTEGER NOT NULL, conversation TEXT, input_tokens INTEGER,
    output_tokens INTEGER, cost TEXT, block INTEGER NOT NULL, offset INTEGER NOT NULL,
    length INTEGER NOT NULL
);
CREATE TABLE turn_blocks (block INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE findings (seq INTEGER PRIMARY KEY, pos INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE views (ord INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE texts (ord INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE continuation (piece INTEGER PRIMARY KEY, data BLOB NOT NULL);
"""
#: Its tables (a writer empties them all before it keeps a run's rows).
TABLES = ("run", "conversations", "turns", "turn_blocks", "findings", "views", "texts",
          "continuation")  # fmt: skip
#: What a printing pass keeps beside the rows (a JSON value a round trip, in order): ``show``'s
#: views of the round trips (``views``: a model call's without its turn's layers and tokens, which
#: the ``turn_blocks`` hold, ``_snapshot.bare``) and the text it printed of them (``texts``: its
#: lines after the title, when nothing was filtered); the table of each and its ``run`` flag.
KINDS = {"views": ("views", "views_done"), "texts": ("texts", "texts_done")}


def _dir() -> Path:
    if os.environ.get("LOOPTAP_CACHE_DIR"):
        return Path(os.environ["LOOPTAP_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "looptap" / "analyses"


def location(cassette: str | Path) -> Path | None:
    """Where the analysis of the cassette at this path is kept (``None``: no cache directory,
    e.g. no home). Named by a digest of the cassette's resolved path."""
    try:
        name = hashlib.blake2b(
            str(Path(cassette).resolve()).encode("utf-8", "surrogateescape"), digest_size=16
        ).hexdigest()
        return _dir() / f"{name}.sqlite"
    except (OSError, RuntimeError):
        return None


#: The cache directories this process checked, and whether each may be used.
_CHECKED: dict[Path, bool] = {}


def _private(where: Path) -> bool:
    """Whether the cache directory ``where`` may hold kept analyses
    (:func:`~cassettes.storage.check_dir`: a directory of this user's, made 0700 if it was looser,
    and said so); one that is not (another user's: planted, a shared ``/tmp`` path) is not used:
    nothing is kept in it or taken from it, said once a process. A missing one is made 0700 when
    something is kept."""
    known = _CHECKED.get(where)
    if known is not None:
        return known
    if not os.path.lexists(where):
        return True
    try:
        check_dir(where, "the cache directory", create=False, tighten=True)
        ok = True
    except UnsafePath as exc:
        ok = False
        if os.path.isdir(where):  # (a file in its place: not kept, as when it cannot be made)
            print(f"looptap: {exc}; no analysis is kept or taken there", file=sys.stderr)
    _CHECKED[where] = ok
    return ok


def note(where: Path, why: str) -> None:
    print(f"looptap: the kept analysis {where.name} is {why}: analysed again", file=sys.stderr)


def _connect(where: Path, *, create: bool) -> sqlite3.Connection | None:
    """The database at ``where``, opened when it is a regular file (a FIFO or a link planted
    there is not opened: ``None``), made when missing and ``create``; WAL, a minute's wait for
    a lock."""
    if not _private(where.parent):
        return None
    try:
        st = os.lstat(where)
    except FileNotFoundError:
        if not create:
            return None
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _CHECKED[where.parent] = True  # (made here: 0700, ours)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(where, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        st = os.lstat(where)
    if not stat.S_ISREG(st.st_mode):
        return None
    db = sqlite3.connect(f"{where.absolute().as_uri()}?nofollow=1", uri=True, timeout=60,
                         isolation_level=None, check_same_thread=False)  # fmt: skip
    try:
        db.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error:
        db.close()
        raise
    return db


def _ours(db: sqlite3.Connection) -> bool:
    """This schema of looptap's (``False``: empty, old, newer or foreign)."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    (app,) = db.execute("PRAGMA application_id").fetchone()
    return bool(version == SCHEMA and app == APPLICATION_ID)


def fresh(where: Path) -> sqlite3.Connection | None:
    """The database at ``where`` with this schema's tables: one that is not (old, foreign,
    corrupt) is replaced."""
    for attempt in (0, 1):
        db = None
        try:
            db = _connect(where, create=True)
            if db is None:
                return None
            db.execute("BEGIN IMMEDIATE")
            if not _ours(db):
                for (name,) in db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                ).fetchall():
                    db.execute(f'DROP TABLE "{name}"')
                for create in _CREATE.split(";"):
                    db.execute(create)
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {SCHEMA}")
            return db
        except sqlite3.OperationalError:  # (locked past the wait, no room, read-only: not kept)
            if db is not None:
                db.close()
            return None
        except sqlite3.DatabaseError:  # not a database: replaced
            if db is not None:
                db.close()
            if attempt:
                return None
            remove(where)  # (the reader that found it said so: take)
    return None


def remove(where: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            os.unlink(f"{where}{suffix}")


@contextlib.contextmanager
def reading(db: sqlite3.Connection) -> Iterator[None]:
    """A read transaction (a snapshot: a writer meanwhile changes nothing it reads)."""
    db.execute("BEGIN")
    try:
        yield
    finally:
        db.execute("COMMIT")


def existing(cassette: Path) -> tuple[Path, sqlite3.Connection] | None:
    """The database kept for this cassette, when there is one of this schema (else ``None``, with
    a note for one that cannot be read)."""
    where = location(cassette)
    if where is None:
        return None
    try:
        db = _connect(where, create=False)
        if db is None:
            return None
        if not _ours(db):
            db.close()
            return None
        return where, db
    except sqlite3.OperationalError:  # (locked past the wait, read-only: analysed, silently)
        return None
    except sqlite3.DatabaseError:
        note(where, "not a database this looptap reads")
        return None
    except OSError:
        return None


def keep_views(
    cassette: Path, generation: bytes, kind: str, blocks: Iterable[tuple[int, bytes]]
) -> None:
    """A printing pass's views (``kind``: :data:`KINDS`; compressed blocks of JSON lines, a
    :class:`~._stores.TurnStore`'s) kept as the rows of the kept analysis ``generation``, in one
    transaction: nothing when another analysis was kept since, or when the redactor would mask
    any of them (:func:`~._stores.as_sealed`). Never raises."""
    table, done = KINDS[kind]
    opened = existing(cassette)
    if opened is None:
        return
    db = opened[1]
    try:
        db.execute("BEGIN IMMEDIATE")
        if db.execute("SELECT 1 FROM run WHERE generation = ?", (generation,)).fetchone():
            db.execute(f"DELETE FROM {table}")  # (a table of ours: KINDS)
            db.executemany(
                f"INSERT INTO {table} (data) VALUES (?)",
                ((as_sealed(d, packed=True),) for _, d in blocks),
            )
            db.execute(f"UPDATE run SET {done} = 1")
        db.execute("COMMIT")
    except (OSError, sqlite3.Error, Unsealed):  # (Unsealed: what looptap masks is never kept)
        pass
    finally:
        with contextlib.suppress(sqlite3.Error):
            if db.in_transaction:
                db.execute("ROLLBACK")
        db.close()


def views(cassette: Path, generation: bytes, kind: str) -> Iterator[Any] | None:
    """The views (``kind``: :data:`KINDS`) kept for the kept analysis ``generation``, one by one,
    in order; ``None`` when there are none. Read in one transaction (a snapshot). Never raises."""
    table, done = KINDS[kind]
    opened = existing(cassette)
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
