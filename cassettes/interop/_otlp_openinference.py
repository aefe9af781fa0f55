"""OpenInference's flattened span attributes read as semconv messages (``{"role", "parts"}``):
``llm.input_messages.N.message.*`` and ``llm.output_messages…`` with their tool calls, the content
lists some instrumentations write instead of ``content`` (the Anthropic one:
``message.contents.N.message_content.{type,text}``), and ``llm.tools.N.tool.json_schema`` in the
OpenAI shape (``{"type": "function", "function": {…}}``) or the Anthropic one (``{"name",
"input_schema"}``)."""

from __future__ import annotations

import re
from typing import Any

from ._otlp_spans import flattened, json_attribute

__all__ = ["flattened_messages", "openinference", "openinference_tools"]

#: OpenInference's keys, and the same flattened under the conventions' names (traceAI's
#: ``gen_ai.input.messages.N.message.*``).
_OI_KEY = {
    side: re.compile(rf"(?:llm\.{side}_messages|gen_ai\.{side}\.messages)\.(\d+)\.message\.(.+)")
    for side in ("input", "output")
}
_OI_CALL = re.compile(r"tool_calls\.(\d+)\.tool_call\.(.+)")
_OI_CONTENT = re.compile(r"contents\.(\d+)\.message_content\.(.+)")
_OI_TOOL = re.compile(r"llm\.tools\.(\d+)\.tool\.(json_schema)")


def _text(msg: dict[str, Any]) -> str | None:
    """A message's text: ``content``, else the text items of its ``contents`` list."""
    if isinstance(msg.get("content"), str):
        return str(msg["content"])
    texts = [
        str(c["text"])
        for c in flattened(msg, _OI_CONTENT)
        if c.get("type") in (None, "text") and isinstance(c.get("text"), str)
    ]
    return "".join(texts) if texts else None


def _messages(a: dict[str, Any], side: str) -> list[dict[str, Any]]:
    out = []
    for msg in flattened(a, _OI_KEY[side]):
        parts: list[dict[str, Any]] = []
        text = _text(msg)
        if msg.get("role") == "tool":
            parts.append(
                {"type": "tool_call_response", "id": msg.get("tool_call_id"), "response": text}
            )
        elif text is not None:
            parts.append({"type": "text", "content": text})
        for call in flattened(msg, _OI_CALL):
            parts.append(
                {"type": "tool_call", "id": call.get("id"), "name": call.get("function.name"),
                 "arguments": call.get("function.arguments")}
            )  # fmt: skip
        out.append({"role": str(msg.get("role") or "user"), "parts": parts})
    return out


def flattened_messages(a: dict[str, Any]) -> bool:
    """The span keeps its messages flattened by number (OpenInference's, traceAI's)."""
    return any(_OI_KEY["input"].fullmatch(k) or _OI_KEY["output"].fullmatch(k) for k in a)


def openinference(
    a: dict[str, Any], span: dict[str, Any]
) -> tuple[list[Any] | None, list[str], dict[str, Any] | None, Any]:
    """(input messages, system texts, the output message, its finish reason) of an OpenInference
    LLM span."""
    inputs = _messages(a, "input")
    outputs = _messages(a, "output")
    return inputs or None, [], (outputs[0] if outputs else None), a.get("llm.finish_reason")


def openinference_tools(a: dict[str, Any]) -> list[dict[str, Any]]:
    """``llm.tools.N.tool.json_schema`` as semconv tool definitions (name, description and the
        schema as its source spelled it: ``parameters`` or ``input_schema``; that of Bedrock's
    ``toolSpec``, ``inputSchema.json``, as ``parameters``), in N's order."""
    tools = []
    for flat in flattened(a, _OI_TOOL):
        t = json_attribute(flat["json_schema"])
        fn = t.get("function") if isinstance(t, dict) else None
        spec = t.get("toolSpec") if isinstance(t, dict) else None  # Bedrock Converse's
        if isinstance(fn, dict):
            tools.append({"type": "function", **fn})
        elif isinstance(spec, dict) and isinstance(spec.get("name"), str):
            schema = spec.get("inputSchema")
            schema = schema.get("json") if isinstance(schema, dict) else None
            tools.append({"name": spec["name"], "description": spec.get("description"),
                          "parameters": schema})  # fmt: skip
        elif isinstance(t, dict) and isinstance(t.get("name"), str):
            tools.append(t)
    return tools


def response_echo(a: dict[str, Any]) -> dict[str, Any] | None:
    """The OpenAI Responses answer an LLM span keeps as its ``output.value`` (OpenInference's
    openai-agents instrumentation): the call was a Responses call, and its
    ``llm.invocation_parameters`` are the answer's echo of the request's (defaults filled in), not
    what was sent."""
    if a.get("output.mime_type") != "application/json":
        return None
    body = json_attribute(a.get("output.value"))
    return body if isinstance(body, dict) and body.get("object") == "response" else None


def echoed_tools(a: dict[str, Any]) -> list[dict[str, Any]]:
    """The function tools a Responses answer echoes, as semconv tool definitions (``strict``
    kept)."""
    echo = response_echo(a) or {}
    tools = echo.get("tools")
    return [
        {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}
        for t in (tools if isinstance(tools, list) else [])
        if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str)
    ]
