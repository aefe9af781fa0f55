"""A run analysed once (issue 48): ``looptap show`` of a big run, first and second, on this tree
against an older commit, in one run, outputs compared byte for byte.

    python bench/kept.py [--against REF] [--size MB] [--dir DIR] [--write]
    python bench/kept.py --grow [--size MB] [--dir DIR] [--more PCT] [--write]

The run is bench/perf.py's ``batch`` run (bench/inspector.py's synthetic agent run of ~``--size``
MB, stored parses taken; kept in ``--dir``). Each tree runs in its own process with its packages
first on ``PYTHONPATH`` (``_env``), and a cache directory of its own, empty at the start
(``LOOPTAP_CACHE_DIR``). The two trees' first ``show`` are started together, then their second,
then their inspectors: each ratio is taken under one load (one tree after the other, a load that
changed between them made the ratio meaningless), CPU seconds and peak RSS by each child's own
``wait4``:

* this tree: ``looptap show FILE`` (the first: analyses the run and keeps the analysis), again
  (the second: takes the kept analysis), then the inspector's whole-file read
  (``bench/inspector.py --child app``) on the kept analysis;
* REF (default ``232556d``, issue 48's starting commit): ``looptap show FILE`` twice (a REF that
  keeps nothing analyses again; one that keeps takes its own kept analysis the second time) and
  the inspector's whole-file read.

Wall seconds, CPU seconds (user + system) and peak RSS (by ``wait4``) per row; the load average
before each. The stdout of every ``show`` is compared byte for byte with REF's (a fresh analysis):
the bench exits 1 when one differs. ``--write`` puts the table of this size into
docs/kept-analysis.md, in a section of its own (one per size: a run at 100, 500 and 1,000 MB
each leaves the others' tables as they are), beside the goals of issue 106 (a first ``show`` in
150 MB and no more CPU than REF's, a second in 60 MB, the inspector in 150 MB).

``--grow``: a file that grew (docs/kept-analysis.md, "A file that grew"), on this tree and REF
side by side, each its own copy of the run and its own cache. The run is cut to its first
records, ``--more`` percent (default 1) of its round trips left out; ``looptap show`` of that
(the first: analyses, keeps), again (the second), then the rest is appended and ``show`` of the
grown file (continued from the kept analysis where the tree can), then ``show --json`` (the grown
file's kept analysis); last, on this tree, ``show --no-cache`` and ``show --json --no-cache`` of
the grown file (a fresh analysis of every byte), which every tree's grown outputs are compared
with byte for byte (exit 1 when one differs). ``--write`` puts that table into
docs/kept-analysis.md.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "kept-analysis.md"
BEGIN, END = "<!-- bench/kept.py: begin -->", "<!-- bench/kept.py: end -->"
GROW_BEGIN = "<!-- bench/kept.py --grow: begin -->"
GROW_END = "<!-- bench/kept.py --grow: end -->"
#: The goals a run is measured against (issue 106): peak RSS in MB of the first and second
#: ``show`` and of the inspector's whole-file read, and the first ``show``'s CPU against REF's.
GOALS = {"first": 150, "second": 60, "inspector": 150, "cpu": 1.0}


def _sized(text: str, size: int, table: list[str]) -> str:
    """``text`` (docs/kept-analysis.md) with the section of a ``size`` MB run replaced by
    ``table``, or added last in the bench's block (the sections of other sizes stay)."""
    a, b = f"<!-- bench/kept.py {size} MB: begin -->", f"<!-- bench/kept.py {size} MB: end -->"
    section = a + "\n" + "\n".join(table) + "\n" + b
    if a in text and b in text:
        return text[: text.index(a)] + section + text[text.index(b) + len(b) :]
    end = text.index(END)
    return text[:end] + section + "\n" + text[end:]


