"""``looptap run --from … --verify``: K=5 branches × 3 models on one run, ``--jobs 1`` against
``--jobs 3`` side by side in one run (issue 104; docs/fork.md, "Which model would have fixed it").

    .venv/bin/python bench/verify_jobs.py              # 5 × 3, --jobs 1 then --jobs 3
    .venv/bin/python bench/verify_jobs.py --k 2        # smaller

The agent is tests/support/bash_agent.py, recorded once through ``looptap run`` against a scripted
Anthropic model that answers each request after ``--latency`` seconds (a model's latency: what
``--jobs`` overlaps): it reads ``calc.py`` then fixes it, right for ``claude-haiku-4-5`` only. Each
verify forks at turn 1 (turn 0 served), every branch in its own scratch tree (util-linux
``unshare``), ``python3 -c …`` the check. Reported per ``--jobs``: the wall time, the requests the
scripted model received against the at-most the command printed before sending anything, and the
verified counts (which must be 5/5, 0/5, 0/5 in each). The load average is printed before and
after (the machine may be shared: the ratio is the figure, from the same run). Needs the recorder's
environment (``LOOPTAP_PROXY_PYTHON``) and ``unshare``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import bash_agent  # noqa: E402
from tests.support.recorder import RECORDER  # noqa: E402
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream  # noqa: E402

GOOD = "claude-haiku-4-5"
MODELS = (GOOD, "claude-opus-4-1", "claude-sonnet-4-5")
CHECK = 'python3 -c "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"'


def route(latency: float) -> object:
    def answer(req: ScriptedRequest) -> Reply:
        time.sleep(latency)
        done = len(req.tool_results())
        if done == 0:
            return Reply.tool("bash", {"command": "cat calc.py"}, what="look")
        if done == 1:
            fix = "a + b" if req.model == GOOD else "a * b"
            return Reply.tool("bash", {"command": f"sed -i 's/a - b/{fix}/' calc.py"}, what="fix")
        return Reply.say("done", what="answer")

    return answer


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.pop("LOOPTAP_SHELL_TRACE", None)  # the default: the working tree per turn
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {**env, "HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-bench", "PYTHONPATH": str(REPO)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 3])
    a = ap.parse_args()
    if shutil.which("unshare") is None:
        print("no unshare (util-linux) here", file=sys.stderr)
        return 2
    print(f"load before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="looptap-bench-verify-") as t:
        tmp = Path(t)
        agent = tmp / "agent.py"
        agent.write_text(Path(bash_agent.__file__).read_text())
        work = tmp / "work"
        work.mkdir()
        (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        env = _env(tmp)
        run = tmp / "run.jsonl"
        with ScriptedUpstream(route(0.0)) as up:  # type: ignore[arg-type]
            rec = subprocess.run(
                [*RECORDER, "run", "-o", str(run), "--confdir", str(tmp / "conf"),
                 "--upstream", f"anthropic={up.url}", "--", sys.executable, str(agent)],
                env=env, cwd=work, capture_output=True, text=True, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        if rec.returncode != 0:
            print(rec.stderr[-3000:], file=sys.stderr)
            return 1
        (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        print(f"{a.k} branches × {len(MODELS)} models, a model latency of {a.latency:g} s")
        print("| --jobs | wall (s) | requests received | at most printed | verified |")
        print("|---|---|---|---|---|")
        walls = {}
        for jobs in a.jobs:
            with ScriptedUpstream(route(a.latency), ids=f"j{jobs}") as up:  # type: ignore[arg-type]
                start = time.perf_counter()
                proc = subprocess.run(
                    [*RECORDER, "run", "--from", f"{run}@turn=1", "--model", ",".join(MODELS),
                     "--repeat", str(a.k), "--jobs", str(jobs), "--verify", CHECK, "--json",
                     "-o", str(tmp / f"v{jobs}"), "--confdir", str(tmp / "conf"),
                     "--upstream", f"anthropic={up.url}", "--", sys.executable, str(agent)],
                    env=env, cwd=work, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                )  # fmt: skip
                walls[jobs] = time.perf_counter() - start
                received = len(up.log)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            doc = json.loads(proc.stdout)
            printed = re.search(r"at most (\d+) requests sent live in all", proc.stderr)
            counts = ", ".join(f"{r['verified']}/{r['judged']}" for r in doc["rows"])
            print(f"| {jobs} | {walls[jobs]:.1f} | {received} (sent {doc['sent']}) | "
                  f"{printed.group(1) if printed else '?'} | {counts} |")  # fmt: skip
            assert received == doc["sent"] <= doc["at_most"]
        if len(walls) > 1:
            first, last = a.jobs[0], a.jobs[-1]
            ratio = walls[last] / walls[first]
            print(f"--jobs {last} / --jobs {first}: {ratio:.2f}× the wall time")
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
