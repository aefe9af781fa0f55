"""Issue 68 item 6: a sub-agent is linked to its parent by the call that started it, not by the
length of its prompt. The main agent asks the weather sub-agent "hi" (two characters: before,
only a prompt of 24 characters or more was looked for, so the sub-agent was a conversation of its
own and a repair inside it never reached the parent in the budget or the verdict). The sub-agent
drops its second tool result; the C repair there goes live in the sub-agent and in the parent's
turn that receives its answer, and the budget counts both. tests/why/why_agent.py ``--shape
sub-agent``, its Chat requests sent by urllib (``--http``: the link is the call's id on the wire,
not the client's), the real recorder and fork, a scripted upstream.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream
from tests.why.test_why import HTTP, _why, record_run
from tests.why.test_why_agents import dropped
from tests.why.test_why_agents import route as weather

pytestmark = [needs_recorder]

AGENT = ("--drop-second", "--expect", "rain", "--shape", "sub-agent", HTTP)


def route(req: ScriptedRequest) -> Reply:
    """The main agent asks the weather agent "hi"; the weather agent answers as in
    test_why_agents (both cities' weather, right only with both results)."""
    if "main agent" in req.system and not req.tool_results():
        return Reply.tool("ask_weather_agent", {"question": "hi"})
    return weather(req)


def test_a_sub_agent_asked_hi_is_linked_by_its_call_and_its_repair_reaches_the_parent(
    tmp_path: Path,
) -> None:
    from looptap.cassettes.reading import open_run

    run = record_run(tmp_path, route, *AGENT, "--family", "chat")
    a = open_run(run, whole=True).analysis
    main, sub = a.conversations[0], a.conversations[1]
    assert len(a.conversations) == 2, [(c.id, c.branch) for c in a.conversations]
    assert (sub.branch, a.turns[sub.parent_seq].conversation) == ("sub_agent", main.id), (
        sub.branch,
        sub.parent_seq,
    )
    call, conversation, turn = dropped(run)
    assert (conversation, turn) == (sub.id, 1)
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path, run, fake, "--layer", "C", "--samples", "1", "--result", f"{call}=rain",
            "-o", str(tmp_path / "w"), "--json", agent=AGENT,
        )  # fmt: skip
    assert rc == 0, err[-4000:]
    doc = orjson.loads(out)
    v = doc["verdict"]
    assert (v["layer"], v["conversation"], v["turn"], v["flips"]) == ("C", sub.id, 1, 1), v
    (c,) = [i for i in doc["interventions"] if i["runnable"]]
    # the sub-agent's turn and the parent's turn that receives its answer: estimated and sent
    assert (c["live_requests_per_sample"], c["sent"]) == (2, 2), c
