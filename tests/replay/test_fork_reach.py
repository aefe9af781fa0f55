"""A change past the cursor that reaches another conversation (issue 55 item 1): a sub-agent's
answer, changed by a fork inside the sub-agent, comes back to the main agent as a tool result. The
main agent's conversation goes live from that request (its earlier turn still served); a fork
whose sub-agent answers as recorded leaves the main agent's turn served; the branch keeps where
each conversation went live, so ``show`` and ``diff`` number its turns as the origin's.

The real recorder and fork, the real openai SDK (tests/why/why_agent.py ``--shape sub-agent``),
a scripted loopback model.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.test_why import AGENT, record_run, why_env
from tests.why.test_why_agents import dropped, route

pytestmark = [needs_recorder]


def _fork(tmp: Path, run: Path, fake: ScriptedUpstream, *args: str) -> tuple[int, str]:
    proc = progress.run(
        [
            *RECORDER,
            "run",
            "--from",
            *args,
            "--confdir",
            str(tmp / "conf"),
            "--upstream",
            f"openai={fake.url}",
            "--",
            sys.executable,
            str(AGENT),
            "--drop-second",
            "--expect",
            "rain",
            "--shape",
            "sub-agent",
        ],
        env=why_env(),
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    return proc.returncode, proc.stderr


def test_a_sub_agents_changed_answer_takes_its_parent_live_from_the_request_it_reaches(
    tmp_path: Path,
) -> None:
    run = record_run(tmp_path, route, "--drop-second", "--expect", "rain", "--shape", "sub-agent")
    call, conversation, turn = dropped(run)
    assert (conversation, turn) == ("c2", 1)
    with ScriptedUpstream(route) as fake:
        rc, err = _fork(
            tmp_path,
            run,
            fake,
            f"{run}@conversation=c2:turn=1",
            "--edit",
            f"restore_result[{call}]=rain",
            "-o",
            str(tmp_path / "branch.jsonl"),
        )
        # the sub-agent's repaired turn, then the main agent's turn that got its answer: live; the
        # main agent's first turn and the sub-agent's first: served
        assert rc == 0, err[-3000:]
        assert [x.request.system.split(".")[0] for x in fake.log] == [
            "Use the tools",
            "You are the main agent",
        ], [x.line() for x in fake.log]
        assert (
            "played 2 of 4 recorded round trips, 2 requests went live past the cursor, 0 unmatched"
            in err
        ), err[-3000:]
        assert (
            "c1 went live from turn 1: the change past the cursor (c2 turn 1) reached it (C: the "
            "tool result for call_s0001 changed" in err
        ), err[-3000:]
        # a fork whose sub-agent answers as it did: the main agent's turn is served
        rc, err = _fork(
            tmp_path, run, fake, f"{run}@conversation=c2:turn=1", "-o", str(tmp_path / "same.jsonl")
        )
        assert rc == 1 and len(fake.log) == 3, err[-3000:]  # the agent's own outcome: it fails
        assert "went live from" not in err and "played 3 of 4 recorded round trips" in err, err
    show = cli_run("show", str(tmp_path / "branch.jsonl"))  # (in this process: what it says)
    assert show.returncode == 0, show.stderr
    # the origin's turn numbers: both live turns are turn 1 of their conversation
    assert "c1/turn 1" in show.stdout and "c2/turn 1" in show.stdout, show.stdout
    diff = cli_run("diff", str(run), str(tmp_path / "branch.jsonl"))
    # issue 71 item 12: one turn served is "turn 0", never "turns 0-0"
    assert "(turn 0 served from A)" in diff.stdout and "turn 1 (seq 3 ↔" in diff.stdout, diff.stdout
