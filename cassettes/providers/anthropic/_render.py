"""An answer rendered as the Messages API sends it (for replay and the fake upstreams): a message,
or its event stream from ``message_start`` to ``message_stop``."""

from __future__ import annotations

from typing import Any

import orjson

from ...models import (
    FinishReason,
    NormalisedResponse,
    Usage,
)
from .._replay import (
    Rendered,
    answer_calls,
    answer_text,
    arguments_not_json,
    call_arguments_object,
    call_arguments_text,
    pieces,
    sse,
)

__all__ = ["render_messages"]

JSONObject = dict[str, Any]

#: The ``stop_reason`` for a normalised class (rendering an answer).
_RAW_FINISH = {
    FinishReason.COMPLETE: "end_turn",
    FinishReason.TOOL_CALL: "tool_use",
    FinishReason.TRUNCATED_LENGTH: "max_tokens",
    FinishReason.REFUSED: "refusal",
}


#: The block of each kind of call (``ToolCall.kind``).
_CALL_BLOCKS = {"function": "tool_use", "server": "server_tool_use", "mcp": "mcp_tool_use"}


def _usage_body(u: Usage | None) -> JSONObject:
    if u is not None and isinstance(u.raw, dict) and "output_tokens" in u.raw:
        return u.raw
    if u is None:
        return {"input_tokens": 0, "output_tokens": 0}
    cached = (u.cache_read_tokens or 0) + (u.cache_write_tokens or 0)
    return {
        "input_tokens": max(0, (u.input_tokens or 0) - cached),
        "output_tokens": u.output_tokens or 0,
        "cache_read_input_tokens": u.cache_read_tokens or 0,
        "cache_creation_input_tokens": u.cache_write_tokens or 0,
    }


def render_messages(answer: NormalisedResponse, stream: bool) -> Rendered | None:
    """An answer as a message (JSON) or its event stream (``message_start`` … ``message_stop``).
    A tool call's cut arguments stream as they are; unstreamed, ``input`` holds what parsed."""
    stop = _RAW_FINISH.get(answer.finish_reason or FinishReason.COMPLETE)
    if stop is None:
        return None  # no stop_reason says it (a content filter is not this API's)
    text, calls = answer_text(answer), answer_calls(answer)
    # the calls the API ran itself (a web search): blocks of this API's own, kept
    calls += [
        p.tool_call
        for p in answer.parts
        if p.tool_call is not None and p.tool_call.kind in _CALL_BLOCKS.keys() - {"function"}
    ]
    if not stream and arguments_not_json(calls):
        # unstreamed, ``input`` is an object: no way to send arguments that are not JSON
        return None
    blocks: list[JSONObject] = [{"type": "text", "text": text}] if text else []
    blocks += [
        {
            "type": _CALL_BLOCKS.get(c.kind, "tool_use"),  # a call the provider ran is its own
            "id": c.id or f"toolu_looptap_{i}",
            "name": c.name or "",
            "input": call_arguments_object(c),
        }
        for i, c in enumerate(calls)
    ]
    # the blocks looptap has no kind for (a server tool's result), after the calls, whole
    blocks += [
        block
        for p in answer.parts
        if p.kind == "other" and isinstance(block := (p.provider_details or {}).get("block"), dict)
    ]
    usage = _usage_body(answer.usage)
    msg: JSONObject = {
        "id": answer.id or "msg_looptap",
        "type": "message",
        "role": "assistant",
        "model": answer.model or "",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        return Rendered("application/json", [orjson.dumps(msg)])
    out = [
        sse(
            {
                "type": "message_start",
                "message": {
                    **msg,
                    "content": [],
                    "stop_reason": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            },
            "message_start",
        )
    ]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            out.append(
                sse(
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                    "content_block_start",
                )
            )
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces(block["text"])]
        elif block["type"] not in _CALL_BLOCKS.values():  # sent whole in its start
            out.append(
                sse(
                    {"type": "content_block_start", "index": i, "content_block": block},
                    "content_block_start",
                )
            )
            deltas = []
        else:
            out.append(
                sse(
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {**block, "input": {}},
                    },
                    "content_block_start",
                )
            )
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in pieces(call_arguments_text(calls[i - (1 if text else 0)]))
            ]
        out += [
            sse({"type": "content_block_delta", "index": i, "delta": d}, "content_block_delta")
            for d in deltas
        ]
        out.append(sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    out.append(
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output_tokens", 0)},
            },
            "message_delta",
        )
    )
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return Rendered("text/event-stream", out)
