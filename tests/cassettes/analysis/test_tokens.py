"""Token accounting and cost per turn (cassettes.analysis._tokens), on real wire formats.

Costs are hand-computed from the list prices genai-prices 0.2.x carries for the dates used here
(gpt-4o: $2.50 / $1.25 cached / $10 per MTok; claude-sonnet-4-5: $3 / $0.30 read / $3.75 write
5m / $6 write 1h / $15; gemini-2.5-pro: $1.25 / $0.125 cached / $10).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from looptap.cassettes.analysis import RunAnalysis, TokenCount, analyse, apportion, estimate_text
from looptap.cassettes.wire import Exchange

WHEN = datetime(2025, 11, 3, 12, 0, tzinfo=UTC).timestamp()
M = Decimal(1_000_000)

OPENAI = "https://api.openai.com/v1/chat/completions"
RESPONSES = "https://api.openai.com/v1/responses"
ANTHROPIC = "https://api.anthropic.com/v1/messages"
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"
BEDROCK = (
    "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0/converse"
)

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"}},
    "required": ["city"],
    "additionalProperties": False,
}
SYSTEM = (
    "You are a helpful travel assistant. Always check the weather before recommending activities."
)
LONG_RESULT = "Forecast for Paris: " + "sunny, 21C, light wind from the west; " * 100


def _ex(
    url: str, req: dict[str, Any], resp: Any, *, status: int = 200, stream: bool = False
) -> Exchange:
    if stream:
        chunks = [(0.1 * (i + 1), c) for i, c in enumerate(resp)]
        ctype = "text/event-stream"
    else:
        chunks = [(0.1, orjson.dumps(resp))]
        ctype = "application/json"
    return Exchange(
        "POST",
        url,
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(req),
        status=status,
        response_headers=[("content-type", ctype)],
        response_chunks=chunks,
        started=WHEN,
    )


def _run(*exs: Exchange) -> RunAnalysis:
    for i, ex in enumerate(exs):
        ex.seq = i
    return analyse(list(exs))


def _tok(ra: RunAnalysis, seq: int) -> TokenCount:
    return ra.turns[seq].tokens


def _seg_sum(tv: TokenCount) -> int:
    s = tv.segments
    assert s is not None
    return s.system + s.tools + s.user + s.assistant + s.tool_results


# --- OpenAI Chat ---------------------------------------------------------------------------------

_OAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather",
            "parameters": WEATHER_SCHEMA,
        },
    }
]
_OAI_H0 = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What should I do in Paris today?"},
]
_OAI_CALL = {
    "id": "call_w1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}
_OAI_H1 = [
    *_OAI_H0,
    {"role": "assistant", "content": None, "tool_calls": [_OAI_CALL]},
    {"role": "tool", "tool_call_id": "call_w1", "content": LONG_RESULT},
]


def _oai_resp(
    message: dict[str, Any], finish: str, usage: dict[str, Any], model: str = "gpt-4o-2024-08-06"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1762171200,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": usage,
        "service_tier": "default",
        "system_fingerprint": "fp_1",
    }


def _oai_usage(prompt: int, cached: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _oai_conversation(
    model0: str = "gpt-4o", served0: str = "gpt-4o-2024-08-06", url: str = OPENAI
) -> list[Exchange]:
    t0 = _ex(
        url,
        {"model": model0, "messages": _OAI_H0, "tools": _OAI_TOOLS},
        _oai_resp(
            {"content": None, "tool_calls": [_OAI_CALL]},
            "tool_calls",
            _oai_usage(1180, 0, 18),
            model=served0,
        ),
    )
    t1 = _ex(
        url,
        {"model": "gpt-4o", "messages": _OAI_H1, "tools": _OAI_TOOLS},
        _oai_resp(
            {"content": "Sunny and 21C: walk along the Seine."}, "stop", _oai_usage(2006, 1152, 300)
        ),
    )
    return [t0, t1]


def test_openai_cached_tokens_are_a_subset_of_prompt_tokens() -> None:
    ra = _run(*_oai_conversation())
    tv = _tok(ra, 1)
    assert tv.source == "reported"
    assert (tv.input, tv.cache_read, tv.input_uncached, tv.output) == (2006, 1152, 854, 300)
    # 854 uncached at $2.50, 1152 cached at $1.25, 300 out at $10 — not 2006 + 1152 input.
    expected = (854 * Decimal("2.5") + 1152 * Decimal("1.25") + 300 * Decimal(10)) / M
    assert tv.cost == expected
    assert tv.price_source == "genai-prices 0.2.3: openai/gpt-4o"
    first = _tok(ra, 0).cost
    assert first == (1180 * Decimal("2.5") + 18 * Decimal(10)) / M
    assert tv.cumulative_cost == first + expected
    assert tv.cost_complete is True
    assert (tv.cumulative_input, tv.cumulative_output) == (1180 + 2006, 18 + 300)


def test_segments_add_up_to_the_reported_input_and_new_is_what_was_appended() -> None:
    ra = _run(*_oai_conversation())
    t0, t1 = _tok(ra, 0), _tok(ra, 1)
    assert t0.segments is not None and t1.segments is not None
    assert _seg_sum(t0) == 1180 and _seg_sum(t1) == 2006
    # First turn: everything is new; no history, no results.
    assert t0.segments.new == 1180
    assert t0.segments.assistant == 0 and t0.segments.tool_results == 0
    assert t0.segments.system > 0 and t0.segments.tools > 0 and t0.segments.user > 0
    # Second turn: the long tool result dominates and is the bulk of what is new.
    s = t1.segments
    assert s.tool_results > s.system + s.tools + s.user + s.assistant
    assert s.assistant > 0
    assert s.tool_results <= s.new < 2006
    assert s.new < s.tool_results + s.assistant + 20


def test_unknown_model_costs_none_and_the_cumulative_says_it_is_incomplete() -> None:
    ra = _run(*_oai_conversation(model0="gpt-imaginary-9", served0="gpt-imaginary-9"))
    t0, t1 = _tok(ra, 0), _tok(ra, 1)
    assert ra.turns[1].conversation == ra.turns[0].conversation
    assert t0.source == "reported" and t0.input == 1180
    assert t0.cost is None  # unknown, never 0
    assert t0.price_source is not None and "gpt-imaginary-9" in t0.price_source
    assert t0.cumulative_cost is None and t0.cost_complete is None
    assert t1.cost is not None and t1.cumulative_cost == t1.cost
    assert t1.cost_complete is False


def test_served_model_is_priced_not_the_requested_one() -> None:
    t0 = _ex(
        OPENAI,
        {"model": "gpt-4o", "messages": _OAI_H0},
        _oai_resp(
            {"content": "Visit the Louvre."},
            "stop",
            _oai_usage(1000, 0, 100),
            model="gpt-4o-mini-2024-07-18",
        ),
    )
    tv = _tok(_run(t0), 0)
    assert tv.price_source == "genai-prices 0.2.3: openai/gpt-4o-mini"
    assert tv.cost == (1000 * Decimal("0.15") + 100 * Decimal("0.6")) / M


def test_host_genai_prices_does_not_know_gives_no_price_for_openai_formats() -> None:
    local = "http://localhost:11434/v1/chat/completions"
    t0 = _ex(
        local,
        {"model": "qwen3:0.6b", "messages": _OAI_H0},
        _oai_resp(
            {"content": "Visit the Louvre."}, "stop", _oai_usage(40, 0, 8), model="qwen3:0.6b"
        ),
    )
    tv = _tok(_run(t0), 0)
    assert tv.source == "reported" and tv.input == 40
    assert tv.cost is None and tv.cumulative_cost is None
    assert (
        tv.price_source is not None
        and "localhost:11434" in tv.price_source
        and "qwen3:0.6b" in tv.price_source
    )
    assert not tv.price_estimated


def test_a_known_model_at_an_unknown_host_is_priced_by_name_and_marked_estimated() -> None:
    """Issue 16: an OpenAI call through a local upstream said "cost unknown" while an Anthropic
    call on the same host was priced. The model's list price by its name, marked estimated."""
    local = "http://127.0.0.1:8470/v1/chat/completions"
    t0 = _ex(
        local,
        {"model": "gpt-4o-mini", "messages": _OAI_H0},
        _oai_resp(
            {"content": "Visit the Louvre."},
            "stop",
            _oai_usage(1000, 0, 100),
            model="gpt-4o-mini-2024-07-18",
        ),
    )
    tv = _tok(_run(t0), 0)
    assert tv.cost == (1000 * Decimal("0.15") + 100 * Decimal("0.6")) / M
    assert tv.price_estimated and tv.price_source is not None
    assert (
        tv.price_source.startswith("estimated:")
        and "openai/gpt-4o-mini" in tv.price_source
        and "127.0.0.1:8470" in tv.price_source
    )
    # at the provider's own host the same call is a plain price
    known = _tok(
        _run(
            _ex(
                "https://api.openai.com/v1/chat/completions",
                {"model": "gpt-4o-mini", "messages": _OAI_H0},
                _oai_resp(
                    {"content": "Visit the Louvre."},
                    "stop",
                    _oai_usage(1000, 0, 100),
                    model="gpt-4o-mini-2024-07-18",
                ),
            )
        ),
        0,
    )
    assert known.cost == tv.cost and not known.price_estimated


