"""Issue 92: how OpenAI-compatible servers end a chat stream, read from their sources.

Each stream below is scripted byte for byte in the shape the server's own code writes (the file
that writes it is cited as ``repo@commit:path``, the same list as docs/coverage.md's "Stream ends
of OpenAI-compatible servers"). A stream is whole by its family's evidence: ``[DONE]``, or the
finish chunk with nothing unread; it is cut when no finish came; an error event is an error,
whatever terminator follows it.

Failing on 21bc15ea (session 46's head): llama.cpp's ``error:`` event (read as a whole answer
with no finish), Groq's ``x_groq`` usage and error, TGI's ``stop_sequence`` and Together's
``eos`` finishes (unusual finishes). On c86d115d every whole stream fails too (no read state).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.wire import Exchange


def _data(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    choices: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1764300000,
        "model": "qwen2.5:7b",
    }
    c["choices"] = (
        [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
        if choices
        else []
    )
    c.update(extra)
    return c


def _exchange(body: bytes, url: str = "http://localhost:8000/v1/chat/completions") -> Exchange:
    req = {"model": "qwen2.5:7b", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    ex = Exchange(
        method="POST",
        url=url,
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=[(None, body)],
    )
    ex.seq = 0
    return ex


def _read(body: bytes, url: str = "http://localhost:8000/v1/chat/completions") -> RoundTrip:
    return parse_exchange(_exchange(body, url))


def _codes(body: bytes, url: str = "http://localhost:8000/v1/chat/completions") -> set[str]:
    return {f.code for f in analyse([_exchange(body, url)]).findings}


USAGE = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
HELLO = [_data(_chunk({"role": "assistant", "content": ""})), _data(_chunk({"content": "Hello"}))]


# -- whole by evidence ----------------------------------------------------------------------------

WHOLE = {
    # vllm-project/vllm@5e918640:vllm/entrypoints/openai/chat_completion/serving.py
    # (chat_completion_stream_generator): the finish chunk carries vLLM's ``stop_reason`` beside
    # ``finish_reason``; with ``continuous_usage_stats`` every chunk has usage; then the final
    # usage chunk (``choices: []``, exclude_none) and ``data: [DONE]``.
    "vllm": HELLO[:1]
    + [
        _data(_chunk({"content": "Hello"}, usage={**USAGE, "completion_tokens": 1})),
        _data(
            {
                **_chunk({"content": ""}, "stop", usage=USAGE),
                "choices": [
                    {"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": None}
                ],
            }
        ),
        _data(_chunk(choices=False, usage=USAGE)),
        b"data: [DONE]\n\n",
    ],
    # ollama/ollama@fb307609:middleware/openai.go (ChatWriter.writeResponse): the content
    # chunks, a finish chunk with an empty delta (openai/openai.go FinishChunk), with
    # ``include_usage`` the same chunk again with ``choices: []`` and usage, then [DONE].
    "ollama /v1": [
        _data(_chunk({"role": "assistant", "content": "Hello"}, system_fingerprint="fp_ollama")),
        _data(_chunk({}, "stop", system_fingerprint="fp_ollama")),
        _data(_chunk(choices=False, system_fingerprint="fp_ollama", usage=USAGE)),
        b"data: [DONE]\n\n",
    ],
    # huggingface/text-generation-inference@db931fcf:router/src/server.rs (chat_completions:
    # KeepAlive comments, ``yield Event::default().data("[DONE]")``) and router/src/chat.rs
    # (ChatState::push: the usage chunk with ``id: ""`` and ``choices: []``); the finish is
    # FinishReason::format(true): "stop", "length" or "stop_sequence".
    "tgi": [
        b":\n\n",
        _data(_chunk({"role": "assistant", "content": "Hello"}, system_fingerprint="3.3.6-native")),
        _data(_chunk({"role": "assistant", "content": ""}, "stop_sequence")),
        _data({**_chunk(choices=False, usage=USAGE), "id": ""}),
        b"data: [DONE]\n\n",
    ],
    # ggml-org/llama.cpp@61e588ab:examples/server/server.cpp (the chat handler: the final
    # chunk with finish_reason, usage and llama.cpp's ``timings``, then ``data: [DONE]`` for
    # OpenAI-compatible calls)
    "llama.cpp": HELLO
    + [
        _data(
            _chunk(
                {},
                "stop",
                usage=USAGE,
                timings={"prompt_n": 11, "predicted_n": 4, "predicted_ms": 80.5},
            )
        ),
        b"data: [DONE]\n\n",
    ],
    # OpenRouter's streaming reference (openrouter.ai/docs/api-reference/streaming):
    # ``: OPENROUTER PROCESSING`` comments before and between chunks, the usage in the last
    # chunk (``choices: []``), then [DONE].
    "openrouter": [
        b": OPENROUTER PROCESSING\n\n",
        *HELLO,
        b": OPENROUTER PROCESSING\n\n",
        _data(_chunk({}, "stop", provider="OpenAI", native_finish_reason="stop")),
        _data(_chunk(choices=False, provider="OpenAI", usage={**USAGE, "cost": 0.0001})),
        b"data: [DONE]\n\n",
    ],
    # mistralai/client-python@05629d23:src/mistralai/client/models/completionchunk.py (usage
    # on the chunk that carries the finish) and src/mistralai/client/chat.py (EventStream
    # ``sentinel="[DONE]"``)
    "mistral": HELLO + [_data(_chunk({"content": ""}, "stop", usage=USAGE)), b"data: [DONE]\n\n"],
    # DeepSeek's API docs (api-docs.deepseek.com, "keep-alive"): ``: keep-alive`` comments
    # while the request waits; usage with its ``prompt_cache_hit_tokens`` on the last chunk
    "deepseek": [
        b": keep-alive\n\n",
        *HELLO,
        _data(
            _chunk(
                {"content": ""},
                "stop",
                usage={**USAGE, "prompt_cache_hit_tokens": 8, "prompt_cache_miss_tokens": 3},
            )
        ),
        b"data: [DONE]\n\n",
    ],
    # groq/groq-python@8ae355a1:src/groq/types/chat/chat_completion_chunk.py (XGroq: ``id`` in
    # the first and final chunk, ``usage`` in the final chunk), then [DONE]
    "groq": [
        _data(_chunk({"role": "assistant", "content": ""}, x_groq={"id": "req_01"})),
        _data(_chunk({"content": "Hello"})),
        _data(
            _chunk(
                {},
                "stop",
                x_groq={"id": "req_01", "usage": {**USAGE, "queue_time": 0.01}},
            )
        ),
        b"data: [DONE]\n\n",
    ],
    # togethercomputer/together-python@e6069871:src/together/types/chat_completions.py
    # (ChatCompletionChunk: ``usage`` on the chunk) and @83bd56f3:src/together/types/common.py
    # (FinishReason: "eos", "stop", "length", "tool_calls", "error", and "" for none)
    "together": [
        _data(_chunk({"role": "assistant", "content": "Hello"}, "")),
        _data(_chunk({}, "eos", usage=USAGE)),
        b"data: [DONE]\n\n",
    ],
    # Fireworks' chat streams (its API reference: the last chunk carries the finish and
    # ``usage``, then [DONE]); LM Studio's server is not open source, its docs
    # (lmstudio.ai/docs/api/openai-api) say OpenAI's own endpoint
    "fireworks / lm studio": HELLO + [_data(_chunk({}, "stop", usage=USAGE)), b"data: [DONE]\n\n"],
}


@pytest.mark.parametrize("server", sorted(WHOLE))
def test_compatible_servers_stream_ends_read_whole(server: str) -> None:
    rt = _read(b"".join(WHOLE[server]))
    r = rt.response
    assert r is not None and r.complete is True and r.error is None, server
    assert r.text == "Hello" and r.finish_reason is FinishReason.COMPLETE
    assert r.usage is not None and (r.usage.input_tokens, r.usage.output_tokens) == (11, 4)
    assert rt.read == "complete", rt.unread
    codes = _codes(b"".join(WHOLE[server]))
    assert not codes & {"A.stream_truncated", "A.unusual_finish", "A.usage_missing"}, codes


# -- cut or failed by evidence --------------------------------------------------------------------


def test_llama_cpp_error_event_is_an_error_not_a_whole_answer() -> None:
    """ggml-org/llama.cpp@61e588ab:examples/server/server.cpp sends a mid-stream error with
    ``server_sent_event(sink, "error", error_data)`` (examples/server/utils.hpp@15ae7dd5: the
    line ``error: {…}``), then ``data: [DONE]``. Was: the line read as a data payload that is
    not JSON and skipped, ``[DONE]`` taken as the end: a whole answer with no finish and no
    error."""
    body = b"".join(
        [
            *HELLO,
            b'error: {"code":500,"message":"llama_decode failed","type":"server_error"}\n\n',
            b"data: [DONE]\n\n",
        ]
    )
    r = _read(body).response
    assert r is not None and r.error is not None
    assert r.error.message == "llama_decode failed" and r.error.type == "server_error"
    assert r.finish_reason is FinishReason.ERROR


def test_tgi_error_event_then_done_is_an_error() -> None:
    """huggingface/text-generation-inference@db931fcf:router/src/infer/mod.rs
    (``into_openai_event``: ``{"error": {"message", "http_status_code": 422}}``), then the
    server's ``[DONE]``: an error, never a whole answer."""
    err = {"error": {"message": "Request failed during generation", "http_status_code": 422}}
    r = _read(b"".join([*HELLO, _data(err), b"data: [DONE]\n\n"])).response
    assert r is not None and r.error is not None and r.finish_reason is FinishReason.ERROR
    assert r.error.message == "Request failed during generation"


