"""``looptap why`` on a recorded Claude Code run with a sub-agent (its Agent tool, the Task tool of
older versions), issue 55: the real ``claude`` (npm, a native build) driven by a scripted model,
recorded by the real ``looptap run``, forked by the real ``looptap run --from`` in every branch.

Claude Code 2.1.328 in ``-p`` mode runs the sub-agent in the background: the main loop answers
"waiting", and a later main-loop request carries the sub-agent's answer in a
``<task-notification>`` (tests/proxy/test_e2e_claude_scripted.py). The sub-agent counts the vowels
of "looptap" wrong in the recording (2); re-sampled, it counts 3. Its answer reaching the main loop
takes the main loop live from that request, and only that re-sample flips the outcome.

A branch whose fork failed (here: Claude Code asked another question than the recording's, so its
first request matched nothing) is said as such, never "no final answer".
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import orjson
import pytest

from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, need, run_env
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream, claude_code_side_call

pytestmark = [needs_recorder]

TASK = "Count the vowels in the word looptap and report the number."
#: The outcome: the final answer must say 3 vowels.
RIGHT = "3 vowels"
#: The prompt: the second and later runs of the script ask another one when PROMPTS asks so.
SCRIPT = """#!/bin/sh
n=$(cat "{counter}" 2>/dev/null || echo 0)
echo $((n + 1)) > "{counter}"
prompt="Use a sub-agent to count the vowels in looptap."
if [ -n "$VARY" ] && [ "$n" -ge 2 ]; then prompt="$prompt Then say hello."; fi
exec "{claude}" -p "$prompt" --model claude-sonnet-4-5 --output-format json \\
  --no-session-persistence --allowedTools Agent,Bash
