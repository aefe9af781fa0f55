"""Analyse a run once: a looptap cassette's analysis, kept as plain rows in a SQLite database
after a reader computed it, and taken by every later reader of the same bytes instead of analysing
them again (docs/kept-analysis.md).

What is kept is what :class:`~cassettes.reading._incremental.RunReader` holds once it has read a
run to its end: the offset index, the analysis (conversations, findings, errors, MCP links), the
full turns (JSON, compressed a block at a time) and ``show``'s printed views
(:func:`cassettes.reading._database.keep_views`). Rows only: a JSON text, integers, compressed JSON;
nothing read from the database (:mod:`cassettes.reading._database`, one per cassette path) can
run code, so it needs no key.

A kept analysis is taken only when it was made by the same analyser (a digest of looptap's source,
Python, pydantic and the price table), its schema is
:data:`~cassettes.reading._database.SCHEMA`, and the cassette has the size
and the SHA-256 it had when it was analysed (the cassette is hashed as the analysis reads it; a
later reader hashes it again), or it grew from those bytes: it is then continued from the
analysis' state kept with them (``continuation``: :mod:`cassettes.analysis._continuation`), its
kept views taken again where the continued analysis did not change them. Anything else (a file
that changed, another analyser, an old, foreign or corrupt database, a state that does not check
out) leads to a fresh analysis, kept in its place; a database that
cannot be read gets a one-line note on stderr. ``LOOPTAP_NO_CACHE=1`` (or ``--no-cache``) neither
takes nor keeps one; a run under :data:`MIN_BYTES` is analysed faster than it is checked, and is
not kept. An error while keeping (a read-only or full disk) leaves the run analysed, silently.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import secrets
import sqlite3
import sys
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ..analysis import active_text, lines, spill, table_identity
from ..errors import CassetteError
from ..storage import open_regular
from . import _database
from ._stores import (
    Pieces,
    Places,
    TurnStore,
    Unsealed,
    as_sealed,
    decompressor,
    json_lines,
)

__all__ = [
    "MAX_CONVERSATIONS",
    "MIN_BYTES",
    "Kept",
    "analyser_digest",
    "digest_of",
    "disabled",
    "hasher",
    "keep",
    "packed",
    "take",
    "unpacked",
    "views_in",
]

#: Runs smaller than this are analysed without a kept analysis (analysing them is quicker than
#: checking one; tests lower it).
MIN_BYTES = 1 << 20
#: Runs of more conversations are not kept: their rows are read into memory when a kept analysis
#: is taken, where the analysis spills them to disk.
MAX_CONVERSATIONS = 20_000
#: Bytes of the analysis' state a grown file is continued from (its JSON): more is not kept, and
#: the grown file is analysed afresh.
MAX_CONTINUATION = 256 << 20
#: Bytes hashed at a time.
_CHUNK = 4 << 20


def disabled() -> bool:
    """``LOOPTAP_NO_CACHE`` is set (to anything but ``0`` or nothing)."""
    return os.environ.get("LOOPTAP_NO_CACHE", "").strip() not in ("", "0")


@functools.cache
def analyser_digest() -> str | None:
    """A digest of what decides a run's analysis: looptap's source (every module under
    ``cassettes/``), the Python and pydantic versions, genai-prices' price table (the turns'
    costs are part of the analysis) and the agent rules in force (docs/rules.md). ``None`` when
    the source cannot be read: nothing is then kept or taken. Computed once a process."""
    import pydantic

    root = Path(__file__).resolve().parents[1]  # cassettes/
    prices = json.dumps(table_identity())
    extra = f"{prices}\0{active_text()}"  # an agent's rules decide findings too
    got = source_digest(root, f"{sys.version}\0{pydantic.VERSION}\0{extra}\0".encode())
    return got.hex() if got is not None else None


def hasher() -> Any | None:
    """The hash to feed the cassette's bytes to as they are read (``None``: nothing kept)."""
    return None if disabled() else hashlib.sha256()


