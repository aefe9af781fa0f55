"""Recording a test suite with the pytest plugin: the wall time of one session, before and after.

    .venv/bin/python bench/pytest_record.py                  # this tree against the commit before the change
    .venv/bin/python bench/pytest_record.py --before REV     # against any other commit

A project of 10 tests, each an openai-SDK agent doing a 2-turn tool loop, is recorded with
``pytest --looptap-record-mode=all`` against a loopback fake upstream (``--looptap-upstream``),
once with this tree's plugin and once with the plugin of ``--before`` (a temporary git worktree),
alternating, ``--repeat`` times each. The recorder runs from ``LOOPTAP_PROXY_PYTHON``
(default ``.venv-proxy/bin/python``). Before, each test started its own recorder; after, one
recorder serves the session. Wall time is the whole ``pytest`` process. Absolute seconds depend on
the machine (these are shared, noisy 2-core boxes): compare the columns of one run.
"""  # noqa: E501

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.upstream import FakeUpstream  # noqa: E402

BEFORE = "0d7e090"  # any commit from before one recorder per session (issue 16)

#: The agent both pytest benches run: the openai SDK's tool loop, three calls at most.
AGENT = '''
import pytest
from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]

def agent(city):
    client = OpenAI(max_retries=0)
    msgs = [{"role": "user", "content": f"Weather in {city}?"}]
    for _ in range(3):
        m = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS).choices[0].message
        if not m.tool_calls:
            return m.content
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
        msgs += [{"role": "tool", "tool_call_id": c.id, "content": "sunny"} for c in m.tool_calls]
'''  # noqa: E501

SUITE = AGENT + '''
@pytest.mark.parametrize("n", range(10))
@pytest.mark.looptap
def test_agent(looptap, n):
    assert agent(f"city {n}")
'''


def run_suite(tree: Path, project: Path, upstream: str, proxy_python: str) -> tuple[float, int]:
    shutil.rmtree(project / "cassettes", ignore_errors=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().endswith(("_PROXY", "_BASE_URL")) and k != "CI"
    }
    env.update(PYTHONPATH=str(tree), LOOPTAP_PROXY_PYTHON=proxy_python, OPENAI_API_KEY="sk-bench")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:textual-snapshot",
            "-p",
            "no:xdist",
            "--looptap-record-mode=all",
            "--looptap-upstream",
            f"openai={upstream}",
            str(project / "test_suite.py"),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(
            f"the suite failed with {tree}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
        )
    recorded = len(list((project / "cassettes").rglob("*.jsonl")))
    return wall, recorded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--before", default=BEFORE, help=f"the commit to compare with (default {BEFORE})"
    )
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    proxy_python = os.environ.get("LOOPTAP_PROXY_PYTHON") or str(
        REPO / ".venv-proxy" / "bin" / "python"
    )
    if not Path(proxy_python).exists():
        raise SystemExit(
            f"the recorder's environment is missing: {proxy_python} (set LOOPTAP_PROXY_PYTHON)"
        )
    with tempfile.TemporaryDirectory(prefix="looptap-bench-") as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(before), args.before],
            check=True,
        )
        try:
            project = Path(tmp) / "project"
            project.mkdir()
            (project / "test_suite.py").write_text(SUITE)
            times: dict[str, list[float]] = {"before": [], "after": []}
            with FakeUpstream(delay=0.002, default_scenario="tool_loop:1") as up:
                for _ in range(args.repeat):
                    for name, tree in (("before", before), ("after", REPO)):
                        wall, n = run_suite(tree, project, up.url, proxy_python)
                        assert n == 10, f"{name}: {n} cassettes written, expected 10"
                        times[name].append(wall)
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)], check=False
            )
    b, a = statistics.median(times["before"]), statistics.median(times["after"])
    print(
        f"recording 10 tests (2 round trips each) in one pytest session, median of {args.repeat}:"
    )
    print("| plugin | session wall time | per test | runs |")
    print("|---|---|---|---|")
    print(
        f"| before ({args.before}: a recorder per test) | {b:.1f} s | {b / 10:.2f} s | "
        f"{', '.join(f'{t:.1f}' for t in times['before'])} |"
    )
    print(
        f"| after (one recorder per session) | {a:.1f} s | {a / 10:.2f} s | "
        f"{', '.join(f'{t:.1f}' for t in times['after'])} |"
    )
    print(f"| ratio | {a / b:.2f}× | | |")


if __name__ == "__main__":
    main()
