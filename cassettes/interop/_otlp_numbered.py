"""The older openllmetry attributes (opentelemetry-instrumentation-openai / -anthropic before 0.50,
still in many deployments): each message flattened by its number, ``gen_ai.prompt.N.{role,
content,tool_call_id}`` with ``gen_ai.prompt.N.tool_calls.M.{id,name,arguments}``, and the answer's
``gen_ai.completion.N.{role,content,finish_reason}`` with ``…tool_calls.M.*``; read as semconv
messages (``{"role", "parts"}``)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from ._otlp_spans import flattened, json_attribute

__all__ = ["function_calls", "ids_from_history", "numbered", "numbered_tools"]

_KEY = {side: re.compile(rf"gen_ai\.{side}\.(\d+)\.(.+)") for side in ("prompt", "completion")}
_CALL = re.compile(r"tool_calls\.(\d+)\.(.+)")
_FUNCTION_CALL = re.compile(r"gen_ai\.completion\.(\d+)\.function_call\.(name|arguments)")
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


def function_calls(a: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's tool calls kept as ``gen_ai.completion.N.function_call.{name,arguments}``
    (N the call's number; LiteLLM 1.110's OTel callback, beside an output message without them)
    as semconv ``tool_call`` parts: their ids are not kept (``None``)."""
    return [
        {"type": "tool_call", "id": None, "name": c.get("name"), "arguments": c.get("arguments")}
        for c in flattened(a, _FUNCTION_CALL)
        if isinstance(c.get("name"), str)
    ]


def _said(calls: Any) -> list[tuple[Any, Any]] | None:
    """An OpenAI Chat message's tool calls as (name, arguments parsed), ``None`` if none."""
    if not isinstance(calls, list) or not calls:
        return None
    out = []
    for c in calls:
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict):
            return None
        args = fn.get("arguments")
        out.append((fn.get("name"), json_attribute(args) if isinstance(args, str) else args))
    return out


def _prefixes(messages: list[Any]) -> list[bytes]:
    """A digest of each prefix of ``messages`` (``[]``'s first, the whole list's last)."""
    h = hashlib.blake2b(digest_size=16)
    out = [h.digest()]
    for m in messages:
        h.update(orjson.dumps(m, option=orjson.OPT_SORT_KEYS) + b"\n")
        out.append(h.copy().digest())
    return out


def _made_up(call_id: Any) -> bool:
    """An id looptap gave a tool call its trace kept without one (providers' ``chat_ids``)."""
    return isinstance(call_id, str) and call_id.startswith("call_imported_")


def _lacking_ids(call: Any) -> bool:
    """An OpenAI Chat answer whose tool calls have ids looptap gave them."""
    made = call.output.get("tool_calls") if isinstance(call.output, dict) else None
    return (
        call.family == "openai_chat"
        and "tool_call.id" in call.inferred
        and isinstance(made, list)
        and any(isinstance(c, dict) and _made_up(c.get("id")) for c in made)
    )


def ids_from_history(calls: list[Any]) -> None:
    """Put back the ids of an OpenAI Chat answer's tool calls its span did not keep
    (:func:`function_calls`; looptap gave them ids of its own, ``tool_call.id`` inferred) from a
    later call's request of the same conversation: the one whose messages are this call's, then
    an assistant message with the same calls (names and arguments), carried verbatim; its ids are
    that message's. An answer no later request carries keeps looptap's ids and says so (``tool
    call ids`` unread)."""
    pending: dict[bytes, list[Any]] = {}  # the request's messages (digest) → calls lacking ids
    for call in calls:
        if _lacking_ids(call):
            pending.setdefault(_prefixes(call.messages)[-1], []).append(call)
    if not pending:
        return
    for later in calls:
        msgs = later.messages if later.family == "openai_chat" else []
        prefixes = _prefixes(msgs)  # (each message hashed once: linear in the request)
        for k, m in enumerate(msgs):
            if not (isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")):
                continue
            for call in pending.get(prefixes[k], []):
                made = call.output["tool_calls"]
                if _said(made) == _said(m["tool_calls"]):
                    for c, echoed in zip(made, m["tool_calls"], strict=True):
                        c["id"] = echoed.get("id")
    for waiting in pending.values():
        for call in waiting:
            _ids_said(call)


def _ids_said(call: Any) -> None:
    """What a call whose answer's tool calls came without ids says of them."""
    if any(_made_up(c.get("id")) for c in call.output["tool_calls"]):
        call.unread.append("tool call ids")
        call.notes.append(
            "imported: the span kept this answer's tool calls without their ids, and no later "
            "request of the trace carries them: their ids are unread"
        )
        return
    call.notes.append(
        "imported: the span kept this answer's tool calls without their ids: taken from the "
        "next request's history, which carries the same calls"
    )
    ids = [c.get("id") for m in call.messages for c in m.get("tool_calls") or []]
    if not any(_made_up(i) for i in ids):
        call.inferred.discard("tool_call.id")
