"""Bedrock Converse adapter: the real recordings first, hand-built event-stream frames for the
rest."""

from __future__ import annotations

import glob
import struct
import zlib
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from real_corpus import CORPUS, corpus_exchanges, corpus_files, rel

from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.providers import detect
from looptap.cassettes.providers.bedrock import BedrockConverse
from looptap.cassettes.wire import Exchange, frame, parse_aws_eventstream

A = BedrockConverse()


@cache
def _exchanges() -> tuple[tuple[str, int, Exchange, RoundTrip], ...]:
    out = []
    for path in corpus_files():
        if b"bedrock" not in path.read_bytes():
            continue
        for p, i, ex in corpus_exchanges(glob.escape(str(path.relative_to(CORPUS)))):
            out.append((rel(p), i, ex, parse_exchange(ex)))
    return tuple(out)


def _ours() -> list[tuple[str, int, Exchange, RoundTrip]]:
    return [t for t in _exchanges() if t[3].family == "bedrock"]


def _one(name: str, index: int = 0) -> RoundTrip:
    return next(rt for r, i, _, rt in _exchanges() if r.endswith(name) and i == index)


def _frame(event: str, payload: dict[str, Any], message_type: str = "event") -> bytes:
    """One AWS event-stream frame with string headers and CRCs."""
    kind = ":exception-type" if message_type == "exception" else ":event-type"
    headers = b""
    for name, value in (
        (kind, event),
        (":content-type", "application/json"),
        (":message-type", message_type),
    ):
        headers += (
            bytes([len(name)])
            + name.encode()
            + b"\x07"
            + struct.pack(">H", len(value))
            + value.encode()
        )
    body = orjson.dumps(payload)
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    msg = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return msg + struct.pack(">I", zlib.crc32(msg))


def _stream(*frames: bytes) -> Any:
    return A.reassemble(parse_aws_eventstream([(None, b"".join(frames))]))


_START = _frame("messageStart", {"role": "assistant"})
_TEXT = [
    _frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": t}})
    for t in ("Hel", "lo")
]
_TOOL = [
    _frame("contentBlockStop", {"contentBlockIndex": 0}),
    _frame(
        "contentBlockStart",
        {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tu_1", "name": "f"}}},
    ),
    _frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"a"'}}}),
    _frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": ":1}"}}}),
    _frame("contentBlockStop", {"contentBlockIndex": 1}),
]
_STOP = _frame("messageStop", {"stopReason": "tool_use"})
_META = _frame(
    "metadata",
    {
        "usage": {
            "inputTokens": 5,
            "outputTokens": 7,
            "totalTokens": 112,
            "cacheReadInputTokens": 100,
        },
        "metrics": {"latencyMs": 42},
    },
)


# --- corpus ------------------------------------------------------------------------------------


def test_corpus_parses_without_analysis_errors() -> None:
    ours = _ours()
    assert len(ours) > 190
    # One recording stores a cut request body (its closing brace is missing); roundtrip labels it,
    # the response still parses.
    bad = [(r, i, rt.analysis_errors) for r, i, _, rt in ours if rt.analysis_errors]
    assert [(r.rsplit("/", 1)[-1], i) for r, i, _ in bad] == [
        ("test_bedrock_model_other_parameters.yaml", 0)
    ]
    assert all(e.startswith("request body is not valid JSON") for _, _, errs in bad for e in errs)


def test_corpus_operations_and_streams() -> None:
    kinds = {(rt.operation, rt.stream, rt.framing) for *_, rt in _ours()}
    assert ("generate", True, "aws_eventstream") in kinds
    assert ("generate", False, "json") in kinds
    assert ("count_tokens", False, "json") in kinds
    for r, i, ex, rt in _ours():
        if rt.operation != "generate" or (ex.status or 0) >= 400:
            continue
        resp = rt.response
        assert resp is not None and resp.complete is True, (r, i)
        assert resp.finish_reason_raw in ("end_turn", "tool_use", "max_tokens"), (r, i)
        assert resp.usage is not None and resp.usage.total_tokens is not None, (r, i)
        if resp.finish_reason is FinishReason.TOOL_CALL:
            assert resp.tool_calls and all(c.id and c.name for c in resp.tool_calls), (r, i)


def test_invoke_is_not_ours() -> None:
    invokes = [rt.family for _, _, ex, rt in _exchanges() if "/invoke" in ex.url]
    assert invokes and "bedrock" not in invokes
    assert (
        A.recognise(
            "POST", urlsplit("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke"), {}
        )
        == 0
    )


def test_model_from_url_is_decoded() -> None:
    rt = _one("test_bedrock/test_bedrock_inference_profile_converse.yaml")
    assert rt.request is not None
    assert (
        rt.request.model
        == "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/mi1dadi0g15f"
    )
    gw = _one("test_gateway/test_gateway_provider_with_bedrock.yaml")
    assert (
        gw.family == "bedrock"
        and gw.request is not None
        and gw.request.model == "amazon.nova-micro-v1:0"
    )


