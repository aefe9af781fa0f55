"""The everyday questions of a fleet, as SQL over :data:`~cassettes.fleet.schema.TABLES`
(``looptap fleet findings | cost | failing-turns | weekly | grew | latency``): each is a query
``looptap query`` could run, given a name, and each takes a time window (:class:`Window`: the
runs recorded from ``--since`` to before ``--until``). Pure strings and parameters, no DuckDB
here."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..errors import CassetteError

__all__ = [
    "Window",
    "cost",
    "failing_turns",
    "findings",
    "grew",
    "latency",
    "recent_runs",
    "since_time",
    "weekly",
]

#: ``fleet cost --by`` and ``fleet latency --by``: what each groups by.
COST_BY = {
    "model": "coalesce(t.model_requested, t.model_served)",
    "agent": "r.agent",
    "day": "t.day",
    "week": "CAST(date_trunc('week', r.recorded) AS DATE)",
}
#: ``fleet grew --by``: what is compared, and its key.
GREW_BY = {"code": "f.code", "agent": "r.agent", "model": COST_BY["model"]}
_RELATIVE = re.compile(r"(\d{1,6})\s*([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class QuestionError(CassetteError, ValueError):
    """A named question asked with options it cannot take."""


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def since_time(ref: str, option: str = "--since", now: datetime | None = None) -> datetime:
    """A time of ``--since`` or ``--until`` (naive, UTC): an ISO date or time (UTC unless it
    says), a time before now (``7d``, ``12h``, ``2w``, ``30m``), ``today``, ``yesterday``, else a
    git ref in the current repository (its commit time: ``--since main`` = since main's last
    commit). Raises :class:`QuestionError` in one line."""
    now = now or _now()
    text = ref.strip().lower()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if text in ("today", "yesterday"):
        return midnight - timedelta(days=text == "yesterday")
    if m := _RELATIVE.fullmatch(text):
        return now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
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
                f"{option} wants a date (2026-11-25), a time (2026-11-25T10:00), a time ago "
                f"(7d, 12h, 2w), today, yesterday or a git ref of this repository: {ref!r}"
            ) from None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when


@dataclass(frozen=True)
class Window:
    """The runs a question reads: recorded at ``since`` or after, and before ``until`` (either
    open). Raises :class:`QuestionError` when ``since`` is not before ``until``."""

    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise QuestionError(
                f"--since ({self.since:%Y-%m-%d %H:%M}) is not before --until "
                f"({self.until:%Y-%m-%d %H:%M}): no run is in between"
            )

    @classmethod
    def of(cls, since: str | None, until: str | None) -> Window:
        """The window of ``--since`` and ``--until`` as given (each may be absent)."""
        return cls(
            since_time(since) if since else None, since_time(until, "--until") if until else None
        )

    def where(self, column: str = "r.recorded", glue: str = "WHERE") -> tuple[str, list[object]]:
        """The SQL condition (``glue`` first; empty for an open window) and its parameters."""
        parts: list[str] = []
        params: list[object] = []
        if self.since is not None:
            parts.append(f"{column} >= ?")
            params.append(self.since)
        if self.until is not None:
            parts.append(f"{column} < ?")
            params.append(self.until)
        return (f"{glue} " + " AND ".join(parts) if parts else ""), params


def findings(
    since: datetime | None, new: bool, until: datetime | None = None
) -> tuple[str, list[object]]:
    """Findings by code: how many, in how many runs, first and last seen (and the run last seen
    in); ``since``/``until``: in runs recorded then; ``new``: only codes no earlier run had."""
    if new and since is None:
        raise QuestionError("--new wants --since (new since when?)")
    where, params = Window(since, until).where()
    fresh = (
        "HAVING f.code NOT IN (SELECT f2.code FROM findings f2 JOIN runs r2 ON f2.run = r2.run "
        "WHERE r2.recorded < ?)"
        if new
        else ""
    )
    sql = f"""
        SELECT f.code, f.layer, f.severity, count(*) AS findings, count(DISTINCT f.run) AS runs,
               min(r.recorded) AS first_seen, max(r.recorded) AS last_seen,
               arg_max(r.run, r.recorded) AS last_run
        FROM findings f JOIN runs r ON f.run = r.run
        {where}
        GROUP BY f.code, f.layer, f.severity
        {fresh}
        ORDER BY runs DESC, findings DESC, f.code"""
    return sql, params + ([since] if new else [])


def cost(by: str, window: Window = Window()) -> tuple[str, list[object]]:
    """Cost and tokens per model, agent, day or week; a turn of unknown price counts in
    ``unpriced_turns``, never as 0."""
    key = COST_BY[by]
    where, params = window.where()
    return (
        f"""
        SELECT {key} AS {by}, count(DISTINCT t.run) AS runs, count(*) AS turns,
               sum(t.cost) AS cost_usd,
               CAST(sum(t.cost) / count(DISTINCT t.run) AS DECIMAL(18, 9)) AS cost_per_run,
               count(*) FILTER (WHERE t.cost IS NULL) AS unpriced_turns,
               sum(t.input_tokens) AS input_tokens, sum(t.output_tokens) AS output_tokens
        FROM turns t JOIN runs r ON t.run = r.run
        {where}
        GROUP BY 1
        ORDER BY cost_usd DESC NULLS LAST, 1""",
        params,
    )


def failing_turns(window: Window = Window()) -> tuple[str, list[object]]:
    """Runs grouped by their first root-cause error (an error finding caused by no other) and the
    failing turn's request shape (family, model asked, tools offered)."""
    where, params = window.where(glue="AND")
    return (
        f"""
        WITH firsts AS (
            SELECT f.run, f.code, f.seq,
                   row_number() OVER (PARTITION BY f.run ORDER BY f.seq, f.position) AS k
            FROM findings f JOIN runs r ON f.run = r.run
            WHERE f.severity = 'error' AND f.caused_by IS NULL {where}
        )
        SELECT x.code AS root_cause, t.family, t.model_requested, t.tools_offered,
               count(*) AS runs, min(x.run) AS example_run, arg_min(x.seq, x.run) AS example_seq
        FROM firsts x JOIN turns t ON t.run = x.run AND t.seq = x.seq
        WHERE x.k = 1
        GROUP BY ALL
        ORDER BY runs DESC, root_cause""",
        params,
    )


