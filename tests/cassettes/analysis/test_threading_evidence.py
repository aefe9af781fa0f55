"""Threading by wire evidence only (issue 90, docs/threading.md "Context management"): words in a
prompt are never evidence; an answer quoted by another agent's first user message is a hand-off
(its parent), never a summary; a request that did not echo the answer stays in its conversation,
whatever its words say.

On c86d115d: the guardrail was merged into the worker's conversation as "a summary in place of the
head" (a false ``C.history_trimmed`` and ``C.user_instruction_dropped``), and the request that
forgot the answer but said "not a summary" was a side call (its true ``C.assistant_not_echoed``
hidden)."""

from __future__ import annotations

import pytest
from scenarios import WEATHER, AgentScript, Call, conv_of, run_of, serious, threads

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")
FINAL = (
    "Paris is sunny today at 24 C with a light wind; Lyon is rainy at 15 C. Pack an umbrella "
    "for Lyon and sunglasses for Paris."
)


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_guardrail_quoting_the_answer_is_a_handoff_not_a_summary(family: str) -> None:
    """A worker answers after two calls; a guardrail (another system prompt, the same tools)
    gets the worker's answer quoted in its first user message; then the worker goes on."""
    w = AgentScript(family, tools=[WEATHER], system="You are the travel researcher.")
    w.user("Weather in Paris and Lyon for the trip: the task is the packing list.")
    w.reply(calls=[Call("get_weather", {"city": "Paris"}, id="call_w1")])
    w.results("sunny, 24 C")
    w.reply(calls=[Call("get_weather", {"city": "Lyon"}, id="call_w2")])
    w.results("rainy, 15 C")
    w.reply(FINAL)
    g = AgentScript(family, tools=[WEATHER], system="You are a guardrail. Judge the answer.")
    g.user(f"Is this answer safe and on topic? Answer PASS or FAIL.\n\nAnswer:\n{FINAL}")
    g.reply("PASS")
    w.user("And the weather in Nice?")
    w.reply(calls=[Call("get_weather", {"city": "Nice"}, id="call_w3")])
    run = run_of([*w.exchanges[:3], g.exchanges[0], w.exchanges[3]])
    assert sorted(threads(run)) == [[0, 1, 2, 4], [3]]
    guard = conv_of(run, 3)
    assert (guard.branch, guard.parent_seq) == ("handoff", 2)
    said = {f.code for f in run.findings}
    assert "C.history_trimmed" not in said
    assert "C.user_instruction_dropped" not in said
    assert serious(run) == []


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_word_never_makes_a_side_call(family: str) -> None:
    """The client forgot the answer and asked again, in words that mention a summary: the
    request stays in its conversation and the missing echo is said."""
    s = AgentScript(family, tools=[WEATHER], system="You are a weather assistant.")
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"}, id="call_s1")])
    s.results("sunny, 24 C")
    s.reply("It is sunny in Paris, 24 C.", echo=False)
    s.user("Now give me the final answer for Lyon too, not a summary.")
    s.reply("Lyon: unknown.")
    run = s.analyse()
    assert threads(run) == [[0, 1, 2]]
    assert ("C.assistant_not_echoed", 2) in serious(run)
