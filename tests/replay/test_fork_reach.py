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

import pytest

from looptap.cassettes.replay.forking.fork import ForkReplay, parse_from
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import RECORDED, why_agent_in_process
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.test_why import AGENT, record_run, why_env
from tests.why.test_why_agents import dropped, route

AGENT_ARGS = ("--drop-second", "--expect", "rain", "--shape", "sub-agent")


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


@needs_recorder
@pytest.mark.slow(
    reason="a recording and two forks through the real recorder (about 6 s of CPU): the same "
    "fork in the process by test_the_change_past_the_cursor_reaches_the_parent_in_process"
)
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


def test_the_change_past_the_cursor_reaches_the_parent_in_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same fork as above, in this process: the run the real recorder made of the same agent
    (``recorded/sub_agent_dropped.run.jsonl``), the fork's own plan (``--from``'s placement and
    edit), its replay server and cursor, the agent's ``main`` on the real openai SDK; the live
    upstream the same scripted model."""
    run = RECORDED / "sub_agent_dropped.run.jsonl"
    call, conversation, turn = dropped(run)
    assert (conversation, turn) == ("c2", 1)
    source = parse_from(f"{run}@conversation=c2:turn=1")
    with ScriptedUpstream(route) as fake:
        for edits, want in (([f"restore_result[{call}]=rain"], 0), ([], 1)):
            fake.log.clear()
            cursor = ForkReplay(source, edits=edits).plan({"openai": fake.url}).router(None)
            with ReplayServer(run, cursor=cursor) as srv:
                rc = why_agent_in_process(monkeypatch, srv.url, *AGENT_ARGS)
            assert rc == want, srv.report_lines() + cursor.report_lines()
            said = "\n".join(srv.report_lines() + cursor.report_lines())
            if edits:
                # the sub-agent's repaired turn, then the main agent's turn that got its answer:
                # live; the main agent's first turn and the sub-agent's first: served
                assert [x.request.system.split(".")[0] for x in fake.log] == [
                    "Use the tools",
                    "You are the main agent",
                ], [x.line() for x in fake.log]
                assert (
                    "played 2 of 4 recorded round trips, 2 requests went live past the cursor, "
                    "0 unmatched" in said
                ), said
                assert (
                    "c1 went live from turn 1: the change past the cursor (c2 turn 1) reached it "
                    "(C: the tool result for call_s0001 changed" in said
                ), said
                # what the branch keeps of where c1 went live (the replay server writes it for the
                # fork's note): the origin's turn 1, as show and diff number it
                turns = {r.seq: r.turn for r in srv.matcher.recorded}
                assert {c: turns[s] for c, s in cursor.reached.items()} == {"c1": 1}
            else:  # the sub-agent answers as it did: the main agent's turn is served
                assert len(fake.log) == 1 and not cursor.reached, said
                assert "went live from" not in said and "played 3 of 4 recorded round trips" in said