class Kept(NamedTuple):
    """A kept analysis of the file's first ``size`` bytes, checked: the reader's state (the JSON
    of :func:`keep`'s ``state``, not yet validated: :class:`.snapshot.ReaderState`, and the
    index's three arrays), the analysis' JSON (without its conversations), the
    conversations' JSON, the findings by turn and the turns' places (the blocks of full turns are
    in the store :func:`take` was given)."""

    size: int
    reading: bytes
    offsets: array[int]
    lengths: array[int]
    seqs: array[int]
    analysis: bytes
    conversations: list[bytes]
    findings: dict[int, tuple[int, bytes]]
    #: Where each turn's full JSON is (read a row at a time into the reader's arrays: a list of
    #: row tuples was 200 bytes a turn, 12 MB at the peak of a 1 GB run's second read).
    places: Places
    #: What the kept printed views are bound to (:func:`views`).
    generation: bytes
    #: For a file that grew since: the analysis' state to continue from (JSON,
    #: :mod:`cassettes.analysis._continuation`), the usage of each kept turn (seq → conversation,
    #: tokens, cost) and the SHA-256 of the kept bytes as a hash to feed the rest to; ``None``
    #: for the same bytes.
    continuation: bytes | None = None
    usage: dict[int, tuple[str, int | None, int | None, str | None]] | None = None
    hashed: Any = None
    #: For a file that grew since: the printed views kept for the kept bytes (their compressed
    #: blocks, in a store of their own; ``None``: none were kept).
    views: TurnStore | None = None


def _arrays(state: dict[str, Any]) -> tuple[bytes, bytes, bytes]:
    """The index's three arrays taken out of ``state``, as the bytes of 64-bit integers."""
    offsets, lengths, seqs = (array("q", state.pop(k)) for k in ("offsets", "lengths", "seqs"))
    return offsets.tobytes(), lengths.tobytes(), seqs.tobytes()


def keep(
    cassette: Path,
    size: int,
    sha256: bytes,
    state: dict[str, Any],
    analysis: bytes,
    conversations: Iterator[tuple[str, bytes]],
    findings: dict[int, tuple[int, bytes]],
    places: Iterator[
        tuple[int, tuple[str, int | None, int | None, str | None] | None, tuple[int, int, int]]
    ],
    turns: Iterable[tuple[int, bytes]],
    continuation: Pieces | None = None,
) -> bytes | None:
    """Keep the analysis of the cassette's first ``size`` bytes (whose SHA-256 is ``sha256``): the
    reader's ``state`` (plain data: the index's ``offsets``, ``lengths`` and ``seqs`` arrays, the
    rest JSON), the ``analysis`` (JSON, without its conversations), each conversation (id, JSON),
    the findings by turn (seq → position, JSON), each turn's usage (conversation, input and output
    tokens, cost) and place (block, offset, length), the blocks of the store of full turns
    (:meth:`~._stores.TurnStore.blocks`), and the state a grown file is continued from
    (:func:`packed`; ``None``: none, a grown file is analysed afresh). Replaces what was kept for
    this path, in one transaction. Never raises: the new generation, ``None`` when it could not be
    kept. Kept only when the redactor leaves every text of it as it is
    (:func:`~._stores.as_sealed`): the analysis of a cassette from an older looptap, or edited by
    hand, that holds what looptap masks is not kept (analysed again next time)."""
    where = _database.location(cassette)
    analyser = analyser_digest()
    if where is None or analyser is None:
        return None
    try:
        db = _database.fresh(where)
    except OSError:
        return None
    if db is None:
        return None
    generation = secrets.token_bytes(16)
    try:
        offsets, lengths, seqs = _arrays(state)
        state_json = orjson.dumps(state).decode()
        as_sealed(state_json.encode() + analysis)
        for table in _database.TABLES:
            db.execute(f"DELETE FROM {table}")  # (a table of ours)
        db.execute(
            "INSERT INTO run VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
            (generation, analyser, size, sha256, state_json, offsets, lengths,
             seqs, analysis.decode()),
        )  # fmt: skip
        if continuation is not None:  # (its pieces were sealed as they were written)
            db.executemany("INSERT INTO continuation VALUES (?, ?)", continuation.rows())
        db.executemany(
            "INSERT INTO conversations (id, data) VALUES (?, ?)",
            ((cid, as_sealed(data).decode()) for cid, data in conversations),
        )
        db.executemany(
            "INSERT INTO findings VALUES (?, ?, ?)",
            ((seq, pos, as_sealed(data).decode()) for seq, (pos, data) in findings.items()),
        )
        db.executemany(
            "INSERT INTO turns (seq, conversation, input_tokens, output_tokens, cost, block, "
            "offset, length) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ((seq, *(usage or (None,) * 4), *at) for seq, usage, at in places),
        )
        db.executemany(
            "INSERT INTO turn_blocks VALUES (?, ?)",
            ((n, as_sealed(b, packed=True)) for n, b in turns),
        )
        db.execute("COMMIT")
        return generation
    except (OSError, ValueError, TypeError, sqlite3.Error) as exc:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            _database.remove(where)  # (damaged inside: the next reader keeps its analysis anew)
        return None
    finally:
        db.close()


