"""Issue 102 item 1, the wire readers: content of a kind a family's reader does not read (a new
Anthropic block type, a Gemini part kind, a Responses output item, a Chat message field, a
Converse block; in a body or a stream) makes the round trip ``partial``, is named, and no finding
rests on that answer; metadata keys beside what is read are not content.

Each case edits one real recording (tests/corpus, recorded by pydantic-ai's suite against the real
APIs) or scripts a stream in the API's shape, and checks its twin: the same answer with the
unknown content removed raises the finding that must not be raised on what was not read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from real_corpus import CORPUS, load
from test_bedrock import _frame
from test_bedrock_guardrail import _exchange as _sent

from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.wire import Exchange

_CASSETTES = "pydantic-ai/tests/cassettes"
Edit = Callable[[dict[str, Any]], None]


def _recorded(name: str, index: int, edit: Edit) -> Exchange:
    """Round trip ``index`` of a real recording, its JSON answer changed by ``edit``."""
    ex = load(CORPUS / _CASSETTES / name)[index]
    body = orjson.loads(ex.response_body)
    edit(body)
    ex.response_chunks = [(None, orjson.dumps(body))]
    ex.seq = 0
    return ex


def _judged(ex: Exchange) -> tuple[RoundTrip, set[str]]:
    return parse_exchange(ex), {f.code for f in analyse([ex]).findings}


# -- whole bodies, from real recordings ------------------------------------------------------------

_HOLOGRAM = {"frames": 3, "data": "AAAA"}  # (a content kind no API has: any new one reads so)
_CHAT_CALLS = "test_cache_prefix_stability/test_openai_tool_call_roundtrip_wire_stable[ag_ui].yaml"
_CONVERSE_CALLS = (
    "../models/bedrock/cassettes/test_cache/"
    "test_bedrock_single_tool_choice_preserves_cache[anthropic].yaml"
)


def _chat_message(b: dict[str, Any]) -> dict[str, Any]:
    return b["choices"][0]["message"]


def _converse(b: dict[str, Any]) -> list[Any]:
    return b["output"]["message"]["content"]


def _gemini(b: dict[str, Any]) -> list[Any]:
    return b["candidates"][0]["content"]["parts"]


#: family: (recording, round trip, the edit putting an unknown kind in place of the answer's
#: content, the twin's edit removing that content, the label said, the finding of the twin)
CASES: dict[str, tuple[str, int, Edit, Edit, str, str]] = {
    # a message field no reader knows where the calls were (finish still `tool_calls`)
    "openai_chat": (
        _CHAT_CALLS, 0,
        lambda b: _chat_message(b).update(hologram_calls=_chat_message(b).pop("tool_calls")),
        lambda b: _chat_message(b).pop("tool_calls"),
        "answer: a message field 'hologram_calls', not read", "A.tool_calls_without_calls",
    ),
    "anthropic": (
        "test_ag_ui/test_thinking_roundtrip_anthropic.yaml", 0,
        lambda b: b.update(content=[{"type": "hologram", **_HOLOGRAM}]),
        lambda b: b.update(content=[]),
        "answer: part 1: a 'hologram' block, not read", "E.empty_response",
    ),
    # a part keyed by a kind no reader knows (Gemini's parts are a union by key)
    "gemini": (
        "test_settings/test_stop_settings[google].yaml", 0,
        lambda b: _gemini(b).__setitem__(slice(None), [{"hologram": _HOLOGRAM}]),
        lambda b: _gemini(b).clear(),
        "answer: part 1: a 'hologram' block, not read", "E.empty_response",
    ),
    "openai_responses": (
        "test_code_execution_files_vcr/test_openai_code_execution_files.yaml", 1,
        lambda b: b.update(output=[{"type": "hologram_call", "id": "hc_1", **_HOLOGRAM}]),
        lambda b: b.update(output=[]),
        "answer: part 1: a 'hologram_call' block, not read",
        "E.empty_response",
    ),
    # a block keyed by a kind no reader knows where the call was (stopReason still `tool_use`)
    "bedrock": (
        _CONVERSE_CALLS, 0,
        lambda b: _converse(b).__setitem__(slice(None), [{"hologram": _HOLOGRAM}]),
        lambda b: _converse(b).clear(),
        "answer: part 1: a 'hologram' block, not read",
        "A.tool_calls_without_calls",
    ),
}  # fmt: skip


@pytest.mark.parametrize("family", sorted(CASES))
def test_an_answer_of_a_kind_no_reader_knows_is_partial_named_and_not_judged(family: str) -> None:
    name, index, unknown, removed, label, finding = CASES[family]
    twin, found = _judged(_recorded(name, index, removed))
    assert twin.family == family and twin.read == "complete" and finding in found
    rt, codes = _judged(_recorded(name, index, unknown))
    assert rt.family == family and rt.read == "partial" and rt.unread == [label]
    assert finding not in codes and not {c for c in codes if c.startswith("E.")}
    assert "E.empty_response" not in codes and "A.tool_calls_without_calls" not in codes


def test_metadata_beside_what_is_read_is_not_content() -> None:
    """A Chat answer's citations (``annotations``), Groq's harmony ``channel`` and Gemini's
    signature (``extra_content``) are about the text read, not content of their own; Gemini's
    signature-only part and its code tool's parts are parts the API defines, kept as sent."""
    extra = {
        "annotations": [{"type": "url_citation", "url_citation": {"url": "https://example.com"}}],
        "channel": "final",
        "extra_content": {"google": {"thought_signature": "c2ln"}},
    }
    chat = _recorded(_CHAT_CALLS, 1, lambda b: _chat_message(b).update(extra))
    code = [
        {"executableCode": {"language": "PYTHON", "code": "print(6 * 7)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "42\n"}},
        {"thoughtSignature": "c2ln"},
    ]
    gemini = _recorded(
        "test_settings/test_stop_settings[google].yaml", 0, lambda b: _gemini(b).extend(code)
    )
    for ex in (chat, gemini):
        rt = parse_exchange(ex)
        assert rt.read == "complete" and rt.unread == []


# -- streams, scripted in each API's shape ---------------------------------------------------------


def _exchange(url: str, request: dict[str, Any], body: bytes, sse: bool = True) -> Exchange:
    ctype = "text/event-stream" if sse else "application/vnd.amazon.eventstream"
    ex = _sent(url, request, [body], ctype)
    ex.seq = 0
    return ex


def _data(d: Any) -> bytes:
    return b"data: " + orjson.dumps(d) + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }  # fmt: skip


_ASK_CHAT = {
    "model": "gpt-4o-mini",
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}
_ASK_GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
_ASK_CONVERSE = {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}
_GEMINI_SSE = (
    "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
    ":streamGenerateContent?alt=sse"
)
_CONVERSE_STREAM = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse-stream"
_GEMINI_USAGE = {"promptTokenCount": 2, "candidatesTokenCount": 3, "totalTokenCount": 5}


def _gemini_event(parts: list[Any], finish: str | None = None) -> dict[str, Any]:
    cand = {"content": {"role": "model", "parts": parts}, "index": 0}
    return {"candidates": [{**cand, **({"finishReason": finish} if finish else {})}],
            "usageMetadata": _GEMINI_USAGE, "modelVersion": "gemini-2.5-flash"}  # fmt: skip


def _chat_stream(delta: dict[str, Any]) -> bytes:
    start = _data(_chunk({"role": "assistant", "content": ""}))
    return start + _data(_chunk(delta)) + _data(_chunk({}, "stop")) + b"data: [DONE]\n\n"


def _converse_stream(*blocks: bytes) -> bytes:
    return b"".join([
        _frame("messageStart", {"role": "assistant"}), *blocks,
        _frame("messageStop", {"stopReason": "end_turn"}),
        _frame("metadata", {"usage": {"inputTokens": 2, "outputTokens": 3, "totalTokens": 5},
                            "metrics": {"latencyMs": 9}}),
    ])  # fmt: skip


_HOLOGRAM_START = _frame(
    "contentBlockStart", {"contentBlockIndex": 0, "start": {"hologram": {"frames": 3}}}
)
_HOLOGRAM_DELTA = _frame(
    "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"hologram": {"data": "AAAA"}}}
)
_STOP_0 = _frame("contentBlockStop", {"contentBlockIndex": 0})

#: stream: (url, request, the stream with unknown content, its twin without, the label said)
STREAMS: dict[str, tuple[str, dict[str, Any], bytes, bytes, str]] = {
    # (OpenRouter's image output is such a field: `delta.images`)
    "openai_chat": (
        "https://api.openai.com/v1/chat/completions", _ASK_CHAT,
        _chat_stream({"hologram": [{"type": "image_url", "image_url": {"url": "data:,"}}]}),
        _chat_stream({}), "answer: a message field 'hologram', not read",
    ),
    "gemini": (
        _GEMINI_SSE, _ASK_GEMINI,
        _data(_gemini_event([{"hologram": _HOLOGRAM}], "STOP")),
        _data(_gemini_event([], "STOP")),
        "answer: part 1: a 'hologram' block, not read",
    ),
    "bedrock": (
        _CONVERSE_STREAM, _ASK_CONVERSE,
        _converse_stream(_HOLOGRAM_START, _HOLOGRAM_DELTA, _STOP_0), _converse_stream(),
        "answer: part 1: a 'hologram' block, not read",
    ),
}  # fmt: skip


@pytest.mark.parametrize("family", sorted(STREAMS))
def test_a_stream_of_a_kind_no_reader_knows_is_partial_named_and_not_judged(family: str) -> None:
    url, request, body, clean, label = STREAMS[family]
    sse = family != "bedrock"
    twin, found = _judged(_exchange(url, request, clean, sse))
    assert twin.family == family and twin.read == "complete" and "E.empty_response" in found
    rt, codes = _judged(_exchange(url, request, body, sse))
    assert rt.family == family and rt.read == "partial" and rt.unread == [label]
    assert "E.empty_response" not in codes
