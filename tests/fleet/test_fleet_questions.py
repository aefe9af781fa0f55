"""The fleet's questions for a team (issue 69, item 5; docs/fleet.md), each answer checked against
``looptap show --json`` of the runs: a time window on every question (``--since``, ``--until``),
cost by agent this week, findings and cost per week, what grew week over week, p50/p95 latency
by model and agent; the page linking each run to its report; ``export --parquet`` from an index.

The fleet: real corpus runs (findings of every layer, priced and unpriced models) spread over
three weeks by their files' times, and looptap cassettes with timings of several models."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import statistics
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import CORPUS

from looptap.cassettes.fleet import since_time
from tests.fleet.test_fleet import RUNS, looptap
from tests.support.analysed import cli_output
from tests.support.huge import write_huge

duckdb = pytest.importorskip("duckdb")
DAY = 86400.0
#: (corpus run, agent directory, days ago) and (model, agent, days ago, round trips) of the
#: synthetic ones: runs in this week, last week and the week before.
CORPUS_RUNS = [
    (RUNS[0], "planner", 1.5), (RUNS[1], "planner", 3.5), (RUNS[2], "coder", 2.5),
    (RUNS[3], "coder", 9.5), (RUNS[4], "planner", 10.5), (RUNS[5], "coder", 12.5),
    (RUNS[6], "triage", 16.5), (RUNS[0], "triage", 8.5), (RUNS[4], "coder", 4.5),
    (RUNS[0], "coder", 5.5),
]  # fmt: skip
TIMED = [
    ("gpt-4o-mini", "planner", 0.5, 9), ("gpt-4o", "coder", 2.5, 7),
    ("gpt-4o-mini", "coder", 6.5, 5), ("gpt-4o", "triage", 11.5, 6),
    ("gpt-4o-mini", "triage", 15.5, 4),
]  # fmt: skip


def ask(db: Path, *question: str) -> list[dict[str, Any]]:
    r = looptap("fleet", *question, "--fleet", str(db), "--json")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return [orjson.loads(line) for line in r.stdout.splitlines()]


def show_json(path: Path) -> list[dict[str, Any]]:
    """``looptap show --json PATH``'s objects (the command line's own code, run in this process:
    a process each would take most of the test's time)."""
    rc, out, err = cli_output("show", "--json", str(path))
    assert rc == 0, err
    return [orjson.loads(line) for line in out.splitlines()]


