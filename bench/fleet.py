"""The fleet index at scale (issue 59): N runs generated from the corpus and the bench's synthetic
runs, indexed, re-indexed with 1 % changed, each named question timed, peak memory.

    python bench/fleet.py [--runs 10000] [--jobs 2] [--dir /tmp/looptap-fleet] [--big MB] [--write]

Runs: the corpus's vcrpy cassettes (every API family, model and finding it has), copied round
robin, and synthetic looptap cassettes (``tests/support/huge.py``: one-turn sweeps and 10-turn
conversations of 3 to 40 round trips), one in three; spread over agents (directories) and 30
days (mtimes). Each command runs as ``looptap`` in its own process; its time is wall-clock and
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


def generate(where: Path, n: int) -> list[Path]:
    """``n`` runs under ``where/<agent>/``: corpus copies and synthetic cassettes."""
    rng = random.Random(59)
    corpus = sorted(CORPUS.rglob("*.yaml"))
    out: list[Path] = []
    now = time.time()
    for i in range(n):
        d = where / AGENTS[i % len(AGENTS)]
        d.mkdir(parents=True, exist_ok=True)
        if i % 3 == 2:
            path = d / f"run{i:05}.jsonl"
            long = rng.random() < 0.5
            write_huge(path, rng.randint(3, 40), "long" if long else "one_turn", turns=10)
        else:
            path = d / f"run{i:05}.yaml"
            shutil.copyfile(corpus[i % len(corpus)], path)
        t = now - rng.randint(0, 30) * 86400 - rng.randint(0, 86399)
        os.utime(path, (t, t))
        out.append(path)
    return out


def measure(argv: list[str]) -> tuple[float, int, str]:
    """Seconds, peak RSS (MB) and the last stderr line of ``looptap argv``."""
    t = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "cassettes.cli", *argv],
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

    from cassettes.fleet import cost, failing_turns, findings, since_time

    if q[1] == "cost":
        sql, params = cost(q[3])
    elif q[1] == "failing-turns":
        sql, params = failing_turns()
    else:
        since = since_time(q[3]) if len(q) > 2 else None
        sql, params = findings(since, "--new" in q)
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
    for q in (
        ["fleet", "findings"],
        [
            "fleet",
            "findings",
            "--since",
            (datetime.date.today() - datetime.timedelta(7)).isoformat(),
            "--new",
        ],
        ["fleet", "cost", "--by", "model"],
        ["fleet", "cost", "--by", "agent"],
        ["fleet", "cost", "--by", "day"],
        ["fleet", "failing-turns"],
    ):
        took, peak, _ = measure([*q, "--fleet", str(db), "--csv"])
        rows.append((f"`looptap {' '.join(q)}`", took, peak, f"the SQL alone: {_sql(db, q):.3f} s"))
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
