"""Anthropic Messages adapter: the real recordings first, hand-written wire samples for the gaps."""

from __future__ import annotations

import base64
import functools
import struct
import zlib
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from real_corpus import corpus_exchanges, rel

from looptap.cassettes.models import FinishReason, NormalisedRequest, NormalisedResponse
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.providers import detect
from looptap.cassettes.providers.anthropic import AnthropicMessages, finish_class, usage_from
from looptap.cassettes.wire import Exchange, frame

A = AnthropicMessages()


@functools.cache
def corpus() -> list[tuple[str, RoundTrip]]:
    """The corpus' Anthropic round trips, parsed on first use: not when the module is imported,
    which every xdist worker does while collecting, whichever tests it then runs."""
    out = []
    for path, i, ex in corpus_exchanges():
        rt = parse_exchange(ex)
        if rt.family == "anthropic":
            out.append((f"{rel(path)}#{i}", rt))
    return out


def _find(fragment: str, index: int = 0) -> RoundTrip:
    matches = [rt for name, rt in corpus() if fragment in name and name.endswith(f"#{index}")]
    assert len(matches) == 1, f"{fragment}#{index}: {len(matches)} matches"
    return matches[0]


def _request(rt: RoundTrip) -> NormalisedRequest:
    assert rt.request is not None
    return rt.request


def _response(rt: RoundTrip) -> NormalisedResponse:
    assert rt.response is not None
    return rt.response


def _sse(*events: tuple[str, dict[str, Any] | str]) -> NormalisedResponse:
    body = "".join(
        f"event: {name}\ndata: {d if isinstance(d, str) else orjson.dumps(d).decode()}\n\n"
        for name, d in events
    )
    framed = frame([(None, body.encode())], "text/event-stream")
    assert framed.kind == "sse"
    return A.reassemble(framed)


def _start(**usage: Any) -> tuple[str, dict[str, Any]]:
    msg = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1, **usage},
    }
    return "message_start", {"type": "message_start", "message": msg}


def _block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {
        "type": "content_block_start",
        "index": index,
        "content_block": block,
    }


def _delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _block_stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def _message_delta(stop: str | None, **usage: Any) -> tuple[str, dict[str, Any]]:
    return "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": usage,
    }


STOP = ("message_stop", {"type": "message_stop"})


# --- the corpus ------------------------------------------------------------------------------


def test_corpus_anthropic_exchanges_all_parse() -> None:
    assert len(corpus()) >= 330
    failing = {name: rt.analysis_errors for name, rt in corpus() if rt.analysis_errors}
    assert failing == {}
    shapes = Counter((rt.operation, rt.framing) for _, rt in corpus())
    assert shapes[("generate", "sse")] >= 45
    assert shapes[("generate", "json")] >= 280
    assert shapes[("count_tokens", "json")] >= 8


def test_corpus_every_messages_url_is_ours() -> None:
    """Every recorded Messages call (direct, beta, gateway prefix, Bedrock invoke) goes to this
    adapter."""
    missed = []
    for path, i, ex in corpus_exchanges():
        p = urlsplit(ex.url).path
        if (
            p.endswith("/v1/messages")
            or p.endswith("/messages/count_tokens")
            or p.endswith("/invoke")
        ) and parse_exchange(ex).family != "anthropic":
            missed.append(f"{rel(path)}#{i}")
    assert missed == []


def test_corpus_generate_responses_are_complete_and_classified() -> None:
    for name, rt in corpus():
        if rt.operation != "generate" or rt.status != 200:
            continue
        resp = _response(rt)
        assert resp.complete is True, name
        assert resp.finish_reason_raw is not None, name
        assert resp.finish_reason not in (None, FinishReason.OTHER, FinishReason.UNKNOWN), name
        assert resp.usage is not None and resp.usage.input_tokens is not None, name


def test_corpus_streamed_tool_calls_have_parsed_arguments() -> None:
    calls = [c for _, rt in corpus() if rt.stream and rt.response for c in rt.response.tool_calls]
    assert len(calls) >= 20
    assert all(c.arguments_error is None and isinstance(c.arguments, dict) for c in calls)
    assert {c.kind for c in calls} >= {"function", "server", "mcp"}


