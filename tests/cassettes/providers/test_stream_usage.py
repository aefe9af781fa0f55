"""Issue 54: usage a stream reports on more than one chunk keeps every count it reported.

watsonx.ai's ``generation_stream`` sends ``input_token_count`` on its first event and ``0`` on every
later one (``generated_token_count`` is cumulative): the stream below is written byte for byte in
the shape of a real ``/ml/v1-beta/generation/text_stream`` recording (traceloop/openllmetry's
watsonx instrumentation tests: ``id:`` / ``event: message`` / ``data:`` events, ``created_at`` on
each, the licence warning under ``system`` on the first, the counts 8, 0, 0 …).
The last event's counts were kept, so every watsonx stream read 0 input tokens.

The same rule holds for every reader that merges usage across chunks (vLLM's and watsonx chat's
usage on every OpenAI chunk, legacy completions, Gemini's ``usageMetadata`` on every chunk,
Bedrock InvokeModel's Llama chunks): a later ``0`` or absent count never replaces a count an
earlier chunk gave. Twins: cumulative counts still read as the latest (the largest), and a stream
whose counts really are 0 reads 0. Anthropic is not of this class: ``message_delta`` carries the
final totals, which overwrite ``message_start``'s, a 0 included (a compaction's real recording ends
with ``cache_read_input_tokens: 0`` after a start of 55,096; test_anthropic_sdk_agreement.py holds
it to the SDK's reading).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from test_bedrock import _frame

from looptap.cassettes.models import Usage
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.wire import Exchange

WATSONX = "https://us-south.ml.cloud.ibm.com/ml/v1-beta/generation/text_stream?version=2024-02-15"
WARNING = {
    "message": "This model is a Non-IBM Product governed by a third-party license that may impose "
    "use restrictions and other obligations. By using this model you agree to its terms as "
    "identified in the following URL.",
    "id": "disclaimer_warning",
    "more_info": "https://dataplatform.cloud.ibm.com/docs/content/wsj/analyze-data/fm-models.html"
    "?context=wx",
}
WORDS = ["", "the", " sun", " is", " the", " most", " important", " star", " in", " the", " sky"]


def _watsonx_stream(input_counts: list[int]) -> list[bytes]:
    """One SSE event per token as watsonx sends it (``id: n``, ``event: message``, ``data: …``),
    the last one with the stop reason."""
    out = []
    for i, word in enumerate([*WORDS, ""]):
        last = i == len(WORDS)
        data: dict[str, Any] = {
            "model_id": "google/flan-ul2",
            "created_at": f"2024-03-01T07:40:{24.839 + 0.024 * i:06.3f}Z",
            "results": [
                {
                    "generated_text": word,
                    "generated_token_count": i,
                    "input_token_count": input_counts[min(i, len(input_counts) - 1)],
                    "stop_reason": "eos_token" if last else "not_finished",
                }
            ],
        }
        if i == 0:
            data["system"] = {"warnings": [WARNING]}
        out.append(f"id: {i + 1}\nevent: message\ndata: ".encode() + orjson.dumps(data) + b"\n\n")
    return out


def _exchange(
    url: str, req: Any, chunks: list[bytes], ctype: str = "text/event-stream"
) -> Exchange:
    return Exchange(
        "POST",
        url,
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(req),
        status=200,
        response_headers=[("content-type", ctype)],
        response_chunks=[(0.024 * i, c) for i, c in enumerate(chunks)],
    )


def _usage(ex: Exchange) -> Usage:
    rt = parse_exchange(ex)
    assert rt.analysis_errors == [], rt.analysis_errors
    assert rt.response is not None and rt.response.usage is not None
    return rt.response.usage


def test_watsonx_stream_keeps_the_input_count_of_its_first_event() -> None:
    """Was: input 0 (the last event's), total 11."""
    req = {
        "model_id": "google/flan-ul2",
        "input": "Write an epigram about the sun",
        "project_id": "p",
    }
    ex = _exchange(WATSONX, req, _watsonx_stream([8, 0]))
    rt = parse_exchange(ex)
    assert rt.response is not None and rt.response.text == "".join(WORDS)
    u = _usage(ex)
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (8, 11, 19)


def test_watsonx_stream_twins_cumulative_and_really_zero() -> None:
    """A stream that repeats the input count reads it; one whose counts are all 0 reads 0."""
    req = {"model_id": "google/flan-ul2", "input": "x"}
    assert _usage(_exchange(WATSONX, req, _watsonx_stream([8]))).input_tokens == 8
    assert _usage(_exchange(WATSONX, req, _watsonx_stream([0]))).input_tokens == 0


def _sse(events: list[Any], done: bool = True) -> list[bytes]:
    out = [b"data: " + orjson.dumps(e) + b"\n\n" for e in events]
    return out + ([b"data: [DONE]\n\n"] if done else [])


def _chat_chunk(i: int, usage: dict[str, int], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "ibm/granite-3-8b-instruct",
        "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": finish}],
        "usage": usage,
    }


