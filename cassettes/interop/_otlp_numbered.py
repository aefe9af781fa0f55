"""The older openllmetry attributes (opentelemetry-instrumentation-openai / -anthropic before 0.50,
still in many deployments): each message flattened by its number, ``gen_ai.prompt.N.{role,
content,tool_call_id}`` with ``gen_ai.prompt.N.tool_calls.M.{id,name,arguments}``, and the answer's
``gen_ai.completion.N.{role,content,finish_reason}`` with ``…tool_calls.M.*``; read as semconv
messages (``{"role", "parts"}``)."""

from __future__ import annotations

import re
from typing import Any

from ._otlp_spans import flattened, json_attribute

__all__ = ["numbered", "numbered_tools"]

_KEY = {side: re.compile(rf"gen_ai\.{side}\.(\d+)\.(.+)") for side in ("prompt", "completion")}
_CALL = re.compile(r"tool_calls\.(\d+)\.(.+)")
_TOOL = re.compile(r"llm\.request\.functions\.(\d+)\.(name|description|parameters|input_schema)")


def _message(msg: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    content = msg.get("content")
    if isinstance(content, str) and content[:1] == "[":  # Anthropic blocks, as JSON
        blocks = json_attribute(content)
        if isinstance(blocks, list):
            content = "".join(
                str(b.get("text") or "") for b in blocks if isinstance(b, dict)
                and b.get("type") == "text"
            )  # fmt: skip
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    parts.append({"type": "tool_call_response", "id": b.get("tool_use_id"),
                                  "response": b.get("content")})  # fmt: skip
    if msg.get("role") == "tool":
        parts.append(
            {"type": "tool_call_response", "id": msg.get("tool_call_id"), "response": content}
        )
    elif isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    for call in flattened(msg, _CALL):
        parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                      "arguments": call.get("arguments")})  # fmt: skip
    out = {"role": str(msg.get("role") or "user"), "parts": parts}
    if isinstance(msg.get("finish_reason"), str):
        out["finish_reason"] = msg["finish_reason"]
    return out


def numbered(a: dict[str, Any]) -> tuple[list[Any] | None, list[Any] | None]:
    """(input messages, output messages) of a span in the older numbered attributes; ``None``
    for a side the span has none of."""
    inputs = [_message(m) for m in flattened(a, _KEY["prompt"])]
    outputs = [_message(m) for m in flattened(a, _KEY["completion"])]
    return inputs or None, outputs or None


def numbered_tools(a: dict[str, Any]) -> list[dict[str, Any]]:
    """``llm.request.functions.N.{name,description,parameters}`` (``input_schema`` for
    Anthropic) as semconv tool definitions."""
    return [
        {f: json_attribute(v) if f in ("parameters", "input_schema") else v for f, v in t.items()}
        for t in flattened(a, _TOOL)
    ]
