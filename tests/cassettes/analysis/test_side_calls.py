"""Side calls, each in its own conversation and linked to the turn it was made over (issue 14), each
beside a clean twin that must stay where it is:

* a question asked over the history of a turn whose tool calls are still running (Claude Code
  2.1.328's progress summary of a background sub-agent: the sub-agent's own request with
  "Describe your most recent action…" appended to its last message) — beside the same request
  answering the running call without echoing it (a client bug: it stays, and is told), and the
  same shape after a final answer as a user message of its own (it stays; merged into the last
  message it is /compact's shape, a side call: docs/threading.md);
* a request with no history that quotes a Task call's arguments as JSON (Claude Code's summary label
  of the tools a turn used) — beside the sub-agent that is handed the prompt, wrapped in words;
* another agent sending exactly a turn's request (a title call on the first message) — beside the
  same agent sending it again (a new run with the same opening).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from scenarios import (
    FAMILIES,
    WEATHER,
    AgentScript,
    Call,
    Tool,
    conv_of,
    results_of,
    run_of,
    serious,
    threads,
    user_of,
)

Json = dict[str, Any]

SYSTEM = "You are a research agent. Use the tools."
QUESTION = (
    "Describe your most recent action in 3-5 words using present tense (-ing). Do not use tools."
)
#: Families whose tool results travel inside a user message, where a question can join them.
MERGING = ("anthropic", "bedrock", "gemini")
TASK = Tool(
    "Task",
    {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "prompt": {"type": "string"},
            "subagent_type": {"type": "string"},
        },
        "required": ["description", "prompt"],
    },
    "Launch a sub-agent.",
)


def with_question(family: str, history: list[Json], text: str, merged: bool) -> list[Json]:
    """``history`` with ``text`` asked at its end: appended to the last message's parts (where
    the family's results travel in a user message) or as a user message of its own."""
    out = copy.deepcopy(history)
    if not merged:
        return [*out, user_of(family, text)]
    last = out[-1]
    if family == "anthropic":
        last["content"].append({"type": "text", "text": text})
    elif family == "gemini":
        last["parts"].append({"text": text})
    else:  # bedrock
        last["content"].append({"text": text})
    return out


# --- a question over the history of a running call ----------------------------------------------

ROME = Call("get_weather", {"city": "Rome"})


def _running(family: str) -> tuple[AgentScript, list[Json]]:
    """Two turns of an agent; the second one's call (Rome) is running. Returns the agent and the
    history its second request carried."""
    agent = AgentScript(family, system=SYSTEM)
    agent.user("Compare the weather in Paris and Rome.")
    agent.reply(calls=[Call("get_weather", {"city": "Paris"})])
    agent.results("sunny")
    asked = copy.deepcopy(agent.history)
    agent.reply(calls=[ROME])
    return agent, asked


@pytest.mark.parametrize(
    ("family", "merged"), [(f, False) for f in FAMILIES] + [(f, True) for f in MERGING]
)
def test_question_over_a_running_call_is_a_side_call(family: str, merged: bool) -> None:
    agent, asked = _running(family)
    fork = AgentScript(family, system=SYSTEM)  # the same agent: its system prompt and tools
    fork.history = with_question(family, asked, QUESTION, merged)
    fork.reply("Checking the weather in Rome")
    agent.results("cloudy")
    agent.reply("Paris is sunny, Rome is cloudy.")
    run = run_of([agent.exchanges[0], agent.exchanges[1], fork.exchanges[0], agent.exchanges[2]])
    assert threads(run) == [[0, 1, 3], [2]]
    side = conv_of(run, 2)
    assert (side.branch, side.parent_seq) == ("side_call", 1)  # forked from the turn whose call ran
    assert [run.turns[s].c.link for s in (0, 1, 3)] == ["start", "extends", "extends"]
    assert serious(run) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_clean_twin_answering_the_running_call_without_its_echo_stays(family: str) -> None:
    """The same history plus the result of the running call, without the call itself: the loop's
    next step with the client's bug, not a side call."""
    agent, asked = _running(family)
    buggy = AgentScript(family, system=SYSTEM)
    buggy.history = [*copy.deepcopy(asked), *results_of(family, [(ROME, "cloudy")])]
    buggy.reply("Paris is sunny, Rome is cloudy.")
    run = run_of([agent.exchanges[0], agent.exchanges[1], buggy.exchanges[0]])
    assert threads(run) == [[0, 1, 2]]
    assert conv_of(run, 0).branch is None
    assert ("C.assistant_not_echoed", 2) in serious(run)


@pytest.mark.parametrize(
    ("family", "merged"), [(f, False) for f in FAMILIES] + [(f, True) for f in MERGING]
)
def test_clean_twin_same_shape_after_a_final_answer_stays(family: str, merged: bool) -> None:
    """Nothing runs (the turn answered in text): a question of its own is the conversation going
    on; merged into the last message, the answer left out, it is /compact's shape."""
    agent = AgentScript(family, system=SYSTEM)
    agent.user("Compare the weather in Paris and Rome.")
    agent.reply(calls=[Call("get_weather", {"city": "Paris"})])
    agent.results("sunny")
    asked = copy.deepcopy(agent.history)
    agent.reply("Paris is sunny.")
    again = AgentScript(family, system=SYSTEM)
    again.history = with_question(family, asked, "And Rome?", merged)
    again.reply(calls=[ROME])
    run = run_of([agent.exchanges[0], agent.exchanges[1], again.exchanges[0]])
    # Merged into the last message with the answer left out, the question has the shape of
    # Claude Code's /compact, and words are no evidence; its answer tells them apart: the loop
    # going on calls a tool (here), a summariser answers in text (issue 90; until session 46
    # this read as a side call).
    assert threads(run) == [[0, 1, 2]]
    if merged:
        assert ("C.assistant_not_echoed", 2) in serious(run)  # the answer it dropped, true