def test_gzip_sse_from_llm_anthropic() -> None:
    rt = _find("llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml")
    resp = _response(rt)
    assert rt.framing == "sse" and rt.stream
    calls = resp.tool_calls
    assert [c.name for c in calls] == ["pelican_name_generator"] * 2  # parallel calls, two blocks
    assert len({c.id for c in calls}) == 2 and all(c.arguments == {} for c in calls)
    assert rt.request is not None and rt.request.stream
    assert resp.finish_reason is FinishReason.TOOL_CALL
    assert resp.complete is True


def test_streamed_thinking_keeps_signature() -> None:
    resp = _response(_find("test_stream_events_thinking"))
    reasoning = [p for p in resp.parts if p.kind == "reasoning"]
    assert len(reasoning) == 1 and reasoning[0].text
    assert (reasoning[0].provider_details or {}).get("signature")
    assert resp.parts[-1].kind == "text"


def test_web_search_stream_parts_in_order() -> None:
    resp = _response(_find("llm-anthropic/tests/cassettes/test_anthropic/test_web_search.yaml"))
    kinds = [p.kind for p in resp.parts]
    assert (
        kinds[0] == "tool_call"
        and resp.parts[0].tool_call is not None
        and resp.parts[0].tool_call.kind == "server"
    )
    assert kinds[1] == "other"
    details = resp.parts[1].provider_details or {}
    assert details["type"] == "web_search_tool_result"
    assert details["tool_use_id"] == resp.parts[0].tool_call.id
    cited = [
        p for p in resp.parts if p.kind == "text" and (p.provider_details or {}).get("citations")
    ]
    assert cited, "citations_delta were not collected"


def test_pause_turn_is_paused() -> None:
    paused = [
        rt for _, rt in corpus() if rt.response and rt.response.finish_reason_raw == "pause_turn"
    ]
    assert len(paused) == 2
    assert all(rt.response and rt.response.finish_reason is FinishReason.PAUSED for rt in paused)
    assert any(rt.stream for rt in paused) and any(not rt.stream for rt in paused)


def test_stop_sequence_is_complete() -> None:
    resp = _response(_find("test_prompt_with_prefill_and_stop_sequences"))
    assert resp.finish_reason_raw == "stop_sequence"
    assert resp.finish_reason is FinishReason.COMPLETE


def test_bedrock_invoke_usage_is_inclusive() -> None:
    rt = _find("test_anthropic_cache_bedrock_real_api", 1)
    assert rt.family == "anthropic" and not rt.stream
    req = _request(rt)
    # from the URL: the body has none
    assert req.model == "eu.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert req.params["anthropic_version"] == "bedrock-2023-05-31"
    usage = _response(rt).usage
    assert usage is not None
    # {"input_tokens":3,"cache_creation_input_tokens":1956,"cache_read_input_tokens":9511,"output_tokens":44}  # noqa: E501
    assert usage.input_tokens == 3 + 1956 + 9511
    assert usage.cache_write_tokens == 1956 and usage.cache_read_tokens == 9511
    assert usage.output_tokens == 44 and usage.total_tokens == 3 + 1956 + 9511 + 44
    assert usage.reasoning_tokens is None
    assert usage.raw is not None and usage.raw["input_tokens"] == 3


def test_thinking_tokens_become_reasoning_tokens() -> None:
    with_details = [
        rt
        for _, rt in corpus()
        if rt.response
        and rt.response.usage
        and rt.response.usage.raw
        and isinstance(rt.response.usage.raw.get("output_tokens_details"), dict)
    ]
    assert with_details
    for rt in with_details:
        u = rt.response.usage if rt.response else None
        assert u is not None and u.raw is not None
        assert u.reasoning_tokens == u.raw["output_tokens_details"]["thinking_tokens"]


def test_mid_conversation_system_message() -> None:
    req = _request(_find("test_mid_conversation_system_prompt_kept_mid_history"))
    roles = [m.role for m in req.messages]
    assert roles == ["user", "assistant", "user", "system", "assistant", "user"]
    assert [p.text for p in req.system] == [
        "You are a code reviewer.",
        "From now on, every suggestion must include explicit type annotations.",
    ]
    assert req.history_key == "messages"