class Fleet:
    """The runs, their index, and what ``show --json`` says of each run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs = root / "runs"
        self.db = root / "fleet.duckdb"
        self.now = time.time()
        #: run path → (agent, recorded datetime, show --json turns)
        self.shown: dict[str, tuple[str, datetime, list[dict[str, Any]]]] = {}

    def make(self) -> None:
        for i, (rel, agent, ago) in enumerate(CORPUS_RUNS):
            d = self.runs / agent
            d.mkdir(parents=True, exist_ok=True)
            path = Path(shutil.copy(CORPUS / rel, d / f"c{i}.yaml"))
            when = self.now - ago * DAY
            os.utime(path, (when, when))
            self._show(path, agent, when)
        for i, (model, agent, ago, n) in enumerate(TIMED):
            path = self.runs / agent / f"t{i}.jsonl"
            when = self.now - ago * DAY

            def timing(seq: int, i: int = i) -> tuple[float, float]:
                return 0.1 + 0.01 * seq, 0.3 + 0.37 * ((seq * 7 + i * 3) % 11)

            write_huge(path, n, "long", turns=3, start=when, model=model, meta={"agent": agent},
                       timing=timing)  # fmt: skip
            self._show(path, agent, when)
        r = looptap("index", str(self.runs), "-o", str(self.db))
        assert r.returncode == 0, r.stderr

    def _show(self, path: Path, agent: str, when: float) -> None:
        turns = [o for o in show_json(path) if o["conversation"]]
        moment = datetime.fromtimestamp(when, UTC).replace(tzinfo=None)
        self.shown[str(path.resolve())] = (agent, moment, turns)

    def between(self, since: datetime, until: datetime) -> list[tuple[str, list[dict[str, Any]]]]:
        return [(a, t) for a, when, t in self.shown.values() if since <= when < until]


def _cost(turns: list[dict[str, Any]]) -> Decimal | None:
    costs = [Decimal(v["tokens"]["cost"]) for v in turns if v["tokens"]["cost"] is not None]
    return sum(costs, Decimal(0)) if costs else None


def _model(v: dict[str, Any]) -> str:
    return str(v["model_requested"] or v["model_served"])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    f = Fleet(tmp_path_factory.mktemp("questions"))
    f.make()
    return f


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC).replace(tzinfo=None)


def test_cost_by_agent_this_week_is_show_json_s(fleet: Fleet) -> None:
    got = {r["agent"]: r for r in ask(fleet.db, "cost", "--by", "agent", "--since", "7d")}
    want: dict[str, list[dict[str, Any]]] = defaultdict(list)
    runs: Counter[str] = Counter()
    for agent, turns in fleet.between(_utc(fleet.now) - timedelta(days=7), _utc(fleet.now + DAY)):
        want[agent] += turns
        runs[agent] += 1
    assert set(got) == set(want) == {"planner", "coder"}
    for agent, turns in want.items():
        cost = _cost(turns)
        assert (Decimal(got[agent]["cost_usd"]) if got[agent]["cost_usd"] else None) == cost
        assert got[agent]["turns"] == len(turns) and got[agent]["runs"] == runs[agent]
        assert got[agent]["unpriced_turns"] == sum(v["tokens"]["cost"] is None for v in turns)


def test_findings_that_grew_week_over_week(fleet: Fleet) -> None:
    now = _utc(fleet.now)
    periods = [(now - timedelta(days=14), now - timedelta(days=7)), (now - timedelta(days=7), now)]
    counts = [
        Counter(f["code"] for _, turns in fleet.between(*p) for v in turns for f in v["findings"])
        for p in periods
    ]
    want = {c: (counts[0][c], counts[1][c]) for c in counts[1] if counts[1][c] > counts[0][c]}
    got = ask(fleet.db, "grew", "--until", now.isoformat())
    assert {r["code"]: (r["before"], r["now"]) for r in got} == want
    assert want and any(b for b, _ in want.values())  # the sample grew from something too
    changes = [r["change"] for r in got]
    assert changes == sorted(changes, reverse=True)
    # by agent: cost and findings of each period, only those that grew
    by_agent = {r["agent"]: r for r in ask(fleet.db, "grew", "--by", "agent")}
    for agent, r in by_agent.items():
        before, latest = ([t for a, t in fleet.between(*p) if a == agent] for p in periods)
        found = [sum(len(v["findings"]) for t in ts for v in t) for ts in (before, latest)]
        costs = [_cost([v for t in ts for v in t]) for ts in (before, latest)]
        assert (r["findings_before"], r["findings_now"]) == tuple(found), agent
        assert [
            Decimal(c) if c is not None else None for c in (r["cost_before"], r["cost_now"])
        ] == costs
        assert found[1] > found[0] or (costs[1] or 0) > (costs[0] or 0)


def test_latency_percentiles_by_model_and_agent(fleet: Fleet) -> None:
    for by, key in (("model", _model), ("agent", None)):
        durations: dict[str, list[float]] = defaultdict(list)
        counted: Counter[str] = Counter()
        for agent, _, turns in fleet.shown.values():
            for v in turns:
                k = key(v) if key else agent
                counted[k] += 1
                if v["timing"]["duration"] is not None:
                    durations[k].append(v["timing"]["duration"])
        got = {r[by]: r for r in ask(fleet.db, "latency", "--by", by)}
        assert set(got) == set(counted)
        for k, ds in durations.items():
            r = got[k]
            assert (r["turns"], r["timed"]) == (counted[k], len(ds))
            if len(ds) < 2:
                continue
            q = statistics.quantiles(ds, n=100, method="inclusive")
            assert r["p50_s"] == pytest.approx(statistics.median(ds), abs=1e-4)
            assert r["p95_s"] == pytest.approx(q[94], abs=1e-4)
            assert r["max_s"] == pytest.approx(max(ds), abs=1e-4)
        if by == "model":  # the timed runs' models, each with several timed turns
            assert {k for k, ds in durations.items() if len(ds) > 1} >= {"gpt-4o", "gpt-4o-mini"}


def test_weekly_findings_and_cost(fleet: Fleet) -> None:
    rows = ask(fleet.db, "weekly")
    weeks: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for _, when, turns in fleet.shown.values():
        monday = (when - timedelta(days=when.weekday())).date().isoformat()
        weeks[monday].append(turns)
    got = {r["week"]: r for r in rows}
    assert [r["week"] for r in rows] == sorted(got)  # every week in between, in order
    for week, runs in weeks.items():
        turns = [v for t in runs for v in t]
        r = got[week]
        assert (r["runs"], r["turns"]) == (len(runs), len(turns))
        assert r["findings"] == sum(len(v["findings"]) for v in turns)
        assert (Decimal(r["cost_usd"]) if r["cost_usd"] else None) == _cost(turns)
    for prev, r in itertools.pairwise(rows):
        assert r["findings_change"] == r["findings"] - prev["findings"]


def test_every_question_takes_a_window(fleet: Fleet) -> None:
    """A window that holds only the runs of 4 to 6 days ago: every question answers of them."""
    now = _utc(fleet.now)
    since, until = (now - timedelta(days=6)).isoformat(), (now - timedelta(days=4)).isoformat()
    inside = fleet.between(now - timedelta(days=6), now - timedelta(days=4))
    assert len(inside) == 2
    turns = [v for _, t in inside for v in t]
    window = ["--since", since, "--until", until]
    codes = Counter(f["code"] for v in turns for f in v["findings"])
    assert {r["code"]: r["findings"] for r in ask(fleet.db, "findings", *window)} == dict(codes)
    cost = ask(fleet.db, "cost", "--by", "week", *window)
    assert sum(r["turns"] for r in cost) == len(turns)
    assert sum(r["turns"] for r in ask(fleet.db, "latency", *window)) == len(turns)
    assert sum(r["runs"] for r in ask(fleet.db, "weekly", *window)) == 2
    failing = ask(fleet.db, "failing-turns", *window)
    runs = {p for p, (_, w, _) in fleet.shown.items() if since <= w.isoformat() < until}
    assert {r["example_run"] for r in failing} <= runs
    assert ask(fleet.db, "findings", "--since", (now + timedelta(days=1)).isoformat()) == []
    for bad, says in (
        (["--since", "last tuesday"], "--since wants a date"),
        (["--until", "3 fortnights"], "--until wants a date"),
        (["--since", "2d", "--until", "5d"], "is not before --until"),
    ):
        r = looptap("fleet", "cost", "--fleet", str(fleet.db), *bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and says in r.stderr, r.stderr


def test_times_a_window_takes() -> None:
    now = datetime(2026, 11, 26, 15, 30)
    assert since_time("7d", now=now) == datetime(2026, 11, 19, 15, 30)
    assert since_time("12h", now=now) == datetime(2026, 11, 26, 3, 30)
    assert since_time("2w", now=now) == datetime(2026, 11, 12, 15, 30)
    assert since_time("30m", now=now) == datetime(2026, 11, 26, 15)
    assert since_time("today", now=now) == datetime(2026, 11, 26)
    assert since_time("Yesterday", now=now) == datetime(2026, 11, 25)
    assert since_time("2026-11-20T10:00:00+01:00", now=now) == datetime(2026, 11, 20, 9)


def test_the_page_links_each_run_to_its_report(fleet: Fleet, tmp_path: Path) -> None:
    page = tmp_path / "fleet.html"
    r = looptap("fleet", "page", "--fleet", str(fleet.db), "-o", str(page))
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    links = re.findall(r'<a href="(fleet\.runs/[^"]+\.html)">([^<]+)</a>', html)
    linked = {text for _, text in links}
    assert linked >= set(fleet.shown)  # every run of the runs table
    for href, text in links:
        report = (tmp_path / href).read_text()
        assert report.startswith("<!doctype html>") and Path(text).name in report, href
    assert len({h for h, _ in links}) == len(linked)  # one report a run
    assert "Latency by model" in html and "Findings that grew" in html and "Per week" in html
    # a second page keeps the reports newer than their runs
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "fleet.runs").iterdir()}
    r = looptap("fleet", "page", "--fleet", str(fleet.db), "-o", str(page), "--force")
    assert r.returncode == 0, r.stderr
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "fleet.runs").iterdir()} == stamps
    r = looptap("fleet", "page", "--fleet", str(fleet.db), "-o", str(tmp_path / "bare.html"),
                "--no-reports")  # fmt: skip
    assert r.returncode == 0 and "<a href" not in (tmp_path / "bare.html").read_text()
    assert not (tmp_path / "bare.runs").exists()


def test_export_parquet_from_an_existing_index_reads_no_run(fleet: Fleet, tmp_path: Path) -> None:
    db = tmp_path / "copy.duckdb"
    shutil.copy(fleet.db, db)
    aside = tmp_path / "aside"
    shutil.move(fleet.runs, aside)  # no run to read: the export takes the index as it is
    try:
        r = looptap("export", "--parquet", str(tmp_path / "pq"), str(db))
        assert r.returncode == 0, r.stderr
        assert "indexed" not in r.stderr
    finally:
        shutil.move(aside, fleet.runs)
    con = duckdb.connect(str(db), read_only=True)
    for table in ("runs", "turns", "findings"):
        want = con.execute(f"SELECT count(*) FROM {table}").fetchone()
        got = (
            duckdb.connect()
            .execute(
                "SELECT count(*) FROM read_parquet(?, hive_partitioning=true)",
                [str(tmp_path / "pq" / table / "**" / "*.parquet")],
            )
            .fetchone()
        )
        assert got == want and want[0] > 0, table
    con.close()


def test_the_page_links_no_run_the_index_could_not_read(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(CORPUS / RUNS[6], runs / "good.yaml")
    (runs / "bad.jsonl").write_text("not a run\n")
    r = looptap("index", str(runs), "-o", str(tmp_path / "f.duckdb"))
    assert r.returncode == 0 and "skipped" in r.stderr, r.stderr
    r = looptap(
        "fleet", "page", "--fleet", str(tmp_path / "f.duckdb"), "-o", str(tmp_path / "p.html")
    )
    assert r.returncode == 0 and "no report" not in r.stderr, r.stderr
    html = (tmp_path / "p.html").read_text()
    linked = set(re.findall(r'<a href="p\.runs/[^"]+">([^<]+)</a>', html))
    assert linked == {str((runs / "good.yaml").resolve())}
    assert str((runs / "bad.jsonl").resolve()) in html  # listed, with why, not linked
    assert [p.name.split("-")[0] for p in (tmp_path / "p.runs").iterdir()] == ["good"]