def test_vllm_streaming_error_is_an_error() -> None:
    """vllm-project/vllm@7ded96b3:vllm/entrypoints/openai/serving_engine.py
    (``create_streaming_error_response``: ``{"error": ErrorResponse}``, its ``object: "error"``)
    then ``data: [DONE]``."""
    err = {
        "error": {
            "object": "error",
            "message": "prompt too long",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
    r = _read(b"".join([*HELLO, _data(err), b"data: [DONE]\n\n"])).response
    assert r is not None and r.error is not None and r.finish_reason is FinishReason.ERROR
    assert r.error.message == "prompt too long"


def test_groq_x_groq_error_is_an_error() -> None:
    """groq/groq-python@8ae355a1 XGroq.error: "an error string indicating why a stream was
    stopped early". Was: not read, the stream whole."""
    body = b"".join(
        [
            *HELLO,
            _data(_chunk({}, "stop", x_groq={"id": "req_01", "error": "over capacity"})),
            b"data: [DONE]\n\n",
        ]
    )
    r = _read(body).response
    assert r is not None and r.error is not None and r.error.message == "over capacity"


def test_ollama_v1_error_mid_stream_ends_without_finish_truncated() -> None:
    """ollama/ollama@fb307609: server/routes.go ``streamResponse`` writes a mid-stream error as
    ``{"error": …}``; middleware/openai.go's ChatWriter (status 200) decodes it as a
    ChatResponse with no content and ends the stream: no finish chunk, no ``[DONE]``. No finish
    is the evidence: truncated."""
    body = b"".join([*HELLO, _data(_chunk({"content": ""}, system_fingerprint="fp_ollama"))])
    rt = _read(body)
    assert rt.response is not None and rt.response.complete is False
    assert "A.stream_truncated" in _codes(body)


def test_ollama_native_error_line_mid_stream_is_an_error() -> None:
    """ollama/ollama@fb307609:server/routes.go ``streamResponse``: once content was written, an
    error is one more NDJSON line ``{"error": "…"}`` and the stream ends (no ``done: true``)."""
    lines = [
        {"model": "qwen2.5:7b", "created_at": "2026-11-28T10:00:00Z",
         "message": {"role": "assistant", "content": "Hel"}, "done": False},
        {"error": "an error was encountered while running the model: unexpected EOF"},
    ]  # fmt: skip
    ex = _exchange(
        b"".join(orjson.dumps(x) + b"\n" for x in lines), "http://localhost:11434/api/chat"
    )
    ex.response_headers = [("content-type", "application/x-ndjson")]
    r = parse_exchange(ex).response
    assert r is not None and r.complete is False and r.error is not None
    assert "unexpected EOF" in (r.error.message or "")


def test_openrouter_error_chunk_with_finish_error() -> None:
    """OpenRouter's streaming reference, "Handling Errors During Streaming": a chunk with a
    top-level ``error`` and a choice whose ``finish_reason`` is ``"error"``, then the stream
    ends."""
    err = _chunk(
        {"content": ""}, "error", error={"code": "server_error", "message": "Provider disconnected"}
    )
    r = _read(b"".join([b": OPENROUTER PROCESSING\n\n", *HELLO, _data(err)])).response
    assert r is not None and r.error is not None and r.finish_reason is FinishReason.ERROR
    assert r.error.message == "Provider disconnected"


def test_finish_without_done_is_whole_but_no_finish_without_done_is_cut() -> None:
    """The profile row: a missing terminator alone is no truncation (ik_llama.cpp without
    ``--send-done``, TGI before its PR 2221); a stream with neither is cut."""
    assert _read(b"".join([*HELLO, _data(_chunk({}, "stop", usage=USAGE))])).response.complete  # type: ignore[union-attr]
    assert _read(b"".join(HELLO)).response.complete is False  # type: ignore[union-attr]
