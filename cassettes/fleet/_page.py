"""``looptap fleet page``: the fleet's questions on one self-contained web page, each run in it
linked to its own HTML report (docs/fleet.md). The reports are written beside the page, in
``<page>.runs/`` (``fleet.html`` → ``fleet.runs/``), one per run linked (the runs table's, a
finding's last run, a failing turn's example), so the links work offline, from a copied folder
too; a report newer than its run is kept, not written again. The page and the reports need the
``html`` extra (Jinja2)."""

from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..commands import err
from ..errors import CassetteError
from ..hints import count
from ..recording import seal
from ..storage import check_target, staged
from ..untrusted import clean_line
from . import _questions as questions
from ._index import FleetError, duckdb_module

__all__ = ["write_page"]

#: Rows of each table at most.
ROWS = 200
#: The columns that name a run: their cells link to its report.
RUN_COLUMNS = ("run", "last_run", "example_run")


def _sections(window: questions.Window) -> list[tuple[str, tuple[str, list[object]]]]:
    _, latest = questions.periods(window)
    return [
        ("Runs (the newest)", questions.recent_runs(window, ROWS)),
        ("Findings by code", questions.findings(window.since, False, window.until)),
        (
            f"Findings that grew: {latest.since:%Y-%m-%d %H:%M} to {latest.until:%Y-%m-%d %H:%M} "
            f"against the {_days(latest)} before",
            questions.grew("code", window),
        ),
        ("Per week", questions.weekly(window)),
        ("Cost by model", questions.cost("model", window)),
        ("Cost by agent", questions.cost("agent", window)),
        ("Latency by model (seconds)", questions.latency("model", window)),
        ("Latency by agent (seconds)", questions.latency("agent", window)),
        ("Failing turns", questions.failing_turns(window)),
    ]


def _days(w: questions.Window) -> str:
    assert w.since is not None and w.until is not None
    days = (w.until - w.since).total_seconds() / 86400
    return f"{days:g} days" if days != 1 else "day"


def write_page(args: argparse.Namespace, con: Any, plain: Callable[[Any], Any]) -> int:
    """Write the page (and the reports of the runs it links) from the open fleet ``con``."""
    from ..views.htmlpage import render_fleet_html  # the html extra's seam (jinja2)

    window = questions.Window.of(args.since, args.until)
    target = check_target(args.output, "the page", force=args.force, hint="--force replaces it")
    reports = None if args.no_reports else _reports_dir(Path(args.output))
    tables: list[tuple[str, list[str], list[list[Any]]]] = []
    linked: dict[str, str] = {}  # run → the report's name
    try:
        for title, (sql, params) in _sections(window):
            cur = con.execute(sql, params)
            names = [d[0] for d in cur.description or ()]
            rows = []
            for r in cur.fetchmany(ROWS):
                row: list[Any] = []
                # a run the index could not read has no report to link (its error says why)
                unread = "error" in names and r[names.index("error")] is not None
                for n, v in zip(names, r, strict=True):
                    text = clean_line(str(plain(v))) if v is not None else ""
                    if reports and n in RUN_COLUMNS and isinstance(v, str) and v and not unread:
                        name = linked.setdefault(v, _report_name(v))
                        row.append((text, f"{reports.name}/{name}"))
                    else:
                        row.append(text)
                rows.append(row)
            tables.append((title, names, rows))
        runs, failed = con.execute("SELECT count(*), count(error) FROM runs").fetchone()
    except duckdb_module().Error as exc:
        raise FleetError(f"the fleet cannot be read: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    missing = _write_reports(reports, linked) if reports is not None else set()
    if missing:  # a run gone or unreadable since it was indexed: its cells are not linked
        tables = [
            (t, n, [[_unlink(c, missing) for c in row] for row in rows]) for t, n, rows in tables
        ]
    page = render_fleet_html(f"{count(runs, 'run')} ({failed:,} unreadable)", tables)
    with staged(target) as s:
        s.write(seal(page.encode()))
    said = f"; {count(len(linked) - len(missing), 'run report')} in {reports}" if reports else ""
    err(f"wrote {args.output}{said}")
    return 0


def _unlink(cell: Any, missing: set[str]) -> Any:
    return cell[0] if isinstance(cell, tuple) and cell[1].rsplit("/", 1)[-1] in missing else cell


def _reports_dir(page: Path) -> Path:
    """``<page>.runs`` beside the page: made, or refused in one line when it is not a
    directory of ours (a link, a file)."""
    d = page.with_name(page.stem + ".runs")
    if d.is_symlink() or (d.exists() and not d.is_dir()):
        raise FleetError(f"{d} is not a directory looptap made: the runs' reports go there")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _report_name(run: str) -> str:
    """A report's file name: the run's name (cleaned) and a digest of its path (two runs of one
    name in two directories get two reports)."""
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(run).stem)[:60]
    return f"{stem}-{hashlib.sha256(run.encode()).hexdigest()[:10]}.html"


def _write_reports(where: Path, linked: dict[str, str]) -> set[str]:
    """Each linked run's report (``looptap export --html``'s page), unless one newer than the run
    is there; the names of those that could not be written (a line each on stderr)."""
    from ..reading import open_run
    from ..views.htmlpage import render_html
    from ..views.report import report_data

    missing: set[str] = set()
    for run, name in linked.items():
        report = where / name
        try:
            if report.is_file() and report.stat().st_mtime_ns >= os.stat(run).st_mtime_ns:
                continue
            target = check_target(report, "the run's report", force=True)
            opened = open_run(Path(run))
            try:
                page = render_html(report_data(opened)).encode()
            finally:
                opened.close()
            with staged(target) as s:
                s.write(seal(page))
        except (CassetteError, OSError, ValueError, MemoryError) as exc:
            missing.add(name)
            err(f"no report for {clean_line(run)}: {clean_line(str(exc).splitlines()[0])}")
    return missing