def _sse(*objs: Any) -> list[bytes]:
    out = [b"data: " + orjson.dumps(o) + b"\n\n" for o in objs]
    return [*out, b"data: [DONE]\n\n"]


def _oai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1762171200,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_stream_without_include_usage_is_estimated_from_text_size() -> None:
    answer = "Sunny and 21C in Paris today: walk along the Seine, then a picnic in the Tuileries."
    t0 = _ex(
        OPENAI,
        {"model": "gpt-4o", "messages": _OAI_H0, "stream": True},
        _sse(
            _oai_chunk({"role": "assistant", "content": ""}),
            _oai_chunk({"content": answer}),
            _oai_chunk({}, "stop"),
        ),
        stream=True,
    )
    tv = _tok(_run(t0), 0)
    assert tv.source == "estimated"
    assert tv.output == estimate_text(answer)
    assert tv.cache_read is None and tv.input_uncached is None
    assert tv.input == _seg_sum(tv)
    # system + user text, plus the per-message template overhead.
    assert (
        tv.input
        == estimate_text(SYSTEM) + estimate_text("What should I do in Paris today?") + 2 * 4
    )
    assert tv.cost == (tv.input * Decimal("2.5") + tv.output * Decimal(10)) / M
    assert tv.price_source is not None and tv.price_source.endswith("(on estimated tokens)")
    # a price of estimated counts is an estimate (issue 54: it read without its ~)
    assert tv.price_estimated and _tok(_run(t0), 0).cumulative_estimated