def packed(state: dict[str, Any], rows: spill.Spill) -> Pieces | None:
    """The state a grown file is continued from (JSON-able, its long tables iterators), as JSON
    lines (:func:`~cassettes.analysis.lines`) written as they come into pieces of their own, each
    compressed into a row of ``rows`` (:class:`~._stores.Pieces`): memory holds one piece, never
    the JSON nor its compressed bytes whole (held whole, then checked whole by the redactor's
    gate, they were the first ``show``'s peak at 1 GB). ``None`` when it is more than
    :data:`MAX_CONTINUATION` bytes, or the gate masks some of it (what looptap masks is never
    kept: the grown file is then analysed afresh)."""
    pieces = Pieces(rows, MAX_CONTINUATION)
    try:
        lines(state, pieces.write)
        pieces.flush()
    except (OverflowError, Unsealed):
        return None
    return pieces


def digest_of(cassette: Path, size: int) -> Any | None:
    """The SHA-256 of the cassette's first ``size`` bytes, as a hash that can be fed the rest;
    ``None`` when it holds fewer."""
    h = hashlib.sha256()
    done = 0
    buf = memoryview(bytearray(_CHUNK))  # (one buffer, read into: a new 4 MiB bytes per read
    with open_regular(cassette) as f:  # and the reader's copy were 8.4 MB at a second read's peak)
        while done < size:
            got = os.readv(f.fileno(), [buf[: min(_CHUNK, size - done)]])
            if not got:
                return None
            h.update(buf[:got])
            done += got
    return h


def take(cassette: Path, turns: TurnStore) -> Kept | None:
    """The kept analysis of the cassette as it is now, checked (see the module's docstring), its
    blocks of full turns put in ``turns``; ``None`` when there is none, or it does not check out.
    Never raises."""
    if disabled() or analyser_digest() is None:
        return None
    opened = _database.existing(cassette)
    if opened is None:
        return None
    where, db = opened
    try:
        with _database.reading(db):
            return _rows(db, cassette, turns)
    except sqlite3.OperationalError:
        return None
    except sqlite3.DatabaseError:
        _database.note(where, "damaged")
        return None
    except (OSError, ValueError, CassetteError):
        return None
    finally:
        db.close()


def _rows(db: sqlite3.Connection, cassette: Path, turns: TurnStore) -> Kept | None:
    row = db.execute(
        "SELECT generation, analyser, size, sha256, reading, offsets, lengths, seqs, analysis, "
        "EXISTS (SELECT 1 FROM continuation) FROM run"
    ).fetchone()
    if row is None:
        return None
    generation, analyser, size, sha256, reading, offsets, lengths, seqs, analysis, cont = row
    hashed, grew = _hashed(cassette, analyser, size, sha256, cont)
    if hashed is None or any(len(raw) % 8 for raw in (offsets, lengths, seqs)):
        return None  # (other bytes; or not arrays of 64-bit integers)
    # (the state to continue from: read only for a file that grew)
    grown = _grown(db) if grew else (None, None, None)
    offsets, lengths, seqs = array("q", offsets), array("q", lengths), array("q", seqs)
    convs = [d.encode() for (d,) in db.execute("SELECT data FROM conversations ORDER BY ord")]
    findings = {
        seq: (pos, data.encode())
        for seq, pos, data in db.execute("SELECT seq, pos, data FROM findings")
    }
    places = Places()
    for seq, block, offset, length in db.execute(
        "SELECT seq, block, offset, length FROM turns ORDER BY ord"
    ):
        if not all(isinstance(n, int) for n in (seq, block, offset, length)):
            raise ValueError("a turn's place is not integers")
        places.put(seq, (block, offset, length))
    turns.adopt(db.execute("SELECT block, data FROM turn_blocks"))
    return Kept(
        size, reading.encode(), offsets, lengths, seqs, analysis.encode(), convs, findings,
        places, generation, grown[0], grown[1], hashed if grown[0] is not None else None, grown[2],
    )  # fmt: skip