def _perf() -> Any:
    spec = importlib.util.spec_from_file_location("perf", ROOT / "bench" / "perf.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


perf = _perf()


def _env(tree: Path, cache: Path) -> dict[str, str]:
    """A tree's environment: its packages first on the path, under ``looptap`` (its
    ``.looptap-editable``) or, for a tree from before the one import package, at its root
    (bench/perf.py's ``_path``), and its own cache directory."""
    return {**perf.ENV, "PYTHONPATH": perf._path(tree), "LOOPTAP_CACHE_DIR": str(cache)}


def _show(
    tree: Path, path: Path, cache: Path, out: Path, options: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``looptap show [OPTIONS] FILE > out``: seconds, CPU seconds, peak RSS (MB, by wait4), the
    output's digest."""
    return _shows([(tree, path, cache, out, options)])[0]


def _shows(jobs: list[tuple[Path, Path, Path, Path, tuple[str, ...]]]) -> list[dict[str, Any]]:
    """Each job's ``looptap show [OPTIONS] FILE > out`` (tree, file, cache, out, options), all
    started together, so that the trees' CPU seconds are taken under one load: each child's
    seconds, CPU seconds and peak RSS (MB) by its own ``wait4``, the output's digest."""
    load = perf._load()
    started = []
    for tree, path, cache, out, options in jobs:
        argv = [perf.PY, "-m", perf.cli(tree), "show", *options, str(path)]
        with out.open("wb") as sink, out.with_suffix(".err").open("wb") as errors:
            proc = subprocess.Popen(
                argv, stdout=sink, stderr=errors, env=_env(tree, cache), cwd=tree
            )
        started.append((proc, time.perf_counter()))
    ended: dict[int, tuple[float, int, Any]] = {}
    while len(ended) < len(started):  # (each child's wall time its own: whichever ends first)
        for proc, t0 in started:
            if proc.pid not in ended:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    ended[pid] = (time.perf_counter() - t0, status, usage)
        time.sleep(0.1)
    rows: list[dict[str, Any]] = []
    for (proc, _), (tree, path, _, out, _) in zip(started, jobs, strict=True):
        took, status, usage = ended[proc.pid]
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            err = out.with_suffix(".err").read_text(errors="replace")
            raise SystemExit(f"looptap show {path} ({tree}) exited {code}: {err[-800:]}")
        cpu = usage.ru_utime + usage.ru_stime
        rows.append({"s": took, "cpu_s": cpu, "rss_mb": usage.ru_maxrss / 1024, "load": load})
    for row, job in zip(rows, jobs, strict=True):
        h = hashlib.sha256()
        with job[3].open("rb") as f:  # (streamed: a later child's peak RSS starts at this one's)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        row["out"] = h.hexdigest()[:16]
    return rows


def _inspectors(jobs: list[tuple[Path, Path, Path]]) -> list[dict[str, Any]]:
    """The inspector's first screen and whole-file read (each tree's own bench/inspector.py
    child) of each job (tree, file, cache), all started together."""
    load = perf._load()
    procs = [
        subprocess.Popen(
            [perf.PY, str(tree / "bench" / "inspector.py"), "--child", "app", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tree, cache),
            cwd=tree,
        )
        for tree, path, cache in jobs
    ]
    out: list[dict[str, Any]] = []
    for proc in procs:
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            said = stderr.strip().splitlines() or [f"exit {proc.returncode}"]
            out.append({"error": said[-1][:200], "load": load})
            continue
        result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
        result["load"] = load
        out.append(result)
    return out


def _cell(r: dict[str, Any]) -> str:
    return f"{r['s']:.1f} s (CPU {r['cpu_s']:.1f} s), {r['rss_mb']:,.0f} MB"


def _insp(r: dict[str, Any]) -> str:
    return (
        f"{r['full_read_s']:.1f} s, peak {r['peak_rss_mb']:,.0f} MB"
        if "full_read_s" in r
        else f"failed: {r.get('error')}"
    )


def _ref_tree(work: Path, against: str) -> tuple[str, Path]:
    """A worktree of ``against`` in ``work`` (its short name, its path)."""
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", against],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    ref = work / f"tree-{rev}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(ref), rev], check=True
    )
    return rev, ref