def weekly(window: Window = Window()) -> tuple[str, list[object]]:
    """Per week (ISO weeks, from Monday, UTC), every week between the first and the last run's
    shown, an empty one too: runs, turns, cost, findings, errors, runs with an error, and the
    change of cost and findings from the week before."""
    where, params = window.where(glue="AND")
    return (
        f"""
        WITH w AS (
            SELECT r.run, date_trunc('week', r.recorded) AS week
            FROM runs r WHERE r.error IS NULL {where}
        ),
        weeks AS (
            SELECT unnest(range(min(week), max(week) + INTERVAL 1 WEEK, INTERVAL 1 WEEK)) AS week
            FROM w
        ),
        rw AS (SELECT week, count(*) AS runs FROM w GROUP BY week),
        tw AS (
            SELECT w.week, count(*) AS turns, sum(t.cost) AS cost,
                   count(*) FILTER (WHERE t.cost IS NULL) AS unpriced
            FROM turns t JOIN w ON t.run = w.run GROUP BY w.week
        ),
        fw AS (
            SELECT w.week, count(*) AS findings, count(*) FILTER (WHERE f.severity = 'error')
                   AS errors
            FROM findings f JOIN w ON f.run = w.run GROUP BY w.week
        ),
        failing AS (  -- an error finding, or the last round trip an API error nothing recovered
            SELECT w.week, count(*) AS failing_runs FROM w JOIN runs r ON r.run = w.run
            WHERE r.ended_on IS NOT NULL OR EXISTS (
                SELECT 1 FROM findings f WHERE f.run = w.run AND f.severity = 'error')
            GROUP BY w.week
        )
        SELECT CAST(weeks.week AS DATE) AS week, coalesce(rw.runs, 0) AS runs,
               coalesce(tw.turns, 0) AS turns, tw.cost AS cost_usd,
               tw.cost - lag(tw.cost) OVER (ORDER BY weeks.week) AS cost_change,
               coalesce(fw.findings, 0) AS findings,
               coalesce(fw.findings, 0) - lag(coalesce(fw.findings, 0)) OVER (ORDER BY weeks.week)
                   AS findings_change,
               coalesce(fw.errors, 0) AS errors, coalesce(failing.failing_runs, 0) AS failing_runs,
               coalesce(tw.unpriced, 0) AS unpriced_turns
        FROM weeks LEFT JOIN rw USING (week) LEFT JOIN tw USING (week) LEFT JOIN fw USING (week)
             LEFT JOIN failing USING (week)
        ORDER BY weeks.week""",
        params,
    )


def periods(window: Window, now: datetime | None = None) -> tuple[Window, Window]:
    """``fleet grew``'s two periods: the window (to now when ``until`` is open; 7 days long when
    ``since`` is), and the period as long just before it."""
    until = window.until or now or _now()
    since = window.since or until - timedelta(days=7)
    latest = Window(since, until)
    return Window(since - (until - since), since), latest


