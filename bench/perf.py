"""The figures a user waits on, this tree side by side with older commits, in one run.

    python bench/perf.py [--against REF ...] [-n RUNS] [--size MB] [--batch-runs N] [--dir DIR] [--only SECTION ...] [--write]

Each REF (default: ``63aa822``, main before session 14's work on issue 30) is checked out
in a temporary ``git worktree`` and run from there (``PYTHONPATH`` = its tree), with the same
interpreters, inputs and machine as this tree, interleaved where the measurement is short, so a
change in the machine's load hits every tree alike. The machine is shared and its load moves:
compare the ratios, not the seconds; the load average is printed with every section.

Sections (``--only``):

* ``startup`` — ``n`` rounds, each running once, in turn: bare ``python -c pass``, then per tree
  ``looptap show`` of a 2-round-trip run (the bundled example's first two round trips),
  ``looptap replay`` of it until its ``export`` lines, and ``looptap run -o X -- true`` in the
  recorder's environment (``.venv-proxy``): wall time (medians) and, for the recorder, the sum of
  the peak RSS (VmHWM, sampled every 10 ms) of its processes. Goal: show and replay at most
  0.3 s over bare Python.
* ``replay`` — requests/s of ``looptap replay`` (bench/replay.py's ``measure``, its quick sizes).
* ``batch`` — a ~``--size`` MB run (bench/inspector.py's synthetic agent run, stored parses taken)
  read and analysed by each tree the way a user's script does it, through the public entry point
  (``cassettes.open_run(path)``, which streams a looptap cassette, then its findings, turns and
  conversations: :data:`_BATCH`, the same code on every tree), and ``looptap show FILE`` to
  ``/dev/null``: wall seconds, CPU seconds (user + system, which the machine's load does not
  inflate as much) and peak RSS. With ``--batch-runs N`` each tree's batch runs N times, the trees
  interleaved round by round (each round starting one tree later), and the row gives the medians (the highest peak): on a shared machine
  one run of each moves by a third between two runs of the same tree. Goal: 20 s, 500 MB (the
  memory met, the time not: docs/reading.md, "How fast"). (Until 2026-11-24 this row measured
  ``read_cassette`` + ``analyse``, which holds the whole run: 45.8 s and 2,550 MB at 1 GB.)
* ``own`` — not in the default run: each tree reads and analyses a ~``--size`` MB run of its own
  (its own bench/inspector.py's template, sealed by that tree, so every tree takes its stored
  parses; a tree's run is kept in ``--dir``/own-REV), through its own entry point
  (``open_run``, or for a tree from before it ``read_cassette``/``read_records`` + ``analyse``:
  :data:`_BATCH_ANY`). The trees' runs differ in turns, so the row that compares is the CPU time
  per turn. Issue 30's goal in these terms: its 20 s where ccd3e89 took 45.8 s is 0.44× of that
  tree's time; measure it with ``--only own --against ccd3e89``.
* ``inspector`` — the same run in the inspector (each tree's ``bench/inspector.py --child app``):
  first screen, whole file read and analysed, peak RSS.

``--write`` writes each section into docs/performance.md as it ends (the sections not measured
in this run stay as they were, each saying when and on which trees it was measured).
"""  # noqa: E501

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = (
    str(Path(sys.prefix) / "bin" / "python")
    if (Path(sys.prefix) / "bin" / "python").exists()
    else sys.executable
)
PROXY_PY = Path(os.environ.get("LOOPTAP_PROXY_PYTHON") or ROOT / ".venv-proxy" / "bin" / "python")
#: Without PYTHONDONTWRITEBYTECODE (a checkout's shell may set it): with it, every child compiles
#: every module it imports whose bytecode is missing, and the start-up measured is the compiler's.
ENV = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith(("PYTEST", "LOOPTAP", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"))
}
SECTIONS = ("startup", "replay", "batch", "own", "inspector")
#: Sections other benches write into the same document (bench/first_read.py), kept as they are.
OTHER_SECTIONS = ("first read",)
#: What a run without ``--only`` measures (``own`` writes a large run per tree: asked for by name).
DEFAULT_SECTIONS = ("startup", "replay", "batch", "inspector")


def _metadata(tree: Path, where: Path) -> Path:
    """A ``looptap`` dist-info holding ``tree``'s own entry points (pyproject.toml), for the front
    of its ``PYTHONPATH``: the installed one names this tree's plugin functions, which an older tree
    may not have (``importlib.metadata`` takes the first distribution of a name on the path)."""
    import tomllib

    project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    info = where / f"{project['name']}-{project.get('version', '0')}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project.get('version', '0')}\n"
    )
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
            for g, eps in groups.items()
        )
    )
    return where