def test_the_same_stream_with_include_usage_is_reported() -> None:
    usage_chunk = {**_oai_chunk({}), "choices": [], "usage": _oai_usage(1180, 0, 25)}
    t0 = _ex(
        OPENAI,
        {
            "model": "gpt-4o",
            "messages": _OAI_H0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        _sse(
            _oai_chunk({"role": "assistant", "content": "Walk along the Seine."}),
            _oai_chunk({}, "stop"),
            usage_chunk,
        ),
        stream=True,
    )
    tv = _tok(_run(t0), 0)
    assert tv.source == "reported" and (tv.input, tv.output) == (1180, 25)


def test_http_error_is_not_priced_and_does_not_make_the_cumulative_incomplete() -> None:
    t0, t1 = _oai_conversation()
    err = {
        "error": {
            "message": "Rate limit reached for gpt-4o",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    retry = _ex(OPENAI, orjson.loads(t1.request_body), err, status=429)
    ra = _run(t0, retry, t1)
    tv = _tok(ra, 1)
    assert tv.source == "missing"
    assert tv.input is None and tv.cost is None
    assert tv.price_source is not None and "HTTP 429" in tv.price_source
    assert tv.segments is not None and tv.segments.tool_results > 0  # what was sent, estimated
    assert tv.cumulative_cost == _tok(ra, 0).cost and tv.cost_complete is True
    last = _tok(ra, 2)
    assert last.cost_complete is True and last.cumulative_cost == _tok(ra, 0).cost + last.cost  # type: ignore[operator]


# --- Anthropic -----------------------------------------------------------------------------------

_ANT_TOOLS = [
    {"name": "get_weather", "description": "Current weather", "input_schema": WEATHER_SCHEMA}
]
_ANT_SYSTEM = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
_ANT_H0 = [
    {"role": "user", "content": [{"type": "text", "text": "What should I do in Paris today?"}]}
]
_ANT_USE = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
_ANT_H1 = [
    *_ANT_H0,
    {"role": "assistant", "content": [_ANT_USE]},
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": LONG_RESULT}],
    },
]


def _ant_resp(content: list[dict[str, Any]], stop: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def _ant_usage(uncached: int, write: int, read: int, out: int, write_1h: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": write - write_1h,
            "ephemeral_1h_input_tokens": write_1h,
        },
        "output_tokens": out,
        "service_tier": "standard",
    }


def _ant_conversation(url: str = ANTHROPIC, write_1h: int = 0) -> list[Exchange]:
    base = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": _ANT_SYSTEM,
        "tools": _ANT_TOOLS,
    }
    t0 = _ex(
        url,
        {**base, "messages": _ANT_H0},
        _ant_resp([_ANT_USE], "tool_use", _ant_usage(12, 1500, 0, 80, write_1h)),
    )
    t1 = _ex(
        url,
        {**base, "messages": _ANT_H1},
        _ant_resp(
            [{"type": "text", "text": "Sunny: walk along the Seine."}],
            "end_turn",
            _ant_usage(1040, 0, 1500, 40),
        ),
    )
    return [t0, t1]


def test_anthropic_input_excludes_cache_and_is_made_inclusive() -> None:
    ra = _run(*_ant_conversation())
    t0, t1 = _tok(ra, 0), _tok(ra, 1)
    assert (t0.input, t0.input_uncached, t0.cache_write, t0.cache_read, t0.output) == (
        1512,
        12,
        1500,
        0,
        80,
    )
    assert (t1.input, t1.input_uncached, t1.cache_write, t1.cache_read, t1.output) == (
        2540,
        1040,
        0,
        1500,
        40,
    )
    # Cache writes at $3.75, reads at $0.30, uncached at $3, output at $15.
    c0 = (12 * Decimal(3) + 1500 * Decimal("3.75") + 80 * Decimal(15)) / M
    c1 = (1040 * Decimal(3) + 1500 * Decimal("0.3") + 40 * Decimal(15)) / M
    assert (t0.cost, t1.cost) == (c0, c1)
    assert t1.cumulative_cost == c0 + c1 and t1.cost_complete is True
    assert t1.price_source == "genai-prices 0.2.3: anthropic/claude-sonnet-4-5"
    assert _seg_sum(t0) == 1512 and _seg_sum(t1) == 2540
    assert t1.segments is not None and t1.segments.tool_results > t1.segments.user


def test_anthropic_one_hour_cache_writes_are_priced_apart() -> None:
    t0 = _tok(_run(*_ant_conversation(write_1h=1000)), 0)
    assert (
        t0.cost
        == (12 * Decimal(3) + 500 * Decimal("3.75") + 1000 * Decimal(6) + 80 * Decimal(15)) / M
    )


def test_anthropic_format_behind_an_unknown_gateway_is_priced_as_anthropic() -> None:
    t0 = _tok(_run(*_ant_conversation(url="http://localhost:8787/anthropic/v1/messages")), 0)
    assert t0.cost == (12 * Decimal(3) + 1500 * Decimal("3.75") + 80 * Decimal(15)) / M
    assert (
        t0.price_source is not None
        and "localhost:8787" in t0.price_source
        and "anthropic/claude-sonnet-4-5" in t0.price_source
    )
    # the list price at a host that may charge otherwise: an estimate, as for an OpenAI-format
    # host (issue 54: it read $… with price_estimated false beside the OpenAI run's ~$…)
    assert t0.price_estimated and t0.price_source.startswith("estimated:")


# --- Bedrock Converse (input excludes cache, like Anthropic) --------------------------------------


def test_bedrock_converse_cache_reads_are_added_to_input() -> None:
    req = {
        "system": [{"text": SYSTEM}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [{"text": "What should I do in Paris today?"}]}],
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "get_weather",
                        "description": "Current weather",
                        "inputSchema": {"json": WEATHER_SCHEMA},
                    }
                }
            ]
        },
        "inferenceConfig": {"maxTokens": 1024},
    }
    resp = {
        "output": {
            "message": {"role": "assistant", "content": [{"text": "Walk along the Seine."}]}
        },
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 433,
            "outputTokens": 16,
            "totalTokens": 3201,
            "cacheReadInputTokens": 2752,
            "cacheWriteInputTokens": 0,
        },
        "metrics": {"latencyMs": 812},
    }
    tv = _tok(_run(_ex(BEDROCK, req, resp)), 0)
    assert (tv.input, tv.input_uncached, tv.cache_read, tv.output) == (3185, 433, 2752, 16)
    # AWS regional list price for claude-sonnet-4-5: $3.30 / $0.33 cache read / $16.50.
    assert tv.cost == (433 * Decimal("3.3") + 2752 * Decimal("0.33") + 16 * Decimal("16.5")) / M
    assert tv.price_source is not None and tv.price_source.startswith("genai-prices 0.2.3: aws/")


