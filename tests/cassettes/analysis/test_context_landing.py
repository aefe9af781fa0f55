"""A summary linked by where its answer lands (issue 103, item 2; docs/threading.md "Context
management"): a summariser given the conversation as a transcript inside its *system prompt*,
answering a JSON object whose ``summary`` field the next request carries in *its* system prompt
(Agno's session summaries, agno 3.1.10 ``SessionSummaryManager``: the summary call's system prompt
is its instructions then ``<conversation>User: …Assistant: …</conversation>``, its one user
message ``Provide the summary of the conversation.``, the answer ``{"summary": …, "topics": …}``;
the next run's system prompt adds ``<summary_of_previous_interactions>`` + the field's value).
Evidence, word for word only: the conversation's question and its last answer in the summary
call's system prompt, in order; the field's string value in the next system prompt.

Then: one conversation, the summary call a side call under the turn it summarised, the dropped
run said once as "replaced by the summary of side call #N", the system prompt's change folded
under it — on every family, the system prompt in the messages (Chat) or apart from them
(Responses ``instructions``, Anthropic ``system``, Gemini ``systemInstruction``).

On f29135f5: three conversations (the summary call and the next run each ``main``), nothing
said."""

from __future__ import annotations

import json

import pytest
from scenarios import WEATHER, AgentScript, Call, threads

from looptap.cassettes.analysis import RunAnalysis, analyse
from looptap.cassettes.wire import Exchange

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")
SYSTEM = "You are a weather assistant. Use the get_weather tool for every city."
#: agno session/summary.py, SessionSummaryManager.get_system_message (the default prompt)
AGNO_PROMPT = (
    "Analyze the following conversation between a user and an assistant, and extract the "
    "following details:\n- Summary (str): Provide a concise summary of the session, focusing on "
    "important information that would be helpful for future interactions.\n- Topics "
    "(Optional[List[str]]): List the topics discussed in the session.\nKeep the summary concise "
    "and to the point. Only include relevant information.\n"
)
Q1, A1 = "What is the weather in Paris?", "FORECAST: Paris is sunny at 24 C, a fine day out."
SUMMARY = (
    "The user asked for the weather in Paris; the assistant looked it up with get_weather and "
    "said it is sunny at 24 C."
)


def _landing(summary: str = SUMMARY) -> str:
    return (
        f"{SYSTEM}\n\nHere is a brief summary of your previous interactions:\n\n"
        f"<summary_of_previous_interactions>\n{summary}\n</summary_of_previous_interactions>\n\n"
        "Note: this information is from previous interactions and may be outdated."
    )


def _agno_run(family: str, structured: str = "json", lands: bool = True) -> list[Exchange]:
    """Run 1 (a tool loop), the summary call, run 2 (its history the summary alone: Agno
    without ``add_history_to_context``), its tool loop."""
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    s.user(Q1)
    s.reply(calls=[Call("get_weather", {"city": "Paris"}, id="call_a1")])
    s.results("WEATHER: Paris is sunny at 24 C")
    s.reply(A1)
    side = AgentScript(
        family,
        tools=[],
        system=f"{AGNO_PROMPT}<conversation>User: {Q1}\nAssistant: None\n\n"
        f"Assistant: {A1}\n</conversation>",
    )
    side.user("Provide the summary of the conversation.")
    answer = SUMMARY
    if structured != "text":
        answer = json.dumps({"summary": SUMMARY, "topics": ["weather", "Paris"]}, indent=2)
    if structured == "fenced":  # a model asked for JSON without a schema (json_object mode)
        answer = f"```json\n{answer}\n```"
    side.reply(answer)
    s.exchanges.append(side.exchanges[0])
    s.system = _landing() if lands else f"{SYSTEM}\n\nBe brief."
    s.history[:] = []
    s.user("And in Tokyo?")
    s.reply(calls=[Call("get_weather", {"city": "Tokyo"}, id="call_a2")])
    s.results("WEATHER: Tokyo is rainy at 15 C")
    s.reply("FORECAST: Tokyo is rainy at 15 C.")
    for i, ex in enumerate(s.exchanges):
        ex.seq = i
    return s.exchanges


def _trims(run: RunAnalysis) -> list[tuple[int | None, str, int | None]]:
    return [
        (f.seq, f.details["kind"], f.details["summary_by_seq"])
        for f in run.findings
        if f.code == "C.history_trimmed"
    ]


@pytest.mark.parametrize("structured", ["json", "fenced", "text"])
@pytest.mark.parametrize("family", FAMILIES4)
def test_a_summary_in_the_system_prompt_links_its_side_call(family: str, structured: str) -> None:
    run = analyse(_agno_run(family, structured))
    assert sorted(threads(run)) == [[0, 1, 3, 4], [2]]
    side = next(c for c in run.conversations if c.turns == [2])
    assert (side.kind, side.parent_seq) == ("side_call", 1)
    assert _trims(run) == [(3, "summarised", 2)]
    (f,) = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert "replaced by the summary of side call #2" in f.message, f.message
    assert "put nothing in their place" not in f.message
    unexplained = [
        (x.code, x.seq) for x in run.findings if x is not f and not x.details.get("caused_by")
    ]
    assert unexplained == [], [x.message for x in run.findings]


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_clean_twin_a_system_prompt_changed_otherwise_links_nothing(family: str) -> None:
    """The same summary call, but the next run's system prompt carries no answer of it: nothing
    ties that run to the first (its own conversation), and the summary call, never used, is
    another agent handed the conversation (a hand-off), not a summary. (The answer's short
    field, the topic ``weather``, is in that system prompt by accident: only string values of
    80 characters or more are looked for.)"""
    run = analyse(_agno_run(family, lands=False))
    assert sorted(threads(run)) == [[0, 1], [2], [3, 4]]
    side = next(c for c in run.conversations if c.turns == [2])
    assert side.kind != "side_call"  # (a hand-off here; main on f29135f5)
    assert _trims(run) == []


def test_a_structured_answer_is_read_bounded() -> None:
    """Only an answer that is JSON whole (fenced or not) is read for fields, its parse bounded:
    nesting past the parser's limit, a cut or malformed answer, give no field and no error."""
    from looptap.cassettes.analysis.threading._words import answer_fields  # (what is tested)

    assert answer_fields('```json\n{"summary": "Paris is sunny", "n": 3}\n```') == [
        "paris is sunny"
    ]
    assert answer_fields("[" * 5000 + "]" * 5000) == []
    assert answer_fields('{"summary": "' + "y" * 200_000 + '"}') == []  # past 100,000: cut
    assert answer_fields('The summary: {"summary": "x"}') == []
