"""A summariser fed the history as rendered text, and a whole history replaced by its summary
(issue 90, docs/threading.md "Context management"): Google ADK's events compaction
(``LlmEventSummarizer``, google-adk 2.13.0: one user message, the prompt then ``user: …``,
``<agent> called tool: …``, ``Tool response from …``, ``<agent>: …``; its answer sent back as a
model message in place of the events) and CrewAI's ``summarize_messages`` (crewai 1.15.30: its own
system prompt, the history as ``[USER]: …`` / ``[TOOL_RESULT (…)]: …`` inside
``<conversation>``; the answer's ``<summary>`` as the one user message after the system prompt).

Evidence: the side call's user text carries the earlier messages' texts word for word and in
order (three or more, the user's among them); the next main request carries its answer word for
word. Then the summariser is a side call under the turn it read, the replacement is management
(said once, a summary in place of the whole history), one conversation. What the user lost is
said by the same evidence: a dropped instruction no summary carries word for word is a warning
only when the summary's writer was not given it either.

On c86d115d: three conversations (the summariser ``main``), nothing said."""

from __future__ import annotations

import pytest
from scenarios import WEATHER, AgentScript, Call, assistant_of, threads, user_of

from looptap.cassettes.analysis import RunAnalysis, analyse
from looptap.cassettes.wire import Exchange

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")
SYSTEM = "You are a weather assistant. Use the get_weather tool for every city."
ADK_PROMPT = (
    "The following is a conversation history between a user and an AI agent. It may or may not "
    "start from a compacted history. Please identify and reiterate the user request, summarize "
    "the context so far.\n\n"
)
SUMMARY = (
    "<summary>The user asked for the weather in Paris and then Tokyo. Known so far: Paris is "
    "sunny at 24 C; Tokyo is rainy at 15 C.</summary>"
)
INSTRUCTION = "Always quote temperatures in Fahrenheit, never in Celsius."


def _main(family: str, instruction: bool = False) -> AgentScript:
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    if instruction:
        s.user(INSTRUCTION)
        s.reply("Understood: I will quote Fahrenheit only.")
    s.user("What is the weather in Paris today?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"}, id="call_r1")])
    s.results("WEATHER: Paris is sunny at 24 C")
    s.reply("FORECAST: Paris is sunny, 24 C.")
    s.user("And in Tokyo, please?")
    s.reply(calls=[Call("get_weather", {"city": "Tokyo"}, id="call_r2")])
    s.results("WEATHER: Tokyo is rainy at 15 C")
    s.reply("FORECAST: Tokyo is rainy, 15 C.")
    return s


def _adk_render(instruction: bool) -> str:
    lines = [f"user: {INSTRUCTION}", "weather_agent: Understood: I will quote Fahrenheit only."]
    lines = lines if instruction else []
    lines += [
        "user: What is the weather in Paris today?",
        "weather_agent called tool: get_weather({'city': 'Paris'})",
        "Tool response from get_weather: {'result': 'WEATHER: Paris is sunny at 24 C'}",
        "weather_agent: FORECAST: Paris is sunny, 24 C.",
        "user: And in Tokyo, please?",
        "weather_agent called tool: get_weather({'city': 'Tokyo'})",
        "Tool response from get_weather: {'result': 'WEATHER: Tokyo is rainy at 15 C'}",
        "weather_agent: FORECAST: Tokyo is rainy, 15 C.",
    ]
    return ADK_PROMPT + "\n".join(lines)


def _compacted(family: str, instruction: bool = False, seen: bool = True) -> RunAnalysis:
    """ADK: the main agent's two invocations, the summariser (no system prompt, no tools, the
    events rendered), then the next invocation: the summary as a model message, the question."""
    return analyse(_compacted_run(family, instruction, seen))