def test_request_tool_result_is_paired_by_id_and_named() -> None:
    req = _request(_find("test_mid_conversation_system_prompt_anchor_keeps_tool_pair_intact"))
    call = req.messages[1].parts[0].tool_call
    result = req.messages[2].parts[0].tool_result
    assert call is not None and result is not None
    assert (call.id, call.name, call.arguments) == ("call_1", "style_guide", {})
    assert (result.call_id, result.name, result.content, result.is_error) == (
        "call_1",
        "style_guide",
        "Prefer explicit signatures.",
        False,
    )
    assert req.tool_choice_mode == "auto"
    assert [t.kind for t in req.tools] == ["function"]
    assert req.tools[0].parameters == {"properties": {}, "type": "object"}


def test_request_tool_choice_modes_in_corpus() -> None:
    modes = Counter(
        _request(rt).tool_choice_mode
        for _, rt in corpus()
        if rt.request and rt.request.tool_choice is not None
    )
    assert modes["auto"] > 100 and modes["required"] >= 10
    assert modes["none"] >= 1 and modes["tool:get_weather"] == 1 and modes["tool:final_result"] == 1


def test_request_server_tools_and_block_kinds() -> None:
    kinds = Counter(t.kind for _, rt in corpus() if rt.request for t in rt.request.tools)
    assert (
        kinds["web_search"] >= 19
        and kinds["tool_search_tool_bm25"] >= 30
        and kinds["code_execution"] >= 19
    )
    assert not any(k[-8:].isdigit() for k in kinds)
    parts = Counter(
        p.kind for _, rt in corpus() if rt.request for m in rt.request.messages for p in m.parts
    )
    assert parts["media"] >= 16 and parts["reasoning"] >= 18 and parts["tool_result"] >= 150
    media = {
        p.media_type
        for _, rt in corpus()
        if rt.request
        for m in rt.request.messages
        for p in m.parts
        if p.kind == "media"
    }
    assert "image/png" in media or "image/jpeg" in media


def test_request_params_exclude_structure() -> None:
    req = _request(_find("llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml"))
    assert req.stream is True and req.model
    assert "max_tokens" in req.params
    assert not set(req.params) & {"messages", "system", "tools", "tool_choice", "model", "stream"}


def test_count_tokens_is_not_generate() -> None:
    counts = [rt for _, rt in corpus() if rt.operation == "count_tokens"]
    assert len(counts) == 8
    assert all(rt.request is None for rt in counts)
    err = _find("test_anthropic_count_tokens_error")
    assert (
        err.status == 404
        and err.response
        and err.response.error
        and err.response.error.type == "not_found_error"
    )


def test_corpus_error_bodies() -> None:
    rt = _find("test_anthropic_explicit_effort_xhigh_unsupported_model_errors")
    err = _response(rt).error
    assert err is not None
    assert (err.status, err.type) == (400, "invalid_request_error")
    assert err.message and err.message.startswith(
        "This model does not support effort level 'xhigh'"
    )
    assert err.raw["request_id"] == "req_011Ca7jT9AHpgXgdv8igm4z9"
    assert _response(rt).finish_reason is FinishReason.ERROR


# --- recognition -----------------------------------------------------------------------------

_BODY = {"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
_VERTEX_BODY = {
    "anthropic_version": "vertex-2023-10-16",
    "max_tokens": 10,
    "messages": [{"role": "user", "content": "hi"}],
}
_BEDROCK_BODY = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 10,
    "messages": [{"role": "user", "content": "hi"}],
}
_VERTEX = (
    "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/publishers/"
    "anthropic/models/claude-sonnet-4@20250514"
)
_BEDROCK = (
    "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
    "us.anthropic.claude-sonnet-4-20250514-v1%3A0"
)


