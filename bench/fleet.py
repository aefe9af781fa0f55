"""The fleet index at scale (issues 59 and 69): N runs generated from the corpus and the bench's
synthetic runs, indexed, re-indexed with 1 % changed, each named question timed, peak memory, and
three answers a team asks printed (cost by agent this week, the findings that grew week over
week, p95 latency by model), with a sample of runs checked against ``looptap show --json``.

    python bench/fleet.py [--runs 10000] [--jobs 2] [--dir /tmp/looptap-fleet] [--big MB] [--write]

Runs: the corpus's vcrpy cassettes (every API family, model and finding it has), copied round
robin, and synthetic looptap cassettes (``tests/support/huge.py``: one-turn sweeps and 10-turn
conversations of 3 to 40 round trips, of five models, each round trip's latency drawn from a
log-normal of its model's median), one in three; spread over 30 days (the corpus copies by their
mtimes, the cassettes by their recording time) and over agents named each way the index knows: a
given name, a trace's service, the command run (in the synthetic headers) or the directory.
Each command runs as ``looptap`` in its own process; its time is wall-clock and
its peak memory the ``ru_maxrss`` ``wait4`` gives for it (the larger of its own and its
worker processes'). The re-index changes 1 % of the runs (a byte appended). ``--big MB`` adds
a row: one synthetic run of about MB megabytes of real round trips, indexed alone. ``--write``
puts the table into docs/fleet.md. Times come from a shared 2-core machine: read them as rough.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from real_corpus import CORPUS  # noqa: E402

from tests.support.huge import write_huge  # noqa: E402

DOC = ROOT / "docs" / "fleet.md"
MARK = "## Measured"
AGENTS = ("planner", "coder", "reviewer", "triage", "evals", "support", "search", "ops")
#: The synthetic runs' models and their median latency (seconds).
MODELS = {"gpt-4o-mini": 0.8, "gpt-4o": 1.6, "gpt-4.1-mini": 0.9, "gpt-4.1": 2.2, "o4-mini": 4.0}


def _meta(rng: random.Random, agent: str) -> dict[str, object]:
    """A synthetic header: the agent given, a trace's service, a command, or nothing."""
    way = rng.randrange(4)
    if way == 0:
        return {"agent": agent}
    if way == 1:
        return {"service": f"{agent}-svc"}
    if way == 2:
        return {"command": ["uv", "run", "python", f"agents/{agent}_bot.py", "--fast"]}
    return {}


def generate(where: Path, n: int) -> list[Path]:
    """``n`` runs under ``where/<agent>/``: corpus copies and synthetic cassettes."""
    rng = random.Random(59)
    corpus = sorted(CORPUS.rglob("*.yaml"))
    out: list[Path] = []
    now = time.time()
    for i in range(n):
        d = where / AGENTS[i % len(AGENTS)]
        d.mkdir(parents=True, exist_ok=True)
        t = now - rng.randint(0, 30) * 86400 - rng.randint(0, 86399)
        if i % 3 == 2:
            path = d / f"run{i:05}.jsonl"
            long = rng.random() < 0.5
            model = rng.choice(list(MODELS))
            median, seed = MODELS[model], rng.random()

            def timing(seq: int, median: float = median, seed: float = seed) -> tuple[float, float]:
                r = random.Random(seed + seq)
                took = median * r.lognormvariate(0, 0.5)
                return round(took * 0.3, 4), round(took, 4)

            write_huge(
                path, rng.randint(3, 40), "long" if long else "one_turn", turns=10, start=t,
                model=model, meta=_meta(rng, d.name), timing=timing,
            )  # fmt: skip
        else:
            path = d / f"run{i:05}.yaml"
            shutil.copyfile(corpus[i % len(corpus)], path)
        os.utime(path, (t, t))
        out.append(path)
    return out


def measure(argv: list[str]) -> tuple[float, int, str]:
    """Seconds, peak RSS (MB) and the last stderr line of ``looptap argv``."""
    t = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "looptap.cassettes.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)  # its rusage: the process and its waited-for workers
    took = time.monotonic() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss // 1024
    if p.returncode != 0:
        raise SystemExit(f"looptap {' '.join(argv)} failed: {err[-2000:]}")
    lines = err.strip().splitlines()
    return took, peak, lines[-1] if lines else ""


