"""Management after an overflow error (issue 90, docs/threading.md "Context management"): a request
answered by a 400 whose error is the family's context-length error, then a request that keeps an
in-order part of it (a trim: Strands' ``SlidingWindowConversationManager``, CrewAI's
``respect_context_window``) or replaces its head by a summary (Strands'
``SummarizingConversationManager``: a side call under its own system prompt, no tools, the head
then ``Please summarize this conversation.``; the summary goes back as a user message). The second
request continues the first's conversation; the management is said once, "after an overflow"; no
pending-calls finding.

On c86d115d: the trimmed request started a new conversation (with a false
``C.stopped_with_pending_calls``), nothing said of the management."""

from __future__ import annotations

from typing import Any

import pytest
from scenarios import WEATHER, AgentScript, Call, ErrorReply, error, serious, threads

from looptap.cassettes.analysis import RunAnalysis

FAMILIES = ("openai_chat", "openai_responses", "anthropic", "gemini", "bedrock")
SYSTEM = "You are a travel assistant. Use the tools to answer."
SUMMARISER = (
    "You are a conversation summarizer. Provide a concise summary of the conversation history."
)
SUMMARY = (
    "The user asked for the weather in Paris; the assistant looked it up (sunny, 24 C) and "
    "told them. Then the user asked about Lyon."
)

#: Each family's context-length error, as the API sends it (the texts the frameworks match:
#: strands 1.62.0 ``_openai_errors``, ``AnthropicModel.OVERFLOW_MESSAGES``,
#: ``BEDROCK_CONTEXT_WINDOW_OVERFLOW_MESSAGES``, ``GeminiModel``; crewai 1.15.30
#: ``context_window_exceeding_exception``).
OVERFLOW: dict[str, ErrorReply] = {
    "openai_chat": error(
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 131072 tokens. Please reduce the length of the "
                "messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "openai_responses": error(
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust "
                "your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
    ),
    "anthropic": error(
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        },
    ),
    "gemini": error(
        400,
        {
            "error": {
                "code": 400,
                "message": "The input token count (1048577) exceeds the maximum number of "
                "tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
    ),
    "bedrock": error(
        400,
        {"message": "Input is too long for requested model."},
        [
            (
                "x-amzn-errortype",
                "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            )
        ],
    ),
}

#: Another 400 (a bad argument): not an overflow, so what follows is judged as before.
NOT_OVERFLOW = error(
    400,
    {
        "error": {
            "message": "Invalid value for 'temperature': must be between 0 and 2.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "invalid_value",
        }
    },
)


def _loop(family: str) -> AgentScript:
    """Two questions; the second's call result overflows the window."""
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    s.user("What is the weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"}, id="call_o1")])
    s.results("sunny, 24 C")
    s.reply("It is sunny in Paris, 24 C.")
    s.user("And in Lyon?")
    s.reply(calls=[Call("get_weather", {"city": "Lyon"}, id="call_o2")])
    s.results("rainy, 15 C " + "(hourly detail) " * 40)
    return s


def _history_of(s: AgentScript) -> list[Any]:
    return list(s.history)


def _start(s: AgentScript) -> int:
    """Where the second question is in the history (Chat keeps no system message here: the
    AgentScript puts it in at send time)."""
    return 4


def _said(run: RunAnalysis, code: str) -> list[int]:
    return [f.seq or 0 for f in run.findings if f.code == code]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_trim_after_an_overflow_continues_the_conversation(family: str) -> None:
    """Strands' sliding window / CrewAI: the 400, then the same loop from the latest question."""
    s = _loop(family)
    s.reply(error=OVERFLOW[family], echo=False)  # 3: the window overflowed
    s.history[:] = s.history[_start(s) :]  # the oldest question and its answer dropped
    s.reply("In Lyon it is rainy, 15 C.")  # 4
    run = s.analyse()
    assert threads(run) == [[0, 1, 2, 3, 4]]
    assert _said(run, "C.history_trimmed") == [4]
    (f,) = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert f.details.get("after_overflow") == 3 and "after" in f.message and "overflow" in f.message
    assert not _said(run, "C.stopped_with_pending_calls")
    assert serious(run) == [("A.http_error", 3)]  # the refusal itself, true


@pytest.mark.parametrize("family", FAMILIES)
def test_a_summary_after_an_overflow_continues_the_conversation(family: str) -> None:
    """Strands' summarising manager: the 400, a side call over the head (its own system prompt,
    no tools, ``Please summarize this conversation.``), then the summary as a user message and
    the messages kept after it."""
    s = _loop(family)
    s.reply(error=OVERFLOW[family], echo=False)  # 3
    head, kept = s.history[: _start(s)], s.history[_start(s) :]
    side = AgentScript(family, tools=[], system=SUMMARISER)
    side.history[:] = [*head]
    side.user("Please summarize this conversation.")
    side.reply(SUMMARY)
    s.exchanges.append(side.exchanges[0])  # 4: the summariser
    s.history[:] = [*AgentScript(family).user(SUMMARY).history, *kept]
    s.reply("In Lyon it is rainy, 15 C.")  # 5
    for i, ex in enumerate(s.exchanges):
        ex.seq = i
    run = s.analyse()
    assert sorted(threads(run)) == [[0, 1, 2, 3, 5], [4]]
    side_conv = next(c for c in run.conversations if 4 in c.turns)
    assert side_conv.branch == "side_call"
    assert _said(run, "C.history_trimmed") == [5]
    (f,) = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert f.details.get("after_overflow") == 3
    assert not _said(run, "C.stopped_with_pending_calls")
    assert serious(run) == [("A.http_error", 3)]  # the refusal itself, true


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_clean_twin_after_another_400_nothing_is_said_of_an_overflow(family: str) -> None:
    """A 400 that is not the context's: the trim is judged as any trim (said, but never "after
    an overflow")."""
    s = _loop(family)
    s.reply(error=NOT_OVERFLOW, echo=False)
    s.history[:] = s.history[_start(s) :]
    s.reply("In Lyon it is rainy, 15 C.")
    run = s.analyse()
    assert all("after_overflow" not in f.details for f in run.findings)
