"""Shell and file tools on the timeline: the process-tracer prototype of docs/shell-file-tools.md,
measured on a real coding agent (issue 84, item 5). Not a product feature: a measurement.

    .venv/bin/python bench/shell_trace.py            # 2 runs each way, about 4 minutes
    .venv/bin/python bench/shell_trace.py --n 3

The agent is Claude Code (the pinned npm package in .npm-agents), run exactly as
tests/clients/test_agents.py's clean row runs it: ``looptap run`` against a scripted model, a remote
MCP tool, a background sub-agent that runs two ``Bash`` calls. Each run is made twice, alternating:
plainly, and with the agent started under ``strace -f --seccomp-bpf`` tracing only the calls the
design needs (process starts and ends, files opened for writing, renamed, removed). Printed:

* the cost: wall time of the run, and CPU time of the whole process tree (the recorder, the
  agent and its children: ``RUSAGE_CHILDREN`` of this process, which waits for all of them);
* what the tracer saw: processes started (by program), files written, and which shell the agent
  starts for a ``Bash`` call (argv[0]: ``$SHELL``, ``PATH``'s ``bash`` or an absolute path: what a
  command shim would have to replace);
* the links: each ``Bash`` tool call of the recording (``looptap show --json``) matched to the
  traced process whose argv carries its command, with that process's exit status; a call that
  matches no process, or two, is said.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tests.clients.test_agents as agents  # noqa: E402  (the clean row's run, reused as is)
from tests.proxy.test_e2e_node_agents import need  # noqa: E402

TRACE = "execve,execveat,exit_group,openat,rename,renameat2,unlink,unlinkat"
_LINE = re.compile(r"^(\d+) +(.*)$")
_EXEC = re.compile(r'^execve\("([^"]*)", \[(.*)\], 0x[0-9a-f]+ /\* \d+ vars \*/')
_FAILED = re.compile(r"\) = -1 ")
_EXIT = re.compile(r"^exit_group\((-?\d+)\)")
_WRITE = re.compile(r'^openat\([^,]+, "([^"]*)", [^)]*O_(?:WRONLY|RDWR)[^)]*\) = \d+')


def _args(text: str) -> list[str]:
    """strace's argv list (``"a", "b"...``) as strings, unescaped the way strace escapes them."""
    out = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"(\.\.\.)?', text):
        out.append(m.group(1).encode().decode("unicode_escape", "replace"))
    return out


def read_trace(path: Path) -> dict[str, Any]:
    """Processes (pid → argv, exit status) and files written, from ``strace -f -o`` output."""
    procs: dict[int, dict[str, Any]] = {}
    written: set[str] = set()
    for raw in path.read_text(errors="replace").splitlines():
        m = _LINE.match(raw)
        if not m:
            continue
        pid, rest = int(m.group(1)), m.group(2)
        if (e := _EXEC.match(rest)) and not _FAILED.search(rest):
            procs[pid] = {"prog": e.group(1), "argv": _args(e.group(2)), "exit": None}
        elif (x := _EXIT.match(rest)) and pid in procs:
            procs[pid]["exit"] = int(x.group(1))
        elif w := _WRITE.match(rest):
            written.add(w.group(1))
    return {"procs": procs, "written": written}


