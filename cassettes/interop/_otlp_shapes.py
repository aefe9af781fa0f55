"""Messages a span keeps in a shape other than the conventions' parts, told by their content and
read by the family's own provider (the code that reads the wire): the APIs' messages
(OpenAI Chat's with ``tool_calls``, Anthropic's content blocks, Gemini's ``contents``) inside
``gen_ai.input.messages`` / ``gen_ai.output.messages``, and the Bedrock Converse content blocks
agent frameworks keep as their own (Strands Agents: ``[{"text": …}]``, ``[{"toolUse": …}]``,
``[{"toolResult": …}]``) in their events. Each is parsed as the request its family would have
sent, and its messages come back as semconv messages (``{"role", "parts"}``) for the import."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ..providers import by_family
from ._otlp_spans import json_attribute
from ._span_attributes import semconv_message

__all__ = ["as_semconv", "blocks", "result_text"]

#: Bedrock Converse's content blocks (each a one-key object): a framework's own blocks.
_CONVERSE = frozenset(
    "text toolUse toolResult image document video reasoningContent cachePoint guardContent".split()
)
#: Where each family's request is read (the path its adapter reads a generate call at).
_AT = {
    "openai_chat": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/m:generateContent",
    "bedrock": "/model/m/converse",
}


def blocks(value: Any) -> list[dict[str, Any]] | None:
    """``value`` (a JSON string or a list) as Bedrock Converse content blocks, if it is a list of
    them (each an object of one block key), else ``None``."""
    v = json_attribute(value) if isinstance(value, str) else value
    if not isinstance(v, list) or not v:
        return None
    ok = all(isinstance(b, dict) and len(b) == 1 and next(iter(b)) in _CONVERSE for b in v)
    return v if ok else None


def result_text(response: Any) -> Any:
    """A tool result kept as content blocks of text alone (``[{"text": "…"}]``, a framework's
    own result) is its text; any other result is as it was."""
    found = blocks(response) if isinstance(response, list) else None
    if found is None or not all(isinstance(b.get("text"), str) for b in found):
        return response
    return "".join(b["text"] for b in found)


def _family(messages: list[Any]) -> str | None:
    """The API whose message shape ``messages`` are in (``None``: the conventions' parts)."""
    for m in messages:
        if not isinstance(m, dict):
            return None
        parts, content = m.get("parts"), m.get("content")
        if isinstance(parts, list) and parts and all(isinstance(p, dict) for p in parts):
            return None if any("type" in p for p in parts) else "gemini"
        if "tool_calls" in m or "tool_call_id" in m or m.get("role") == "tool":
            return "openai_chat"
        if blocks(content) is not None:
            return "bedrock"
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content
        ):
            return "anthropic"
    plain = all(isinstance(m, dict) and "role" in m and "parts" not in m for m in messages)
    return "openai_chat" if messages and plain else None


def as_semconv(messages: Any) -> Any:
    """``messages`` as semconv messages when they are in an API's shape (parsed by the family's
    provider; an output message's ``finish_reason`` kept), else as they were."""
    if not isinstance(messages, list):
        return messages
    family = _family(messages)
    adapter = by_family(family) if family else None
    if adapter is None:
        return messages
    body = {"contents": messages} if family == "gemini" else {"messages": messages}
    try:
        req = adapter.parse_request(body, urlsplit("http://trace" + _AT[str(family)]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return messages  # (said where it is read: no message content)
    out = [semconv_message(m) for m in req.messages]
    if family != "openai_chat":  # (OpenAI Chat keeps its system messages among the messages)
        system = [{"type": "text", "content": p.text or ""} for p in req.system if p.kind == "text"]
        out = ([{"role": "system", "parts": system}] if system else []) + out
    finish = messages[-1].get("finish_reason") if isinstance(messages[-1], dict) else None
    if out and isinstance(finish, str):
        out[-1]["finish_reason"] = finish
    return out
