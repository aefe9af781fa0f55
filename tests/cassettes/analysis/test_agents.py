"""Agents as first-class in threading (issue 45, "Threading and labels"): the structure agent
frameworks add on top of one loop, each case beside a clean twin that must stay as it was.

* a group chat (AutoGen's round robin): two agents, each its own system prompt and no tools,
  each receiving the other's answer as a named user message — two conversations, the second a
  ``group_chat`` member of the first, no false ``C.assistant_not_echoed`` / "system prompt
  changed"; twin: one agent whose system prompt changed (its answer echoed) stays one conversation;
* a prompt optimiser's few-shot prompts [system, demo question, demo answer, new question]: each
  its own conversation, a ``sibling`` of the first, no false ``C.history_mutated``; identical
  prompts again threaded alike; twin: a chat that goes on after the demo stays one conversation;
* a ``transfer_to_agent`` handoff (Google ADK: the next agent's request carries the history with
  the transfer told as context text): kind ``handoff`` under the turn that transferred, no
  ``C.stopped_with_pending_calls`` there; an agent used as a tool, handed the user's question word
  for word: kind ``agent_tool``; twins: a title call over the same opening stays a side call;
* an answer thrown away and the same history asked again: the same conversation, the discarded
  answer said (``C.answer_discarded``); a Responses continuation that sends the previous answer
  back by id but drops the question: the same conversation, the dropped question said.

The wire shapes are the families' own (tests/cassettes/analysis/scenarios.py), with the fields the
frameworks add (a user message's ``name``, ADK's "For context:" parts) written as they send them.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from scenarios import (
    WEATHER,
    AgentScript,
    Call,
    Tool,
    openai_responses_turn,
    run_of,
    serious,
    threads,
)

from looptap.cassettes.analysis import RunAnalysis
from looptap.cassettes.wire import Exchange

Json = dict[str, Any]


def kinds(run: RunAnalysis) -> list[tuple[str, int | None]]:
    return [(c.kind, c.parent_seq) for c in run.conversations]


def codes(run: RunAnalysis) -> list[tuple[str, int | None]]:
    return [(f.code, f.seq) for f in run.findings]


# --- a group chat ------------------------------------------------------------------------------

TOPIC = "Write a two-line slogan for a bakery that opens at dawn."
WRITER = "You are Writer. Propose a slogan; improve it when the critic answers."
CRITIC = "You are Critic. Point out one weakness of the writer's slogan in one sentence."


def _named(text: str, name: str) -> Json:
    """AutoGen AgentChat's OpenAI client: another agent's message is a user message with its
    name."""
    return {"role": "user", "name": name, "content": text}


def _group_chat() -> list[Exchange]:
    """A round robin of two agents over the same task: each sees the other's answers as named
    user messages and its own as assistant messages."""
    writer = AgentScript("openai_chat", system=WRITER, tools=())
    critic = AgentScript("openai_chat", system=CRITIC, tools=())
    writer.user(TOPIC)
    critic.user(TOPIC)
    answers = [
        ("writer", "Fresh bread at first light, / warm hellos every night."),
        ("critic", "The second line talks about night although the shop opens at dawn."),
        ("writer", "Fresh bread at first light, / the morning starts just right."),
        ("critic", "Better: both lines now belong to the morning."),
    ]
    out: list[Exchange] = []
    for who, text in answers:
        me, other = (writer, critic) if who == "writer" else (critic, writer)
        out.append(me.reply(text))
        other.history.append(_named(text, who))
    return out


def test_group_chat_agents_are_two_conversations() -> None:
    run = run_of(_group_chat())
    assert threads(run) == [[0, 2], [1, 3]]
    assert kinds(run) == [("main", None), ("group_chat", 0)]
    assert codes(run) == []  # no false C.assistant_not_echoed, no "system prompt changed"
    from looptap.cassettes.views import analysis_lines

    assert "group chat with #0" in "\n".join(analysis_lines(run))


def test_clean_twin_one_agent_whose_system_prompt_changed_stays_one_conversation() -> None:
    """The same agent (no tools) under a changed system prompt, its answer echoed: one conversation,
    and the change is the true note it was."""
    agent = AgentScript("openai_chat", system=WRITER, tools=())
    agent.user(TOPIC)
    agent.reply("Fresh bread at first light, / warm hellos every night.")
    agent.user("Make it about the morning.")
    agent.system = CRITIC
    agent.reply("Fresh bread at first light, / the morning starts just right.")
    run = run_of(agent.exchanges)
    assert threads(run) == [[0, 1]]
    assert kinds(run) == [("main", None)]
    assert codes(run) == [("C.cache_prefix_broken", 1)]


REVIEWER = "You review weather reports. Say APPROVE when the report covers every city."
REPORT = "FORECAST: Paris sunny 21 C, Tokyo rain 18 C."


def _team(
    final: str = REPORT, told: str = REPORT, name: str | None = "weather_agent"
) -> list[Exchange]:
    """AutoGen AgentChat's team as recorded for real (tests/clients, 'autogen team'): the first
    agent runs its own tool loop; the reviewer then gets the task and that agent's final answer as
    a named user message — not its tool calls and results, which stay the first agent's own."""
    agent = AgentScript("openai_chat", system="You are a weather assistant.", tools=(WEATHER,))
    agent.user("What is the weather in Paris and Tokyo?")
    out = [
        agent.reply(
            calls=[Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Tokyo"})]
        )
    ]
    agent.results("sunny", "rainy")
    out.append(agent.reply(final))
    reviewer = AgentScript("openai_chat", system=REVIEWER, tools=())
    reviewer.user("What is the weather in Paris and Tokyo?")
    reviewer.history.append(_named(told, name) if name else {"role": "user", "content": told})
    out.append(reviewer.reply("APPROVE"))
    return out


def test_a_team_member_hearing_the_final_answer_without_the_tool_steps_is_a_group_chat() -> None:
    run = run_of(_team())
    assert threads(run) == [[0, 1], [2]]
    assert kinds(run) == [("main", None), ("group_chat", 1)]
    assert serious(run) == []


def test_clean_twin_a_reviewer_told_other_words_stays_a_side_call() -> None:
    """The same shape, but the user message is not the answer word for word (a summary of it):
    nothing says this agent heard that one, so it stays what it was."""
    run = run_of(_team(told="Summarise: FORECAST: Paris sunny 21 C, Tokyo rain 18 C."))
    assert threads(run) == [[0, 1], [2]]
    assert kinds(run) == [("main", None), ("side_call", 0)]


# --- a prompt optimiser's few-shot prompts -------------------------------------------------------

CLASSIFY = "Classify the sentiment of the review as positive or negative."
DEMO = [
    {"role": "user", "content": "Review: The soup was cold."},
    {"role": "assistant", "content": "negative"},
]


def _few_shot(question: str, answer: str) -> Exchange:
    s = AgentScript("openai_chat", system=CLASSIFY, tools=())
    s.history = [*copy.deepcopy(DEMO), {"role": "user", "content": question}]
    return s.reply(answer)


def test_few_shot_prompts_are_siblings_not_rewrites() -> None:
    run = run_of(
        [
            _few_shot("Review: Lovely staff and great bread.", "positive"),
            _few_shot("Review: We waited an hour.", "negative"),
            _few_shot("Review: Lovely staff and great bread.", "positive"),  # the same prompt again
            _few_shot("Review: Best croissant in town.", "positive"),
        ]
    )
    assert threads(run) == [[0], [1], [2], [3]]
    assert kinds(run) == [("main", None), ("sibling", 0), ("sibling", 0), ("sibling", 0)]
    assert serious(run) == []


DEMOS = [
    ("Review: The soup was cold.", "negative"),
    ("Review: Friendly staff.", "positive"),
    ("Review: Too loud to talk.", "negative"),
]


def _demo_prompt(demos: list[int], question: str, answer: str) -> Exchange:
    """A few-shot prompt of the demos named (by index) and a question of its own."""
    s = AgentScript("openai_chat", system=CLASSIFY, tools=())
    s.history = [
        m
        for i in demos
        for m in (
            {"role": "user", "content": DEMOS[i][0]},
            {"role": "assistant", "content": DEMOS[i][1]},
        )
    ]
    s.history.append({"role": "user", "content": question})
    return s.reply(answer)


def test_few_shot_prompts_with_other_demos_are_siblings_not_rewrites() -> None:
    """Issue 54: an optimiser's prompts differ in their demos too (one left out while it is itself
    bootstrapped, one added, the question asked again under other demos). Was: the second and
    third read as the first one's history rewritten (C.history_mutated), one conversation."""
    run = run_of(
        [
            _demo_prompt([0, 1, 2], "Review: Lovely staff and great bread.", "positive"),
            _demo_prompt([0, 2], "Review: Best croissant in town.", "positive"),
            _demo_prompt([0, 1], "Review: Lovely staff and great bread.", "positive"),
        ]
    )
    assert threads(run) == [[0], [1], [2]]
    assert kinds(run) == [("main", None), ("sibling", 0), ("sibling", 0)]
    assert codes(run) == []


def test_twin_a_chat_that_edits_its_last_question_and_goes_on_is_still_a_rewrite() -> None:
    """The edited question followed by the answer it got and a new question: the history was
    changed in place, and looptap still says so."""
    s = AgentScript("openai_chat", system=CLASSIFY, tools=())
    s.history = [*copy.deepcopy(DEMO), {"role": "user", "content": "Review: Lovely staff."}]
    s.reply("positive")
    s.history[-2] = {"role": "user", "content": "Review: Lovely staff, cold soup."}
    s.user("Review: We waited an hour.")
    s.reply("negative")
    run = run_of(s.exchanges)
    assert threads(run) == [[0, 1]]
    assert serious(run) == [("C.history_mutated", 1)]


def test_clean_twin_a_chat_that_goes_on_after_the_demo_stays_one_conversation() -> None:
    s = AgentScript("openai_chat", system=CLASSIFY, tools=())
    s.history = [*copy.deepcopy(DEMO), {"role": "user", "content": "Review: Lovely staff."}]
    s.reply("positive")
    s.user("Review: We waited an hour.")
    s.reply("negative")
    run = run_of(s.exchanges)
    assert threads(run) == [[0, 1]]
    assert kinds(run) == [("main", None)]
    assert codes(run) == []


def test_an_edited_last_question_mid_loop_is_still_a_rewrite() -> None:
    """The bug twin: the same shape while the model's calls wait for results is the loop's history
    rewritten, not a sibling."""
    s = AgentScript("openai_chat", system="You are a weather agent.", tools=(WEATHER,))
    s.history = [*copy.deepcopy(DEMO), {"role": "user", "content": "Weather in Paris?"}]
    s.reply(calls=[Call("get_weather", {"city": "Paris"})], echo=False)
    s.history[-1] = {"role": "user", "content": "Weather in Rome?"}
    s.reply("It is sunny in Rome.")
    run = run_of(s.exchanges)
    assert threads(run) == [[0, 1]]


# --- handoffs and agents used as tools -----------------------------------------------------------

ROOT = "You are the root agent. Answer greetings; transfer weather questions to weather_agent."
WEATHER_AGENT = "You are weather_agent. Answer weather questions with get_weather."
TRANSFER = Tool(
    "transfer_to_agent",
    {
        "type": "object",
        "properties": {"agent_name": {"type": "string"}},
        "required": ["agent_name"],
    },
    "Transfer the question to another agent.",
)
ASK = "What is the weather like in Paris today?"


def adk_handoff(context: bool = True, system: str = WEATHER_AGENT) -> list[Exchange]:
    """Google ADK: root calls transfer_to_agent; the run goes on under weather_agent, whose request
    carries the question and the transfer told "For context:" as user text (ADK presents another
    agent's events so; ``context=False``: without it), then weather_agent's own loop."""
    root = AgentScript("gemini", system=ROOT, tools=(TRANSFER,))
    root.user(ASK)
    root.reply(calls=[Call("transfer_to_agent", {"agent_name": "weather_agent"})])
    weather = AgentScript("gemini", system=system, tools=(WEATHER,))
    weather.user(ASK)
    if context:
        weather.history.append(
            {
                "role": "user",
                "parts": [
                    {"text": "For context:"},
                    {
                        "text": "[root_agent] called tool `transfer_to_agent` with parameters: "
                        "{'agent_name': 'weather_agent'}"
                    },
                ],
            }
        )
        weather.history.append(
            {
                "role": "user",
                "parts": [
                    {"text": "For context:"},
                    {
                        "text": "[root_agent] `transfer_to_agent` tool "
                        "returned result: {'result': None}"
                    },
                ],
            }
        )
    weather.reply(calls=[Call("get_weather", {"city": "Paris"})])
    weather.results("sunny, 21 C")
    weather.reply("It is sunny in Paris, 21 C.")
    return [*root.exchanges, *weather.exchanges]


@pytest.mark.parametrize("context", [True, False])
def test_transfer_to_agent_is_a_handoff(context: bool) -> None:
    run = run_of(adk_handoff(context))
    assert threads(run) == [[0], [1, 2]]
    assert kinds(run) == [("main", None), ("handoff", 0)]
    assert codes(run) == []  # the root is not left with C.stopped_with_pending_calls
    from looptap.cassettes.views import analysis_lines

    assert "handoff from #0" in "\n".join(analysis_lines(run))


@pytest.mark.parametrize("context", [True, False])
def test_clean_twin_an_agent_the_transfer_did_not_name_stays_a_side_call(context: bool) -> None:
    """Another agent over the same opening while the transfer waits, under a system prompt that
    does not name the agent the call asked for (a summariser): a side call, as before, and the call
    left unanswered is still said."""
    run = run_of(adk_handoff(context, system="Summarise the conversation for the log."))
    assert kinds(run)[1] == ("side_call", 0)
    assert ("C.stopped_with_pending_calls", 0) in codes(run)


AGENT_TOOL = Tool(
    "weather_agent",
    {"type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]},
    "Ask the weather agent.",
)


def agent_as_tool(title: bool = False) -> list[Exchange]:
    """ADK's AgentTool (openai-agents' as_tool alike): the parent calls the agent as a tool with the
    user's question word for word; the agent's request is that question under its own system prompt;
    the parent gets the agent's answer as the tool's result."""
    root = AgentScript("openai_chat", system=ROOT, tools=(AGENT_TOOL,))
    root.user(ASK)
    call = Call("weather_agent", {"request": ASK})
    root.reply(calls=[call])
    sub = AgentScript(
        "openai_chat",
        system="Give a title of three words to the user's question." if title else WEATHER_AGENT,
        tools=(),
    )
    sub.user(ASK)
    sub.reply("Sunny, 21 C.")
    root.results("Sunny, 21 C.")
    root.reply("It is sunny in Paris, 21 C.")
    return [root.exchanges[0], sub.exchanges[0], root.exchanges[1]]


def test_agent_used_as_a_tool_is_labelled_so() -> None:
    run = run_of(agent_as_tool())
    assert threads(run) == [[0, 2], [1]]
    assert kinds(run) == [("main", None), ("agent_tool", 0)]
    assert serious(run) == []
    from looptap.cassettes.views import analysis_lines

    assert "agent used as a tool by #0" in "\n".join(analysis_lines(run))


def test_clean_twin_a_title_call_after_the_answer_stays_a_side_call() -> None:
    """A title call over the opening, made when no call carries the question: a side call."""
    root = AgentScript("openai_chat", system=ROOT, tools=(AGENT_TOOL,))
    root.user(ASK)
    root.reply("Let me see.")
    titler = AgentScript(
        "openai_chat", system="Give a title of three words to the user's question.", tools=()
    )
    titler.user(ASK)
    titler.reply("Paris weather today")
    run = run_of([root.exchanges[0], titler.exchanges[0]])
    assert kinds(run) == [("main", None), ("side_call", 0)]


# --- discarded answers and dropped questions -----------------------------------------------------


def _loop() -> AgentScript:
    s = AgentScript("openai_chat", system="You are a weather agent.", tools=(WEATHER,))
    s.user(ASK)
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny, 21 C")
    return s


def test_an_answer_thrown_away_and_asked_again_is_said() -> None:
    s = _loop()
    s.reply("It is sunny in Paris, 21 C.", echo=False)
    s.reply("Sunny and 21 C in Paris.")  # the same history again: the first answer was discarded
    run = run_of(s.exchanges)
    assert threads(run) == [[0, 1, 2]]
    assert [t.c.link for t in run.turns.values()] == ["start", "extends", "retry"]
    assert ("C.answer_discarded", 2) in codes(run)
    assert serious(run) == []


def test_clean_twin_a_failed_answer_asked_again_is_a_plain_retry() -> None:
    s = _loop()
    s.fail(500, {"error": {"message": "upstream overloaded", "type": "server_error"}})
    s.reply("It is sunny in Paris, 21 C.")
    run = run_of(s.exchanges)
    assert threads(run) == [[0, 1, 2]]
    assert "C.answer_discarded" not in [c for c, _ in codes(run)]


def _responses_dropped_question(drop: bool) -> list[Exchange]:
    """@ai-sdk/openai with ``store`` on: the model's answer goes back as an item_reference; the
    continuation here drops the user's first question (``drop``) or keeps it."""
    user = {"role": "user", "content": [{"type": "input_text", "text": ASK}]}
    first = openai_responses_turn([user], "It is sunny in Paris, 21 C.", tools=[WEATHER])
    msg = orjson.loads(first.response_body)["output"][0]
    ref = {"type": "item_reference", "id": msg["id"]}
    follow = {"role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]}
    second = openai_responses_turn(
        [ref, follow] if drop else [user, ref, follow], "Rain tomorrow.", tools=[WEATHER]
    )
    return [first, second]


def test_a_responses_continuation_that_drops_the_question_is_said() -> None:
    run = run_of(_responses_dropped_question(drop=True))
    assert threads(run) == [[0, 1]]
    (found,) = [f for f in run.findings if f.seq == 1 and f.code == "C.history_trimmed"]
    assert "dropped" in found.message and "question" in found.message
    assert serious(run) == []  # (the cache prefix that changed with it is the true info it is)


def test_clean_twin_a_responses_continuation_with_the_question() -> None:
    run = run_of(_responses_dropped_question(drop=False))
    assert threads(run) == [[0, 1]]
    assert codes(run) == []


# --- a re-rendered trajectory (DSPy ReAct, ChatAdapter) ------------------------------------------

DSPY_SYSTEM = (
    "Your input fields are:\n1. `question` (str):\n2. `trajectory` (str):\nYour output fields "
    "are:\n1. `next_thought` (str):\n2. `next_tool_name` (Literal['get_weather', 'finish']):\n3. "
    "`next_tool_args` (dict[str, Any]):\nAll interactions will be structured in the following way, "
    "with the appropriate values filled in.\n\n[[ ## question ## ]]\n{question}\n\n[[ ## "
    "trajectory ## ]]\n{trajectory}\n\n[[ ## next_thought ## ]]\n{next_thought}\n\n[[ ## "
    "next_tool_name ## ]]\n{next_tool_name}\n\n[[ ## next_tool_args ## ]]\n{next_tool_args}\n\n[[ "
    "## completed ## ]]\nIn adhering to this structure, your objective is: \n        Given the "
    "fields `question`, produce the fields `answer`."
)
DSPY_ASK = (
    "Respond with the corresponding output fields, starting with the field `[[ ## next_thought ## "
    "]]`, then `[[ ## next_tool_name ## ]]` (must be formatted as a valid Python "
    "Literal['get_weather', 'finish']), then `[[ ## next_tool_args ## ]]` (must be formatted as a "
    "valid Python dict[str, Any]), and then ending with the marker for `[[ ## completed ## ]]`."
)
DSPY_STEPS = [
    ("I need the weather in Paris.", "get_weather", '{"city": "Paris"}', "sunny, 21 C"),
    ("I need the weather in Rome too.", "get_weather", '{"city": "Rome"}', "cloudy, 17 C"),
    ("I can answer now.", "finish", "{}", "Completed."),
]


def _dspy_user(steps: list[tuple[str, str, str, str]]) -> str:
    """DSPy's ChatAdapter: the question and the whole trajectory so far, re-rendered as fields."""
    traj = "\n\n".join(
        f"[[ ## thought_{i} ## ]]\n{t}\n\n[[ ## tool_name_{i} ## ]]\n{n}\n\n[[ ## tool_args_{i} ## "
        f"]]\n{a}\n\n[[ ## observation_{i} ## ]]\n{o}"
        for i, (t, n, a, o) in enumerate(steps)
    )
    return (
        "[[ ## question ## ]]\nCompare the weather in Paris and Rome.\n\n[[ ## trajectory ## "
        f"]]\n{traj}\n\n{DSPY_ASK}"
    )


def _dspy_answer(thought: str, name: str, args: str) -> str:
    return (
        f"[[ ## next_thought ## ]]\n{thought}\n\n[[ ## next_tool_name ## ]]\n{name}\n\n[[ ## "
        f"next_tool_args ## ]]\n{args}\n\n[[ ## completed ## ]]"
    )


def _dspy(rewrite_at: int | None = None) -> list[Exchange]:
    """Three ReAct steps, one request each (system, one user message); ``rewrite_at``: from that
    step on the client renders observation_0 otherwise than it sent it the step before."""
    out = []
    for k in range(3):
        steps = [list(s) for s in DSPY_STEPS[:k]]
        if rewrite_at is not None and k >= rewrite_at and steps:
            steps[0][3] = "rainy, 12 C"
        s = AgentScript("openai_chat", system=DSPY_SYSTEM, tools=())
        s.history = [{"role": "user", "content": _dspy_user([tuple(x) for x in steps])}]  # type: ignore[misc]
        out.append(s.reply(_dspy_answer(*DSPY_STEPS[k][:3])))
    return out


def test_a_re_rendered_trajectory_is_one_loop() -> None:
    run = run_of(_dspy())
    assert threads(run) == [[0, 1, 2]]
    assert [t.c.link for t in run.turns.values()] == ["start", "extends", "extends"]
    assert codes(run) == []


def test_an_observation_rewritten_between_steps_is_seen() -> None:
    run = run_of(_dspy(rewrite_at=2))
    assert threads(run) == [[0, 1, 2]]
    (f,) = [f for f in run.findings if f.severity == "warning"]
    assert (f.code, f.seq) == ("C.history_mutated", 2)
    assert "observation_0" in f.message


def test_clean_twin_another_question_is_another_conversation() -> None:
    """The same program asked another question: a new trajectory, its own conversation."""
    first = _dspy()[0]
    s = AgentScript("openai_chat", system=DSPY_SYSTEM, tools=())
    s.history = [
        {"role": "user", "content": _dspy_user([]).replace("Paris and Rome", "Oslo and Bergen")}
    ]
    other = s.reply(_dspy_answer("I need the weather in Oslo.", "get_weather", '{"city": "Oslo"}'))
    later = _dspy()[1]
    run = run_of([first, other, later])
    assert threads(run) == [[0, 2], [1]]