def test_cached_usage_is_made_inclusive() -> None:
    # Bedrock's inputTokens excludes cache reads and writes: totalTokens = input + output + both.
    resp = _one("test_bedrock/test_bedrock_cache_write_and_read.yaml", 1).response
    assert resp is not None and resp.usage is not None
    u = resp.usage
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens) == (
        1324,
        1322,
        0,
        5,
    )
    for *_, rt in _ours():
        u2 = rt.response.usage if rt.response else None
        if (
            u2
            and u2.total_tokens is not None
            and u2.input_tokens is not None
            and u2.output_tokens is not None
        ):
            assert u2.input_tokens + u2.output_tokens == u2.total_tokens


def test_tool_round_trip_in_stream() -> None:
    first = _one("test_bedrock/test_bedrock_model_iter_stream.yaml", 0)
    resp = first.response
    assert resp is not None and resp.complete and resp.finish_reason is FinishReason.TOOL_CALL
    (call,) = resp.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
        "get_temperature",
        {"city": "Paris"},
    )
    assert resp.text.startswith("<thinking>") and resp.events == 26
    second = _one("test_bedrock/test_bedrock_model_iter_stream.yaml", 1).request
    assert second is not None and second.history_key == "messages"
    assert [p.text for p in second.system] == ["You are a helpful chatbot."]
    result = second.messages[2].parts[0].tool_result
    assert result is not None and (result.call_id, result.content, result.is_error) == (
        "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
        "30°C",
        False,
    )
    assert second.params["topP"] == 0.5
    assert [t.name for t in second.tools] == ["get_capital", "get_temperature"]


def test_reasoning_stream_keeps_signature_and_redacted_content() -> None:
    resp = _one("test_bedrock/test_bedrock_model_thinking_part_stream.yaml").response
    assert resp is not None and [p.kind for p in resp.parts] == ["reasoning", "text"]
    assert (
        resp.parts[0].text
        and resp.parts[0].provider_details
        and "signature" in resp.parts[0].provider_details
    )
    red = _one("test_bedrock/test_bedrock_model_thinking_part_redacted_stream.yaml").response
    assert (
        red is not None
        and red.parts[0].kind == "reasoning"
        and red.parts[0].provider_details
        and "redacted" in red.parts[0].provider_details
    )


def test_server_tool_use_and_result() -> None:
    resp = _one("test_bedrock/test_bedrock_model_code_execution_tool_stream.yaml").response
    assert resp is not None
    assert [(p.kind, p.tool_call.kind if p.tool_call else None) for p in resp.parts] == [
        ("tool_call", "server"),
        ("tool_result", None),
        ("tool_call", "function"),
    ]
    tr = resp.parts[1].tool_result
    assert tr is not None and "7006652" in tr.content


def test_http_error() -> None:
    resp = _one("test_bedrock/test_bedrock_streaming_error.yaml").response
    assert resp is not None and resp.error is not None
    assert (resp.error.status, resp.error.message) == (
        400,
        "The provided model identifier is invalid.",
    )


# --- recognition ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "operation", "stream", "model"),
    [
        (
            "https://bedrock-runtime.us-east-1.amazonaws.com/"
            "model/us.amazon.nova-micro-v1%3A0/converse",
            "generate",
            False,
            "us.amazon.nova-micro-v1:0",
        ),
        (
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse-stream",
            "generate",
            True,
            "m",
        ),
        (
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/count-tokens",
            "count_tokens",
            False,
            "m",
        ),
        (
            "http://localhost:8787/bedrock/model/amazon.nova-micro-v1%3A0/converse",
            "generate",
            False,
            "amazon.nova-micro-v1:0",
        ),
    ],
)
def test_recognise(url: str, operation: str, stream: bool, model: str) -> None:
    u = urlsplit(url)
    assert A.recognise("POST", u, {"messages": []}) > 0
    assert detect("POST", u, {"messages": []}) is not None
    assert (A.operation("POST", u), A.is_stream(u, None), A.model_from_url(u)) == (
        operation,
        stream,
        model,
    )


# --- request and response (hand-written) ------------------------------------------------------