@pytest.mark.parametrize(
    ("url", "body", "operation", "stream", "model"),
    [
        ("https://api.anthropic.com/v1/messages", _BODY, "generate", False, None),
        (
            "https://api.anthropic.com/v1/messages?beta=true",
            {**_BODY, "stream": True},
            "generate",
            True,
            None,
        ),
        ("http://localhost:8787/anthropic/v1/messages?beta=true", _BODY, "generate", False, None),
        (
            "https://bedrock-mantle.us-east-1.api.aws/anthropic/v1/messages",
            _BODY,
            "generate",
            False,
            None,
        ),
        (
            "https://api.anthropic.com/v1/messages/count_tokens?beta=true",
            {"model": "m", "messages": []},
            "count_tokens",
            False,
            None,
        ),
        (f"{_VERTEX}:rawPredict", _VERTEX_BODY, "generate", False, "claude-sonnet-4@20250514"),
        (
            f"{_VERTEX}:streamRawPredict",
            {**_VERTEX_BODY, "stream": True},
            "generate",
            True,
            "claude-sonnet-4@20250514",
        ),
        (f"{_VERTEX}:streamRawPredict", _VERTEX_BODY, "generate", True, "claude-sonnet-4@20250514"),
        (
            "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/anthropic/"
            "models/count-tokens:rawPredict",
            {**_BODY, "anthropic_version": "vertex-2023-10-16"},
            "count_tokens",
            False,
            None,
        ),
        (
            f"{_BEDROCK}/invoke",
            _BEDROCK_BODY,
            "generate",
            False,
            "us.anthropic.claude-sonnet-4-20250514-v1:0",
        ),
        (
            f"{_BEDROCK}/invoke-with-response-stream",
            _BEDROCK_BODY,
            "generate",
            True,
            "us.anthropic.claude-sonnet-4-20250514-v1:0",
        ),
    ],
)
def test_recognised(
    url: str, body: dict[str, Any], operation: str, stream: bool, model: str | None
) -> None:
    u = urlsplit(url)
    assert A.recognise("POST", u, body) >= 2
    assert detect("POST", u, body) is not None and detect("POST", u, body).family == "anthropic"  # type: ignore[union-attr]
    assert A.operation("POST", u) == operation
    assert A.is_stream(u, body) is stream
    assert A.model_from_url(u) == model
    if operation == "generate":
        req = A.parse_request(body, u)
        assert req.stream is stream
        assert req.model == (model or body.get("model"))


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("GET", "https://api.anthropic.com/v1/messages", None),
        (
            "POST",
            f"{_BEDROCK}/converse",
            {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
        ),
        ("POST", f"{_BEDROCK}/invoke", {"prompt": "hi", "max_gen_len": 10}),  # Llama on Bedrock
        (
            "POST",
            "https://api.openai.com/v1/threads/thread_1/messages",
            {"role": "user", "content": "hi"},
        ),
        ("POST", "https://api.openai.com/v1/chat/completions", _BODY),
        (
            "POST",
            "https://x-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers/google/"
            "models/g:generateContent",
            {},
        ),
    ],
)
def test_not_recognised(method: str, url: str, body: Any) -> None:
    assert A.recognise(method, urlsplit(url), body) == 0


# --- request shapes the corpus lacks -------------------------------------------------------------


def test_request_blocks_hand_written() -> None:
    body = {
        "model": "claude-x",
        "max_tokens": 2048,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        "tools": [
            {"name": "get_weather", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": "JVBE",
                        },
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    {"type": "text", "text": "Weather?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "boom"},
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/png", "data": ""},
                            },
                        ],
                    },
                    {"type": "brand_new_block", "x": 1},
                ],
            },
        ],
    }
    req = A.parse_request(body, urlsplit("https://api.anthropic.com/v1/messages"))
    assert [p.text for p in req.system] == ["Be brief."]
    assert req.system[0].provider_details == {"cache_control": {"type": "ephemeral"}}
    assert req.tool_choice_mode == "tool:get_weather"
    assert [(t.name, t.kind) for t in req.tools] == [
        ("get_weather", "function"),
        ("web_search", "web_search"),
    ]
    user, assistant, results = req.messages
    assert [(p.kind, p.media_type) for p in user.parts[:2]] == [
        ("media", "application/pdf"),
        ("media", "image"),
    ]
    thinking, redacted, call = assistant.parts
    assert (thinking.kind, thinking.text, thinking.provider_details) == (
        "reasoning",
        "hmm",
        {"signature": "sig=="},
    )
    assert (redacted.kind, redacted.text, redacted.provider_details) == (
        "reasoning",
        None,
        {"redacted": True, "data": "opaque"},
    )
    assert call.tool_call is not None and call.tool_call.arguments == {"city": "Paris"}
    assert call.tool_call.arguments_raw == '{"city":"Paris"}'
    result, unknown = results.parts
    assert result.tool_result is not None
    assert (result.tool_result.name, result.tool_result.is_error) == ("get_weather", True)
    assert result.tool_result.content == "boom[image: image/png]"
    assert unknown.kind == "other" and (unknown.provider_details or {})["block"] == {
        "type": "brand_new_block",
        "x": 1,
    }
    assert req.params == {
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }


