"""The fleet index: a DuckDB file holding :data:`~cassettes.fleet.schema.TABLES` for every run
under some directories, updated incrementally, and its Parquet export.

DuckDB is the optional extra ``fleet``: it is imported here, inside the functions that
need it, and :func:`duckdb_module` turns its absence into one line saying how to install it. The
core, the pytest plugin and every other command never import it.

**Incremental.** A run whose ``stat`` (size, mtime, ctime, inode, device) is the one indexed
is not opened; one with another ``stat`` but the same size and
:func:`~cassettes.fleet._rows.stamp_of` digest (touched, copied back) is not read, its new ``stat``
kept; a changed or grown one is read (its kept analysis serves the
unchanged part, docs/kept-analysis.md) and its rows replaced; a removed one's rows leave. A run
that cannot be read is a ``runs`` row with ``error``, and a line on stderr: never a stopped index.
Rows reach DuckDB in batches as newline-delimited JSON read by ``read_json`` (DuckDB's row-by-row
``executemany`` is ~50 times slower), each string as the redactor passes it
(:func:`~cassettes.recording.sealed_json`: a run from an older looptap, or edited by hand, is
masked here as it would have been when recorded).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CassetteError
from ..recording import sealed_json
from ..storage import sealed
from ._files import run_stats
from ._rows import (
    STAMP_COLUMNS,
    RunRows,
    Stamp,
    run_rows,
    stamp_of,
    stat_key,
)
from .schema import TABLES

__all__ = [
    "FleetError",
    "connect",
    "default_fleet",
    "duckdb_module",
    "export_parquet",
    "parquet_dir",
    "update",
]

#: Where an index goes by default, beside the first directory indexed.
FLEET_NAME = Path(".looptap") / "fleet.duckdb"
#: Runs, and rows, gathered before one write.
BATCH_RUNS = 500
BATCH_ROWS = 200_000
#: The fewest runs to read that make a worker process worth its start.
RUNS_PER_WORKER = 200


class FleetError(CassetteError, RuntimeError):
    """The fleet cannot be used: DuckDB missing, no index, a bad query."""


def duckdb_module() -> Any:
    """DuckDB, or a :class:`FleetError` saying in one line how to install it."""
    try:
        import duckdb
    except ImportError:
        from ..hints import install_command

        # looptap is on no package index: the extra from the checkout, into this environment
        raise FleetError(
            f"the fleet commands need DuckDB (the fleet extra): {install_command('fleet')}"
        ) from None
    return duckdb


def default_fleet(first_dir: Path) -> Path:
    """``.looptap/fleet.duckdb`` beside ``first_dir`` (in it, when it is the current directory)."""
    d = first_dir.resolve()
    return (d if d == Path.cwd().resolve() else d.parent) / FLEET_NAME


#: A reading connection's settings (``looptap query``, the questions, the page): no file but the
#: index itself is read or written (``read_text``, ``COPY … TO``, ``ATTACH``, ``INSTALL``, ``LOAD``
#: of an extension not built in), and no setting changes after (not even these two).
LOCKED = {"enable_external_access": False, "lock_configuration": True}


def connect(db: Path, *, read_only: bool = False, locked: bool = True) -> Any:
    """A connection to the index at ``db`` (created with its tables unless ``read_only``; a
    read-only one is :data:`LOCKED` unless ``locked`` is false: the Parquet export's, which
    writes files)."""
    duckdb = duckdb_module()
    if read_only and not db.is_file():
        raise FleetError(f"no fleet index at {db}: make one with looptap index DIR")
    _index_file(db)
    if not read_only:
        db.parent.mkdir(parents=True, exist_ok=True)
    try:
        config = LOCKED if read_only and locked else {}
        con = duckdb.connect(str(db), read_only=read_only, config=config)
    except duckdb.Error as exc:
        raise FleetError(f"cannot open the fleet index {db}: {exc}") from None
    if not read_only:
        _tables(con)
    return con


def _index_file(db: Path) -> None:
    """Refuse to make an index over a file that is not one (DuckDB would take any file over),
    a link or anything but a regular file."""
    if db.is_symlink() or (db.exists() and not db.is_file()):
        raise FleetError(f"{db} is not a fleet index (a link, a directory or a device)")
    if db.is_file() and db.stat().st_size:
        with open(db, "rb") as f:
            if f.read(12)[8:12] != b"DUCK":
                raise FleetError(f"{db} is not a fleet index (not a DuckDB file): name another")


def _tables(con: Any) -> None:
    """Create the tables; an index of another schema (an older looptap's) is emptied first, so
    the update reads every run again into the tables as :data:`TABLES` has them."""
    have = {
        table: [(n, t) for n, t, *_ in con.execute(f"DESCRIBE {table}").fetchall()]
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        if table in TABLES
    }
    if any(cols != [(n, t) for n, t, _ in TABLES[table]] for table, cols in have.items()):
        for table in have:
            con.execute(f"DROP TABLE {table}")
    for table, columns in TABLES.items():
        cols = ", ".join(f'"{n}" {t}' for n, t, _ in columns)
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
    # what the rows were made with (the agent rules' digest), beside the documented tables
    con.execute("CREATE TABLE IF NOT EXISTS fleet_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")


@dataclass
class Indexed:
    """What an update did, counted in runs."""

    read: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    round_trips: int = 0


def update(
    con: Any,
    dirs: Sequence[Path],
    *,
    jobs: int = 1,
    progress: Callable[[int, int, int], None] | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> Indexed:
    """Bring the index up to date with the runs under ``dirs``: see the module's docstring."""
    roots = [d.resolve() for d in dirs]
    for d, r in zip(dirs, roots, strict=True):
        if not r.is_dir():
            raise FleetError(f"not a directory: {d}")
    files = run_stats(roots)
    done = Indexed()
    known = _known(con, roots)
    rules = _rules_digest()
    # other agent rules than the index was made with: every run's findings may differ, read all
    todo, touched = _changed(files, known if _made_with(con) == rules else {}, done)
    _restamp(con, touched)
    gone = sorted(set(known) - {str(f) for f in files})
    if gone:
        _delete(con, gone)
        done.removed = len(gone)
    total = sum(size for _, size in todo) or 1
    read_bytes = 0
    batch: list[RunRows] = []
    for rows in _read_all([p for p, _ in todo], jobs):
        done.read += 1
        done.round_trips += rows.round_trips
        read_bytes += rows.stamp.size if rows.stamp else 0
        if rows.skipped is not None:
            done.skipped += 1
            say(f"skipped {rows.path}: {rows.skipped}")
        batch.append(rows)
        if len(batch) >= BATCH_RUNS or sum(_count(b) for b in batch) >= BATCH_ROWS:
            _write(con, batch)
            batch = []
        if progress is not None:
            progress(read_bytes, total, done.round_trips)
    _write(con, batch)
    con.execute("INSERT OR REPLACE INTO fleet_meta VALUES ('rules', ?)", [rules])
    return done


def _rules_digest() -> str:
    """A digest of the agent rules in force (docs/rules.md), as ``fleet_meta`` keeps it."""

    from ..analysis import active_text  # (here: the questions never load the analysis)

    return hashlib.sha256(active_text().encode()).hexdigest()


def _made_with(con: Any) -> str | None:
    """The digest of the agent rules the index's rows were made with (``None``: not known)."""
    row = con.execute("SELECT value FROM fleet_meta WHERE key = 'rules'").fetchone()
    return row[0] if row else None


def _known(con: Any, roots: list[Path]) -> dict[str, tuple[Any, ...]]:
    """The stamps the index holds of the runs under ``roots``, in one query."""
    cols = ", ".join(STAMP_COLUMNS)
    return {
        run: tuple(stamp)
        for run, *stamp in con.execute(f"SELECT run, {cols} FROM runs").fetchall()
        if any(Path(run).is_relative_to(r) for r in roots)
    }


def _changed(
    files: dict[Path, os.stat_result], known: dict[str, tuple[Any, ...]], done: Indexed
) -> tuple[list[tuple[str, int]], list[tuple[str, Stamp]]]:
    """The files to read, with their sizes (new, or not what was indexed), and the files only
    touched (another ``stat``, the same size and digest: not read, their new ``stat`` kept). A
    file whose ``stat`` is the one indexed is not opened at all, as git's index does."""
    todo: list[tuple[str, int]] = []
    touched: list[tuple[str, Stamp]] = []
    for f, st in files.items():
        run, now = str(f), stat_key(st)
        was = known.get(run)
        if was is not None and was[:5] == now:
            done.unchanged += 1
            continue
        if was is not None and was[0] == st.st_size:
            try:
                stamp = stamp_of(f)
            except OSError:
                stamp = None  # read below: its row says why it cannot be
            if stamp is not None and stamp.digest == was[5]:
                done.unchanged += 1
                touched.append((run, stamp))
                continue
        todo.append((run, st.st_size))
    return todo, touched


def _restamp(con: Any, touched: list[tuple[str, Stamp]]) -> None:
    """Keep the new ``stat`` of runs touched but not changed, so the next index opens none."""
    if not touched:
        return
    columns = zip(*((run, *stamp.stat[1:]) for run, stamp in touched), strict=True)
    con.execute(
        "UPDATE runs SET mtime_ns = t.m, ctime_ns = t.c, inode = t.i, device = t.d FROM (SELECT "
        "unnest(?::VARCHAR[]) AS run, unnest(?::BIGINT[]) AS m, unnest(?::BIGINT[]) AS c, "
        "unnest(?::UBIGINT[]) AS i, unnest(?::UBIGINT[]) AS d) t WHERE runs.run = t.run",
        [list(c) for c in columns],
    )


def _read_all(paths: list[str], jobs: int) -> Iterator[RunRows]:
    """Each run's rows, in order; in worker processes when ``jobs`` is more than one and each
    worker has :data:`RUNS_PER_WORKER` runs at least (a worker's start and imports cost about
    the reading of 50 runs: 100 changed runs read in one process took 2.4 s, in two 3.6 s)."""
    jobs = min(jobs, len(paths) // RUNS_PER_WORKER)
    if jobs <= 1:
        yield from map(run_rows, paths)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(run_rows, paths, chunksize=8)


def _count(rows: RunRows) -> int:
    return sum(len(v) for v in rows.tables.values())


def _delete(con: Any, runs: list[str]) -> None:
    for table in TABLES:
        con.execute(f"DELETE FROM {table} WHERE run IN (SELECT unnest(?::VARCHAR[]))", [runs])


def _write(con: Any, batch: list[RunRows]) -> None:
    """Replace the batch's runs' rows, in one transaction."""
    if not batch:
        return
    with tempfile.TemporaryDirectory(prefix="looptap-fleet-") as tmp:
        con.execute("BEGIN")
        try:
            _delete(con, [b.path for b in batch])
            for table, columns in TABLES.items():
                _load(con, table, columns, (r for b in batch for r in b.tables.get(table, ())), tmp)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def _load(
    con: Any,
    table: str,
    columns: tuple[tuple[str, str, str], ...],
    rows: Iterable[dict[str, Any]],
    tmp: str,
) -> None:
    path = os.path.join(tmp, f"{table}.jsonl")
    n = 0
    with open(path, "wb") as f:
        for r in rows:
            f.write(sealed(sealed_json(r)))  # (each string as the redactor passes it)
            n += 1
    if not n:
        return
    spec = ", ".join(f"'{name}': '{kind}'" for name, kind, _ in columns)
    names = ", ".join(f'"{name}"' for name, _, _ in columns)
    con.execute(
        f"INSERT INTO {table} ({names}) SELECT {names} FROM read_json(?, "
        f"format='newline_delimited', columns={{{spec}}})",
        [path],
    )


def export_parquet(con: Any, out: Path) -> dict[str, int]:
    """Every table as Parquet under ``out/<table>/day=YYYY-MM-DD/``: rows written per table.
    Each ``out/<table>`` is replaced whole (``OVERWRITE``); nothing else in ``out`` is touched."""
    parquet_dir(out)
    written: dict[str, int] = {}
    duckdb = duckdb_module()
    for table in TABLES:
        target = str(out / table)
        written[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        try:
            con.execute(
                f"COPY (SELECT * FROM {table} ORDER BY run) TO '{_quoted(target)}' "
                "(FORMAT PARQUET, PARTITION_BY (day), OVERWRITE)"
            )
        except duckdb.Error as exc:
            raise FleetError(f"cannot write {target}: {str(exc).splitlines()[0]}") from None
    return written


def parquet_dir(out: Path) -> None:
    """Make the export's directory, or refuse a name that is not one (a file, a link), or one
    whose ``<table>`` entry is not an earlier export's: the export replaces those whole, and a
    directory looptap did not write is never replaced."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise FleetError(f"the Parquet export goes to a directory: {out} is not one")
    for table in TABLES:
        t = out / table
        if t.is_symlink() or (t.exists() and not (t.is_dir() and _exported(t))):
            raise FleetError(
                f"{t} is not a looptap Parquet export: not replaced; choose another OUTDIR"
            )
    out.mkdir(parents=True, exist_ok=True)


def _exported(table_dir: Path) -> bool:
    """``table_dir`` holds only what an export writes there: ``day=…`` directories of Parquet
    files."""
    for part in table_dir.iterdir():
        if part.is_symlink() or not part.is_dir() or not part.name.startswith("day="):
            return False
        for f in part.iterdir():
            if f.is_symlink() or not f.is_file() or f.suffix != ".parquet":
                return False
    return True


def parquet_views(where: Path) -> Any:
    """An in-memory connection holding a Parquet export at ``where`` under the tables' names
    (``looptap query --fleet OUTDIR``), :data:`LOCKED` once they are read: a view over the files
    would need the file access a query may not have."""
    con = duckdb_module().connect(":memory:")
    for table, columns in TABLES.items():
        if not any((where / table).glob("**/*.parquet")):  # no row: the table, empty
            cols = ", ".join(f'"{n}" {t}' for n, t, _ in columns)
            con.execute(f"CREATE TABLE {table} ({cols})")
            continue
        pattern = str(where / table / "**" / "*.parquet")
        con.execute(
            f"CREATE TABLE {table} AS SELECT * FROM read_parquet('{_quoted(pattern)}', "
            "hive_partitioning = true)"
        )
    for name, value in LOCKED.items():
        con.execute(f"SET {name} = {str(value).lower()}")
    return con


def _quoted(s: str) -> str:
    return s.replace("'", "''")
