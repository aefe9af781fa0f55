"""A big run's first read by phase (issue 73): where ``looptap show``'s CPU goes, on this tree
and on REF side by side.

    python bench/first_read.py [--against REF] [--size MB] [--dir DIR] [--write]

The run is bench/kept.py's (bench/perf.py's ``batch`` run of ~``--size`` MB, kept in ``--dir``).
Each tree runs ``looptap show FILE`` once in a child of its own (``PYTHONPATH`` = its tree, an empty
cache directory: the first read, which analyses and keeps) under cProfile with a CPU-time timer
(the machine is shared: wall time is noise). The phases are the cumulative CPU of the functions
that do each (named for both trees: the modules were renamed between them); nested phases are
indented and overlap their parent. cProfile adds its own cost to every call, more to code that
makes many small calls: compare the columns of a row, and the shares, not the seconds with
bench/kept.py's. ``--write`` puts the table into docs/performance.md (section ``first read``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import pstats
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


kept = _load("kept")
perf = kept.perf

_CHILD = """
import cProfile, sys, time
out, target = sys.argv[1], sys.argv[2]
sys.argv = ["looptap", "show", target]
try:
    from looptap.cassettes.cli import main
except ImportError:  # a tree from before the one import package (bench/perf.py's _path)
    from cassettes.cli import main
p = cProfile.Profile(timer=time.process_time)
p.enable()
try:
    main()
except SystemExit:
    pass
finally:
    p.disable()
    p.dump_stats(out)
"""

#: (phase, its functions as "path suffix:function" on either tree); two spaces: a part of the row
#: above.
PHASES: list[tuple[str, list[str]]] = [
    ("read and analyse (`open_run`)", ["reading/_run.py:open_run", "reading/run.py:open_run"]),
    ("  analysis of each turn", ["analysis/_analyser.py:_add", "analysis/run.py:_add"]),
    ("    parse (request and response)", ["parsing/_roundtrip.py:parse_exchange",
                                          "parsing/roundtrip.py:parse_exchange"]),
    ("      SSE framing", ["wire/_framing.py:parse_sse", "wire/framing.py:parse_sse"]),
    ("      events to a response", ["providers/_parts.py:read"]),
    ("    threading", ["analysis/_analyser.py:_thread", "analysis/run.py:_thread"]),
    ("    layers and checks (`judge`)", ["analysis/_judgement.py:judge", "analysis/run.py:_judge"]),
    ("      the checks", ["analysis/_judgement.py:run_check", "analysis/run.py:_run"]),
    ("      tokens and price", ["analysis/_tokens.py:build", "analysis/tokens.py:build"]),
    ("        price (genai-prices)", ["analysis/pricing.py:price"]),
    ("  parse kept for the printing", ["reading/_incremental.py:_keep_parse",
                                       "reading/incremental.py:_keep_parse"]),
    ("printing (`show`'s lines)", ["cli/show.py:_print_lines", "cli.py:_print_lines"]),
    ("  turns read again to print", ["reading/_reread.py:pair_at",
                                     "reading/incremental.py:pair_at"]),
]  # fmt: skip


def phases(prof: Path) -> tuple[float, dict[str, float]]:
    """The profile's whole CPU seconds, and each phase's."""
    stats: dict[Any, Any] = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    total = max(v[3] for v in stats.values())
    out = {}
    for name, wants in PHASES:
        keys = [w.rsplit(":", 1) for w in wants]
        out[name] = sum(
            v[3]
            for (path, _, fn), v in stats.items()
            if any(path.endswith("/cassettes/" + f) and fn == n for f, n in keys)
        )
    return total, out


def _profile(tree: Path, path: Path, work: Path, label: str) -> Path:
    prof = work / f"{label}.prof"
    cache = work / f"cache-{label}"
    cache.mkdir()
    env = {**perf.ENV, "PYTHONPATH": perf._path(tree), "LOOPTAP_CACHE_DIR": str(cache)}
    with (work / f"{label}.out").open("wb") as out:
        subprocess.run([perf.PY, "-c", _CHILD, str(prof), str(path)], stdout=out,
                       stderr=subprocess.DEVNULL, env=env, cwd=tree, check=True)  # fmt: skip
    shutil.rmtree(cache, ignore_errors=True)
    return prof


def table(label: str, rev: str, mine: Path, theirs: Path) -> list[str]:
    (t1, p1), (t2, p2) = phases(mine), phases(theirs)
    rows = [
        f"| phase (CPU s under cProfile, share) | {label} | {rev} | difference |",
        "|---|---:|---:|---:|",
        f"| whole first `show` | {t1:.1f} | {t2:.1f} | {t1 - t2:+.1f} |",
    ]
    for name, _ in PHASES:
        a, b = p1[name], p2[name]
        shown = name.lstrip(" ")
        depth = (len(name) - len(shown)) // 2
        rows.append(
            f"| {'· ' * depth}{shown} | {a:.1f} ({100 * a / t1:.0f}%) | "
            f"{b:.1f} ({100 * b / t2:.0f}%) | {a - b:+.1f} |"
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--against", default="1f07033")
    ap.add_argument("--size", type=int, default=250, help="the run, MB (default 250)")
    ap.add_argument("--dir", type=Path, help="where the run is written and kept")
    ap.add_argument("--write", action="store_true", help="into docs/performance.md")
    args = ap.parse_args()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "-uno"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    label = f"this tree ({head}{' + changes' if dirty else ''})"
    start = datetime.datetime.now(datetime.UTC)
    load = perf._load()
    with tempfile.TemporaryDirectory(prefix="looptap-first-read-") as tmp:
        work = Path(tmp)
        rev, ref = kept._ref_tree(work, args.against)
        try:
            path = perf._big_run(args.size, args.dir or work / "big")
            size = path.stat().st_size  # (the run goes with the temporary directory)
            mine = _profile(ROOT, path, work, "this")
            theirs = _profile(ref, path, work, rev)
            rows = table(label, rev, mine, theirs)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref)],
                           check=False)  # fmt: skip
    took = (datetime.datetime.now(datetime.UTC) - start).total_seconds()
    block = [
        "### first read",
        "",
        f"Measured {start:%Y-%m-%d %H:%M} UTC by `python bench/first_read.py --against {rev} "
        f"--size {args.size}` ({platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}); load average at the start: {load}; took {took:.0f} s. "
        f"The run: {size / 1e6:,.0f} MB. What is measured: the docstring of "
        "`bench/first_read.py`.",
        "",
        *rows,
    ]
    print("\n".join(block))
    if args.write:
        perf._write("first read", block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