@pytest.mark.parametrize(
    ("tc", "mode"),
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "tool", "name": "f"}, "tool:f"),
        ({"type": "future"}, "future"),
        (None, None),
    ],
)
def test_tool_choice_mode(tc: Any, mode: str | None) -> None:
    req = A.parse_request(
        {**_BODY, "tool_choice": tc}, urlsplit("https://api.anthropic.com/v1/messages")
    )
    assert req.tool_choice_mode == mode


# --- non-streamed responses -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        ("end_turn", FinishReason.COMPLETE),
        ("stop_sequence", FinishReason.COMPLETE),
        ("max_tokens", FinishReason.TRUNCATED_LENGTH),
        ("model_context_window_exceeded", FinishReason.TRUNCATED_CONTEXT),
        ("tool_use", FinishReason.TOOL_CALL),
        ("pause_turn", FinishReason.PAUSED),
        ("refusal", FinishReason.REFUSED),
        ("brand_new_reason", FinishReason.OTHER),
        (None, None),
    ],
)
def test_finish_classes(raw: str | None, cls: FinishReason | None) -> None:
    assert finish_class(raw) is cls


def test_refusal_response_adds_a_refusal_part() -> None:
    sd = {"type": "refusal", "category": "cyber", "explanation": "Cannot help with that."}
    resp = A.parse_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "I"}],
            "stop_reason": "refusal",
            "stop_sequence": None,
            "stop_details": sd,
            "usage": {"input_tokens": 5, "output_tokens": 1},
        }
    )
    assert resp.finish_reason is FinishReason.REFUSED
    assert [p.kind for p in resp.parts] == ["text", "refusal"]
    assert resp.parts[1].text == "Cannot help with that."
    assert (resp.provider_details or {})["stop_details"] == sd


def test_usage_not_reported_is_none() -> None:
    u = usage_from({"output_tokens": 3})
    assert u is not None
    assert (
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.total_tokens,
    ) == (
        None,
        3,
        None,
        None,
        None,
    )
    only_input = usage_from({"input_tokens": 7, "output_tokens": 2})
    assert only_input is not None and (
        only_input.input_tokens,
        only_input.cache_read_tokens,
        only_input.total_tokens,
    ) == (7, None, 9)
    assert usage_from(None) is None


def test_error_shaped_200_body() -> None:
    resp = A.parse_response(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    assert resp.error is not None and resp.error.type == "overloaded_error"
    assert resp.finish_reason is FinishReason.ERROR


# --- streams ------------------------------------------------------------------------------------


def test_stream_tool_call_and_usage_overwrite() -> None:
    resp = _sse(
        _start(cache_read_input_tokens=100, cache_creation_input_tokens=20),
        ("ping", {"type": "ping"}),
        _block_start(0, {"type": "text", "text": ""}),
        _delta(0, {"type": "text_delta", "text": "Hel"}),
        _delta(0, {"type": "text_delta", "text": "lo"}),
        _block_stop(0),
        _block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        _delta(1, {"type": "input_json_delta", "partial_json": ""}),
        _delta(1, {"type": "input_json_delta", "partial_json": '{"a": '}),
        _delta(1, {"type": "input_json_delta", "partial_json": "1}"}),
        _block_stop(1),
        ("brand_new_event", {"type": "brand_new_event", "x": 1}),
        # Input/cache counts absent or null here: the message_start values survive.
        _message_delta("tool_use", output_tokens=42, cache_read_input_tokens=None),
        STOP,
    )
    assert resp.complete is True and resp.error is None
    assert resp.text == "Hello"
    [call] = resp.tool_calls
    assert (call.id, call.name, call.arguments, call.arguments_raw) == (
        "toolu_1",
        "f",
        {"a": 1},
        '{"a": 1}',
    )
    assert resp.finish_reason is FinishReason.TOOL_CALL
    assert resp.usage is not None
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.cache_read_tokens) == (
        130,
        42,
        100,
    )
    assert (resp.provider_details or {})["unknown_events"] == ["brand_new_event"]