#: Each tree's dist-info directory (:func:`_metadata`).
_META: dict[Path, Path] = {}


#: First on the path of a tree from before the one import package (issue 72): a ``looptap`` that
#: cannot be imported (bench/_older_tree). Without it the environment's editable install (this
#: checkout's) answers ``import looptap…``, and that tree's child runs this checkout's code.
_NO_LOOPTAP = ROOT / "bench" / "_older_tree"


def _path(tree: Path) -> str:
    """The ``PYTHONPATH`` a tree runs with: its ``looptap`` (``.looptap-editable``; none for a
    tree from before the one import package), the tree, its entry points (:func:`_metadata`)."""
    own = tree / ".looptap-editable"
    parts = [own if own.is_dir() else _NO_LOOPTAP, tree, *([_META[tree]] if tree in _META else [])]
    return os.pathsep.join(map(str, parts))


def cli(tree: Path) -> str:
    """The tree's command-line module (``cassettes.cli`` before the one import package)."""
    return "looptap.cassettes.cli" if (tree / ".looptap-editable").is_dir() else "cassettes.cli"


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- processes ------------------------------------------------------------------------------


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class _Peaks:
    """The peak RSS of a process and its descendants, sampled every 10 ms while it runs."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peaks = pid, dict[int, int]()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in _descendants(self.pid):
                self.peaks[p] = max(self.peaks.get(p, 0), _hwm_kb(p))
            self._stop.wait(0.01)

    def stop(self) -> tuple[float, float]:
        """(sum of the processes' peaks, the largest one), MB."""
        self._stop.set()
        self._thread.join()
        return sum(self.peaks.values()) / 1024, max(self.peaks.values(), default=0) / 1024


def _wall(
    cmd: list[str], env: dict[str, str], cwd: Path, until: bytes | None = None, peaks: bool = False
) -> tuple[float, float]:
    """(seconds, peak RSS MB summed over the process tree, 0 unless ``peaks``) of ``cmd``; with
    ``until``, up to the first output line holding it (then SIGINT)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if until else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if until else subprocess.PIPE,
    )
    watch = _Peaks(proc.pid) if peaks else None
    if until is not None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if until in line:
                break
        took = time.perf_counter() - t0
        proc.send_signal(signal.SIGINT)
        proc.communicate()
    else:
        _, err = proc.communicate()
        took = time.perf_counter() - t0
        if proc.returncode not in (0, 1):
            raise SystemExit(
                f"{' '.join(cmd)} exited {proc.returncode}: {err.decode(errors='replace')[-800:]}"
            )
    rss = watch.stop()[0] if watch is not None else 0.0
    return took, rss


# -- sections -------------------------------------------------------------------------------


def _compile(trees: list[tuple[str, Path]]) -> None:
    """An install's bytecode, for every tree (a fresh worktree would otherwise compile on its first
    run, inside the measurement)."""
    for interp in {PY, str(PROXY_PY)}:  # every tree and the environments' packages
        if Path(interp).exists():
            subprocess.run(
                [
                    interp,
                    "-m",
                    "compileall",
                    "-q",
                    "-j",
                    "0",
                    str(Path(interp).parents[1] / "lib"),
                    *(str(t) for _, t in trees),
                ],
                capture_output=True,
            )


def startup(trees: list[tuple[str, Path]], runs: int, work: Path) -> list[str]:
    demo, two = work / "demo.jsonl", work / "two.jsonl"
    subprocess.run(
        [
            PY,
            "-m",
            "looptap.cassettes.cli",
            "import",
            str(ROOT / "cassettes" / "examples" / "tool_loop_anthropic.yaml"),
            "-o",
            str(demo),
        ],
        check=True,
        capture_output=True,
        cwd=work,
        env={**ENV, "PYTHONPATH": str(ROOT)},
    )
    two.write_bytes(b"".join(demo.read_bytes().splitlines(keepends=True)[:3]))
    _compile(trees)

    def on(tree: Path, interp: str, *argv: str) -> tuple[list[str], dict[str, str]]:
        return [interp, "-m", cli(tree), *argv], {**ENV, "PYTHONPATH": _path(tree)}

    cmds: dict[str, Callable[[Path, int], tuple[float, float]]] = {
        "show": lambda t, i: _wall(*on(t, PY, "show", str(two)), cwd=work),
        "replay": lambda t, i: _wall(*on(t, PY, "replay", str(two)), cwd=work, until=b"export "),
    }
    if PROXY_PY.exists():
        made = iter(range(1_000_000))  # a new output each time: older trees have no --force
        cmds["run"] = lambda t, i: _wall(
            *on(
                t,
                str(PROXY_PY),
                "run",
                "-o",
                str(work / f"r{next(made)}.jsonl"),
                "--confdir",
                str(work / "conf"),
                "--",
                "true",
            ),
            cwd=work,
            peaks=True,
        )
    bare: list[float] = []
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for i in range(runs + 1):  # the first round warms the caches and is dropped
        b = _wall([PY, "-c", "pass"], ENV, cwd=work)[0]
        for name, cmd in cmds.items():
            for label, tree in trees:
                r = cmd(tree, i)
                if i:
                    got.setdefault((name, label), []).append(r)
        if i:
            bare.append(b)
    base = statistics.median(bare)
    what = {
        "show": "`looptap show` of a 2-round-trip run",
        "replay": "`looptap replay` until its export lines",
        "run": "`looptap run -o X -- true` (recorder env)",
    }
    labels = [label for label, _ in trees]
    lines = [
        f"Bare `python -c pass`: {base:.3f} s (median of {runs}). "
        "Load average before: see the section line.",
        "",
        "| command | "
        + " | ".join(f"{lb} (s)" for lb in labels)
        + f" | {labels[0]} over bare Python | "
        + " | ".join(f"{labels[0]} / {lb}" for lb in labels[1:])
        + " |",
        "|---|" + "---:|" * (2 * len(labels)),
    ]
    for name in cmds:
        med = [statistics.median(w for w, _ in got[(name, lb)]) for lb in labels]
        lines.append(
            f"| {what[name]} | "
            + " | ".join(f"{m:.3f}" for m in med)
            + f" | {(med[0] - base) * 1000:+.0f} ms | "
            + " | ".join(f"{med[0] / m:.2f}×" for m in med[1:])
            + " |"
        )
    if "run" in cmds:
        rss = [statistics.median(r for _, r in got[("run", lb)]) for lb in labels]
        lines.append(
            "| recorder's peak RSS, its processes summed (MB) | "
            + " | ".join(f"{r:.0f}" for r in rss)
            + " | | "
            + " | ".join(f"{rss[0] / r:.2f}×" for r in rss[1:])
            + " |"
        )
    return lines


def replay(trees: list[tuple[str, Path]], work: Path) -> list[str]:
    bench = _module("replay")
    real = bench.subprocess

    class _WithMeta:  # its server started with the tree's entry points too (see _metadata)
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def Popen(*a: Any, env: dict[str, str], **k: Any) -> Any:
            return real.Popen(*a, env={**env, "PYTHONPATH": _path(Path(env["PYTHONPATH"]))}, **k)

    bench.subprocess = _WithMeta()
    n_json, seq_streams, conc_streams, chunks = 400, 2, 4, 40  # bench/replay.py --quick
    cas = work / "replay.jsonl"
    offsets = bench.build(cas, n_json, seq_streams + conc_streams, chunks)
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(2):
        for label, tree in trees:
            runs.setdefault(label, []).append(
                bench.measure(tree, cas, n_json, offsets, seq_streams, conc_streams)
            )
    labels = [label for label, _ in trees]
    best = {
        lb: (
            max(float(r["rps1"]) for r in rs),
            max(float(r["rps8"]) for r in rs),
            min(float(r["cpu_us"]) for r in rs),
        )
        for lb, rs in runs.items()
    }
    lines = [
        "| replay (best of 2, interleaved) | "
        + " | ".join(labels)
        + " | "
        + " | ".join(f"{labels[0]} / {lb}" for lb in labels[1:])
        + " |",
        "|---|" + "---:|" * (2 * len(labels) - 1),
    ]
    for i, what in enumerate(
        (
            f"requests/s, 1 keep-alive connection ({n_json // 2} requests)",
            f"requests/s, 8 connections ({n_json - n_json // 2} requests)",
            "server CPU per request, µs (lower is better)",
        )
    ):
        vals = [best[lb][i] for lb in labels]
        lines.append(
            f"| {what} | "
            + " | ".join(f"{v:,.0f}" for v in vals)
            + " | "
            + " | ".join(f"{vals[0] / v:.2f}×" for v in vals[1:])
            + " |"
        )
    return lines


def _child(tree: Path, mode: str, path: Path) -> dict[str, Any]:
    """Each tree's own bench/inspector.py child (its own names for its own internals)."""
    proc = subprocess.run(
        [PY, str(tree / "bench" / "inspector.py"), "--child", mode, str(path)],
        capture_output=True,
        text=True,
        env={**ENV, "PYTHONPATH": _path(tree)},
        cwd=tree,
    )
    if proc.returncode != 0:
        return {
            "error": proc.stderr.strip().splitlines()[-1][:200]
            if proc.stderr.strip()
            else f"exit {proc.returncode}"
        }
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


