"""``looptap index``, ``looptap query`` and ``looptap fleet``: the fleet commands (docs/fleet.md).

Declared in :mod:`cassettes.commands`; DuckDB (the ``fleet`` extra) is imported only when one of
them runs. What they print passes through the CLI's output
guard, and each table cell is cleaned and clipped first (recorded text: a finding's message, a
model name, a client's User-Agent).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from ..commands import err
from ..hints import count
from ..untrusted import clean_line
from ..views import reading_line
from . import _questions as questions
from ._index import (
    FLEET_NAME,
    FleetError,
    connect,
    default_fleet,
    duckdb_module,
    parquet_dir,
    parquet_views,
    update,
)
from ._index import export_parquet as write

__all__ = ["cmd_fleet", "cmd_index", "cmd_query", "export_parquet", "open_fleet"]

#: A table cell's width at most, in characters.
CELL = 60


def index_dirs(dirs: Sequence[str], fleet: str | None, jobs: int) -> tuple[Any, Path]:
    """Update (or make) the index of ``dirs``: the open connection and where it is."""
    paths = [Path(d) for d in dirs]
    db = Path(fleet) if fleet else default_fleet(paths[0])
    con = connect(db)
    with reading_line(f"the runs under {', '.join(dirs)}") as progress:
        done = update(con, paths, jobs=max(1, jobs), progress=progress, say=err)
    err(
        f"indexed {count(done.read, 'run')} ({count(done.round_trips, 'round trip')}), "
        f"{done.unchanged:,} unchanged, {done.removed:,} removed, {done.skipped:,} skipped: {db}"
    )
    return con, db


def cmd_index(args: argparse.Namespace) -> int:
    con, _ = index_dirs(args.dirs, args.output, args.jobs)
    con.close()
    return 0


def open_fleet(fleet: str | None) -> Any:
    """A read-only, locked connection to the fleet (no file access, settings fixed): an index
    file, or a Parquet export's directory."""
    where = Path(fleet) if fleet else FLEET_NAME
    if where.is_dir():
        return parquet_views(where)
    return connect(where, read_only=True)


def _failed(exc: BaseException) -> FleetError:
    return FleetError(
        f"the query failed: {clean_line(str(exc).splitlines()[0] if str(exc) else '')}"
    )


def _run(
    args: argparse.Namespace, sql: str, params: Sequence[object] = (), *, given: bool = False
) -> int:
    """Run ``sql`` on the fleet and print its rows; ``given``: SQL the user wrote, which may only
    read (a query, ``EXPLAIN``), and says so in one line otherwise."""
    con = open_fleet(args.fleet)
    duckdb = duckdb_module()
    try:
        if given:
            _reads_only(con, sql)
        cur = con.execute(sql, list(params))
        names = [d[0] for d in cur.description or ()]
        rows = cur.fetchall() if cur.description else []
    except duckdb.Error as exc:
        raise _failed(exc) from None
    finally:
        con.close()
    _print(names, rows, args.format)
    return 0


#: The statements ``looptap query`` runs: those that only read.
_READING = ("SELECT", "EXPLAIN")


def _reads_only(con: Any, sql: str) -> None:
    """Refuse in one line SQL that is empty or would do anything but read (``COPY``, ``ATTACH``,
    ``INSTALL``, ``SET`` …: the connection is locked besides, this says it first and plainly)."""
    statements = con.extract_statements(sql)
    if not statements:
        raise FleetError('no SQL given: looptap query "SELECT count(*) FROM runs"')
    for st in statements:
        kind = getattr(st.type, "name", str(st.type))
        if kind not in _READING:
            word = st.query.split(None, 1)[0].upper() if st.query.split() else kind
            kind = word if word.isalpha() else kind  # INSTALL is a LOAD statement to DuckDB
            raise FleetError(
                f"looptap query only reads the fleet: {kind} is refused (a SELECT, or EXPLAIN)"
            )


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return format(v.normalize(), "f")
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    return str(v)


def _print(names: list[str], rows: list[tuple[Any, ...]], fmt: str) -> None:
    if fmt == "json":
        out = sys.stdout.buffer
        for r in rows:
            out.write(
                orjson.dumps(
                    {n: _plain(v) for n, v in zip(names, r, strict=True)},
                    option=orjson.OPT_APPEND_NEWLINE,
                )
            )
        out.flush()
        return
    if fmt == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(names)
        w.writerows([_defused(v) for v in r] for r in rows)
        return
    _table(names, rows)


#: What begins a cell a spreadsheet would run as a formula (OWASP, "CSV Injection").
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _defused(v: Any) -> Any:
    """A CSV cell: a text that begins as a formula begins gets a ``'`` first, as OWASP's CSV
    injection guidance says; a number is written as it is (``-5``, ``-0.5``: not formulas)."""
    return "'" + v if isinstance(v, str) and v.startswith(_FORMULA) else _plain(v)


def _table(names: list[str], rows: list[tuple[Any, ...]]) -> None:
    def cell(v: Any) -> str:
        s = "" if v is None else clean_line(str(_plain(v)))
        return s if len(s) <= CELL else s[: CELL - 1] + "…"

    body = [[cell(v) for v in r] for r in rows]
    widths = [max([len(n)] + [len(r[i]) for r in body]) for i, n in enumerate(names)]
    right = [
        bool(rows) and all(isinstance(r[i], int | float | Decimal) or r[i] is None for r in rows)
        for i in range(len(names))
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ).rstrip()

    print(line(names))
    print(line(["-" * w for w in widths]))
    for r in body:
        print(line(r))
    print(f"({count(len(rows), 'row')})")


def cmd_query(args: argparse.Namespace) -> int:
    return _run(args, args.sql, given=True)


def cmd_fleet(args: argparse.Namespace) -> int:
    window = questions.Window.of(args.since, args.until)
    if args.question == "page":
        from ._page import write_page

        return write_page(args, open_fleet(args.fleet), _plain)
    if args.question == "findings":
        sql, params = questions.findings(window.since, args.new, window.until)
    elif args.question == "cost":
        sql, params = questions.cost(args.by, window)
    elif args.question == "failing-turns":
        sql, params = questions.failing_turns(window)
    elif args.question == "weekly":
        sql, params = questions.weekly(window)
    elif args.question == "latency":
        sql, params = questions.latency(args.by, window)
    else:
        before, latest = questions.periods(window)
        err(
            f"{latest.since:%Y-%m-%d %H:%M} to {latest.until:%Y-%m-%d %H:%M} UTC against "
            f"{before.since:%Y-%m-%d %H:%M} to {before.until:%Y-%m-%d %H:%M}"
        )
        sql, params = questions.grew(args.by, latest)
    return _run(args, sql, params)


def export_parquet(dirs: Sequence[str], out: Path, quiet: bool) -> int:
    """``looptap export --parquet OUTDIR DIR...``: the index of ``dirs`` brought up to date (the
    default one, beside the first), then its tables written as Parquet under ``out``;
    ``looptap export --parquet OUTDIR FLEET.duckdb``: an existing index's tables as they are (no
    run is read)."""
    parquet_dir(out)  # refused before anything is read
    given = Path(dirs[0])
    if given.is_file() or given.is_symlink():
        if len(dirs) > 1:
            raise FleetError("one index at a time: looptap export --parquet OUTDIR FLEET.duckdb")
        con = connect(given, read_only=True, locked=False)
    else:
        con, _ = index_dirs(dirs, None, 1)
    try:
        written = write(con, out)
    finally:
        con.close()
    if not quiet:
        err(f"wrote {', '.join(f'{t} {n:,}' for t, n in written.items())} rows: {out}")
    return 0
