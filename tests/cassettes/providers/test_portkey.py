"""Portkey prompt completions (``/v1/prompts/{id}/completions``): read as an LLM call (issue 45,
"LLM calls left unread"), its answer a chat completion or a text completion, streamed or not."""

from __future__ import annotations

from typing import Any

import orjson

from looptap.cassettes.analysis import analyse
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.wire import Exchange

URL = "https://api.portkey.ai/v1/prompts/pp-weather-7f3a21/completions"
REQUEST = {"variables": {"city": "Paris"}, "max_tokens": 64}
CHAT = {
    "id": "chatcmpl-9x",
    "object": "chat.completion",
    "created": 1732500000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Sunny in Paris.", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 31, "completion_tokens": 5, "total_tokens": 36},
    "provider": "openai",
}
TEXT = {
    "id": "cmpl-9y",
    "object": "text_completion",
    "created": 1732500000,
    "model": "gpt-3.5-turbo-instruct",
    "choices": [
        {"text": " Sunny in Paris.", "index": 0, "logprobs": None, "finish_reason": "length"}
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
}


def _ex(
    body: dict[str, Any],
    resp: Any,
    *,
    url: str = URL,
    chunks: list[bytes] | None = None,
    status: int = 200,
) -> Exchange:
    ctype = "text/event-stream" if chunks else "application/json"
    return Exchange(
        "POST",
        url,
        [("content-type", "application/json"), ("x-portkey-api-key", "pk-redacted")],
        orjson.dumps(body),
        status=status,
        response_headers=[("content-type", ctype)],
        response_chunks=[(0.1 * i, c) for i, c in enumerate(chunks or [orjson.dumps(resp)])],
    )


def _rt(ex: Exchange) -> RoundTrip:
    rt = parse_exchange(ex)
    assert rt.analysis_errors == [], rt.analysis_errors
    return rt


def _sse(*events: dict[str, Any]) -> list[bytes]:
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def test_a_chat_prompt_is_read() -> None:
    rt = _rt(_ex(REQUEST, CHAT))
    assert (rt.family, rt.operation) == ("portkey_prompt", "generate")
    assert (
        rt.request is not None
        and rt.request.params["prompt_id"] == "pp-weather-7f3a21"
        and rt.request.params["variables"] == {"city": "Paris"}
    )
    assert (
        rt.response is not None
        and rt.response.text == "Sunny in Paris."
        and rt.response.finish_reason is FinishReason.COMPLETE
    )
    assert rt.response.model == "gpt-4o-mini-2024-07-18"
    assert rt.response.usage is not None and (
        rt.response.usage.input_tokens,
        rt.response.usage.output_tokens,
    ) == (31, 5)


def test_a_completion_prompt_is_read() -> None:
    rt = _rt(_ex(REQUEST, TEXT))
    assert (
        rt.response is not None
        and rt.response.text == " Sunny in Paris."
        and rt.response.finish_reason is FinishReason.TRUNCATED_LENGTH
    )


def test_a_streamed_chat_prompt_is_read_and_its_cut_said() -> None:
    chunk = {
        "id": "chatcmpl-9x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
    }
    events = [
        {
            **chunk,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "Sunny"},
                    "finish_reason": None,
                }
            ],
        },
        {
            **chunk,
            "choices": [{"index": 0, "delta": {"content": " in Paris."}, "finish_reason": None}],
        },
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    rt = _rt(_ex({**REQUEST, "stream": True}, None, chunks=_sse(*events)))
    assert rt.request is not None and rt.request.stream
    assert (
        rt.response is not None
        and rt.response.text == "Sunny in Paris."
        and rt.response.complete is True
    )
    cut = _rt(_ex({**REQUEST, "stream": True}, None, chunks=_sse(*events)[:2]))
    assert cut.response is not None and cut.response.complete is not True


def test_a_prompt_run_is_a_turn_of_its_own_without_false_findings() -> None:
    exs = [_ex(REQUEST, CHAT), _ex({"variables": {"city": "Rome"}}, CHAT)]
    for i, ex in enumerate(exs):
        ex.seq = i
    run = analyse(exs)
    assert sorted(len(c.turns) for c in run.conversations) == [1, 1]
    assert not [f for f in run.findings if f.severity.value in ("warning", "error")], [
        (f.code, f.message) for f in run.findings
    ]


def test_other_prompts_paths_and_openai_completions_are_not_taken() -> None:
    assert (
        _rt(_ex(REQUEST, CHAT, url="https://api.portkey.ai/v1/prompts/pp-1/render")).family
        != "portkey_prompt"
    )
    legacy = {"model": "gpt-3.5-turbo-instruct", "prompt": "Say hi"}
    assert (
        _rt(_ex(legacy, TEXT, url="https://api.openai.com/v1/completions")).family
        == "openai_completions"
    )
    # a self-hosted Portkey gateway: known by the body
    assert (
        _rt(_ex(REQUEST, CHAT, url="http://127.0.0.1:8787/v1/prompts/pp-1/completions")).family
        == "portkey_prompt"
    )
