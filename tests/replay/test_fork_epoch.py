"""An agent whose system prompt carries the current time as Unix seconds and milliseconds forks
later with its prefix served (issue 55 item 4): an epoch within a year of the recording's own time
is volatile by default, as an ISO date is; an epoch-sized number far from it (an order number)
stays significant, and a change in it still fails closed.

The agent is the real openai SDK against a scripted loopback model, recorded by the real
``looptap run``, then forked by ``looptap run --from`` seconds later (the clock has moved: the
seconds, their fraction and the milliseconds differ from the recording's).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

AGENT = """
import json, sys, time
from openai import OpenAI

order = sys.argv[1]
now = time.time()
system = (f"You track orders. Current time: {now:.2f}; {int(now * 1000)} ms since the epoch. "
          f"Order {order}.")
print(system)
tools = [{"type": "function", "function": {"name": "status", "parameters": {"type": "object",
          "properties": {"order": {"type": "string"}}}}}]
client = OpenAI(max_retries=0)
msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Where is my order?"}]
for _ in range(3):
    m = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=tools)
    m = m.choices[0].message
    if not m.tool_calls:
        print(m.content)
        break
    msgs.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.function.name,
         "arguments": c.function.arguments}} for c in m.tool_calls]})
    msgs += [{"role": "tool", "tool_call_id": c.id, "content": "shipped"} for c in m.tool_calls]
"""


def route(req: ScriptedRequest) -> Reply:
    if not req.tool_results():
        return Reply.tool("status", {"order": "1234567890"})
    return Reply.say("Your order has shipped.")


def _run(
    tmp: Path, fake: ScriptedUpstream, *args: str, order: str = "1234567890"
) -> tuple[int, str]:
    proc = progress.run(
        [
            *RECORDER,
            "run",
            *args,
            "--confdir",
            str(tmp / "conf"),
            "--upstream",
            f"openai={fake.url}",
            "--",
            sys.executable,
            str(tmp / "agent.py"),
            order,
        ],
        env=clean_env(OPENAI_API_KEY="sk-test-epoch"),
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.slow(
    reason=(
        "a recording and a fork (about 6 s of CPU): a fork's prefix tolerates volatile values "
        "in the process in test_volatile_replay.py's "
        "test_a_forks_prefix_tolerates_them_as_replay_does, and the epoch detector in "
        "tests/matching/test_volatile.py"
    )
)
def test_an_epoch_in_the_prompt_is_tolerated_and_a_far_number_is_not(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    with ScriptedUpstream(route) as fake:
        rc, said = _run(tmp_path, fake, "-o", str(tmp_path / "run.jsonl"))
        assert rc == 0 and len(fake.log) == 2, said[-3000:]
        recorded = re.search(r"Current time: ([0-9.]+); ([0-9]+) ms", said)
        assert recorded is not None, said
        rc, said = _run(
            tmp_path, fake, "--from", f"{tmp_path / 'run.jsonl'}@turn=1", "-o", "branch.jsonl"
        )
        forked = re.search(r"Current time: ([0-9.]+); ([0-9]+) ms", said)
        assert forked is not None and forked.groups() != recorded.groups(), said
        # turn 0 served from the recording (its epochs tolerated), turn 1 live
        assert rc == 0 and len(fake.log) == 3, said[-3000:]
        assert "(by epoch)" in said and "played 1 of 2 recorded round trips" in said, said[-3000:]
        # an epoch-sized number more than a year from the recording's time is the order's number:
        # a change in it is the client's, and fails closed before the cursor
        rc, said = _run(
            tmp_path,
            fake,
            "--from",
            f"{tmp_path / 'run.jsonl'}@turn=1",
            "-o",
            "branch2.jsonl",
            order="1234567891",
        )
        assert rc == 1 and len(fake.log) == 3, said[-3000:]
        assert "1234567891" in said and "no recorded round trip matches" in said, said[-3000:]