@pytest.mark.parametrize("family", MERGING)
def test_the_compact_shape_answered_in_text_stays_a_side_call(family: str) -> None:
    """The same merged shape answered in text (Claude Code's /compact: the summary) is still the
    compaction's side call of the latest turn."""
    agent = AgentScript(family, system=SYSTEM)
    agent.user("Compare the weather in Paris and Rome.")
    agent.reply(calls=[Call("get_weather", {"city": "Paris"})])
    agent.results("sunny")
    asked = copy.deepcopy(agent.history)
    agent.reply("Paris is sunny.")
    again = AgentScript(family, system=SYSTEM)
    again.history = with_question(family, asked, "Summarise the conversation so far.", True)
    again.reply("The user compares the weather in Paris and Rome; Paris is sunny.")
    run = run_of([agent.exchanges[0], agent.exchanges[1], again.exchanges[0]])
    assert threads(run) == [[0, 1], [2]]
    side = conv_of(run, 2)
    assert (side.branch, side.parent_seq) == ("side_call", 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_clean_twin_new_question_after_a_first_answers_dropped_calls_stays(family: str) -> None:
    """The first answer's calls were dropped and the user asked again: the client's bug, told in
    the conversation (a side call is taken while a loop step's calls run, after results)."""
    agent = AgentScript(family, system=SYSTEM)
    agent.user("Weather in Paris?")
    agent.reply(calls=[Call("get_weather", {"city": "Paris"})], echo=False)
    agent.user("Weather in Paris, please?")
    agent.reply("Sunny.")
    run = run_of(agent.exchanges)
    assert threads(run) == [[0, 1]]


# --- a summary that quotes the call, beside the sub-agent the call started ----------------------

PROMPT = "Find the weather in Paris this weekend and report it in two lines."
ARGS = {"description": "Paris weather", "prompt": PROMPT, "subagent_type": "general-purpose"}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")], ids=["compact", "spaced"])
def test_summary_quoting_a_task_call_is_a_side_call_of_its_turn(
    family: str, separators: tuple[str, str]
) -> None:
    main = AgentScript(
        family, system="You are a travel planner. Delegate research.", tools=(WEATHER, TASK)
    )
    main.user("Plan a weekend in Paris.")
    main.reply(calls=[Call("Task", ARGS)])
    label = AgentScript(
        family,
        system="Write a short summary label describing what these tool calls accomplished.",
        tools=(),
    )
    label.user(
        f"Tools completed:\n\nTool: Task\nInput: {json.dumps(ARGS, separators=separators)}"
        "\nOutput: launched\n\nLabel:"
    )
    label.reply("Researching Paris weather")
    sub = AgentScript(family, system="You are a research sub-agent.", tools=(WEATHER,))
    # the prompt, wrapped in words
    sub.user(f"You work for the travel planner.\n\n{PROMPT}\n\nBe brief.")
    sub.reply("Saturday sunny, Sunday showers.")
    main.results("Saturday sunny, Sunday showers.")
    main.reply("Saturday: Louvre gardens. Sunday: Orsay museum.")
    run = run_of([main.exchanges[0], label.exchanges[0], sub.exchanges[0], main.exchanges[1]])
    assert threads(run) == [[0, 3], [1], [2]]
    assert (conv_of(run, 1).branch, conv_of(run, 1).parent_seq) == ("side_call", 0)
    # the clean twin: handed the prompt (not quoting it), the sub-agent the call started
    assert (conv_of(run, 2).branch, conv_of(run, 2).parent_seq) == ("sub_agent", 0)
    assert serious(run) == []


# --- another agent sending exactly a turn's request -----------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_title_call_on_the_first_request_is_a_side_call_of_that_turn(family: str) -> None:
    main = AgentScript(family, system="You are a travel planner.")
    main.user("Plan a weekend in Paris.")
    main.reply("Saturday: Louvre. Sunday: Orsay.")
    title = AgentScript(family, system="Write a 3-5 word title for the user's request.", tools=())
    title.user("Plan a weekend in Paris.")
    title.reply("Paris Weekend Plan")
    # the clean twin: the same agent
    again = AgentScript(family, system="You are a travel planner.")
    again.user("Plan a weekend in Paris.")
    again.reply("Saturday: Versailles. Sunday: Montmartre.")
    run = run_of([main.exchanges[0], title.exchanges[0], again.exchanges[0]])
    assert threads(run) == [[0], [1], [2]]
    assert (conv_of(run, 1).branch, conv_of(run, 1).parent_seq) == ("side_call", 0)
    # a new run, same opening
    assert (conv_of(run, 2).branch, conv_of(run, 2).parent_seq) == (None, None)
    assert serious(run) == []
