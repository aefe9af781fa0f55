"""What the working tree per turn (proxy/workspace.py, docs/shell-file-tools.md) costs in a big
tree: ``looptap run``'s start-up, and each turn's snapshot.

A generated tree of ``--files`` files (default 20,000, the walk's bound, and 30,000: past it),
each a distinct text file of 0.5–4 KiB in folders of 100, and a small tree of 100 files beside it.
In each tree, ``looptap run -- /bin/true`` is run plainly (``--no-shell-trace``) and the default
way (the processes traced, the tree walked at the start, its contents read on a thread while
the command runs), alternating, ``--n`` times each: wall time of the
whole run, and the CPU time of its process tree (``RUSAGE_CHILDREN``). The agent here does
nothing: what differs is the start (and the last scan at its end).

Then the per-turn snapshot itself, the ``Workspace.scan`` the recorder runs on a thread of its own
at each model request (the request goes on meanwhile): in each tree, a scan with nothing changed,
and one after 100 files were rewritten (these hashed, their contents kept), ``--n`` times each,
wall and CPU time of this process.

    .venv/bin/python bench/shell_tree.py                 # 20,000 and 30,000 files, 3 runs each
    .venv/bin/python bench/shell_tree.py --files 5000 --n 1
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))

from looptap.cassettes.recording import Redactor  # noqa: E402
from looptap.cassettes.shell import FILES  # noqa: E402
from looptap.proxy.workspace import Workspace  # noqa: E402
from tests.support.recorder import RECORDER, clean_env  # noqa: E402

MODES = {"plain": ("--no-shell-trace",), "default": ()}


def make_tree(root: Path, n: int) -> None:
    """``n`` distinct text files of 0.5–4 KiB, 100 a folder, under ``root``."""
    rng = random.Random(n)
    for i in range(n):
        d = root / f"pkg{i // 100:04d}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        body = f"# file {i}\n" + f"x = {rng.randrange(1 << 30)}\n" * rng.randrange(50, 400)
        (d / f"mod{i % 100:02d}.py").write_text(body)


def run_once(mode: str, tree: Path, confdir: Path, out: Path) -> dict[str, Any]:
    argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(confdir), *MODES[mode]]
    env = clean_env()
    env.pop("LOOPTAP_SHELL_TRACE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*argv, "--", "/bin/true"], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    kept = Path(f"{out}.files")
    blobs = list(kept.iterdir()) if kept.is_dir() else []
    ok = proc.returncode == 0
    if not ok:
        print(proc.stderr[-2000:], flush=True)
    said = [x for x in proc.stderr.splitlines() if "working tree" in x or "files" in x]
    return {
        "wall": wall,
        "cpu": cpu,
        "ok": ok,
        "kept": len(blobs),
        "kept_bytes": sum(b.stat().st_size for b in blobs),
        "said": said,
    }


def scans(tree: Path, n: int, keep: Path) -> dict[str, list[tuple[float, float]]]:
    """Wall and CPU seconds of ``n`` scans with nothing changed and ``n`` after 100 rewrites."""
    records: list[dict[str, Any]] = []
    ws = Workspace(str(tree), keep, records.append, Redactor().seal)
    ws.start()
    ws.read()
    out: dict[str, list[tuple[float, float]]] = {"unchanged": [], "100 changed": []}
    files = sorted(tree.rglob("*.py"))[:100]
    for i in range(n):
        for kind in out:
            if kind == "100 changed":
                for f in files:
                    f.write_text(f.read_text() + f"# turn {i}\n")
            t0, c0 = time.perf_counter(), time.process_time()
            ws.scan()
            out[kind].append((time.perf_counter() - t0, time.process_time() - c0))
    return out


def _mean(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--files", type=int, nargs="*", default=[100, FILES, FILES * 3 // 2])
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="looptap-shell-tree-bench-") as d:
        base = Path(d)
        confdir = base / "conf"
        confdir.mkdir()
        rows = []
        for n in args.files:
            tree = base / f"tree{n}"
            make_tree(tree, n)
            runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
            for i in range(args.n):
                for mode in list(MODES) if i % 2 == 0 else list(MODES)[::-1]:
                    out = base / f"run-{n}-{mode}-{i}.jsonl"
                    r = run_once(mode, tree, confdir, out)
                    ok = ok and r["ok"]
                    runs[mode].append(r)
                    print(
                        f"{n} files, {mode:7} run {i + 1}: wall {r['wall']:.2f} s, cpu "
                        f"{r['cpu']:.2f} s, {r['kept']} contents kept "
                        f"({r['kept_bytes'] / 1e6:.1f} MB){'' if r['ok'] else ', FAILED'}",
                        flush=True,
                    )
                    for line in r["said"]:
                        print(f"    said: {line}", flush=True)
                    shutil.rmtree(f"{out}.files", ignore_errors=True)
            s = scans(tree, args.n, base / f"keep{n}")
            shutil.rmtree(tree)
            rows.append((n, runs, s))
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        print("| files | start-up wall plain | default | CPU plain | default | kept |")
        print("|---|---|---|---|---|---|")
        for n, runs, _ in rows:
            p, q = runs["plain"], runs["default"]
            kept = f"{q[0]['kept']} ({q[0]['kept_bytes'] / 1e6:.1f} MB)"
            print(
                f"| {n} | {_mean([r['wall'] for r in p])} | {_mean([r['wall'] for r in q])} | "
                f"{_mean([r['cpu'] for r in p])} | {_mean([r['cpu'] for r in q])} | {kept} |"
            )
        print("| files | scan, nothing changed: wall | CPU | 100 changed: wall | CPU |")
        print("|---|---|---|---|---|")
        for n, _, s in rows:
            u, c = s["unchanged"], s["100 changed"]
            print(
                f"| {n} | {_mean([w for w, _ in u])} | {_mean([x for _, x in u])} | "
                f"{_mean([w for w, _ in c])} | {_mean([x for _, x in c])} |"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