def _compacted_run(family: str, instruction: bool = False, seen: bool = True) -> list[Exchange]:
    """The round trips of :func:`_compacted`."""
    s = _main(family, instruction)
    side = AgentScript(family, tools=[])
    side.user(_adk_render(instruction and seen))
    side.reply(SUMMARY)
    s.exchanges.append(side.exchanges[0])
    s.history[:] = [*assistant_of(family, SUMMARY), user_of(family, "And in Berlin?")]
    s.reply(calls=[Call("get_weather", {"city": "Berlin"}, id="call_r3")])
    for i, ex in enumerate(s.exchanges):
        ex.seq = i
    return s.exchanges


def _trim(run: RunAnalysis) -> list[tuple[int, str]]:
    return [(f.seq or 0, f.details["kind"]) for f in run.findings if f.code == "C.history_trimmed"]


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_summariser_fed_rendered_text_is_a_side_call_and_its_summary_management(
    family: str,
) -> None:
    run = _compacted(family)
    assert sorted(threads(run)) == [[0, 1, 2, 3, 5], [4]]
    side = next(c for c in run.conversations if c.turns == [4])
    assert (side.kind, side.parent_seq) == ("side_call", 3)
    assert _trim(run) == [(5, "summarised")]
    (f,) = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert f.details["summary_by_seq"] == 4
    assert len(f.details["summary"]) == 1  # the summary alone; the new question is the turn's
    assert not [x for x in run.findings if x.severity in ("warning", "error")]


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_crewai_whole_history_replaced_by_the_summary_as_a_user_message(family: str) -> None:
    """CrewAI: the summariser under its own system prompt, the history rendered inside
    ``<conversation>``; then the agent's system prompt and ONE user message, the summary's body
    and ``Continue the task…`` (nothing else kept)."""
    s = _main(family)
    rendered = (
        "Analyze the following conversation.\n\n<conversation>\n"
        "[USER]: What is the weather in Paris today?\n\n[ASSISTANT]: [Called tools: get_weather]"
        "\n\n[TOOL_RESULT (get_weather)]: WEATHER: Paris is sunny at 24 C\n\n"
        "[ASSISTANT]: FORECAST: Paris is sunny, 24 C.\n\n[USER]: And in Tokyo, please?\n\n"
        "[ASSISTANT]: [Called tools: get_weather]\n\n"
        "[TOOL_RESULT (get_weather)]: WEATHER: Tokyo is rainy at 15 C\n</conversation>"
    )
    side = AgentScript(family, tools=[], system="You create structured summaries.")
    side.user(rendered)
    side.reply(SUMMARY)
    s.exchanges.append(side.exchanges[0])
    body = SUMMARY.removeprefix("<summary>").removesuffix("</summary>")
    s.history[:] = []
    s.user(f"<summary>\n{body}\n</summary>\n\nContinue the task from where it left off.")
    s.reply("FORECAST: Paris sunny, Tokyo rainy.")
    for i, ex in enumerate(s.exchanges):
        ex.seq = i
    run = s.analyse()
    assert sorted(threads(run)) == [[0, 1, 2, 3, 5], [4]]
    assert _trim(run) == [(5, "summarised")]
    assert not [x for x in run.findings if x.severity in ("warning", "error")]


@pytest.mark.parametrize("family", ["openai_chat", "gemini"])
def test_an_instruction_the_summariser_saw_is_info_when_not_carried(family: str) -> None:
    """The summary restates nothing of the instruction word for word, but its writer was given
    it: the model may know it (the summary may restate it). Said with the trim, not a warning."""
    run = _compacted(family, instruction=True, seen=True)
    assert not [f for f in run.findings if f.code == "C.user_instruction_dropped"]
    (f,) = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert f.details["restated"] == [INSTRUCTION] and "may restate" in f.message