def _openai_chat(first: int, later: int) -> Exchange:
    """OpenAI chunks with usage on every one (vLLM's continuous usage, watsonx ``chat_stream``)."""
    chunks = [
        _chat_chunk(
            i,
            {
                "prompt_tokens": first if i == 0 else later,
                "completion_tokens": i + 1,
                "total_tokens": (first if i == 0 else later) + i + 1,
            },
            "stop" if i == 2 else None,
        )
        for i in range(3)
    ]
    return _exchange(
        "http://vllm.local:8000/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        _sse(chunks),
    )


def _completions(first: int, later: int) -> Exchange:
    chunks = [
        {
            "id": "cmpl-1",
            "object": "text_completion",
            "model": "m",
            "choices": [
                {"index": 0, "text": f"w{i} ", "finish_reason": "stop" if i == 2 else None}
            ],
            "usage": {
                "prompt_tokens": first if i == 0 else later,
                "completion_tokens": i + 1,
                "total_tokens": (first if i == 0 else later) + i + 1,
            },
        }
        for i in range(3)
    ]
    return _exchange(
        "http://vllm.local:8000/v1/completions",
        {"model": "m", "prompt": "hi", "stream": True},
        _sse(chunks),
    )


def _gemini(first: int, later: int) -> Exchange:
    chunks = [
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": f"w{i} "}]},
                    **({"finishReason": "STOP"} if i == 2 else {}),
                }
            ],
            "usageMetadata": {
                "promptTokenCount": first if i == 0 else later,
                "candidatesTokenCount": i + 1,
                "totalTokenCount": (first if i == 0 else later) + i + 1,
            },
            "modelVersion": "gemini-2.0-flash",
        }
        for i in range(3)
    ]
    return _exchange(
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:"
        "streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        _sse(chunks, done=False),
    )


def _bedrock_llama(first: int, later: int) -> Exchange:
    def chunk(d: dict[str, Any]) -> bytes:
        return _frame("chunk", {"bytes": base64.b64encode(orjson.dumps(d)).decode()})

    frames = [
        chunk(
            {
                "generation": f"w{i} ",
                "prompt_token_count": first if i == 0 else later,
                "generation_token_count": i + 1,
                "stop_reason": "stop" if i == 2 else None,
            }
        )
        for i in range(3)
    ]
    return _exchange(
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/meta.llama3-8b-instruct-v1:0/"
        "invoke-with-response-stream",
        {"prompt": "hi", "max_gen_len": 100},
        frames,
        "application/vnd.amazon.eventstream",
    )


READERS = {
    "openai_chat": _openai_chat,
    "openai_completions": _completions,
    "gemini": _gemini,
    "bedrock_llama": _bedrock_llama,
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_later_zero_never_replaces_an_earlier_count(reader: str) -> None:
    """The input count on the first chunk and 0 on the later ones: the first one's count stands
    (was: 0 for every one of these readers)."""
    u = _usage(READERS[reader](8, 0))
    assert u.input_tokens == 8, u
    assert u.total_tokens is None or u.total_tokens >= 8 + (u.output_tokens or 0), u


@pytest.mark.parametrize("reader", sorted(READERS))
def test_twins_repeated_counts_and_real_zeros(reader: str) -> None:
    """The count repeated on every chunk reads as it is, and so does a count that is 0
    throughout."""
    assert _usage(READERS[reader](8, 8)).input_tokens == 8
    assert _usage(READERS[reader](0, 0)).input_tokens == 0