def grow(size: int, where: Path | None, more: float, write: bool, against: str) -> int:
    """``--grow`` (see the module's docstring)."""
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    label = f"{head}{' + changes' if dirty else ''}"
    start = datetime.datetime.now(datetime.UTC)
    with tempfile.TemporaryDirectory(prefix="looptap-grow-") as tmp:
        work = Path(tmp)
        rev, ref = _ref_tree(work, against)
        try:
            trees = [("this tree", ROOT), (rev, ref)]
            for i, (_, tree) in enumerate(trees):
                perf._META[tree] = perf._metadata(tree, work / f"meta-{i}")
            perf._compile(trees)
            big = perf._big_run(size, where or work / "big")
            with big.open("rb") as f:
                records = sum(1 for _ in f) - 1
            kept_n = round(records / (1 + more / 100))
            with big.open("rb") as f:
                for _ in range(1 + kept_n):
                    f.readline()
                cut = f.tell()
            print(f"run {big}: {records:,} round trips; load {perf._load()}", file=sys.stderr)
            rows: dict[str, dict[str, Any]] = {}
            # each tree its own cache, the run at one path (show prints it)
            path = work / "run" / big.name
            path.parent.mkdir()
            for i, (name, tree) in enumerate(trees):
                cache = work / f"cache-{i}"
                with big.open("rb") as f, path.open("wb") as out:
                    shutil.copyfileobj(f, out, 1 << 20)
                os.truncate(path, cut)
                base_mb = path.stat().st_size / 1e6
                for step, options in (("first", ()), ("second", ()), ("grown", ()),
                                      ("grown --json", ("--json",)), ("fresh", ("--no-cache",)),
                                      ("fresh --json", ("--json", "--no-cache"))):  # fmt: skip
                    if step == "grown":
                        with big.open("rb") as f, path.open("ab") as out:
                            f.seek(cut)
                            shutil.copyfileobj(f, out, 1 << 20)
                    if step.startswith("fresh") and i:
                        continue  # (a fresh analysis of the grown file: once, on this tree)
                    key = f"{name}: {step}"
                    rows[key] = _show(tree, path, cache, work / f"{i}-{step}.out", options)
                    print(f"  {key}: {rows[key]}", file=sys.stderr, flush=True)
            grown_mb = path.stat().st_size / 1e6
            fresh = {j: rows[f"this tree: fresh{j}"]["out"] for j in ("", " --json")}
            differ = [
                f"{name}: grown{j}"
                for name, _ in trees
                for j in ("", " --json")
                if rows[f"{name}: grown{j}"]["out"] != fresh[j]
            ]
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref)], check=False
            )
    here, there = (lambda s: rows[f"this tree: {s}"]), (lambda s: rows[f"{rev}: {s}"])

    def line(what: str, step: str) -> str:
        a, b = here(step), there(step)
        return (
            f"| {what} | {_cell(a)} | {_cell(b)} | {a['s'] / b['s']:.2f}×; CPU "
            f"{a['cpu_s'] / b['cpu_s']:.2f}× | {a['load']} / {b['load']} |"
        )

    fresh_row = here("fresh")
    lines_out = [
        f"Measured {start:%Y-%m-%d %H:%M} UTC by `python bench/kept.py --grow --size {size} "
        f"--more {more:g} --against {rev}` on {label} ({platform.machine()}, {os.cpu_count()} "
        "CPUs, shared: the load average before each row is given; compare the CPU seconds).",
        "",
        f"| {base_mb:,.0f} MB run ({kept_n:,} round trips), then {records - kept_n:,} more "
        f"appended ({grown_mb:,.0f} MB) | this tree ({label}) | {rev} | this / {rev} | "
        "load average before |",
        "|---|---:|---:|---:|---|",
        line("first `looptap show FILE` (analyses, keeps)", "first"),
        line("second `looptap show FILE` (the kept analysis)", "second"),
        line(f"**grown by {more:g} %**: `looptap show FILE`", "grown"),
        line("then `looptap show --json FILE` (the grown file's kept analysis)", "grown --json"),
        f"| the grown file, `looptap show --no-cache FILE` (a fresh analysis of every byte) | "
        f"{_cell(fresh_row)} | | | {fresh_row['load']} |",
        "",
        "Output of the grown file's `show` and `show --json` on each tree: "
        + (
            "**differs** from the fresh analysis' in " + ", ".join(differ)
            if differ
            else "byte-identical to the fresh analysis'"
        )
        + f" (sha256 {fresh_row['out']} and {rows['this tree: fresh --json']['out']}).",
    ]
    print("\n".join(lines_out))
    if write:
        text = DOC.read_text()
        a, b = text.index(GROW_BEGIN) + len(GROW_BEGIN), text.index(GROW_END)
        DOC.write_text(text[:a] + "\n" + "\n".join(lines_out) + "\n" + text[b:])
        print(f"wrote {DOC}", file=sys.stderr)
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--against", default="232556d", metavar="REF")
    ap.add_argument("--size", type=int, default=1000, help="the run, MB (default 1000)")
    ap.add_argument(
        "--dir",
        type=Path,
        help="where the run is written and kept (default: a temporary directory)",
    )
    ap.add_argument(
        "--write", action="store_true", help="write the table into docs/kept-analysis.md"
    )
    ap.add_argument(
        "--grow", action="store_true", help="a file that grew: continued against a fresh analysis"
    )
    ap.add_argument(
        "--more", type=float, default=1.0, help="--grow: percent of round trips appended (1)"
    )
    args = ap.parse_args()
    if args.grow:
        return grow(args.size, args.dir, args.more, args.write, args.against)
    with tempfile.TemporaryDirectory(prefix="looptap-kept-") as tmp:
        work = Path(tmp)
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", args.against],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        ref = work / f"tree-{rev}"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(ref), rev], check=True
        )
        try:
            trees = [("this tree", ROOT), ("ref", ref)]
            for i, (_, tree) in enumerate(trees):
                perf._META[tree] = perf._metadata(tree, work / f"meta-{i}")
            perf._compile(trees)
            path = perf._big_run(args.size, args.dir or work / "big")
            mb = path.stat().st_size / 1e6
            print(
                f"run {path} ({mb:,.0f} MB); load average {perf._load()}",
                file=sys.stderr,
                flush=True,
            )
            here, there = work / "cache-here", work / "cache-ref"
            rows: dict[str, dict[str, Any]] = {}
            # both trees at once, each its own cache: each ratio is taken under one load
            for mine, theirs in (("first show", "ref show"), ("second show", "ref second show")):
                mine_out = work / f"{mine.replace(' ', '-')}.out"
                theirs_out = work / f"{theirs.replace(' ', '-')}.out"
                both = _shows(
                    [(ROOT, path, here, mine_out, ()), (ref, path, there, theirs_out, ())]
                )
                for name, row in zip((mine, theirs), both, strict=True):
                    rows[name] = row
                    print(f"  {name}: {row}", file=sys.stderr, flush=True)
            same = (work / "ref-show.out").read_bytes()
            differ = [
                n
                for n in ("first show", "second show", "ref second show")
                if (work / f"{n.replace(' ', '-')}.out").read_bytes() != same
            ]
            insp_here, insp_ref = _inspectors([(ROOT, path, here), (ref, path, there)])
            print(f"  inspector (kept): {insp_here}", file=sys.stderr, flush=True)
            print(f"  inspector ({rev}): {insp_ref}", file=sys.stderr, flush=True)
            kept_mb = sum(p.stat().st_size for p in here.iterdir()) / 1e6 if here.exists() else 0.0
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref)], check=False
            )
    first, second, old = rows["first show"], rows["second show"], rows["ref show"]
    old_second = rows["ref second show"]
    label = f"this tree ({head}{' + changes' if dirty else ''})"
    met = _met(first, old, second, insp_here)
    lines = [
        f"Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC by `python "
        f"bench/kept.py --against {rev} --size {args.size}` ({platform.machine()}, "
        f"{os.cpu_count()} CPUs, shared: the load average is given per row; compare the CPU "
        f"seconds and the peaks); trees: `{label}`, `{rev}`.",
        "",
        f"| {mb:,.0f} MB run | {label} | {rev} | this / {rev} | goal | load average before |",
        "|---|---:|---:|---:|---|---|",
        f"| first `looptap show FILE` (analyses, keeps) | {_cell(first)} | {_cell(old)} | "
        f"CPU {first['cpu_s'] / old['cpu_s']:.2f}× | ≤ {GOALS['first']} MB, CPU ≤ "
        f"{GOALS['cpu']:.1f}×: {met['first']} | {first['load']} / {old['load']} |",
        f"| second `looptap show FILE` (the kept analysis) | {_cell(second)} | "
        f"{_cell(old_second)} | CPU {second['cpu_s'] / old_second['cpu_s']:.2f}× | ≤ "
        f"{GOALS['second']} MB: {met['second']} | {second['load']} / {old_second['load']} |",
        f"| inspector, whole file read | {_insp(insp_here)} (kept) | {_insp(insp_ref)} | "
        + (
            f"{insp_here['full_read_s'] / insp_ref['full_read_s']:.2f}×"
            if "full_read_s" in insp_here and "full_read_s" in insp_ref
            else ""
        )
        + f" | ≤ {GOALS['inspector']} MB: {met['inspector']} | {insp_here['load']} / "
        f"{insp_ref['load']} |",
        "",
        f"Kept: {kept_mb:,.1f} MB in the cache directory. Output of `show` (stdout): "
        + (
            "**differs** from the fresh analysis' in " + ", ".join(differ)
            if differ
            else f"first and second of each tree byte-identical to {rev}'s first (its analysis)"
        )
        + f" (sha256 {old['out']}).",
    ]
    print("\n".join(lines))
    if args.write:
        DOC.write_text(_sized(DOC.read_text(), args.size, lines))
        print(f"wrote {DOC}", file=sys.stderr)
    return 1 if differ else 0


def _met(
    first: dict[str, Any], old: dict[str, Any], second: dict[str, Any], insp: dict[str, Any]
) -> dict[str, str]:
    """Whether each row met its goal (:data:`GOALS`): "met" or "**missed**"."""
    said = {True: "met", False: "**missed**"}
    return {
        "first": said[
            first["rss_mb"] <= GOALS["first"] and first["cpu_s"] <= GOALS["cpu"] * old["cpu_s"]
        ],
        "second": said[second["rss_mb"] <= GOALS["second"]],
        "inspector": said[insp.get("peak_rss_mb", float("inf")) <= GOALS["inspector"]],
    }


if __name__ == "__main__":
    raise SystemExit(main())
