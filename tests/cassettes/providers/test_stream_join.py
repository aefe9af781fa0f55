"""A streamed text is joined once (issue 73): each stream reader that grows a wire block's text by
its deltas keeps the pieces and joins them when the answer is read, so an answer of n deltas costs
its length, not n times its length.

Counted, not timed: each delta's text is a :class:`Counted` string, whose ``__radd__`` runs (before
``str``'s own) whenever the text so far is joined with it by ``+``, and adds the length it copies to
:data:`COPIED`. Joining as the deltas come copies the text so far on every delta (about n²/2
pieces); joining once copies nothing through ``+``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from looptap.cassettes.models import NormalisedResponse
from looptap.cassettes.providers.anthropic import MessagesStream
from looptap.cassettes.providers.bedrock import ConverseStream
from looptap.cassettes.providers.gemini import GenerateStream
from looptap.cassettes.providers.openai_responses import OpenAIResponses, ResponsesStream

N = 2000
PIECE = "word "
COPIED = [0]


class Counted(str):
    """A delta's text that counts what ``prefix + self`` copies."""

    def __radd__(self, other: str) -> str:
        COPIED[0] += len(other)
        return str.__add__(other, self)


def _pieces(n: int = N) -> list[Counted]:
    return [Counted(PIECE) for _ in range(n)]


def _anthropic(kind: str) -> NormalisedResponse:
    field, delta = ("text", "text_delta") if kind == "text" else ("thinking", "thinking_delta")
    s = MessagesStream(bedrock=False)
    s.on(None, {"type": "message_start", "message": {"id": "m", "role": "assistant"}})
    block = {"type": kind, field: ""}
    s.on(None, {"type": "content_block_start", "index": 0, "content_block": block})
    for p in _pieces():
        s.on(None, {"type": "content_block_delta", "index": 0, "delta": {"type": delta, field: p}})
    s.on(None, {"type": "content_block_stop", "index": 0})
    s.on(None, {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
    s.on(None, {"type": "message_stop"})
    return s.close()


def _bedrock_text() -> NormalisedResponse:
    s = ConverseStream()
    s.on("messageStart", {"role": "assistant"})
    for p in _pieces():
        s.on("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}})
    s.on("messageStop", {"stopReason": "end_turn"})
    return s.close()


def _bedrock_reasoning() -> NormalisedResponse:
    s = ConverseStream()
    s.on("messageStart", {"role": "assistant"})
    for p in _pieces():
        s.on(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": p}}},
        )
    s.on("messageStop", {"stopReason": "end_turn"})
    return s.close()


def _bedrock_tool_input() -> NormalisedResponse:
    s = ConverseStream()
    s.on("messageStart", {"role": "assistant"})
    s.on(
        "contentBlockStart",
        {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "f"}}},
    )
    for p in [Counted('{"q": "'), *_pieces(), Counted('"}')]:
        s.on("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": p}}})
    s.on("messageStop", {"stopReason": "tool_use"})
    return s.close()


def _gemini() -> NormalisedResponse:
    s = GenerateStream()
    for p in _pieces():
        s.on(None, {"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}}]})
    s.on(None, {"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]})
    return s.close()


def _responses(event: str, item: dict[str, object]) -> NormalisedResponse:
    adapter = OpenAIResponses()
    s = ResponsesStream(lambda r, in_stream: adapter.parse_response(r))
    s.on(None, {"type": "response.output_item.added", "output_index": 0, "item": item})
    for p in _pieces():
        s.on(None, {"type": event, "output_index": 0, "content_index": 0, "delta": p})
    return s.close()


CASES: dict[str, tuple[Callable[[], NormalisedResponse], str]] = {
    "anthropic text": (lambda: _anthropic("text"), "text"),
    "anthropic thinking": (lambda: _anthropic("thinking"), "reasoning"),
    "bedrock text": (_bedrock_text, "text"),
    "bedrock reasoning": (_bedrock_reasoning, "reasoning"),
    "bedrock tool input": (_bedrock_tool_input, "tool_call"),
    "gemini text": (_gemini, "text"),
    "responses text": (
        lambda: _responses(
            "response.output_text.delta",
            {"type": "message", "id": "i", "role": "assistant", "content": []},
        ),
        "text",
    ),
    "responses arguments": (
        lambda: _responses(
            "response.function_call_arguments.delta",
            {"type": "function_call", "id": "i", "call_id": "c", "name": "f", "arguments": ""},
        ),
        "tool_call",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_streamed_text_is_joined_once(case: str) -> None:
    build, kind = CASES[case]
    COPIED[0] = 0
    resp = build()
    parts = [p for p in resp.parts if p.kind == kind]
    assert len(parts) == 1, resp.parts
    got = parts[0].text if kind != "tool_call" else parts[0].tool_call.arguments_raw  # type: ignore[union-attr]
    assert got is not None and PIECE * N in got, "the whole text, every piece in order"
    # Joined as they come, the text so far is copied on each delta: about N²/2 pieces (10 MB
    # here); joined once, nothing goes through ``+``. A bound linear in the answer's length.
    assert COPIED[0] <= len(PIECE) * N, f"{COPIED[0]:,} characters copied for {len(got):,}"
