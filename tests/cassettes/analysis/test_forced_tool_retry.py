"""A forced-tool retry stays in its conversation (issue 90): a client sends its first request
again after the answer's tool call was cut by the token cap (finish ``length``): pydantic-ai's
``FallbackModel`` with ``fallback_on=IncompleteToolCall`` (pydantic-ai-slim 2.68.0,
``_fallback.py``; the agent's output tools sent with ``tool_choice: required``) sends the same
request to its next model; a client that retries with a larger cap sends it to the same one.
That request is the conversation's retry of the cut answer, not another agent starting alike,
so the loop that follows is one conversation and its repeated calls are each said in it.

On c86d115d: two conversations, the cut turn alone in the first."""

from __future__ import annotations

import pytest
from scenarios import LENGTH, REQUIRED, WEATHER, AgentScript, Call, threads

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")


def _forced(family: str, cut: bool = True) -> AgentScript:
    s = AgentScript(family, tools=[WEATHER], system="You are a weather assistant.")
    s.user("What is the weather in Paris right now?")
    if cut:
        s.reply(
            calls=[Call("get_weather", raw='{"city": "Pa', id="call_t0")],
            finish=LENGTH[family],
            tool_choice=REQUIRED[family],
            echo=False,
        )
    else:
        s.reply("Let me look that up.", tool_choice=REQUIRED[family], echo=False)
    s.reply(
        calls=[Call("get_weather", {"city": "Paris"}, id="call_t1")],
        tool_choice=REQUIRED[family],
        model="gpt-4o",
    )
    s.results("sunny, 24 C")
    for n in range(3):  # the model looks it up again and again: each repeat is said
        s.reply(calls=[Call("get_weather", {"city": "Paris"}, id=f"call_t{n + 2}")])
        s.results("sunny, 24 C")
    s.reply("It is sunny in Paris, 24 C.")
    return s


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_retry_after_a_cut_tool_call_stays_in_its_conversation(family: str) -> None:
    run = _forced(family).analyse()
    assert threads(run) == [[0, 1, 2, 3, 4, 5]]
    assert [f.seq for f in run.findings if f.code == "C.answer_discarded"] == [1]
    repeats = sorted(f.seq or 0 for f in run.findings if f.code == "E.repeated_call")
    assert repeats == [2, 3, 4]  # each repeat said, in the one conversation
    assert {f.conversation for f in run.findings if f.code == "E.repeated_call"} == {
        run.conversations[0].id
    }


def test_clean_twin_the_same_first_request_after_a_whole_answer_is_a_new_agent() -> None:
    """An identical first request after an answer that was not cut stays what it was: another
    agent starting alike (N identical first requests are N agents)."""
    run = _forced("openai_chat", cut=False).analyse()
    assert len(threads(run)) == 2


@pytest.mark.parametrize("family", FAMILIES4)
def test_asked_again_after_a_cut_call_is_the_loop_not_a_side_call(family: str) -> None:
    """Mid-loop, the answer's call cut by the cap; the client leaves it out, asks again in a user
    message and forces the tool. The calls of a cut answer run nowhere, so this is the loop's next
    step (before: a side call forked from the cut turn, which took the rest of the loop with it
    and hid its findings). The cut call dropped and not echoed follow from the cut: folded."""
    s = AgentScript(family, tools=[WEATHER], system="You are a weather assistant.")
    s.user("What is the weather in Paris and in Lyon?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"}, id="call_m0")])
    s.results("sunny, 24 C")
    s.reply(
        calls=[Call("get_weather", raw='{"city": "Ly', id="call_m1")],
        finish=LENGTH[family],
        echo=False,
    )
    s.user("Your last tool call was cut off. Call the tool again.")
    s.reply(
        calls=[Call("get_weather", {"city": "Lyon"}, id="call_m2")], tool_choice=REQUIRED[family]
    )
    s.results("rainy, 15 C")
    s.reply(calls=[Call("get_weather", {"city": "Lyon"}, id="call_m3")])  # a repeat
    s.results("rainy, 15 C")
    s.reply("Paris is sunny, Lyon rainy.")
    run = s.analyse()
    assert threads(run) == [[0, 1, 2, 3, 4]]
    serious = [
        (f.code, f.seq)
        for f in run.findings
        if f.severity in ("warning", "error") and not f.details.get("caused_by")
    ]
    assert serious == [("A.truncated_length", 1)]
    folded = {f.code for f in run.findings if f.details.get("caused_by") == "A.truncated_length"}
    assert {"C.dropped_tool_result", "C.assistant_not_echoed"} <= folded
    assert [f.seq for f in run.findings if f.code == "E.repeated_call"] == [3]