def _sql(db: Path, q: list[str]) -> float:
    """Seconds the named question's query takes in DuckDB, without the command's start-up."""
    import duckdb

    import looptap.cassettes.fleet as questions

    opts = dict(zip(q[2::2], q[3::2], strict=False))
    window = questions.Window.of(opts.get("--since"), opts.get("--until"))
    by = opts.get("--by")
    if q[1] == "cost":
        sql, params = questions.cost(by or "model", window)
    elif q[1] == "failing-turns":
        sql, params = questions.failing_turns(window)
    elif q[1] == "weekly":
        sql, params = questions.weekly(window)
    elif q[1] == "grew":
        sql, params = questions.grew(by or "code", window)
    elif q[1] == "latency":
        sql, params = questions.latency(by or "model", window)
    else:
        sql, params = questions.findings(window.since, "--new" in q, window.until)
    con = duckdb.connect(str(db), read_only=True)
    t = time.monotonic()
    con.execute(sql, params).fetchall()
    took = time.monotonic() - t
    con.close()
    return took


def _big(where: Path, mb: int) -> tuple[str, float, int, str]:
    """One run of about ``mb`` MB (10-turn conversations, ~790 bytes a round trip), indexed alone
    into its own index: the time and memory one big run takes."""
    where.mkdir(parents=True)
    path = write_huge(where / "big.jsonl", mb * 1_000_000 // 790, "long", turns=10)
    took, peak, said = measure(["index", str(where), "-o", str(where.parent / "big.duckdb")])
    return (f"one run of {path.stat().st_size / 1e6:,.0f} MB, indexed alone", took, peak, said)


#: The named questions timed, each with ``--fleet INDEX --csv``.
QUESTIONS = (
    ["fleet", "findings"],
    ["fleet", "findings", "--since", "7d", "--new"],
    ["fleet", "cost", "--by", "model"],
    ["fleet", "cost", "--by", "agent"],
    ["fleet", "cost", "--by", "agent", "--since", "7d"],
    ["fleet", "cost", "--by", "day"],
    ["fleet", "failing-turns"],
    ["fleet", "weekly"],
    ["fleet", "grew"],
    ["fleet", "grew", "--by", "agent"],
    ["fleet", "latency", "--by", "model"],
    ["fleet", "latency", "--by", "agent", "--since", "7d"],
)


def _ask(db: Path, *q: str) -> list[dict[str, object]]:
    import orjson

    p = subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "fleet", *q, "--fleet", str(db), "--json"],
        capture_output=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    return [orjson.loads(line) for line in p.stdout.splitlines()]


def _md(rows: list[dict[str, object]], cols: list[str], limit: int = 8) -> list[str]:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows[:limit]:
        out.append("| " + " | ".join("" if r[c] is None else str(r[c]) for c in cols) + " |")
    return out


def answers(db: Path, files: list[Path]) -> list[str]:
    """Three answers a team asks, as tables, and a sample of runs checked against ``show
    --json``: each sampled run's turns, cost and latencies, as the index holds them."""
    out = ["Cost by agent this week (`fleet cost --by agent --since 7d`):", ""]
    out += _md(_ask(db, "cost", "--by", "agent", "--since", "7d"),
               ["agent", "runs", "turns", "cost_usd", "unpriced_turns"])  # fmt: skip
    out += ["", "Findings that grew week over week (`fleet grew`, the 8 that grew most):", ""]
    out += _md(_ask(db, "grew"), ["code", "before", "now", "change", "runs_now", "per_run_now"])
    out += [
        "",
        "p95 latency by model (`fleet latency --by model`, the synthetic runs' models):",
        "",
    ]
    out += _md([r for r in _ask(db, "latency", "--by", "model") if r["timed"]],
               ["model", "timed", "p50_s", "p95_s", "max_s"])  # fmt: skip
    out += ["", _sampled(db, files)]
    return out