def test_stream_message_delta_counts_overwrite_start() -> None:
    resp = _sse(
        _start(),
        _message_delta("end_turn", input_tokens=12, cache_read_input_tokens=3, output_tokens=5),
        STOP,
    )
    assert resp.usage is not None
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.total_tokens) == (
        15,
        5,
        20,
    )


def test_truncated_stream_keeps_partial_arguments() -> None:
    resp = _sse(
        _start(),
        _block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        _delta(0, {"type": "input_json_delta", "partial_json": '{"path": "/tm'}),
    )
    assert resp.complete is False
    assert resp.finish_reason is None and resp.finish_reason_raw is None
    [call] = resp.tool_calls
    assert call.arguments is None and call.arguments_error is not None
    assert call.arguments_raw == '{"path": "/tm'
    assert (resp.provider_details or {})["unfinished_blocks"] == [0]


def test_max_tokens_with_invalid_json() -> None:
    resp = _sse(
        _start(),
        _block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        _delta(0, {"type": "input_json_delta", "partial_json": '{"a": [1, 2'}),
        _block_stop(0),
        _message_delta("max_tokens", output_tokens=10),
        STOP,
    )
    assert resp.complete is True
    assert resp.finish_reason is FinishReason.TRUNCATED_LENGTH
    assert resp.tool_calls[0].arguments_error is not None


def test_mid_stream_error_event() -> None:
    resp = _sse(
        _start(),
        _block_start(0, {"type": "text", "text": ""}),
        _delta(0, {"type": "text_delta", "text": "partial"}),
        (
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    )
    assert resp.complete is False
    assert resp.text == "partial"
    assert resp.error is not None and resp.error.in_stream
    assert (resp.error.type, resp.error.message) == ("overloaded_error", "Overloaded")
    assert resp.finish_reason is FinishReason.ERROR


def test_stream_thinking_signature_citations_and_unknown_delta() -> None:
    cite = {"type": "web_search_result_location", "url": "https://x", "cited_text": "c"}
    resp = _sse(
        _start(),
        _block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        _delta(0, {"type": "thinking_delta", "thinking": "let me "}),
        _delta(0, {"type": "thinking_delta", "thinking": "think"}),
        _delta(0, {"type": "signature_delta", "signature": "SIG"}),
        _block_stop(0),
        _block_start(1, {"type": "text", "text": "", "citations": None}),
        _delta(1, {"type": "citations_delta", "citation": cite}),
        _delta(1, {"type": "text_delta", "text": "cited"}),
        _block_stop(1),
        _block_start(2, {"type": "compaction", "content": None}),
        _delta(2, {"type": "compaction_delta", "content": "summary"}),
        _block_stop(2),
        _block_start(3, {"type": "redacted_thinking", "data": "opaque"}),
        _block_stop(3),
        _message_delta("end_turn", output_tokens=9),
        STOP,
    )
    thinking, text, compaction, redacted = resp.parts
    assert (thinking.kind, thinking.text, thinking.provider_details) == (
        "reasoning",
        "let me think",
        {"signature": "SIG"},
    )
    assert text.text == "cited" and text.provider_details == {"citations": [cite]}
    assert (
        compaction.kind == "other"
        and (compaction.provider_details or {})["block"]["content"] == "summary"
    )
    assert redacted.kind == "reasoning" and redacted.text is None
    assert resp.events == 17  # every event, message_start to message_stop


def test_padded_events_and_bare_data_lines() -> None:
    """llm-anthropic's recordings pad the JSON before the closing brace; some gateways drop
    ``event:``."""
    body = (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"m","content":[],'
        '"usage":{"input_tokens":1,"output_tokens":1}}      }\n\ndata: '
        '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}   '
        '}\n\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
        '"text":"ok"}  }\n\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
        '"usage":{"output_tokens":2}}\n\nevent: message_stop\ndata: {"type":"message_stop"     '
        '}\n\n'
    )
    resp = A.reassemble(frame([(None, body.encode())], "text/event-stream"))
    assert (resp.text, resp.complete, resp.finish_reason) == ("ok", True, FinishReason.COMPLETE)


# --- Bedrock invoke-with-response-stream ---------------------------------------------------------


def _aws_frame(headers: dict[str, str], payload: bytes) -> bytes:
    hdr = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
        for k, v in headers.items()
    )
    total = 12 + len(hdr) + len(payload) + 4
    prelude = struct.pack(">II", total, len(hdr))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    msg = prelude + hdr + payload
    return msg + struct.pack(">I", zlib.crc32(msg))