def bash_calls(out: Path) -> list[str]:
    """The command of every ``Bash`` tool call the recording holds, in order."""
    show = subprocess.run(
        [sys.executable, "-c", "from looptap.cassettes.cli import main; main()",
         "show", "--json", str(out)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    calls = []
    for line in show.stdout.splitlines():
        rt = json.loads(line)
        for call in rt.get("tool_calls") or []:
            if call.get("name") == "Bash" and isinstance(call.get("arguments"), dict):
                calls.append(str(call["arguments"].get("command", "")))
    return calls


SHIM = """#!/bin/sh
printf '%s\\0' "$@" > "{log}/$$.argv"
/bin/bash "$@"
rc=$?
echo $rc > "{log}/$$.exit"
exit $rc
"""


def shimmed(tmp: Path) -> dict[str, str]:
    """The command shim: a ``bash`` first on ``PATH`` and named by ``SHELL`` that keeps each
    invocation's argv and exit status, then runs the real ``/bin/bash``."""
    shim, log = tmp / "shim", tmp / "shim-log"
    shim.mkdir()
    log.mkdir()
    (shim / "bash").write_text(SHIM.format(log=log))
    (shim / "bash").chmod(0o755)
    return {"SHELL": str(shim / "bash"), "PATH": f"{shim}:{os.environ['PATH']}"}


def read_shim(log: Path) -> dict[int, dict[str, Any]]:
    procs = {}
    for argv in log.glob("*.argv"):
        code = argv.with_suffix(".exit")
        procs[int(argv.stem)] = {
            "prog": "shim/bash",
            "argv": ["bash", *argv.read_text(errors="replace").split("\0")[:-1]],
            "exit": int(code.read_text()) if code.exists() else None,
        }
    return procs


def one_run(mode: str, keep: Path) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=keep))
    confdir = tmp / "conf"
    confdir.mkdir()
    trace = tmp / "strace.txt"
    traced = mode == "traced"
    saved = dict(os.environ)
    if mode == "shim":
        os.environ.update(shimmed(tmp))
    if traced:
        real = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
        wrapper = tmp / "claude-traced"
        wrapper.write_text(
            f"#!/bin/sh\nexec strace -f --seccomp-bpf -qq -e trace={TRACE} -e signal=none"
            f" -s 65536 -o {shlex.quote(str(trace))} {shlex.quote(str(real))} \"$@\"\n"
        )
        wrapper.chmod(0o755)
        agents.need = lambda *a, **k: wrapper  # type: ignore[attr-defined]
    else:
        agents.need = need  # type: ignore[attr-defined]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        got = agents.claude_run(tmp, confdir, None)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = {"wall": wall, "cpu": cpu, "rc": got["proc"].returncode, "out": got["out"]}
    if traced:
        result["trace"] = read_trace(trace)
    if mode == "shim":
        result["trace"] = {"procs": read_shim(tmp / "shim-log"), "written": set()}
    return result


def _carries(arg: str, cmd: str) -> bool:
    """Whether a shell's argument carries the command: as written, or shell-quoted (Claude Code
    2.1.328 runs ``eval '…'`` with each ``'`` of the command written ``'"'"'``, as ``shlex.quote``
    writes it)."""
    return cmd in arg or shlex.quote(cmd) in arg


def link(calls: list[str], procs: dict[int, dict[str, Any]]) -> list[str]:
    lines = []
    for cmd in calls:
        hits = [
            (pid, p) for pid, p in procs.items()
            if Path(p["prog"]).name in ("bash", "sh", "zsh", "dash")
            and any(_carries(a, cmd) for a in p["argv"][1:])
        ]
        if len(hits) == 1:
            pid, p = hits[0]
            lines.append(f"  linked    {cmd[:50]!r} → {p['prog']} (pid {pid}), exit {p['exit']}")
        else:
            what = "ambiguous" if hits else "unlinked "
            lines.append(f"  {what} {cmd[:50]!r}: {len(hits)} processes carry it")
    return lines


def report(mode: str, run: dict[str, Any]) -> None:
    procs = run["trace"]["procs"]
    progs = Counter(Path(p["prog"]).name for p in procs.values())
    print(f"{mode}: {len(procs)} processes seen ({dict(progs.most_common(8))})")
    shells = sorted({p["prog"] for p in procs.values()
                     if Path(p["prog"]).name in ("bash", "sh", "zsh")})
    print(f"  shells started, by path: {shells}")
    if run["trace"]["written"]:
        files = sorted(f for f in run["trace"]["written"] if not f.startswith(("/dev/", "/proc/")))
        print(f"  files opened for writing: {len(files)}")
    calls = bash_calls(run["out"])
    print(f"  Bash tool calls in the recording: {len(calls)}")
    print("\n".join(link(calls, procs)))


MODES = ("plain", "traced", "shim")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=2, help="runs of each mode (the order rotates)")
    args = ap.parse_args()
    keep = Path(tempfile.mkdtemp(prefix="shell-trace-bench-"))
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for i in range(args.n):
        for mode in MODES[i % 3:] + MODES[:i % 3]:
            r = one_run(mode, keep)
            runs[mode].append(r)
            print(f"run {i + 1} {mode:6}: exit {r['rc']}, wall {r['wall']:.1f} s, "
                  f"CPU {r['cpu']:.1f} s", flush=True)

    def mean(mode: str, key: str) -> float:
        return sum(r[key] for r in runs[mode]) / len(runs[mode])

    for mode in MODES[1:]:
        w, c = mean(mode, "wall") / mean("plain", "wall"), mean(mode, "cpu") / mean("plain", "cpu")
        print(f"cost, {mode} / plain: wall {w:.2f}×, CPU of the process tree {c:.2f}× (n={args.n})")
    for mode in MODES[1:]:
        report(mode, runs[mode][-1])
    print(f"(kept: {keep})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
