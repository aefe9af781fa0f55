"""The per-branch overhead of ``looptap why`` against the plain fork it runs, side by side in one run.

    .venv/bin/python bench/why.py             # N = 4 branches each way
    .venv/bin/python bench/why.py --n 10

A failing run is recorded (tests/why/why_agent.py with the C bug: the second tool result dropped)
against a scripted fake upstream; then the same branch (the fork at c1 turn 1 with the dropped
result put back) is made N times

1. as plain forks, ``looptap run --from RUN@conversation=c1:turn=1 --edit restore_result[ID]=rain``,
   one after another;
2. by ``looptap why RUN --layer C --samples N --jobs 1 --result ID=rain`` (which also runs the
   command once against the recording first, to judge the recorded outcome: the baseline).

Reported: the wall time and the CPU time of the processes (this one's children: looptap, the
recorder, the replay server, the agent) per branch, and why's as a ratio of the plain fork's; the
baseline is included in why's figures, as a user pays it. The load average is printed before and
after (the machine is shared: wall times move with it, CPU times much less). Needs the recorder's
environment (``LOOPTAP_PROXY_PYTHON``).
"""  # noqa: E501

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.recorder import RECORDER, clean_env  # noqa: E402
from tests.support.scripted import ScriptedUpstream  # noqa: E402
from tests.why.test_why import AGENT, c_call, c_route  # noqa: E402

AGENT_ARGS = ["--drop-second", "--expect", "rain"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    c0, t0 = _cpu(), time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv[:6]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4)
    opts = ap.parse_args()
    from tests.support.recorder import PROXY_PYTHON

    if PROXY_PYTHON is None:
        raise SystemExit("needs the recorder's environment: set LOOPTAP_PROXY_PYTHON")
    env = clean_env(OPENAI_API_KEY="sk-bench-why", LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON))
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as d, ScriptedUpstream(c_route) as fake:
        tmp = Path(d)
        up = ["--upstream", f"openai={fake.url}", "--confdir", str(tmp / "conf")]
        run = tmp / "run.jsonl"
        subprocess.run(
            [*RECORDER, "run", "-o", str(run), *up, "--", sys.executable, str(AGENT), *AGENT_ARGS],
            env=env,
            cwd=tmp,
            capture_output=True,
        )
        call = c_call(run)
        fork_wall = fork_cpu = 0.0
        for k in range(opts.n):
            w, c = _timed(
                [
                    *RECORDER,
                    "run",
                    "--from",
                    f"{run}@conversation=c1:turn=1",
                    "--edit",
                    f"restore_result[{call}]=rain",
                    *up,
                    "-o",
                    str(tmp / f"fork.{k}.jsonl"),
                    "--",
                    sys.executable,
                    str(AGENT),
                    *AGENT_ARGS,
                ],
                env,
                tmp,
            )
            fork_wall, fork_cpu = fork_wall + w, fork_cpu + c
        why_wall, why_cpu = _timed(
            [
                sys.executable,
                "-m",
                "looptap.cassettes.cli",
                "why",
                str(run),
                "--layer",
                "C",
                "--samples",
                str(opts.n),
                "--jobs",
                "1",
                "--result",
                f"{call}=rain",
                *up,
                "-o",
                str(tmp / "why"),
                "--",
                sys.executable,
                str(AGENT),
                *AGENT_ARGS,
            ],
            env,
            tmp,
        )
    n = opts.n
    print("| path | branches | wall s per branch | CPU s per branch | / plain fork (wall, CPU) |")
    print("|---|---|---|---|---|")
    print(
        f"| plain fork (looptap run --from --edit) | {n} | {fork_wall / n:.2f} | "
        f"{fork_cpu / n:.2f} | 1.00×, 1.00× |"
    )
    print(
        f"| looptap why --layer C (baseline included) | {n} | {why_wall / n:.2f} | "
        f"{why_cpu / n:.2f} | {why_wall / fork_wall:.2f}×, {why_cpu / fork_cpu:.2f}× |"
    )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
