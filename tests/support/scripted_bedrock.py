"""The scripted upstream's Bedrock Converse answers (:mod:`tests.support.scripted`): ``Converse``
as one JSON body and ``ConverseStream`` as AWS event-stream frames, in the shapes of botocore's
``bedrock-runtime`` service model, so that boto3 reads them as it reads the service's."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tests.support.secret_streams import aws_frame

if TYPE_CHECKING:
    from tests.support.scripted import Logged, Reply, ScriptedUpstream


def converse(up: ScriptedUpstream, reply: Reply, usage_in: int, logged: Logged) -> dict[str, Any]:
    """The ``Converse`` answer carrying ``reply``'s text and tool calls."""
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"text": reply.text})
    for c in reply.calls:
        cid = up.new_id("tooluse_s")
        logged.ids.append(cid)
        content.append({"toolUse": {"toolUseId": cid, "name": c.name, "input": c.arguments}})
    out_tokens = max(1, len(json.dumps(content)) // 4)
    stop = "max_tokens" if reply.cut else "tool_use" if reply.calls else "end_turn"
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {
            "inputTokens": usage_in,
            "outputTokens": out_tokens,
            "totalTokens": usage_in + out_tokens,
        },
        "metrics": {"latencyMs": 7},
    }


def _event(kind: str, body: dict[str, Any]) -> bytes:
    head = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return aws_frame(head, json.dumps(body).encode())


def converse_stream(answer: dict[str, Any]) -> list[bytes]:
    """``answer`` (a ``Converse`` body) as ``ConverseStream`` sends it: a text block by its
    deltas, a tool call's input as one JSON-string delta after the block's start."""
    out = [_event("messageStart", {"role": "assistant"})]
    for i, block in enumerate(answer["output"]["message"]["content"]):
        if "toolUse" in block:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            out.append(_event("contentBlockStart", {"contentBlockIndex": i, "start": start}))
            delta: dict[str, Any] = {"toolUse": {"input": json.dumps(use["input"])}}
        else:
            delta = {"text": block["text"]}
        out.append(_event("contentBlockDelta", {"contentBlockIndex": i, "delta": delta}))
        out.append(_event("contentBlockStop", {"contentBlockIndex": i}))
    out.append(_event("messageStop", {"stopReason": answer["stopReason"]}))
    out.append(_event("metadata", {"usage": answer["usage"], "metrics": answer["metrics"]}))
    return out