def _hashed(
    cassette: Path, analyser: str, size: int, sha256: bytes, continuation: int
) -> tuple[Any | None, bool]:
    """The SHA-256 of the kept bytes (a hash to feed the rest to) when the cassette holds them:
    the same bytes, or a file that grew from them with a state to continue from (``True``:
    ``continuation``, whether one was kept); else ``None``."""
    now = os.stat(cassette).st_size
    if analyser != analyser_digest() or size > now or (size < now and not continuation):
        return None, False
    hashed = digest_of(cassette, size)
    if hashed is None or hashed.digest() != sha256:
        return None, False
    return hashed, size < now


def _grown(
    db: sqlite3.Connection,
) -> tuple[bytes, dict[int, tuple[str, int | None, int | None, str | None]], TurnStore | None]:
    """What a file that grew from the kept bytes is continued from: the state, each kept turn's
    usage, the kept views (:class:`Kept`)."""
    continuation = unpacked(db.execute("SELECT data FROM continuation ORDER BY piece"))
    usage = {
        seq: (conv, i, o, cost)
        for seq, conv, i, o, cost in db.execute(
            "SELECT seq, conversation, input_tokens, output_tokens, cost FROM turns"
        )
    }
    return continuation, usage, _views_copied(db)


def _views_copied(db: sqlite3.Connection) -> TurnStore | None:
    """The printed views kept (their compressed blocks) in a store of their own; ``None`` when
    none were kept."""
    if db.execute("SELECT views_done FROM run").fetchone() != (1,):
        return None
    views = TurnStore()
    views.adopt(db.execute("SELECT ord, data FROM views"))
    return views


def views_in(views: TurnStore) -> Iterator[Any]:
    """The views :func:`_views_copied` put in ``views``, one by one, in order (the store is
    closed after the last)."""
    try:
        yield from json_lines(views.blocks())
    finally:
        views.close()


def unpacked(pieces: Iterable[tuple[Any]]) -> bytes:
    """The state a grown file is continued from, read from its pieces (:func:`packed`, rows of
    one value) a piece at a time, at most :data:`MAX_CONTINUATION` bytes (``ValueError`` when
    they are not one)."""
    import zstandard

    parts, size = [], 0
    try:
        for (piece,) in pieces:
            if not isinstance(piece, bytes):
                raise ValueError("not a kept state")
            with decompressor().stream_reader(piece) as reader:  # (a part at a time: bounded)
                while part := reader.read(_CHUNK):
                    parts.append(part)
                    size += len(part)
                    if size > MAX_CONTINUATION:
                        raise ValueError("the kept state is too big to be one")
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None
    if not parts:
        raise ValueError("no kept state")
    return b"".join(parts)


def source_digest(root: Path, extra: bytes) -> bytes | None:
    """A digest of ``extra`` and of every ``.py`` file under ``root``, each by its path relative
    to ``root``, its length and its bytes; ``None`` when a file cannot be read."""
    h = hashlib.blake2b(digest_size=16)
    h.update(extra)
    try:
        for f in sorted(root.rglob("*.py")):
            data = f.read_bytes()
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + len(data).to_bytes(8, "big"))
            h.update(data)
    except OSError:
        return None
    return h.digest()
