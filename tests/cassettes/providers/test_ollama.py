"""Ollama native adapter (WIRE.md §E).

The corpus has no native Ollama traffic (its one ``localhost:11434`` recording is the
OpenAI-compatible ``/v1``), so the wire samples below are written from WIRE.md §E and Ollama's
``docs/api.md``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from real_corpus import corpus_exchanges, rel

from looptap.cassettes.models import FinishReason, NormalisedResponse
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.providers import detect
from looptap.cassettes.providers.ollama import OllamaChat
from looptap.cassettes.wire import Exchange

OLLAMA = OllamaChat()
CHAT = "http://localhost:11434/api/chat"
GENERATE = "http://localhost:11434/api/generate"
T0 = "2026-08-21T10:00:00.000000Z"


def _ndjson(*lines: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


def _run(
    url: str, request: dict[str, Any], body: bytes, status: int = 200, chunked: bool = True
) -> RoundTrip:
    chunks = (
        [(0.05 * i, ln) for i, ln in enumerate(body.splitlines(keepends=True))]
        if chunked
        else [(0.1, body)]
    )
    ex = Exchange(
        "POST", url, request_body=orjson.dumps(request), status=status, response_chunks=chunks
    )
    rt = parse_exchange(ex)
    assert rt.family == "ollama"
    assert not rt.analysis_errors, rt.analysis_errors
    return rt


def _resp(rt: RoundTrip) -> NormalisedResponse:
    assert rt.response is not None
    return rt.response


def _delta(
    content: str = "", thinking: str | None = None, tool_calls: list[Any] | None = None
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        msg["thinking"] = thinking
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return {"model": "qwen3:8b", "created_at": T0, "message": msg, "done": False}


def _final(
    reason: str | None = "stop", prompt: int | None = 26, output: int | None = 12
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "model": "qwen3:8b",
        "created_at": T0,
        "message": {"role": "assistant", "content": ""},
        "done": True,
    }
    if reason is not None:
        line["done_reason"] = reason
    line["total_duration"] = 4883583458
    line["load_duration"] = 1334875
    if prompt is not None:
        line["prompt_eval_count"] = prompt
        line["prompt_eval_duration"] = 342546000
    if output is not None:
        line["eval_count"] = output
        line["eval_duration"] = 4535599000
    return line


CHAT_REQUEST: dict[str, Any] = {
    "model": "qwen3:8b",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": "What is in this picture, and the weather in Toronto?",
            "images": ["iVBORw0KGgo="],
        },
        {
            "role": "assistant",
            "content": "",
            "thinking": "I should call the tool.",
            "tool_calls": [
                {
                    "id": "call_ab12cd34",
                    "function": {
                        "index": 0,
                        "name": "get_weather",
                        "arguments": {"city": "Toronto"},
                    },
                }
            ],
        },
        {
            "role": "tool",
            "content": "11 degrees celsius",
            "tool_name": "get_weather",
            "tool_call_id": "call_ab12cd34",
        },
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Get the weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ],
    "think": True,
    "options": {"temperature": 0.1, "num_ctx": 8192},
    "keep_alive": "5m",
}


# --- recognition ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url", "score", "operation"),
    [
        ("POST", CHAT, 3, "generate"),
        ("POST", "https://ollama.com/api/chat", 3, "generate"),
        ("POST", "http://gpu-box:8080/ollama/api/chat", 3, "generate"),
        ("POST", GENERATE, 3, "generate"),
        ("POST", "http://localhost:11434/api/embed", 1, "embed"),
        ("GET", "http://localhost:11434/api/tags", 1, "tags"),
        ("POST", "http://localhost:11434/api/show", 1, "show"),
        ("GET", CHAT, 0, "generate"),
        ("POST", "http://localhost:11434/v1/chat/completions", 0, "other"),
        ("POST", "https://openrouter.ai/api/v1/chat/completions", 0, "other"),
        ("POST", "http://localhost:3000/api/chat/completions", 0, "other"),
    ],
)
def test_recognise(method: str, url: str, score: int, operation: str) -> None:
    body = {"model": "m", "messages": [], "prompt": "x"}
    u = urlsplit(url)
    assert OLLAMA.recognise(method, u, body) == score
    if score:
        assert OLLAMA.operation(method, u) == operation


def test_corpus_has_no_native_ollama_traffic_and_compat_goes_to_openai_chat() -> None:
    seen = seen_compat = 0
    for path, i, ex in corpus_exchanges():
        seen += 1
        assert OLLAMA.recognise(ex.method, urlsplit(ex.url), ex.request_json()) == 0, (
            f"{rel(path)}#{i} {ex.url}"
        )
        if "localhost:11434" in ex.url:
            seen_compat += 1
            assert parse_exchange(ex).family == "openai_chat"
    assert seen > 1000 and seen_compat >= 1


@pytest.mark.parametrize(
    ("body", "stream"),
    [
        ({"model": "m"}, True),
        ({"model": "m", "stream": True}, True),
        ({"model": "m", "stream": False}, False),
    ],
)
def test_stream_defaults_to_true(body: dict[str, Any], stream: bool) -> None:
    assert OLLAMA.is_stream(urlsplit(CHAT), body) is stream
    assert OLLAMA.parse_request({**body, "messages": []}, urlsplit(CHAT)).stream is stream


# --- requests -------------------------------------------------------------------------------------


def test_chat_request() -> None:
    req = OLLAMA.parse_request(CHAT_REQUEST, urlsplit(CHAT))
    assert (req.family, req.model, req.stream, req.history_key) == (
        "ollama",
        "qwen3:8b",
        True,
        "messages",
    )
    assert [p.text for p in req.system] == ["You are terse."]
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "tool"]
    assert [p.kind for p in req.messages[1].parts] == ["text", "media"]
    assert [p.kind for p in req.messages[2].parts] == ["reasoning", "tool_call"]
    call = req.messages[2].parts[1].tool_call
    assert call is not None and (call.id, call.name, call.arguments, call.arguments_raw) == (
        "call_ab12cd34",
        "get_weather",
        {"city": "Toronto"},
        '{"city":"Toronto"}',
    )
    assert req.messages[2].parts[1].provider_details == {"index": 0}
    result = req.messages[3].parts[0].tool_result
    assert result is not None and (result.call_id, result.name, result.content) == (
        "call_ab12cd34",
        "get_weather",
        "11 degrees celsius",
    )
    assert [(t.name, t.kind) for t in req.tools] == [("get_weather", "function")]
    assert req.tools[0].parameters and req.tools[0].parameters["required"] == ["city"]
    assert req.tool_choice is None and req.tool_choice_mode is None
    assert req.params == {"temperature": 0.1, "num_ctx": 8192, "think": True, "keep_alive": "5m"}


def test_generate_request() -> None:
    body = {
        "model": "llama3.2",
        "prompt": "Why is the sky blue?",
        "system": "Answer like a pirate.",
        "images": ["AAAA"],
        "options": {"num_predict": 64},
        "stream": False,
        "context": [1, 2, 3],
    }
    req = OLLAMA.parse_request(body, urlsplit(GENERATE))
    assert [p.text for p in req.system] == ["Answer like a pirate."]
    assert [(m.role, [p.kind for p in m.parts]) for m in req.messages] == [
        ("user", ["text", "media"])
    ]
    assert req.messages[0].text == "Why is the sky blue?"
    assert req.stream is False and req.history_key is None
    assert req.params == {"num_predict": 64, "context": [1, 2, 3]}


# --- responses ------------------------------------------------------------------------------------


def test_streamed_text_with_thinking() -> None:
    body = _ndjson(
        _delta(thinking="The user "),
        _delta(thinking="wants a greeting."),
        _delta("Hel"),
        _delta("lo!"),
        _final("stop", prompt=26, output=12),
    )
    rt = _run(CHAT, {"model": "qwen3:8b", "messages": [{"role": "user", "content": "hi"}]}, body)
    assert rt.stream and rt.framing == "ndjson"
    r = _resp(rt)
    assert [(p.kind, p.text) for p in r.parts] == [
        ("reasoning", "The user wants a greeting."),
        ("text", "Hello!"),
    ]
    assert (r.finish_reason_raw, r.finish_reason, r.complete, r.events) == (
        "stop",
        FinishReason.COMPLETE,
        True,
        5,
    )
    assert r.usage is not None and (
        r.usage.input_tokens,
        r.usage.output_tokens,
        r.usage.total_tokens,
    ) == (
        26,
        12,
        38,
    )
    assert r.usage.raw is not None and r.usage.raw["eval_duration"] == 4535599000
    assert r.model == "qwen3:8b" and r.id is None


def test_streamed_tool_calls_are_appended_across_chunks() -> None:
    body = _ndjson(
        _delta(thinking="Two cities."),
        _delta(
            tool_calls=[
                {
                    "id": "call_aaaa1111",
                    "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ]
        ),
        _delta(
            tool_calls=[
                {"function": {"index": 1, "name": "get_weather", "arguments": {"city": "Rome"}}}
            ]
        ),
        _final("stop"),
    )
    r = _resp(_run(CHAT, CHAT_REQUEST, body))
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [
        ("call_aaaa1111", "get_weather", {"city": "Paris"}),
        (None, "get_weather", {"city": "Rome"}),
    ]
    assert r.finish_reason_raw == "stop" and r.finish_reason is FinishReason.TOOL_CALL
    assert r.text == ""


def test_truncated_stream() -> None:
    r = _resp(_run(CHAT, CHAT_REQUEST, _ndjson(_delta("The answer"), _delta(" is"))))
    assert r.text == "The answer is"
    assert r.complete is False and r.finish_reason is None and r.usage is None


def test_truncated_mid_line() -> None:
    body = (
        _ndjson(_delta("The answer"), _delta(" is"))
        + b'{"model":"qwen3:8b","created_at":"2026-08-21T10:0'
    )
    rt = _run(CHAT, CHAT_REQUEST, body)
    assert _resp(rt).complete is False and _resp(rt).text == "The answer is"
    assert any("incomplete piece" in n for n in rt.notes)


def test_mid_stream_error_line() -> None:
    body = _ndjson(_delta("Par"), {"error": "an error was encountered while running the model"})
    r = _resp(_run(CHAT, CHAT_REQUEST, body))
    assert r.text == "Par"
    assert (
        r.error is not None
        and r.error.in_stream
        and r.error.message == "an error was encountered while running the model"
    )
    assert r.complete is False and r.finish_reason is FinishReason.ERROR


def test_non_streamed_response() -> None:
    body = {
        "model": "qwen3:8b",
        "created_at": T0,
        "message": {
            "role": "assistant",
            "content": "",
            "thinking": "Call it.",
            "tool_calls": [
                {
                    "id": "call_zz99yy88",
                    "function": {
                        "index": 0,
                        "name": "get_weather",
                        "arguments": {"city": "Toronto"},
                    },
                }
            ],
        },
        "done": True,
        "done_reason": "stop",
        "total_duration": 885095291,
        "prompt_eval_count": 140,
        "eval_count": 19,
    }
    rt = _run(CHAT, {**CHAT_REQUEST, "stream": False}, orjson.dumps(body), chunked=False)
    assert rt.framing == "json" and rt.stream is False
    r = _resp(rt)
    assert [p.kind for p in r.parts] == ["reasoning", "tool_call"]
    assert r.finish_reason is FinishReason.TOOL_CALL and r.complete is True and r.events is None
    assert r.usage is not None and (r.usage.input_tokens, r.usage.output_tokens) == (140, 19)


def test_one_line_stream_cut_after_its_first_line_is_incomplete() -> None:
    rt = _run(CHAT, CHAT_REQUEST, orjson.dumps(_delta("Hel")), chunked=False)
    assert rt.framing == "json" and _resp(rt).complete is False


def test_generate_stream() -> None:
    body = _ndjson(
        {"model": "llama3.2", "created_at": T0, "response": "The", "done": False},
        {"model": "llama3.2", "created_at": T0, "response": " sky", "done": False},
        {
            "model": "llama3.2",
            "created_at": T0,
            "response": "",
            "done": True,
            "done_reason": "length",
            "context": [1, 2, 3],
            "prompt_eval_count": 9,
            "eval_count": 2,
        },
    )
    r = _resp(_run(GENERATE, {"model": "llama3.2", "prompt": "Why is the sky blue?"}, body))
    assert r.text == "The sky"
    assert r.finish_reason is FinishReason.TRUNCATED_LENGTH and r.complete is True
    assert r.provider_details and r.provider_details["context_tokens"] == 3


@pytest.mark.parametrize(
    ("reason", "cls"),
    [
        ("load", FinishReason.NO_GENERATION),
        ("unload", FinishReason.NO_GENERATION),
        (None, FinishReason.UNKNOWN),
        ("", FinishReason.UNKNOWN),
        ("something_new", FinishReason.OTHER),
    ],
)
def test_done_reasons(reason: str | None, cls: FinishReason) -> None:
    line = _final(reason, prompt=None, output=None)
    r = OLLAMA.parse_response(line)
    assert r.finish_reason is cls and r.finish_reason_raw == reason and r.complete is True


def test_missing_counts_are_unknown_not_zero() -> None:
    r = OLLAMA.parse_response(_final("stop", prompt=None, output=5))
    assert r.usage is not None and (
        r.usage.input_tokens,
        r.usage.output_tokens,
        r.usage.total_tokens,
    ) == (
        None,
        5,
        None,
    )


def test_http_error() -> None:
    rt = _run(
        CHAT,
        {"model": "nope", "messages": []},
        b'{"error":"model \'nope\' not found"}',
        status=404,
        chunked=False,
    )
    err = _resp(rt).error
    assert err is not None and (err.status, err.message, err.in_stream) == (
        404,
        "model 'nope' not found",
        False,
    )
    assert OLLAMA.parse_error("upstream timeout", 502).message == "upstream timeout"


def test_registry_sends_native_routes_here() -> None:
    p = detect("POST", urlsplit(CHAT), CHAT_REQUEST)
    assert p is not None and p.family == "ollama"