def _chunk(event: dict[str, Any]) -> bytes:
    payload = orjson.dumps({"bytes": base64.b64encode(orjson.dumps(event)).decode(), "p": "abcd"})
    return _aws_frame(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
        payload,
    )


def _bedrock_exchange(frames: bytes) -> Exchange:
    return Exchange(
        method="POST",
        url=f"{_BEDROCK}/invoke-with-response-stream",
        request_body=orjson.dumps(_BEDROCK_BODY),
        status=200,
        response_headers=[("content-type", "application/vnd.amazon.eventstream")],
        response_chunks=[(0.1, frames[:40]), (0.2, frames[40:])],
    )


def test_bedrock_event_stream() -> None:
    events = [
        _start(cache_read_input_tokens=0)[1],
        _block_start(0, {"type": "text", "text": ""})[1],
        _delta(0, {"type": "text_delta", "text": "Hi there"})[1],
        _block_stop(0)[1],
        _message_delta("end_turn", output_tokens=3)[1],
        {
            "type": "message_stop",
            "amazon-bedrock-invocationMetrics": {"inputTokenCount": 10, "outputTokenCount": 3},
        },
    ]
    rt = parse_exchange(_bedrock_exchange(b"".join(_chunk(e) for e in events)))
    assert rt.family == "anthropic" and rt.framing == "aws_eventstream" and rt.stream
    assert not rt.analysis_errors
    resp = _response(rt)
    assert (resp.text, resp.complete, resp.finish_reason) == (
        "Hi there",
        True,
        FinishReason.COMPLETE,
    )
    assert resp.usage is not None and (resp.usage.input_tokens, resp.usage.output_tokens) == (10, 3)
    assert (resp.provider_details or {})["amazon-bedrock-invocationMetrics"][
        "outputTokenCount"
    ] == 3
    assert _request(rt).model == "us.anthropic.claude-sonnet-4-20250514-v1:0"


def test_bedrock_exception_frame() -> None:
    frames = _chunk(_start()[1]) + _aws_frame(
        {
            ":exception-type": "modelStreamErrorException",
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        b'{"message":"Model stream error"}',
    )
    resp = _response(parse_exchange(_bedrock_exchange(frames)))
    assert resp.complete is False
    assert resp.error is not None and resp.error.in_stream
    assert (resp.error.type, resp.error.message) == (
        "modelStreamErrorException",
        "Model stream error",
    )


# --- errors -------------------------------------------------------------------------------------


def test_vertex_wrapped_error() -> None:
    inner = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "messages.3: `tool_use` ids were found without `tool_result` blocks",
        },
    }
    body = [
        {
            "error": {
                "code": 400,
                "message": orjson.dumps(inner).decode(),
                "status": "INVALID_ARGUMENT",
            }
        }
    ]
    err = A.parse_error(body, 400)
    assert (err.status, err.type, err.code) == (400, "invalid_request_error", "INVALID_ARGUMENT")
    assert err.message is not None and err.message.startswith("messages.3: `tool_use` ids")


def test_plain_google_and_bedrock_errors() -> None:
    g = A.parse_error(
        {"error": {"code": 404, "message": "Publisher model not found", "status": "NOT_FOUND"}}, 404
    )
    assert (g.type, g.message) == ("NOT_FOUND", "Publisher model not found")
    b = A.parse_error({"message": "The provided model identifier is invalid."}, 400)
    assert b.message == "The provided model identifier is invalid."
    text = A.parse_error("<html>502 Bad Gateway</html>", 502)
    assert text.message == "<html>502 Bad Gateway</html>"


def test_spend_limit_error_code() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "limit",
            "details": {"error_code": "enforced_spend_limit_reached"},
        },
        "request_id": "req_1",
    }
    err = A.parse_error(body, 429)
    assert (err.type, err.code) == ("rate_limit_error", "enforced_spend_limit_reached")


def test_error_string_body_from_stream_framing() -> None:
    """An error body framed as an SSE event reaches parse_error as a JSON string."""
    err = A.parse_error(
        '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', 529
    )
    assert (err.status, err.type, err.message) == (529, "overloaded_error", "Overloaded")