# --- Gemini --------------------------------------------------------------------------------------


def test_gemini_cached_content_and_thoughts_and_resource_model_name() -> None:
    req = {
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": [{"role": "user", "parts": [{"text": "What should I do in Paris today?"}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": False}},
    }
    resp = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "Walk along the Seine."}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 345,
            "cachedContentTokenCount": 230,
            "candidatesTokenCount": 37,
            "thoughtsTokenCount": 275,
            "totalTokenCount": 657,
        },
        "modelVersion": "models/gemini-2.5-pro",
        "responseId": "abc",
    }
    tv = _tok(_run(_ex(GEMINI, req, resp)), 0)
    assert (tv.input, tv.cache_read, tv.input_uncached, tv.output, tv.reasoning) == (
        345,
        230,
        115,
        312,
        275,
    )
    assert tv.price_source == "genai-prices 0.2.3: google/gemini-2.5-pro"
    assert tv.cost == (115 * Decimal("1.25") + 230 * Decimal("0.125") + 312 * Decimal(10)) / M


# --- OpenAI Responses with previous_response_id --------------------------------------------------


def test_previous_response_id_history_counts_as_history_not_new() -> None:
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather",
            "parameters": WEATHER_SCHEMA,
        }
    ]
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_w1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
        "status": "completed",
    }

    def resp(
        rid: str, output: list[dict[str, Any]], inp: int, cached: int, out: int
    ) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "response",
            "status": "completed",
            "model": "gpt-4o-2024-08-06",
            "output": output,
            "usage": {
                "input_tokens": inp,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": inp + out,
            },
        }

    t0 = _ex(
        RESPONSES,
        {
            "model": "gpt-4o",
            "instructions": SYSTEM,
            "input": "What should I do in Paris today? " * 20,
            "tools": tools,
        },
        resp("resp_1", [call], 420, 0, 18),
    )
    t1 = _ex(
        RESPONSES,
        {
            "model": "gpt-4o",
            "instructions": SYSTEM,
            "previous_response_id": "resp_1",
            "input": [
                {"type": "function_call_output", "call_id": "call_w1", "output": "Sunny, 21C."}
            ],
            "tools": tools,
        },
        resp(
            "resp_2",
            [
                {
                    "type": "message",
                    "id": "msg_2",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": "Walk along the Seine.", "annotations": []}
                    ],
                }
            ],
            460,
            384,
            12,
        ),
    )
    ra = _run(t0, t1)
    assert ra.turns[1].conversation == ra.turns[0].conversation
    s = _tok(ra, 1).segments
    assert s is not None and _seg_sum(_tok(ra, 1)) == 460
    # The stored history (user question, the call) is counted though the request does not carry it.
    assert s.user > s.tool_results > 0 and s.assistant > 0
    assert 0 < s.new <= s.tool_results + 4


