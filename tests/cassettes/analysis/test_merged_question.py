"""A question merged into the last message and answered in text (issue 90; docs/threading.md
"Context management", the question asked over the history in place).

The real client: langchain-anthropic 1.7.7's ``_merge_messages`` (``ChatAnthropic``) merges runs
of human messages into one user message of text blocks. An app whose history lost the model's
answer (it did not save the ``AIMessage``) and then adds the user's next question sends the
latest request again, the answer left out, the question appended to the last message's parts:
Claude Code's ``/compact`` shape. The bodies below are what ``ChatAnthropic._get_request_payload``
built from ``[System, Human(q1)]``, ``[System, Human(q1), Human(q2)]`` and then the history with
the answer saved (``…, AIMessage(a2), Human(q3)``): the next request carries the merged
question's text answer as the assistant message right after it, in the conversation's line.

That later request is the evidence that the merged question was the conversation going on
(one conversation, the first answer not echoed: ``C.assistant_not_echoed`` at #1); a summariser
asked so (``/compact``) has its answer carried as a summary in place of the history instead, a
side call (tests/cassettes/analysis/test_side_calls.py, test_context_management.py). Reading
it needs hindsight that moves a turn already read into another conversation: not built (session
48, helper ctxh; the design is in docs/threading.md), so the reading is a strict xfail."""

from __future__ import annotations

import orjson
import pytest
from scenarios import anthropic_turn, gemini_turn, run_of, serious, set_request_body, threads

from looptap.cassettes.wire import Exchange

SYSTEM = "You are a helpful travel assistant."
Q1 = "What is the capital of Portugal?"
A1 = "The capital of Portugal is Lisbon."
Q2 = "And what is its population?"
A2 = "Lisbon has about 545,000 inhabitants in the city proper."
Q3 = "Thanks. Which museums should I see there?"
A3 = "The Gulbenkian Museum and the National Tile Museum."


def _turn(messages: list[dict[str, object]], answer: str) -> Exchange:
    ex = anthropic_turn(messages, answer)
    body = orjson.loads(ex.request_body)
    ex.request_body = orjson.dumps({**body, "system": SYSTEM})
    return ex


def _litellm(family: str, body: dict[str, object], answer: str) -> Exchange:
    """A turn whose request is LiteLLM 1.106.2's body as its provider transformation built it."""
    if family == "anthropic":
        ex = anthropic_turn(body["messages"], answer)  # type: ignore[arg-type]
    else:
        ex = gemini_turn(body["contents"], answer)  # type: ignore[arg-type]
    return set_request_body(ex, orjson.dumps(body))


def _text(family: str, text: str) -> dict[str, object]:
    return {"type": "text", "text": text} if family == "anthropic" else {"text": text}


def _message(family: str, role: str, *texts: str) -> dict[str, object]:
    parts = [_text(family, t) for t in texts]
    if family == "anthropic":
        return {"role": role, "content": parts}
    return {"role": "model" if role == "assistant" else role, "parts": parts}


def _litellm_body(family: str, messages: list[dict[str, object]]) -> dict[str, object]:
    """What LiteLLM 1.106.2 sends for ``[system, *messages]``: ``AnthropicConfig.transform_request``
    (every content a list of text blocks, the system prompt one too) and Gemini's
    ``_transform_request_body`` (``system_instruction``; roles ``user``/``model``): consecutive
    user messages merged into one, their texts its blocks (``prompt_templates/factory.py``)."""
    if family == "anthropic":
        return {
            "model": "claude-sonnet-4-5",
            "messages": messages,
            "max_tokens": 1024,
            "system": [{"type": "text", "text": SYSTEM}],
        }
    return {"contents": messages, "system_instruction": {"parts": [{"text": SYSTEM}]}}


def _litellm_run(family: str) -> list[Exchange]:
    """``completion(messages=[system, user(q1)])``, then the app's history without the answer
    plus the next question (``[system, user(q1), user(q2)]``: merged), then with the answer
    saved (``…, assistant(a2), user(q3)``); bodies as LiteLLM 1.106.2 built them (read with
    ``/work/main/.venv-clients``' litellm, no request sent)."""
    merged: dict[str, object] = _message(family, "user", Q1, Q2)
    return [
        _litellm(family, _litellm_body(family, [_message(family, "user", Q1)]), A1),
        _litellm(family, _litellm_body(family, [merged]), A2),
        _litellm(
            family,
            _litellm_body(
                family, [merged, _message(family, "assistant", A2), _message(family, "user", Q3)]
            ),
            A3,
        ),
    ]


def _langchain_anthropic_run() -> list[Exchange]:
    blocks = [{"type": "text", "text": Q1}, {"type": "text", "text": Q2}]
    merged = {"role": "user", "content": blocks}
    return [
        _turn([{"role": "user", "content": Q1}], A1),
        _turn([merged], A2),  # the answer A1 lost, Q2 merged into the last message
        _turn([merged, {"role": "assistant", "content": A2}, {"role": "user", "content": Q3}], A3),
    ]


@pytest.mark.xfail(strict=True, reason="hindsight for a merged question answered in text: open")
def test_a_merged_question_answered_in_text_is_the_conversation_going_on() -> None:
    run = run_of(_langchain_anthropic_run())
    assert threads(run) == [[0, 1, 2]]
    assert ("C.assistant_not_echoed", 1) in serious(run)


def test_today_it_reads_as_a_side_call_and_says_nothing_false() -> None:
    """What is read now: #1 a side call of #0, #2 going on from it; no warning (the dropped
    answer is not said: a finding missed, not a false one)."""
    run = run_of(_langchain_anthropic_run())
    assert sorted(threads(run)) == [[0], [1, 2]]
    assert serious(run) == []


@pytest.mark.parametrize("family", ["anthropic", "gemini"])
@pytest.mark.xfail(strict=True, reason="hindsight for a merged question answered in text: open")
def test_litellm_merged_question_answered_in_text_is_the_conversation_going_on(
    family: str,
) -> None:
    run = run_of(_litellm_run(family))
    assert threads(run) == [[0, 1, 2]]
    assert ("C.assistant_not_echoed", 1) in serious(run)


@pytest.mark.parametrize("family", ["anthropic", "gemini"])
def test_litellm_today_it_reads_as_a_side_call_and_says_nothing_false(family: str) -> None:
    """LiteLLM's shape (every content a list of blocks; Gemini's ``parts``) reads as
    langchain-anthropic's does: #1 a side call of #0, #2 going on from it, nothing false."""
    run = run_of(_litellm_run(family))
    assert sorted(threads(run)) == [[0], [1, 2]]
    assert serious(run) == []
