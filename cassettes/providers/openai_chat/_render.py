"""An answer rendered as Chat Completions sends it (for replay and the fake upstreams): a chat
completion, or its chunk stream ending ``[DONE]``."""

from __future__ import annotations

from typing import Any

import orjson

from ...models import FinishReason, NormalisedResponse, Usage
from .._replay import Rendered, answer_calls, answer_text, call_arguments_text, pieces, sse

__all__ = ["render_chat"]


#: The finish reason this API sends for a normalised class (rendering an answer).
_RAW_FINISH = {
    FinishReason.COMPLETE: "stop",
    FinishReason.TOOL_CALL: "tool_calls",
    FinishReason.TRUNCATED_LENGTH: "length",
    FinishReason.FILTERED: "content_filter",
    # a refusal is the message's ``refusal`` text, the finish stays "stop"
    FinishReason.REFUSED: "stop",
}


def _usage_body(u: Usage | None) -> dict[str, Any] | None:
    if u is None:
        return None
    if isinstance(u.raw, dict) and "prompt_tokens" in u.raw:
        return u.raw
    out: dict[str, Any] = {
        "prompt_tokens": u.input_tokens or 0,
        "completion_tokens": u.output_tokens or 0,
    }
    out["total_tokens"] = (
        u.total_tokens
        if u.total_tokens is not None
        else out["prompt_tokens"] + out["completion_tokens"]
    )
    if u.cache_read_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": u.cache_read_tokens}
    if u.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": u.reasoning_tokens}
    return out


def render_chat(answer: NormalisedResponse, stream: bool, request: Any) -> Rendered:
    """An answer as a chat completion (JSON) or its chunk stream (SSE ending ``[DONE]``)."""
    text, refusal, calls = answer_text(answer), answer_text(answer, "refusal"), answer_calls(answer)
    finish = _RAW_FINISH.get(
        answer.finish_reason or FinishReason.COMPLETE, answer.finish_reason_raw or "stop"
    )
    head = {
        "id": answer.id or "chatcmpl-looptap",
        "created": 1700000000,
        "model": answer.model or "",
    }
    wire_calls: list[dict[str, Any]] = [
        {
            "id": c.id or f"call_looptap_{i}",
            "type": "function",
            "function": {"name": c.name or "", "arguments": call_arguments_text(c)},
        }
        for i, c in enumerate(calls)
    ]
    usage = _usage_body(answer.usage)
    if not stream:
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": text or None,
            "refusal": refusal or None,
        }
        if wire_calls:
            msg["tool_calls"] = wire_calls
        body = {
            **head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
        }
        if usage is not None:
            body["usage"] = usage
        return Rendered("application/json", [orjson.dumps(body)])
    head["object"] = "chat.completion.chunk"
    out = _delta_chunks(head, text, refusal, wire_calls)
    options = request.get("stream_options") if isinstance(request, dict) else None
    out += _last_chunks(
        head, finish, usage, isinstance(options, dict) and bool(options.get("include_usage"))
    )
    out.append(b"data: [DONE]\n\n")
    return Rendered("text/event-stream", out)


def _chunk(head: dict[str, Any], delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    return sse(
        {
            **head,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
    )


def _delta_chunks(
    head: dict[str, Any], text: str, refusal: str, wire_calls: list[dict[str, Any]]
) -> list[bytes]:
    """The role chunk, the text and refusal pieces, each call's head and argument pieces."""
    out = [_chunk(head, {"role": "assistant", "content": "", "refusal": None})]
    out += [_chunk(head, {"content": piece}) for piece in pieces(text)]
    out += [_chunk(head, {"refusal": piece}) for piece in pieces(refusal)]
    for i, call in enumerate(wire_calls):
        fn = call["function"]
        out.append(
            _chunk(
                head,
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                },
            )
        )
        out += [
            _chunk(head, {"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            for piece in pieces(fn["arguments"])
        ]
    return out


def _last_chunks(
    head: dict[str, Any], finish: str, usage: dict[str, Any] | None, asked: bool
) -> list[bytes]:
    """The finish, and the usage: a chunk of its own when asked for (``include_usage``), on the
    last chunk when recorded without being asked (the compatible servers)."""
    if usage is not None and asked:
        return [_chunk(head, {}, finish), sse({**head, "choices": [], "usage": usage})]
    if usage is not None:
        return [
            sse(
                {
                    **head,
                    "choices": [
                        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}
                    ],
                    "usage": usage,
                }
            )
        ]
    return [_chunk(head, {}, finish)]