@pytest.mark.parametrize("family", ["openai_chat", "gemini"])
def test_an_instruction_the_summariser_never_saw_is_a_warning(family: str) -> None:
    """The summariser was given the events after the instruction only: the summary cannot carry
    it, nothing kept does, so the model cannot know it."""
    run = _compacted(family, instruction=True, seen=False)
    (f,) = [f for f in run.findings if f.code == "C.user_instruction_dropped"]
    assert f.seq == 6 and f.details["lost"] == [INSTRUCTION]  # (after the instruction turn)


def test_clean_twin_a_question_and_answer_quoted_is_no_rendered_history() -> None:
    """Another agent quoting one question and its answer (two texts: a demo, a hand-off) is not a
    summariser fed the history."""
    s = _main("openai_chat")
    other = AgentScript("openai_chat", tools=[], system="You judge answers.")
    other.user(
        "Question: And in Tokyo, please? Answer: FORECAST: Tokyo is rainy, 15 C. Is the answer "
        "grounded in what the tool said? Reply PASS or FAIL with a reason."
    )
    other.reply("PASS")
    s.exchanges.append(other.exchanges[0])
    for i, ex in enumerate(s.exchanges):
        ex.seq = i
    run = s.analyse()
    judge = next(c for c in run.conversations if c.turns == [4])
    assert judge.kind != "side_call"


GUARDRAIL = "You are a guardrail. Check that the agent's answers are grounded in its tools."
VERDICT = (
    "PASS: every figure the agent gave (Paris sunny at 24 C, Tokyo rainy at 15 C) is what the "
    "get_weather tool returned; nothing was invented."
)


def _guardrail(family: str, goes_on: bool) -> RunAnalysis:
    return analyse(_guardrail_run(family, goes_on))


def _guardrail_run(family: str, goes_on: bool) -> list[Exchange]:
    """A guardrail agent (its own system prompt, no tools) handed the worker's conversation:
    its user message quotes the question, both tool results and the answer word for word (four
    texts, in order: what the rendered-history rule reads). Its verdict is long enough to be a
    summary, but no request carries it. With ``goes_on`` the worker asks on after it."""
    s = _main(family)
    quoted = (
        "Review this exchange.\nUser: What is the weather in Paris today?\n"
        "Tool get_weather returned: WEATHER: Paris is sunny at 24 C\nUser: And in Tokyo, please?\n"
        "Tool get_weather returned: WEATHER: Tokyo is rainy at 15 C\n"
        "Agent answered: FORECAST: Tokyo is rainy, 15 C.\nIs every figure grounded?"
    )
    judge = AgentScript(family, tools=[], system=GUARDRAIL)
    judge.user(quoted)
    judge.reply(VERDICT)
    s.exchanges.append(judge.exchanges[0])
    if goes_on:
        s.user("And in Berlin?")
        s.reply(calls=[Call("get_weather", {"city": "Berlin"}, id="call_r3")])
    for i, ex in enumerate(s.exchanges):
        ex.seq = i
    return s.exchanges


@pytest.mark.parametrize("goes_on", [False, True], ids=["at_the_end", "worker_goes_on"])
@pytest.mark.parametrize("family", FAMILIES4)
def test_a_guardrail_quoting_three_texts_is_a_handoff_not_a_summariser(
    family: str, goes_on: bool
) -> None:
    """The rendered-history rule's doubt (issue 90): a guardrail whose user text carries three
    or more of the worker's texts in order reads, when it arrives, like a summariser fed the
    history; what happens after decides. Its answer is never carried as a summary, so it was
    another agent quoting the conversation: a hand-off under the worker's latest turn, nothing
    said managed, nothing dropped. (On 20d0006a: a side call.)"""
    run = _guardrail(family, goes_on)
    worker = [0, 1, 2, 3, 5] if goes_on else [0, 1, 2, 3]
    assert sorted(threads(run)) == sorted([worker, [4]])
    judge = next(c for c in run.conversations if c.turns == [4])
    assert (judge.kind, judge.parent_seq) == ("handoff", 3)
    assert not _trim(run)
    assert not [x for x in run.findings if x.severity in ("warning", "error")]
