"""``looptap rules propose`` on two recordings of the same real agent made on different days (issue
44, must-show 4), end to end through the recorder:

    day 1   looptap run -o monday.jsonl -- python agent.py                               → fake #1
    day 2   looptap run -o tuesday.jsonl -- env LD_PRELOAD=libfaketime FAKETIME=+1d python agent.py → fake #2
            looptap rules propose monday.jsonl tuesday.jsonl   → the block pasted into pyproject.toml
    day 2   looptap run --from monday.jsonl@turn=2 -- (the agent, a day on)             → fake #3

The agent (the real openai SDK) writes the weekday, the date and a fresh run id into its system
prompt and returns a fresh uuid beside each file's line count. The proposal covers what the
built-in detectors do not (the weekday, the run id), and with it pasted the day-2 fork serves its
prefix (turns 0 and 1) from the recording and only turn 2 reaches the live fake; without it the
fork fails at turn 0 and nothing is sent. Nothing more: a file that grew a line between the days
still fails the fork with the rules in place, at turn 1's tool result.
"""  # noqa: E501

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.clock import moved, needs_faketime
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder, needs_faketime]

AGENT = '''
import datetime, json, uuid
from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "count_lines", "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}}}]


def count_lines(name):
    with open(name) as f:
        return f"{len(f.read().splitlines())} lines (scan {uuid.uuid4()})"


now = datetime.datetime.now()
client = OpenAI(max_retries=0)
# a run id as machines make them, letters and digits (one of 43 all-digit draws reads as a number,
# which propose rightly leaves alone: the test failed so once in a full suite)
rid = next(h for h in iter(lambda: uuid.uuid4().hex[:8], "") if not (h.isdigit() or h.isalpha()))
msgs = [{"role": "system", "content": f"You count lines. Today is {now:%A}, {now:%Y-%m-%d}. Trace run-{rid}."},
        {"role": "user", "content": "How many lines do notes.txt and todo.txt have?"}]
for _ in range(4):
    m = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS).choices[0].message
    if not m.tool_calls:
        print("answer:", m.content)
        break
    msgs.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
    msgs += [{"role": "tool", "tool_call_id": c.id, "content": count_lines(json.loads(c.function.arguments)["name"])} for c in m.tool_calls]
'''  # noqa: E501
FILES = ("notes.txt", "todo.txt")


def route(req: ScriptedRequest) -> Reply:
    done = len(req.tool_results())
    if done < len(FILES):
        return Reply.tool("count_lines", {"name": FILES[done]})
    return Reply.say("counted: " + ", ".join(r.split(" (")[0] for r in req.tool_results()))


def _looptap(tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [*RECORDER, *argv],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=clean_env(OPENAI_API_KEY="sk-test-two-days"),
    )


def _agent(tomorrow: bool) -> list[str]:
    clock = ["env", *(f"{k}={v}" for k, v in moved("+1d").items())] if tomorrow else []
    return [*clock, sys.executable, "agent.py"]


def _record(tmp: Path, out: str, tomorrow: bool) -> None:
    # a fake each: the same call ids, as the model's are not part of the question
    with ScriptedUpstream(route, validate=True) as fake:
        proc = _looptap(
            tmp,
            "run",
            "-o",
            out,
            "--confdir",
            str(tmp / "conf"),
            "--upstream",
            f"openai={fake.url}",
            "--",
            *_agent(tomorrow),
        )
    assert proc.returncode == 0 and "answer: counted: 2 lines, 3 lines" in proc.stdout, proc.stderr[
        -3000:
    ]


def _fork(tmp: Path) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """``monday.jsonl`` forked at turn 2 by the agent a day on; the requests the live fake got (the
    tool results each carried: 2 is turn 2)."""
    with ScriptedUpstream(lambda req: Reply.say("LIVE"), validate=True) as fake:
        proc = _looptap(
            tmp,
            "run",
            "--from",
            "monday.jsonl@turn=2",
            "-o",
            "branch.jsonl",
            "--confdir",
            str(tmp / "conf"),
            "--upstream",
            f"openai={fake.url}",
            "--",
            *_agent(True),
        )
        return proc, [len(x.request.tool_results()) for x in fake.log]


@pytest.mark.slow(
    reason=(
        "five recorder runs under faketime (about 13 s of CPU): the proposal making two days "
        "match runs in the process in test_rules_propose.py, and a fork's prefix with pasted "
        "rules in test_rules_replay.py"
    )
)
def test_the_rules_proposed_from_two_days_make_the_next_days_fork_match_and_nothing_more(
    tmp_path: Path,
) -> None:
    pytest.importorskip("openai")
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "notes.txt").write_text("a\nb\n")
    (tmp_path / "todo.txt").write_text("a\nb\nc\n")
    _record(tmp_path, "monday.jsonl", tomorrow=False)
    _record(tmp_path, "tuesday.jsonl", tomorrow=True)

    # (in this process: what it says; tests/replay/test_rules_propose.py runs the command)
    proposed = cli_run("rules", "propose", "monday.jsonl", "tuesday.jsonl", cwd=tmp_path)
    out = proposed.stdout
    assert (
        proposed.returncode == 0
        and "with the rules below (and the built-in detectors) all 3 turns match" in out
    ), out + proposed.stderr
    # the date and the scan's uuid
    assert "tolerated by the built-in detectors (no rule needed)" in out
    block = out[out.index("[tool.looptap]"):]
    assert (
        "<weekday>" in block and "run\\-[0-9a-f]{8}\\b=run-<id>" in block and "ignore" not in block
    ), block

    # Without the rules the day-2 fork fails at turn 0 (the weekday, the run id); nothing is sent.
    refused, live = _fork(tmp_path)
    assert refused.returncode == 1 and live == [], refused.stderr[-3000:]
    assert (
        "closest recorded turn: conversation c1, turn 0 (seq 0)" in refused.stderr
        and "messages[0].content" in refused.stderr
    ), refused.stderr[-3000:]

    # Pasted into the project's pyproject.toml: the prefix (turns 0 and 1) served, turn 2 live.
    (tmp_path / "pyproject.toml").write_text(block)
    forked, live = _fork(tmp_path)
    err = forked.stderr
    assert forked.returncode == 0 and live == [2] and "answer: LIVE" in forked.stdout, err[-3000:]
    assert (
        "2 recorded round trips answered a request that differed only in what was tolerated" in err
    ), err[-3000:]
    assert "(by substitute " in err and "(by uuid)" in err, err[-3000:]

    # Nothing more: a file that grew a line is still a divergence, at turn 1's tool result.
    (tmp_path / "notes.txt").write_text("a\nb\nc\n")
    grew, live = _fork(tmp_path)
    assert grew.returncode == 1 and live == [], grew.stderr[-3000:]
    assert "C: the tool result for call_s0001 changed (messages[3].content)" in grew.stderr, (
        grew.stderr[-3000:]
    )
