"""The older openllmetry attributes (opentelemetry-instrumentation-openai / -anthropic before 0.50,
still in many deployments): each message flattened by its number, ``gen_ai.prompt.N.{role,
content,tool_call_id}`` with ``gen_ai.prompt.N.tool_calls.M.{id,name,arguments}``, and the answer's
``gen_ai.completion.N.{role,content,finish_reason}`` with ``…tool_calls.M.*``; read as semconv
messages (``{"role", "parts"}``)."""

from __future__ import annotations

import re
from typing import Any

from ._otlp_spans import json_attribute

__all__ = ["numbered", "numbered_tools"]

_KEY = re.compile(r"gen_ai\.(prompt|completion)\.(\d+)\.(.+)")
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
    for _, call in sorted(msg["calls"].items()):
        parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                      "arguments": call.get("arguments")})  # fmt: skip
    out = {"role": str(msg.get("role") or "user"), "parts": parts}
    if isinstance(msg.get("finish_reason"), str):
        out["finish_reason"] = msg["finish_reason"]
    return out


def numbered(a: dict[str, Any]) -> tuple[list[Any] | None, list[Any] | None]:
    """(input messages, output messages) of a span in the older numbered attributes; ``None``
    for a side the span has none of."""
    sides: dict[str, dict[int, dict[str, Any]]] = {"prompt": {}, "completion": {}}
    for key, value in a.items():
        m = _KEY.fullmatch(key)
        if m is None:
            continue
        msg = sides[m.group(1)].setdefault(int(m.group(2)), {"calls": {}})
        c = _CALL.fullmatch(m.group(3))
        if c is not None:
            msg["calls"].setdefault(int(c.group(1)), {})[c.group(2)] = value
        else:
            msg[m.group(3)] = value
    inputs = [_message(m) for _, m in sorted(sides["prompt"].items())]
    outputs = [_message(m) for _, m in sorted(sides["completion"].items())]
    return inputs or None, outputs or None


def numbered_tools(a: dict[str, Any]) -> list[dict[str, Any]]:
    """``llm.request.functions.N.{name,description,parameters}`` (``input_schema`` for
    Anthropic) as semconv tool definitions."""
    tools: dict[int, dict[str, Any]] = {}
    for key, value in a.items():
        m = _TOOL.fullmatch(key)
        if m is not None:
            field = m.group(2)
            tools.setdefault(int(m.group(1)), {})[field] = (
                json_attribute(value) if field in ("parameters", "input_schema") else value
            )
    return [t for _, t in sorted(tools.items())]