# --- the estimator and the split ---------------------------------------------------------------


def test_incremental_history_estimates_match_a_from_scratch_measurement() -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    exs: list[Exchange] = []
    for i in range(25):
        history.append({"role": "user", "content": f"Question {i}: " + "tell me more " * (i + 1)})
        answer = f"Answer {i}: " + "details " * (3 * i + 1)
        exs.append(
            _ex(
                OPENAI,
                {"model": "gpt-4o", "messages": list(history)},
                _oai_resp({"content": answer}, "stop", _oai_usage(100 + 50 * i, 0, 10)),
            )
        )
        history.append({"role": "assistant", "content": answer})
    ra = _run(*exs)
    assert len(ra.conversations) == 1
    last = _tok(ra, 24)
    alone = _tok(
        _run(
            _ex(
                OPENAI,
                orjson.loads(exs[24].request_body),
                orjson.loads(exs[24].response_chunks[0][1]),
            )
        ),
        0,
    )
    assert last.segments is not None and alone.segments is not None
    assert last.segments.model_dump(exclude={"new"}) == alone.segments.model_dump(exclude={"new"})
    assert alone.segments.new == alone.input and last.segments.new < last.input  # type: ignore[operator]
    assert last.cumulative_input == sum(100 + 50 * i for i in range(25))


