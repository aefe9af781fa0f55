"""A Bedrock ``ConverseStream`` answer rendered from a normalised one (what replay serves for a
round trip rebuilt from a trace that says the call streamed): AWS event-stream frames, as the
runtime sends them and botocore reads them."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import orjson

from ...models import FinishReason, NormalisedResponse
from .._replay import Rendered, answer_calls, answer_text, call_arguments_text

__all__ = ["render_converse_stream"]

_STOP = {
    FinishReason.TOOL_CALL: "tool_use",
    FinishReason.TRUNCATED_LENGTH: "max_tokens",
    FinishReason.FILTERED: "content_filtered",
}


def _frame(event: str, payload: dict[str, Any]) -> bytes:
    heads = {":event-type": event, ":content-type": "application/json", ":message-type": "event"}
    hb = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
        for k, v in heads.items()
    )
    body = orjson.dumps(payload)
    prelude = struct.pack(">II", 16 + len(hb) + len(body), len(hb))
    msg = prelude + struct.pack(">I", zlib.crc32(prelude)) + hb + body
    return msg + struct.pack(">I", zlib.crc32(msg))


def render_converse_stream(answer: NormalisedResponse) -> Rendered:
    """``answer`` as ``ConverseStream`` events: the text block by one delta, each tool call's
    start and its input as one JSON-string delta, the stop reason, the usage."""
    out = [_frame("messageStart", {"role": "assistant"})]
    blocks: list[tuple[dict[str, Any] | None, dict[str, Any]]] = []
    text = answer_text(answer)
    if text:
        blocks.append((None, {"text": text}))
    for c in answer_calls(answer):
        use = {"toolUse": {"toolUseId": c.id or "", "name": c.name}}
        blocks.append((use, {"toolUse": {"input": call_arguments_text(c)}}))
    for n, (first, delta) in enumerate(blocks):
        if first is not None:
            out.append(_frame("contentBlockStart", {"contentBlockIndex": n, "start": first}))
        out.append(_frame("contentBlockDelta", {"contentBlockIndex": n, "delta": delta}))
        out.append(_frame("contentBlockStop", {"contentBlockIndex": n}))
    stop = _STOP.get(answer.finish_reason, "end_turn") if answer.finish_reason else "end_turn"
    out.append(_frame("messageStop", {"stopReason": stop}))
    u = answer.usage
    if u is not None:
        i, o = u.input_tokens or 0, u.output_tokens or 0
        usage = {"inputTokens": i, "outputTokens": o, "totalTokens": i + o}
        out.append(_frame("metadata", {"usage": usage, "metrics": {"latencyMs": 0}}))
    return Rendered("application/vnd.amazon.eventstream", out)
