"""The everyday questions of a fleet, as SQL over :data:`~cassettes.fleet.schema.TABLES`
(``looptap fleet findings | cost | failing-turns``): each is a query ``looptap query`` could run,
given a name. Pure strings and parameters, no DuckDB here."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime

from cassettes.errors import CassetteError

__all__ = ["cost", "failing_turns", "findings", "since_time"]

#: ``fleet cost --by``: what each groups by.
COST_BY = {
    "model": "coalesce(t.model_requested, t.model_served)",
    "agent": "r.agent",
    "day": "t.day",
}


class QuestionError(CassetteError, ValueError):
    """A named question asked with options it cannot take."""


def since_time(ref: str) -> datetime:
    """``--since``: an ISO date or time (UTC unless it says), else a git ref in the current
    repository (its commit time: ``--since main`` = since main's last commit)."""
    try:
        when = datetime.fromisoformat(ref)
    except ValueError:
        try:
            out = subprocess.run(
                ["git", "log", "-1", "--format=%cI", ref, "--"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            when = datetime.fromisoformat(out)
        except (OSError, subprocess.CalledProcessError, ValueError):
            raise QuestionError(
                f"--since wants a date (2026-11-25) or a git ref of this repository: {ref!r}"
            ) from None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when


def findings(since: datetime | None, new: bool) -> tuple[str, list[object]]:
    """Findings by code: how many, in how many runs, first and last seen; ``since``: in runs
    recorded since then; ``new``: only codes no earlier run had."""
    if new and since is None:
        raise QuestionError("--new wants --since (new since when?)")
    where = "WHERE r.recorded >= ?" if since is not None else ""
    fresh = (
        "HAVING f.code NOT IN (SELECT f2.code FROM findings f2 JOIN runs r2 ON f2.run = r2.run "
        "WHERE r2.recorded < ?)"
        if new
        else ""
    )
    sql = f"""
        SELECT f.code, f.layer, f.severity, count(*) AS findings, count(DISTINCT f.run) AS runs,
               min(r.recorded) AS first_seen, max(r.recorded) AS last_seen
        FROM findings f JOIN runs r ON f.run = r.run
        {where}
        GROUP BY f.code, f.layer, f.severity
        {fresh}
        ORDER BY runs DESC, findings DESC, f.code"""
    return sql, [since] * (bool(where) + new)


def cost(by: str) -> tuple[str, list[object]]:
    """Cost and tokens per model, agent or day; a turn of unknown price counts in
    ``unpriced_turns``, never as 0."""
    key = COST_BY[by]
    return (
        f"""
        SELECT {key} AS {by}, count(DISTINCT t.run) AS runs, count(*) AS turns,
               sum(t.cost) AS cost_usd,
               CAST(sum(t.cost) / count(DISTINCT t.run) AS DECIMAL(18, 9)) AS cost_per_run,
               count(*) FILTER (WHERE t.cost IS NULL) AS unpriced_turns,
               sum(t.input_tokens) AS input_tokens, sum(t.output_tokens) AS output_tokens
        FROM turns t JOIN runs r ON t.run = r.run
        GROUP BY 1
        ORDER BY cost_usd DESC NULLS LAST, 1""",
        [],
    )


def failing_turns() -> tuple[str, list[object]]:
    """Runs grouped by their first root-cause error (an error finding caused by no other) and the
    failing turn's request shape (family, model asked, tools offered)."""
    return (
        """
        WITH firsts AS (
            SELECT f.run, f.code, f.seq,
                   row_number() OVER (PARTITION BY f.run ORDER BY f.seq, f.position) AS k
            FROM findings f
            WHERE f.severity = 'error' AND f.caused_by IS NULL
        )
        SELECT x.code AS root_cause, t.family, t.model_requested, t.tools_offered,
               count(*) AS runs, min(x.run) AS example_run, arg_min(x.seq, x.run) AS example_seq
        FROM firsts x JOIN turns t ON t.run = x.run AND t.seq = x.seq
        WHERE x.k = 1
        GROUP BY ALL
        ORDER BY runs DESC, root_cause""",
        [],
    )