def _sampled(db: Path, files: list[Path], n: int = 20) -> str:
    """``n`` runs drawn at random: their turns, cost and durations from the index equal ``show
    --json``'s."""
    from decimal import Decimal

    import duckdb
    import orjson

    con = duckdb.connect(str(db), read_only=True)
    same = 0
    sample = random.Random(69).sample(files, n)
    for f in sample:
        p = subprocess.run(
            [sys.executable, "-m", "looptap.cassettes.cli", "show", "--json", str(f)],
            capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        shown = [orjson.loads(x) for x in p.stdout.splitlines()]
        turns = [v for v in shown if v["conversation"]]
        costs = [Decimal(v["tokens"]["cost"]) for v in turns if v["tokens"]["cost"] is not None]
        want = (
            len(turns),
            sum(costs, Decimal(0)) if costs else None,
            sorted(v["timing"]["duration"] or 0.0 for v in turns),
        )
        got = con.execute(
            "SELECT count(*), sum(cost), list(coalesce(duration, 0.0) ORDER BY coalesce(duration, "
            "0.0)) FROM turns WHERE run = ?",
            [str(f.resolve())],
        ).fetchone()
        if p.returncode != 0:  # a file no reader takes: an error row in the index, no turns
            error = con.execute("SELECT error FROM runs WHERE run = ?", [str(f.resolve())])
            same += got[0] == 0 and (error.fetchone() or (None,))[0] is not None
            continue
        same += (got[0], got[1], list(got[2])) == want
    con.close()
    return (
        f"{same} of {n} runs drawn at random have the index's turns, cost and latencies of "
        "`looptap show --json` (the answers above sum those rows; tests/fleet/"
        "test_fleet_questions.py checks each question against show --json on a small fleet)."
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/looptap-fleet")
    ap.add_argument("--big", type=int, default=0, help="MB of one big run, indexed alone")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    work = Path(args.dir)
    shutil.rmtree(work, ignore_errors=True)
    runs = work / "runs"
    t = time.monotonic()
    files = generate(runs, args.runs)
    made = time.monotonic() - t
    db = work / ".looptap" / "fleet.duckdb"  # the default index of runs/: export --parquet's
    rows: list[tuple[str, float, int, str]] = []
    index = ["index", str(runs), "--jobs", str(args.jobs)]
    took, peak, said = measure(index)
    rows.append((f"first index ({args.runs:,} runs, --jobs {args.jobs})", took, peak, said))
    for f in random.Random(1).sample(files, max(1, len(files) // 100)):
        with f.open("ab") as fh:
            fh.write(b"\n")
    took, peak, said = measure(index)
    rows.append(("re-index, 1 % of the runs changed", took, peak, said))
    took, peak, said = measure(index)
    rows.append(("re-index, nothing changed", took, peak, said))
    slowest = 0.0
    for q in QUESTIONS:
        took, peak, _ = measure([*q, "--fleet", str(db), "--csv"])
        slowest = max(slowest, took)
        rows.append((f"`looptap {' '.join(q)}`", took, peak, f"the SQL alone: {_sql(db, q):.3f} s"))
    took, peak, said = measure(["fleet", "page", "--fleet", str(db), "-o", str(work / "f.html")])
    rows.append(("`looptap fleet page` (200 runs' reports written)", took, peak, said))
    took, peak, said = measure(["fleet", "page", "--fleet", str(db), "-o", str(work / "f.html"),
                                "--force"])  # fmt: skip
    rows.append(("`looptap fleet page --force` again (the reports kept)", took, peak, said))
    pq = work / "parquet"
    took, peak, said = measure(["export", "--parquet", str(pq), str(runs)])
    rows.append(("`export --parquet` (index up to date)", took, peak, said))
    size = sum(f.stat().st_size for f in runs.rglob("*") if f.is_file())
    if args.big:
        rows.append(_big(work / "big", args.big))
    table = [
        f"{MARK}\n",
        f"`python bench/fleet.py --runs {args.runs} --jobs {args.jobs}"
        f"{f' --big {args.big}' if args.big else ''}` on {datetime.date.today()} "
        f"({platform.machine()}, {os.cpu_count()} cores shared with other jobs: times are rough). "
        f"{args.runs:,} runs, {size / 1e6:,.0f} MB (generated in {made:.0f} s); index "
        f"{db.stat().st_size / 1e6:,.1f} MB. Peak memory: the largest ru_maxrss among the command "
        "and its worker processes (`wait4`).\n",
        "| step | seconds | peak MB | what it said |",
        "|---|---:|---:|---|",
    ]
    for what, took, peak, said in rows:
        said = said.removeprefix("looptap: ").replace(str(work) + "/", "").replace("|", "\\|")
        table.append(f"| {what} | {took:,.1f} | {peak:,} | {said} |")
    table += ["", f"The slowest named question took {slowest:.2f} s, start-up included.", ""]
    table += answers(db, files)
    text = "\n".join(table) + "\n"
    print(text)
    if args.write:
        doc = DOC.read_text()
        at = doc.find(MARK)
        if at >= 0:
            end = doc.find("\n## ", at + len(MARK))
            doc = doc[:at] + text + ("\n" + doc[end + 1 :] if end >= 0 else "")
        else:
            doc = doc.rstrip("\n") + "\n\n" + text
        DOC.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