#: The batch child, the same code for every tree (run with its ``PYTHONPATH``): a run read and
#: analysed as a user's script does it, through the public entry point.
_BATCH = """
import importlib, json, os, sys, time
P = "looptap.cassettes" if os.path.isdir(".looptap-editable") else "cassettes"  # (cwd: the tree)
importlib.import_module(P + ".cli").tune_gc()  # as the looptap command does
t0, c0 = time.perf_counter(), os.times()
open_run = importlib.import_module(P).open_run
run = open_run(sys.argv[1])
a = run.analysis
out = {"findings": len(a.findings), "turns": len(a.turns), "conversations": len(a.conversations)}
c1 = os.times()
out["batch_s"] = time.perf_counter() - t0
out["cpu_s"] = (c1.user - c0.user) + (c1.system - c0.system)
with open("/proc/self/status") as f:
    out["peak_rss_mb"] = next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmHWM:"))
print(json.dumps(out))
"""


#: :data:`_BATCH` for any tree, one from before ``open_run`` included (``own``).
_BATCH_ANY = _BATCH.replace(
    "open_run = importlib.import_module(P).open_run\nrun = open_run(sys.argv[1])\n"
    "a = run.analysis\n",
    """try:
    open_run = importlib.import_module(P).open_run
except AttributeError:  # a tree from before open_run: its whole-run reader and analyse()
    analyse = importlib.import_module(P + ".analysis").analyse
    store = importlib.import_module(P + ".storage.store")
    read = getattr(store, "read_records", None) or store.read_cassette
    a = analyse(read(sys.argv[1]).exchanges)
else:
    a = open_run(sys.argv[1]).analysis
""",
)
assert _BATCH_ANY != _BATCH