"""


class Route:
    """The main loop spawns the sub-agent, waits, and reports the count the notification carries;
    the sub-agent runs ``echo looptap``, then counts: wrong the first time it is asked, right
    after."""

    def __init__(self) -> None:
        self.counted = 0
        self.lock = threading.Lock()

    def __call__(self, req: ScriptedRequest) -> Reply:
        side = claude_code_side_call(req)
        if side:
            return Reply.say("(side call)", what=f"side:{side}")
        done = len(req.tool_results())
        if "cc_is_subagent=true" in req.system:
            if done == 0:
                return Reply.tool(
                    "Bash", {"command": "echo looptap", "description": "Print the word"}
                )
            with self.lock:
                self.counted += 1
                n = 2 if self.counted == 1 else 3
            return Reply.say(f"There are {n} vowels in looptap.", what="sub:answer")
        if done == 0:
            return Reply.tool(
                "Agent",
                {"description": "Count vowels", "prompt": TASK, "subagent_type": "general-purpose"},
            )
        last = req.last_user_text()
        if "<task-notification>" not in last:
            return Reply.say("Waiting for the sub-agent.")
        n = 3 if "There are 3 vowels" in last else 2
        return Reply.say(f"The sub-agent counted {n} vowels in looptap.", what="main:answer")


@pytest.fixture(scope="module")
def claude_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The failing run, recorded once: (the run, the agent script)."""
    claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    tmp = tmp_path_factory.mktemp("why-claude")
    script = tmp / "claude.sh"
    script.write_text(SCRIPT.format(counter=tmp / "runs.txt", claude=claude))
    script.chmod(0o755)
    with ScriptedUpstream(Route()) as up:
        proc = progress.run(
            [
                *RECORDER,
                "run",
                "-o",
                str(tmp / "run.jsonl"),
                "--confdir",
                str(tmp / "conf"),
                "--upstream",
                f"anthropic={up.url}",
                "--",
                str(script),
            ],
            env=run_env(tmp, ANTHROPIC_API_KEY="sk-ant-why-claude", **CLAUDE_OFFLINE),
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        assert proc.returncode == 0, proc.stderr[-3000:] + "\n".join(x.line() for x in up.log)
    return tmp / "run.jsonl", script


def _why(run: Path, script: Path, out: Path, *args: str, **env: str) -> tuple[int, dict, str]:
    """``looptap why`` on the run, in the directory and home it was recorded in (as a user forks
    a run in the checkout it was recorded in), the branches into ``out``."""
    with ScriptedUpstream(Route()) as up:
        up.route.counted = 1  # type: ignore[attr-defined]  # the recording asked once already
        proc = progress.run(
            [
                sys.executable,
                "-m",
                "looptap.cassettes.cli",
                "why",
                str(run),
                "--answer-not-matches",
                RIGHT,
                "--upstream",
                f"anthropic={up.url}",
                "--confdir",
                str(run.parent / "conf"),
                "-o",
                str(out),
                "--json",
                *args,
                "--",
                str(script),
            ],
            env=run_env(
                run.parent,
                ANTHROPIC_API_KEY="sk-ant-why-claude",
                LOOPTAP_PROXY_PYTHON=RECORDER[0],
                **CLAUDE_OFFLINE,
                **env,
            ),
            capture_output=True,
            text=True,
            cwd=run.parent,
        )
    doc = orjson.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, doc, proc.stderr


def test_why_on_claude_code_finds_the_sub_agents_answer(
    claude_run: tuple[Path, Path], tmp_path: Path
) -> None:
    run, script = claude_run
    rc, doc, err = _why(run, script, tmp_path / "w", "--samples", "2")
    assert rc == 0, err[-4000:]
    v = doc["verdict"]
    # the sub-agent's last turn (c2 turn 1), re-sampled: its answer reaches the main loop
    assert (v["layer"], v["conversation"], v["turn"], v["flips"], v["samples"]) == (
        "E",
        "c2",
        1,
        2,
        2,
    ), v
    others = [i for i in doc["interventions"] if i["key"] != v["intervention"]]
    assert others and all(i["flips"] == 0 and i["samples"] == 2 for i in others), others
    assert "c1 went live from turn 2: the change past the cursor (c2 turn 1) reached it" in "".join(
        p.read_text() for p in (tmp_path / "w").glob("E-c2-t1-*.log")
    )
    # a branch live from the main loop's second turn: its requests differ from the recording only
    # in what a run changes (the sub-agent's id, said three times in one tool result, each
    # tolerated difference listed once; the notification's duration)
    diff = progress.run(
        [*RECORDER, "diff", str(run), str(tmp_path / "w" / "E-c1-t1-e-resample.1.jsonl")],
        capture_output=True,
        text=True,
    )
    lines = diff.stdout.splitlines()
    assert diff.returncode == 0 and "the runs do not diverge" in diff.stdout, diff.stdout
    assert len(lines) == len(set(lines)) and "(by id, 3 times)" in diff.stdout, diff.stdout


def test_a_claude_code_branch_whose_fork_failed_says_so(
    claude_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """From its third run on (the recording was its first), the agent asks another question: every
    branch forked past its first request fails closed there; each says the fork failed and why,
    none "no final answer" (issue 55: diverged Claude Code branches were reported so), and none
    is counted as a sample."""
    run, script = claude_run
    (script.parent / "runs.txt").write_text("1")
    _rc, doc, err = _why(run, script, tmp_path / "w", "--samples", "1", "--jobs", "1", VARY="1")
    invalid = [b for i in doc["interventions"] for b in i["branches"] if b["result"] == "invalid"]
    # the first branch (live from c1's first request) asks as recorded; the three after it fail
    assert len(invalid) == 3 and all(
        b["why"].startswith(
            "the fork failed: the client diverged before the cursor at conversation c1, turn 0"
        )
        for b in invalid
    ), invalid
    assert "no final answer" not in err + orjson.dumps(doc).decode(), err[-3000:]
    assert sum(i["samples"] for i in doc["interventions"]) == 1, doc["interventions"]