def grew(
    by: str, window: Window = Window(), now: datetime | None = None
) -> tuple[str, list[object]]:
    """What grew from the period before to the window (:func:`periods`): by finding code, its
    findings (and in how many runs, and per run of the period); by agent or model, its cost and
    findings. Only what grew, most first."""
    before, latest = periods(window, now)
    params: list[object] = [before.since, latest.since, latest.since, latest.until]
    period = (
        "CASE WHEN r.recorded >= ? AND r.recorded < ? THEN 'before' "
        "WHEN r.recorded >= ? AND r.recorded < ? THEN 'now' END"
    )
    runs = f"SELECT {period} AS p, count(*) AS n FROM runs r WHERE r.error IS NULL GROUP BY 1"
    if by == "code":
        sql = f"""
            WITH n AS ({runs}),
            c AS (
                SELECT f.code, f.layer, {period} AS p, count(*) AS findings,
                       count(DISTINCT f.run) AS runs
                FROM findings f JOIN runs r ON f.run = r.run GROUP BY ALL
            ),
            g AS (
                SELECT code, layer,
                       coalesce(sum(findings) FILTER (WHERE p = 'before'), 0) AS before,
                       coalesce(sum(findings) FILTER (WHERE p = 'now'), 0) AS now,
                       coalesce(sum(runs) FILTER (WHERE p = 'before'), 0) AS runs_before,
                       coalesce(sum(runs) FILTER (WHERE p = 'now'), 0) AS runs_now
                FROM c WHERE p IS NOT NULL GROUP BY ALL
            )
            SELECT code, layer, before, now, now - before AS change, runs_before,
                   runs_now,
                   round(before / nullif((SELECT n FROM n WHERE p = 'before'), 0), 3)
                       AS per_run_before,
                   round(now / nullif((SELECT n FROM n WHERE p = 'now'), 0), 3) AS per_run_now
            FROM g WHERE now > before
            ORDER BY change DESC, code"""
        return sql, params * 2
    key = GREW_BY[by]
    sql = f"""
        WITH t AS (
            SELECT {key} AS k, {period} AS p, count(DISTINCT t.run) AS runs, sum(t.cost) AS cost
            FROM turns t JOIN runs r ON t.run = r.run GROUP BY ALL
        ),
        f AS (
            SELECT {key.replace("t.model", "ft.model")} AS k, {period} AS p, count(*) AS findings
            FROM findings f JOIN runs r ON f.run = r.run
            JOIN turns ft ON ft.run = f.run AND ft.seq = f.seq GROUP BY ALL
        ),
        g AS (
            SELECT coalesce(t.k, f.k) AS k, coalesce(t.p, f.p) AS p, t.runs, t.cost, f.findings
            FROM t FULL JOIN f ON t.k IS NOT DISTINCT FROM f.k AND t.p = f.p
            WHERE coalesce(t.p, f.p) IS NOT NULL
        ),
        s AS (
            SELECT k,
                   coalesce(sum(runs) FILTER (WHERE p = 'before'), 0) AS runs_before,
                   coalesce(sum(runs) FILTER (WHERE p = 'now'), 0) AS runs_now,
                   sum(cost) FILTER (WHERE p = 'before') AS cost_before,
                   sum(cost) FILTER (WHERE p = 'now') AS cost_now,
                   coalesce(sum(findings) FILTER (WHERE p = 'before'), 0) AS findings_before,
                   coalesce(sum(findings) FILTER (WHERE p = 'now'), 0) AS findings_now
            FROM g GROUP BY k
        )
        SELECT k AS {by}, runs_before, runs_now, cost_before, cost_now,
               coalesce(cost_now, 0) - coalesce(cost_before, 0) AS cost_change,
               findings_before, findings_now, findings_now - findings_before AS findings_change
        FROM s
        WHERE coalesce(cost_now, 0) > coalesce(cost_before, 0) OR findings_now > findings_before
        ORDER BY cost_change DESC, findings_change DESC, 1"""
    return sql, params * 2


def latency(by: str, window: Window = Window()) -> tuple[str, list[object]]:
    """Latency per model or agent: the turns, how many were timed, p50, p95 and the slowest of
    ``duration`` (seconds to the end of the response), p50 and p95 of ``ttft`` (to the first
    stream event); percentiles interpolated between the two nearest turns (``quantile_cont``,
    as numpy's default and Python's ``statistics.quantiles(method="inclusive")``)."""
    key = COST_BY[by]
    where, params = window.where()
    return (
        f"""
        SELECT {key} AS {by}, count(*) AS turns, count(t.duration) AS timed,
               round(quantile_cont(t.duration, 0.5), 4) AS p50_s,
               round(quantile_cont(t.duration, 0.95), 4) AS p95_s,
               round(max(t.duration), 4) AS max_s,
               round(quantile_cont(t.ttft, 0.5), 4) AS ttft_p50_s,
               round(quantile_cont(t.ttft, 0.95), 4) AS ttft_p95_s
        FROM turns t JOIN runs r ON t.run = r.run
        {where}
        GROUP BY 1
        ORDER BY p95_s DESC NULLS LAST, 1""",
        params,
    )


def recent_runs(window: Window = Window(), limit: int = 200) -> tuple[str, list[object]]:
    """The newest runs of the window, one row each (the fleet page's runs, each linked to its
    report): when, agent, turns, cost, findings and errors, or why it could not be read."""
    where, params = window.where()
    return (
        f"""
        SELECT r.run, r.recorded, r.agent, r.round_trips,
               (SELECT count(*) FROM turns t WHERE t.run = r.run) AS turns,
               (SELECT sum(t.cost) FROM turns t WHERE t.run = r.run) AS cost_usd,
               (SELECT count(*) FROM findings f WHERE f.run = r.run) AS findings,
               (SELECT count(*) FROM findings f WHERE f.run = r.run AND f.severity = 'error')
                   AS errors,
               r.error
        FROM runs r
        {where}
        ORDER BY r.recorded DESC, r.run
        LIMIT {int(limit)}""",
        params,
    )