#: A tree's own run (``own``), made by that tree's bench/inspector.py: argv = tree, where, MB.
_OWN_RUN = """
import sys
from pathlib import Path
import importlib.util
spec = importlib.util.spec_from_file_location("bench_inspector", sys.argv[1] + "/bench/inspector.py")
b = importlib.util.module_from_spec(spec)
spec.loader.exec_module(b)
where, mb = Path(sys.argv[2]), int(sys.argv[3])
where.mkdir(parents=True, exist_ok=True)
tmpl = where / "template.jsonl"
if tmpl.exists() and not b.sealed_ok(tmpl):  # another looptap's: the files bench/inspector.py made, made again
    for old in [tmpl, *where.glob("*-*mb.jsonl")]:
        old.unlink()
if not tmpl.exists():
    b.template(tmpl)
if not b.sealed_ok(tmpl):
    raise SystemExit("this tree does not take its own template's stored parses")
print(b._ensure(where, "run", mb, tmpl))
"""  # noqa: E501


def _stream_batch(tree: Path, path: Path, code: str = _BATCH) -> dict[str, Any]:
    """:data:`_BATCH` on ``tree``: seconds, CPU seconds and peak RSS (VmHWM, this process's own)."""
    proc = subprocess.run(
        [PY, "-c", code, str(path)],
        capture_output=True,
        text=True,
        env={**ENV, "PYTHONPATH": _path(tree)},
        cwd=tree,
    )
    if proc.returncode != 0:
        return {
            "error": proc.stderr.strip().splitlines()[-1][:200]
            if proc.stderr.strip()
            else f"exit {proc.returncode}"
        }
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _show_big(tree: Path, path: Path) -> tuple[float, float, float]:
    """``looptap show FILE`` to /dev/null: seconds, CPU seconds and peak RSS (MB, by wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [PY, "-m", cli(tree), "show", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**ENV, "PYTHONPATH": _path(tree)},
        cwd=tree,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):
        raise SystemExit(f"looptap show {path} ({tree}) exited {proc.returncode}: {err[-800:]}")
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _own_run(tree: Path, where: Path, size: int) -> Path:
    """``tree``'s ~``size`` MB run in ``where``, made (or kept from an earlier run, if this tree
    takes its template's stored parses) by that tree's own bench/inspector.py: :data:`_OWN_RUN`."""
    made = subprocess.run([PY, "-c", _OWN_RUN, str(tree), str(where), str(size)], capture_output=True, text=True,  # noqa: E501
                          env={**ENV, "PYTHONPATH": _path(tree)}, cwd=tree)  # fmt: skip
    if made.returncode != 0:
        raise SystemExit(f"{tree}: its own run could not be made: {made.stderr.strip()[-800:]}")
    return Path(made.stdout.strip().splitlines()[-1])


def _big_run(size: int, where: Path) -> Path:
    return _own_run(ROOT, where, size)


def _median_batch(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One tree's :data:`_BATCH` runs as one: the median seconds and CPU seconds, the highest peak
    RSS, the counts (an error when a run failed, or when the counts differ between runs)."""
    failed = [r for r in runs if "batch_s" not in r]
    if failed:
        return failed[0]
    if len({(r["turns"], r["conversations"], r["findings"]) for r in runs}) > 1:
        return {
            "error": "turns / conversations / findings changed between runs of the same tree: "
            + "; ".join(f"{r['turns']} / {r['conversations']} / {r['findings']}" for r in runs)
        }
    out = dict(runs[0])
    out["batch_s"] = statistics.median(r["batch_s"] for r in runs)
    out["cpu_s"] = statistics.median(r["cpu_s"] for r in runs)
    out["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    out["runs"] = len(runs)
    return out


def _interleaved(
    trees: list[tuple[str, Path]], paths: list[Path], rounds: int, code: str, what: str
) -> list[dict[str, Any]]:
    """Each tree's batch child ``code`` on its path, ``rounds`` times, interleaved round by round,
    each round starting one tree later (a change in the machine's load hits every tree alike, and
    no tree always runs first): per tree, the medians (:func:`_median_batch`)."""
    each: list[list[dict[str, Any]]] = [[] for _ in trees]
    for r in range(rounds):
        for k in range(len(trees)):
            i = (k + r) % len(trees)
            label, tree = trees[i]
            each[i].append(_stream_batch(tree, paths[i], code))
            print(
                f"  {what} {label} (round {r + 1}/{rounds}): {each[i][-1]} (load {_load()})",
                file=sys.stderr,
                flush=True,
            )
    return [_median_batch(runs) for runs in each]


def batch(trees: list[tuple[str, Path]], path: Path, rounds: int = 1) -> list[str]:
    _compile(trees)
    labels = [label for label, _ in trees]
    # every tree's batch, then every tree's show: the main figure first
    batches = _interleaved(trees, [path] * len(trees), rounds, _BATCH, "batch")
    rows = []
    for (label, tree), b in zip(trees, batches, strict=True):
        s = _show_big(tree, path)
        print(
            f"  show {label}: {s[0]:.1f} s, CPU {s[1]:.1f} s, {s[2]:.0f} MB (load {_load()})",
            file=sys.stderr,
            flush=True,
        )
        rows.append((b, s))
    mb = path.stat().st_size / 1e6

    def cell(b: dict[str, Any]) -> str:
        return (
            f"{b['batch_s']:.1f} s (CPU {b['cpu_s']:.1f} s), {b['peak_rss_mb']:,.0f} MB"
            if "batch_s" in b
            else f"failed: {b['error']}"
        )

    def ratio(a: dict[str, Any], b: dict[str, Any]) -> str:
        if "batch_s" not in a or "batch_s" not in b:
            return ""
        return (
            f"{a['batch_s'] / b['batch_s']:.2f}× (CPU {a['cpu_s'] / b['cpu_s']:.2f}×), "
            f"{a['peak_rss_mb'] / b['peak_rss_mb']:.2f}×"
        )

    head = rows[0][0]
    lines = [
        f"| {mb:,.0f} MB run, {head.get('turns', 0):,} turns, {head.get('conversations', 0):,} "
        f"conversations, {head.get('findings', 0):,} findings | "
        + " | ".join(labels)
        + " | "
        + " | ".join(f"{labels[0]} / {lb} (time, peak)" for lb in labels[1:])
        + " |",
        "|---|" + "---:|" * (2 * len(labels) - 1),
    ]
    what = "`open_run(path)` + its analysis (goal ≤ 20 s, ≤ 500 MB)" + (
        f"; median of {rounds} interleaved runs, highest peak" if rounds > 1 else ""
    )
    lines.append(
        f"| {what} | "
        + " | ".join(cell(b) for b, _ in rows)
        + " | "
        + " | ".join(ratio(head, b) for b, _ in rows[1:])
        + " |"
    )
    lines.append(
        "| `looptap show FILE > /dev/null` | "
        + " | ".join(f"{s:.1f} s (CPU {c:.1f} s), {r:,.0f} MB" for _, (s, c, r) in rows)
        + " | "
        + " | ".join(
            f"{rows[0][1][0] / s:.2f}× (CPU {rows[0][1][1] / c:.2f}×), {rows[0][1][2] / r:.2f}×"
            for _, (s, c, r) in rows[1:]
        )
        + " |"
    )
    same = {
        (b.get("turns"), b.get("conversations"), b.get("findings"))
        for b, _ in rows
        if "batch_s" in b
    }
    lines += [
        "",
        "Turns, conversations and findings are the same on every tree."
        if len(same) == 1
        else "**The trees disagree** on turns / conversations / findings: "
        + "; ".join(
            f"{lb}: {b.get('turns')} / {b.get('conversations')} / {b.get('findings')}"
            for lb, (b, _) in zip(labels, rows, strict=True)
        ),
    ]
    return lines


def own(trees: list[tuple[str, Path]], size: int, where: Path, rounds: int = 1) -> list[str]:
    """Each tree on a run of its own (see the ``own`` section in the module's docstring)."""
    _compile(trees)
    runs = [_big_run(size, where)]  # this tree's: the batch section's run
    for _, tree in trees[1:]:
        rev = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        runs.append(_own_run(tree, where / f"own-{rev}", size))
    for (label, _), run in zip(trees, runs, strict=True):
        print(
            f"  own run of {label}: {run} ({run.stat().st_size / 1e6:,.0f} MB)",
            file=sys.stderr,
            flush=True,
        )
    got = _interleaved(trees, runs, rounds, _BATCH_ANY, "own")
    labels = [label for label, _ in trees]
    ok = all("batch_s" in b for b in got)
    per_turn = [
        b["cpu_s"] / b["turns"] * 1e3 if "batch_s" in b and b.get("turns") else None for b in got
    ]
    lines = [
        f"| each tree's own ~{size:,} MB run | "
        + " | ".join(labels)
        + " | "
        + " | ".join(f"{labels[0]} / {lb}" for lb in labels[1:])
        + " |",
        "|---|" + "---:|" * (2 * len(labels) - 1),
    ]

    def row(what: str, cells: list[str], ratios: list[str]) -> None:
        lines.append(f"| {what} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")

    row(
        "file, turns",
        [
            f"{p.stat().st_size / 1e6:,.0f} MB, {b.get('turns', 0):,}"
            for p, b in zip(runs, got, strict=True)
        ],
        ["" for _ in got[1:]],
    )
    row("read and analysed" + (f" (median of {rounds})" if rounds > 1 else ""),
        [f"{b['batch_s']:.1f} s (CPU {b['cpu_s']:.1f} s), {b['peak_rss_mb']:,.0f} "
        "MB" if "batch_s" in b else f"failed: {b['error']}" for b in got],
        [f"{got[0]['peak_rss_mb'] / b['peak_rss_mb']:.2f}× "
        "peak" if ok else "" for b in got[1:]])  # fmt: skip
    row("CPU per turn", [f"{t:.2f} ms" if t is not None else "" for t in per_turn],
        [f"{per_turn[0] / t:.2f}"
        "×" if per_turn[0] is not None and t else "" for t in per_turn[1:]])  # fmt: skip
    return lines


def inspector(trees: list[tuple[str, Path]], path: Path) -> list[str]:
    _compile(trees)
    labels = [label for label, _ in trees]
    apps = []
    for label, tree in trees:
        a = _child(tree, "app", path)
        print(f"  inspector {label}: {a} (load {_load()})", file=sys.stderr, flush=True)
        apps.append(a)
    lines = [
        f"| inspector, {path.stat().st_size / 1e6:,.0f} MB run | "
        + " | ".join(labels)
        + " | "
        + " | ".join(f"{labels[0]} / {lb}" for lb in labels[1:])
        + " |",
        "|---|" + "---:|" * (2 * len(labels) - 1),
    ]
    for key, what, unit in (
        ("first_screen_s", "first screen", "s"),
        ("first_screen_rss_mb", "RSS at first screen", "MB"),
        ("full_read_s", "whole file read and analysed", "s"),
        ("peak_rss_mb", "peak RSS", "MB"),
    ):
        vals = [a.get(key) for a in apps]
        lines.append(
            f"| {what} | "
            + " | ".join(
                (f"{v:.2f} s" if unit == "s" else f"{v:,.0f} MB")
                if v is not None
                else f"failed: {a.get('error', '?')}"
                for v, a in zip(vals, apps, strict=True)
            )
            + " | "
            + " | ".join(f"{vals[0] / v:.2f}×" if vals[0] and v else "" for v in vals[1:])
            + " |"
        )
    return lines


DOC = ROOT / "docs" / "performance.md"


def _write(section: str, block: list[str]) -> None:
    """docs/performance.md with ``section``'s block replaced (the other sections as they were:
    each says when and on which trees it was measured)."""
    head = (
        "# Performance: the figures a user waits on\n\n"
        f"Generated by `python bench/perf.py --write` ({platform.machine()}, {os.cpu_count()} "
        f"CPUs, Python {platform.python_version()}), a section at a time. What is measured, and "
        "how: the docstring of `bench/perf.py`. The machine is shared with other people's test "
        "runs (the load average is given per section): compare the columns of a row with each "
        "other (the ratios), not with another run. A speed change is checked for unchanged output "
        "(``show``, ``show --json`` and ``textconv``, byte for byte, on the corpus and the "
        "synthetic runs) with `python bench/same_output.py --against REF`.\n"
    )
    blocks: dict[str, str] = {}
    if DOC.exists():
        for part in DOC.read_text().split("\n### ")[1:]:
            blocks[part.split("\n", 1)[0].strip()] = "### " + part.rstrip("\n") + "\n"
    blocks[section] = "\n".join(block).rstrip("\n") + "\n"
    DOC.write_text(
        head + "".join("\n" + blocks[s] for s in (*SECTIONS, *OTHER_SECTIONS) if s in blocks)
    )
    print(f"wrote {section} into {DOC}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--against", nargs="*", default=["63aa822"], metavar="REF")
    ap.add_argument("-n", "--runs", type=int, default=9, help="start-up rounds (default 9)")
    ap.add_argument(
        "--size", type=int, default=1000, help="the batch and inspector run, MB (default 1000)"
    )
    ap.add_argument(
        "--batch-runs",
        type=int,
        default=1,
        metavar="N",
        help="batch rows: run each tree's batch N times, interleaved, "
        "and give the medians (default 1)",
    )
    ap.add_argument(
        "--dir",
        type=Path,
        help="where the big run is written and kept (default: a temporary directory)",
    )
    ap.add_argument("--only", nargs="+", choices=SECTIONS, default=list(DEFAULT_SECTIONS))
    ap.add_argument(
        "--write",
        action="store_true",
        help="write each section measured into docs/performance.md, as it ends",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="looptap-perf-") as tmp:
        work = Path(tmp)
        trees: list[tuple[str, Path]] = [("this tree", ROOT)]
        for ref in args.against:
            rev = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", ref],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            tree = work / f"tree-{rev}"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), rev],
                check=True,
            )
            trees.append((f"{ref} ({rev})" if ref != rev else rev, tree))
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        trees[0] = (f"this tree ({head}{' + changes' if dirty else ''})", ROOT)
        for i, (_, tree) in enumerate(trees):
            _META[tree] = _metadata(tree, work / f"meta-{i}")
        try:
            big = None
            for section in SECTIONS:
                if section not in args.only:
                    continue
                load = _load()
                print(f"{section} … (load average {load})", file=sys.stderr, flush=True)
                t0 = time.perf_counter()
                # (``own``: each tree's, made by it)
                if section in ("batch", "inspector") and big is None:
                    big = _big_run(args.size, args.dir or work / "big")
                lines = (
                    startup(trees, args.runs, work)
                    if section == "startup"
                    else replay(trees, work)
                    if section == "replay"
                    else own(trees, args.size, args.dir or work / "big", args.batch_runs)
                    if section == "own"
                    else batch(trees, big, args.batch_runs)
                    if section == "batch"
                    else inspector(trees, big)
                )  # type: ignore[arg-type]
                block = [
                    f"### {section}",
                    "",
                    f"Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; load "
                    f"average (1/5/15 min) at the start: {load}; took "
                    f"{time.perf_counter() - t0:.0f} s; trees: "
                    + ", ".join(f"`{lb}`" for lb, _ in trees)
                    + ".",
                    "",
                    *lines,
                    "",
                ]
                print("\n".join(block), flush=True)
                if args.write:
                    _write(section, block)
        finally:
            for _, tree in trees[1:]:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
