"""What the fleet index answers the MCP server (docs/fleet.md, "The fleet page, and the MCP
server"): ``list_runs``' figures of the runs it holds as they are now, and ``search``'s runs whose
findings or tool calls hold the query. Each opens the index read-only and answers ``{}``/``[]``
without DuckDB, without an index or when it cannot be read: the caller then reads the runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..errors import CassetteError
from ._index import FLEET_NAME
from ._rows import stamp_of

__all__ = ["find_index", "overviews", "runs_mentioning"]

T = TypeVar("T")


def find_index(roots: Sequence[Path]) -> Path | None:
    """The index of ``roots`` (``.looptap/fleet.duckdb`` in the first root or beside it), if any."""
    if not roots:
        return None
    for where in (roots[0] / FLEET_NAME, roots[0].parent / FLEET_NAME):
        if where.is_file():
            return where
    return None


def _asked(roots: Sequence[Path], question: Callable[[Any], T], none: T) -> T:
    """``question``'s answer from a read-only connection to the index of ``roots``; ``none``
    without DuckDB, without an index, or when it cannot be read (being written)."""
    db = find_index(roots)
    if db is None:
        return none
    try:
        import duckdb
    except ImportError:
        return none
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:
        return none
    try:
        return question(con)
    except duckdb.Error:
        return none
    finally:
        con.close()


def overviews(roots: Sequence[Path], paths: Sequence[Path]) -> dict[Path, dict[str, Any]]:
    """The MCP server's ``list_runs`` figures of those of ``paths`` the index of ``roots`` holds
    as they are now (same size, mtime and digest, read without error); ``{}`` without DuckDB,
    without an index, or when it cannot be read (being written): the caller reads the runs
    instead."""
    stamps: dict[str, tuple[Path, int, int]] = {}
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            continue
        stamps[str(p)] = (p, st.st_size, st.st_mtime_ns)
    return _asked(roots, lambda con: _overviews(con, stamps), {}) if stamps else {}


def _same(path: Path, digest: str) -> bool:
    """The run's digest is still ``digest`` (the agent rules in force are those it was indexed
    with: its findings figures hold)."""
    try:
        return stamp_of(path).digest == digest
    except (OSError, CassetteError):
        return False


def _overviews(con: Any, stamps: dict[str, tuple[Path, int, int]]) -> dict[Path, dict[str, Any]]:
    names = list(stamps)
    out: dict[Path, dict[str, Any]] = {}
    for run, size, mtime, digest, trips, problems in con.execute(
        "SELECT run, size, mtime_ns, digest, round_trips, problems FROM runs "
        "WHERE run IN (SELECT unnest(?::VARCHAR[])) AND error IS NULL",
        [names],
    ).fetchall():
        path, now_size, now_mtime = stamps[run]
        if (size, mtime) == (now_size, now_mtime) and _same(path, digest):
            out[path] = {"round_trips": trips, "conversations": 0, "turns": 0, "findings": {}}
            out[path].update(cost_usd=0.0, cost_estimated=False, problems=problems)
    held = [str(p) for p in out]
    by_run = {str(p): o for p, o in out.items()}
    for run, conversations, turns in con.execute(
        "SELECT run, count(DISTINCT conversation), count(*) FROM turns "
        "WHERE run IN (SELECT unnest(?::VARCHAR[])) GROUP BY run",
        [held],
    ).fetchall():
        by_run[run].update(conversations=conversations, turns=turns)
    for run, layer, severity, n in con.execute(
        "SELECT run, layer, severity, count(*) FROM findings "
        "WHERE run IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL ORDER BY ALL",
        [held],
    ).fetchall():
        by_run[run]["findings"].setdefault(layer, {})[severity] = n
    # each conversation's last turn: its cumulative cost, summed as the listing sums it
    priced = dict.fromkeys(held, True)
    for run, cumulative, estimated in con.execute(
        "SELECT run, arg_max(cumulative_cost, turn), arg_max(cumulative_estimated, turn) "
        "FROM turns WHERE run IN (SELECT unnest(?::VARCHAR[])) GROUP BY run, conversation "
        "ORDER BY run, min(seq)",
        [held],
    ).fetchall():
        o = by_run[run]
        if cumulative is None:
            priced[run] = False
            continue
        o["cost_usd"] += float(cumulative)
        o["cost_estimated"] = o["cost_estimated"] or bool(estimated)
    for run, o in by_run.items():
        o["cost_usd"] = round(o["cost_usd"], 6) if priced[run] else None
        o["cost_estimated"] = o["cost_estimated"] if priced[run] else None
    return out


def runs_mentioning(roots: Sequence[Path], query: str, limit: int = 50) -> list[Path]:
    """Runs of the index of ``roots`` with a finding message or a tool call's name holding
    ``query`` (case-insensitive), newest first: the MCP server's search reads these first, so a
    hit beyond the newest runs is found. ``[]`` without DuckDB or an index."""
    found: list[Any] = _asked(
        roots,
        lambda con: con.execute(
            "SELECT run FROM runs WHERE run IN ("
            "  SELECT run FROM findings WHERE contains(lower(message), lower(?))"
            "  UNION SELECT run FROM tool_calls WHERE contains(lower(name), lower(?))"
            ") ORDER BY recorded DESC LIMIT ?",
            [query, query, limit],
        ).fetchall(),
        [],
    )
    return [Path(r[0]) for r in found if Path(r[0]).is_file()]