def test_request_blocks() -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "hi"},
                    {"image": {"format": "png", "source": {"bytes": "AA"}}},
                    {"document": {"format": "pdf", "name": "d"}},
                    {"cachePoint": {"type": "default"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "sig"}}},
                    {"toolUse": {"toolUseId": "t1", "name": "f", "input": {"a": 1}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "t1",
                            "content": [{"json": {"ok": True}}],
                            "status": "error",
                        }
                    },
                    {"hologram": {}},
                ],
            },
        ],
        "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}],
        "toolConfig": {
            "tools": [
                {"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}},
                {"cachePoint": {"type": "default"}},
            ],
            "toolChoice": {"tool": {"name": "f"}},
        },
        "inferenceConfig": {"maxTokens": 10},
        "additionalModelRequestFields": {"thinking": {"type": "enabled"}},
    }
    req = A.parse_request(
        body, urlsplit("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse")
    )
    assert [p.kind for p in req.messages[0].parts] == ["text", "media", "media", "other"]
    assert [p.media_type for p in req.messages[0].parts[1:3]] == ["image/png", "application/pdf"]
    reasoning, call = req.messages[1].parts
    assert reasoning.text == "hm" and reasoning.provider_details == {"signature": "sig"}
    assert call.tool_call is not None and (
        call.tool_call.id,
        call.tool_call.arguments,
        call.tool_call.arguments_raw,
    ) == ("t1", {"a": 1}, '{"a":1}')
    result = req.messages[2].parts[0].tool_result
    assert result is not None and (result.call_id, result.content, result.is_error) == (
        "t1",
        '{"ok":true}',
        True,
    )
    assert req.messages[2].parts[1].kind == "other"
    assert [p.kind for p in req.system] == ["text", "other"]
    assert [t.name for t in req.tools] == ["f"] and req.tools[0].parameters == {"type": "object"}
    assert req.tool_choice_mode == "tool:f" and req.model == "m" and req.stream is False
    assert req.params == {
        "maxTokens": 10,
        "additionalModelRequestFields": {"thinking": {"type": "enabled"}},
    }


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        ("end_turn", FinishReason.COMPLETE),
        ("stop_sequence", FinishReason.COMPLETE),
        ("tool_use", FinishReason.TOOL_CALL),
        ("max_tokens", FinishReason.TRUNCATED_LENGTH),
        ("guardrail_intervened", FinishReason.FILTERED),
        ("content_filtered", FinishReason.FILTERED),
        ("model_context_window_exceeded", FinishReason.TRUNCATED_CONTEXT),
        ("brand_new_reason", FinishReason.OTHER),
    ],
)
def test_stop_reasons(raw: str, cls: FinishReason) -> None:
    resp = A.parse_response(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "x"}]}},
            "stopReason": raw,
            "usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3},
        }
    )
    assert (resp.finish_reason_raw, resp.finish_reason, resp.text) == (raw, cls, "x")
    assert resp.usage is not None and (resp.usage.input_tokens, resp.usage.cache_read_tokens) == (
        1,
        None,
    )


# --- streams (hand-built frames) --------------------------------------------------------------


def test_full_stream() -> None:
    resp = _stream(_START, *_TEXT, *_TOOL, _STOP, _META)
    assert (
        resp.complete is True
        and resp.text == "Hello"
        and resp.finish_reason is FinishReason.TOOL_CALL
    )
    (call,) = resp.tool_calls
    assert (call.id, call.name, call.arguments, call.arguments_raw) == (
        "tu_1",
        "f",
        {"a": 1},
        '{"a":1}',
    )
    assert resp.usage is not None and (
        resp.usage.input_tokens,
        resp.usage.output_tokens,
        resp.usage.total_tokens,
    ) == (105, 7, 112)
    assert resp.provider_details == {"metrics": {"latencyMs": 42}}


def test_truncated_stream() -> None:
    resp = _stream(_START, *_TEXT, *_TOOL[:3])
    assert resp.complete is False and resp.finish_reason is None and resp.usage is None
    # '{"a"' is cut JSON
    assert resp.text == "Hello" and resp.tool_calls[0].arguments_error is not None


def test_stream_cut_after_message_stop_lacks_usage() -> None:
    """The stop reason is the evidence the answer ended whole (issue 92): complete, its usage said
    unread."""
    resp = _stream(_START, *_TEXT, _STOP)
    assert resp.complete is True and resp.finish_reason_raw == "tool_use"
    assert resp.provider_details == {"metadata_missing": True}
    assert resp.unread == ["usage: the stream ended after messageStop, before its metadata"]


def test_cut_inside_a_frame_keeps_earlier_events() -> None:
    data = b"".join((_START, *_TEXT, _STOP, _META))
    framed = frame([(None, data[:-10])])
    resp = A.reassemble(framed)
    assert framed.kind == "aws_eventstream" and framed.tail
    assert resp.complete is False and resp.text == "Hello"


def test_exception_frame_mid_stream() -> None:
    exc = _frame(
        "throttlingException",
        {"message": "Too many tokens, please wait before trying again."},
        message_type="exception",
    )
    resp = _stream(_START, *_TEXT, exc)
    assert resp.complete is False and resp.finish_reason is FinishReason.ERROR
    assert resp.error is not None and resp.error.in_stream
    assert (resp.error.type, resp.error.message) == (
        "throttlingException",
        "Too many tokens, please wait before trying again.",
    )


def test_unknown_event_and_delta_kept() -> None:
    odd = _frame(
        "contentBlockDelta", {"contentBlockIndex": 2, "delta": {"hologram": {"title": "t"}}}
    )
    resp = _stream(
        _START,
        odd,
        _frame("telepathy", {}),
        _frame("messageStop", {"stopReason": "end_turn"}),
        _META,
    )
    assert resp.complete is True and resp.parts[0].kind == "other"
    assert resp.provider_details is not None and resp.provider_details["unknown_events"] == [
        "telepathy"
    ]
