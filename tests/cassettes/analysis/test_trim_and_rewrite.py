"""A request that both trims and rewrites (issue 103 item 3): ``C.history_mutated`` names the
rewritten message's index in that request, not an unchanged one the trim moved up, and the trim is
still said (``C.history_trimmed``, the dropped messages by their index in the previous request).

On f29135f5: ``messages[1] differs`` (the unchanged user question), the trim unsaid."""

from __future__ import annotations

import orjson
import pytest
from scenarios import WEATHER, AgentScript, Call, run_of

from looptap.cassettes.analysis import RunAnalysis

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")
WAS, NOW = "sunny, 24 C", "It is sunny in Paris today, 24 C, with a light wind."
#: Where the rewritten result stands once the first question and its answer are dropped, per
#: family (OpenAI Chat counts its system message; Responses sends calls and results as items).
REWRITTEN = {
    "openai_chat": "messages[3]",
    "anthropic": "messages[2]",
    "gemini": "contents[2]",
    "openai_responses": "input[2]",
}


def _run(family: str, trim: bool) -> RunAnalysis:
    a = AgentScript(family, tools=[WEATHER], system="You are a weather assistant.")
    a.user("Hello there, I plan a trip.")
    a.reply("Happy to help: where to?")
    a.user("What is the weather in Paris?")
    a.reply(calls=[Call("get_weather", {"city": "Paris"}, id="call_p1")])
    a.results(WAS)
    a.reply(calls=[Call("get_weather", {"city": "Lyon"}, id="call_l1")])
    a.results("rainy, 15 C")
    if trim:
        del a.history[:2]  # the first question and its answer
    a.history[:] = orjson.loads(orjson.dumps(a.history).replace(WAS.encode(), NOW.encode()))
    a.reply("Paris is sunny; Lyon is rainy.")
    return run_of(a.exchanges)


@pytest.mark.parametrize("family", FAMILIES4)
def test_the_rewritten_message_is_named_and_the_trim_said(family: str) -> None:
    run = _run(family, trim=True)
    said = {f.code: f for f in run.findings if f.seq == 3}
    mutated = said["C.history_mutated"]
    assert mutated.path == REWRITTEN[family]
    trimmed = said["C.history_trimmed"]
    assert trimmed.details["dropped"] == ([1, 2] if family == "openai_chat" else [0, 1])


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_rewrite_alone_names_its_message_and_says_no_trim(family: str) -> None:
    run = _run(family, trim=False)
    said = {f.code: f for f in run.findings if f.seq == 3}
    at = {"openai_chat": "messages[5]", "anthropic": "messages[4]"}
    assert said["C.history_mutated"].path == at.get(family, REWRITTEN[family].replace("2", "4"))
    assert "C.history_trimmed" not in said