def test_estimate_text_counts_utf8_bytes() -> None:
    assert estimate_text("") == 0
    assert estimate_text("abcd") == 1
    assert estimate_text("abcde") == 2
    assert estimate_text("日本語") == 3  # 9 bytes


@pytest.mark.parametrize(
    ("weights", "total", "expected"),
    [
        ([1, 1, 1], 10, [4, 3, 3]),
        ([0, 0, 0], 7, [7, 0, 0]),
        ([5, 0, 5], 3, [2, 0, 1]),
        ([3, 1], 0, [0, 0]),
    ],
)
def test_apportion_examples(weights: list[int], total: int, expected: list[int]) -> None:
    assert apportion(weights, total) == expected


@given(
    st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=10**7),
)
def test_apportion_preserves_the_total_and_stays_within_one_of_the_quota(
    weights: list[int], total: int
) -> None:
    out = apportion(weights, total)
    assert sum(out) == total and all(x >= 0 for x in out)
    s = sum(weights)
    if s:
        for w, x in zip(weights, out, strict=True):
            assert abs(x - w * total / s) < 1


def test_failed_requests_chained_to_an_answer_the_server_never_gave_are_measured_not_a_crash() -> (
    None
):
    """A Responses agent forked with a recorded ``previous_response_id`` sent live (issue 42): each
    attempt a 400 ``previous_response_not_found``, linked to the one before as a retry, not as
    the answer it continues; the run is analysed (``looptap run``'s summary died on it)."""
    err = orjson.dumps(
        {
            "error": {
                "message": "Previous response with id 'resp_s0003' not found.",
                "type": "invalid_request_error",
                "param": "previous_response_id",
                "code": "previous_response_not_found",
            }
        }
    )
    exs = []
    for i, prev in enumerate(["resp_s0003", "resp_s0011", "resp_s0019"]):
        body = {
            "model": "gpt-4o-mini",
            "instructions": "Use the weather tool.",
            "previous_response_id": prev,
            "input": [{"type": "function_call_output", "call_id": f"call_{i}", "output": "sunny"}],
            "tools": [
                {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
            ],
        }
        exs.append(
            Exchange(
                "POST",
                "https://api.openai.com/v1/responses",
                [("content-type", "application/json")],
                orjson.dumps(body),
                status=400,
                response_headers=[("content-type", "application/json")],
                response_chunks=[(0.0, err)],
                seq=i,
            )
        )
    run = analyse(exs)
    turns = [t for c in run.conversations for t in c.turns]
    assert len(turns) == 3
