"""What ``looptap run``'s process tracer (proxy/shell_trace.py, docs/shell-file-tools.md) costs a
coding agent on a syscall-heavy command: Claude Code (the pinned npm package in .npm-agents), told
by a scripted model to run one ``Bash`` command — a generated test suite under pytest (200 test
files, each writing, reading and removing files), ``python -m compileall`` of the suite, then
a new virtual environment ``.venv`` (Python 3.13's ``venv``, whose ``ensurepip`` installs its
bundled pip wheel) and a ``pip install --no-index`` of setuptools and wheel from a local wheel
directory (CPython 3.13's test wheels) — then to answer. Each run is made plainly (``looptap run
--no-shell-trace``), recorded the default way (``looptap run``: the working tree per turn, no
process tracer) and with the processes traced (``LOOPTAP_SHELL_TRACE=processes``: each program
and its exit, ptrace), alternating, ``--n`` times each; ``--full`` adds ``looptap run
--shell-trace`` (each process's output and files too) to the rotation.

    .venv/bin/python bench/shell_overhead.py          # 3 interleaved runs each way
    .venv/bin/python bench/shell_overhead.py --n 5 --full

Printed per mode: wall time of the whole ``looptap run`` (mean, and each run), and the CPU time of
the whole process tree (``RUSAGE_CHILDREN`` of this process, which waits for all of it: the
recorder, its writer, strace, the agent and the command's processes), and the ratio traced/plain.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.proxy.test_e2e_node_agents import (  # noqa: E402
    CLAUDE_OFFLINE,
    looptap_run,
    need,
    run_env,
)
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream  # noqa: E402

TEST = """
import os, tempfile

def test_{i}(tmp_path):
    for j in range(20):
        p = tmp_path / f"f{{j}}.txt"
        p.write_text("x" * 4096)
        assert p.read_text().startswith("x")
        os.rename(p, tmp_path / f"g{{j}}.txt")
        os.unlink(tmp_path / f"g{{j}}.txt")
"""


def _suite(work: Path) -> None:
    d = work / "suite"
    d.mkdir()
    for i in range(200):
        (d / f"test_{i}.py").write_text(TEST.format(i=i))


#: The Python whose ``venv`` and bundled pip the install step uses, and the wheels it installs.
PY313 = Path(os.environ.get("LOOPTAP_BENCH_PY313", "/root/.pyenv/versions/3.13.0/bin/python3"))
WHEELS = PY313.parent.parent / "lib" / "python3.13" / "test" / "wheeldata"
#: Each mode's options to ``looptap run``.
MODES = {
    "plain": ("--no-shell-trace",),
    "default": (),
    "processes": (),  # with LOOPTAP_SHELL_TRACE=processes (opt-in: ptrace)
    "full": ("--shell-trace",),
}


def one_run(mode: str, tmp: Path, confdir: Path) -> dict[str, Any]:
    claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    (tmp / "work").mkdir(parents=True)
    _suite(tmp / "work")
    py = shlex.quote(sys.executable)
    command = (
        f"{py} -m pytest -q -p no:cacheprovider suite > pytest.log 2>&1; tail -1 pytest.log; "
        f"{py} -m compileall -f -q suite && "
        f"{shlex.quote(str(PY313))} -m venv .venv && "
        f".venv/bin/pip install -q --no-index --find-links {shlex.quote(str(WHEELS))} "
        "setuptools wheel && .venv/bin/python -c 'import setuptools' "
        "&& echo installed"
    )

    def route(req: ScriptedRequest) -> Reply:
        if not req.tools:
            return Reply.say("(side call)")
        if not req.tool_results():
            return Reply.tool("Bash", {"command": command, "timeout": 600000})
        return Reply.say("done")

    env = run_env(tmp, ANTHROPIC_API_KEY="sk-ant-bench", SHELL="/bin/bash", **CLAUDE_OFFLINE)
    cmd = [
        str(claude), "-p", "Run the suite.", "--model", "claude-sonnet-4-5",
        "--output-format", "json", "--no-session-persistence", "--allowedTools", "Bash",
    ]  # fmt: skip
    env.pop("LOOPTAP_SHELL_TRACE", None)
    if mode == "processes":
        env["LOOPTAP_SHELL_TRACE"] = "processes"
    extra = MODES[mode]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with ScriptedUpstream(route) as up:
        proc, out = looptap_run(tmp, confdir, cmd, env, upstream=up, extra=extra)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    _reap()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    said = out.read_text()
    ok = proc.returncode == 0 and "200 passed" in said and "installed" in said
    if not ok:  # kept for a look (the temporary directory goes)
        keep = Path(tempfile.gettempdir()) / f"looptap-shell-bench-failed-{tmp.name}"
        shutil.copytree(tmp, keep, ignore=shutil.ignore_patterns("suite"), dirs_exist_ok=True)
        (keep / "looptap.stderr").write_text(proc.stderr)
        print(f"kept in {keep}: exit {proc.returncode}", flush=True)
    return {"wall": wall, "cpu": cpu, "ok": ok, "processes": said.count('"type":"process"')}


def _reap() -> None:
    """Wait for the orphans handed to this process (a subreaper): their CPU time is counted."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> int:
    # A subreaper: the agent's processes orphaned when the recorder ends strace (a tracer's
    # tracees are not its children's CPU time once it is gone) come here and are counted.
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="also --shell-trace (output and files)")
    args = ap.parse_args()
    if not WHEELS.is_dir():
        print(f"no wheel directory at {WHEELS} (set LOOPTAP_BENCH_PY313 to a CPython 3.13)")
        return 2
    modes = ["plain", "default", "processes", *(["full"] if args.full else [])]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="looptap-shell-bench-") as d:
        base = Path(d)
        confdir = base / "conf"
        for i in range(args.n):
            for mode in modes if i % 2 == 0 else modes[::-1]:
                r = one_run(mode, base / f"{mode}{i}", confdir)
                runs[mode].append(r)
                print(
                    f"{mode:7} run {i + 1}: wall {r['wall']:.1f} s, cpu {r['cpu']:.1f} s, "
                    f"{'ok' if r['ok'] else 'FAILED'}, process records {r['processes']}",
                    flush=True,
                )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print("| | " + " | ".join(modes) + " | " + " | ".join(f"{m} / plain" for m in modes[1:]) + " |")
    for key in ("wall", "cpu"):
        means = {m: statistics.mean(r[key] for r in runs[m]) for m in modes}
        each = {m: ", ".join(f"{r[key]:.1f}" for r in runs[m]) for m in modes}
        cells = [f"{means[m]:.2f} ({each[m]})" for m in modes]
        ratios = [f"**{means[m] / means['plain']:.3f}x**" for m in modes[1:]]
        print(f"| {key} (s), mean of {args.n} | " + " | ".join(cells + ratios) + " |")
    return 0 if all(r["ok"] for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
