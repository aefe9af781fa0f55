"""The Vercel AI SDK's own telemetry (``experimental_telemetry``, scope ``ai``) read as the
conventions' attributes: each ``ai.generateText.doGenerate`` / ``ai.streamText.doStream`` span is
one model call, its model, usage, response id and finish reasons under ``gen_ai.*`` names, and
its content under the SDK's own: the prompt as the SDK gave it to its provider
(``ai.prompt.messages``: its ``LanguageModelV3Prompt``, ``tool-call`` / ``tool-result`` parts),
the tools (``ai.prompt.tools``), the answer (``ai.response.text``, ``ai.response.toolCalls``,
``ai.response.reasoning``). Its finish reasons are the SDK's own (``tool-calls``), put back as
the API's where the profile knows the provider (:class:`~._otlp_profiles.OwnAttributes`).

What it cannot read is said, never judged: a provider the profile does not name (the OpenAI
Responses model, ``openai.responses``: its request is not the SDK's prompt rebuilt as chat
messages), a part of a kind it does not know (a file, an image), content not recorded
(``recordInputs`` / ``recordOutputs`` false: no ``ai.prompt.messages`` / ``ai.response.*``).
"""

from __future__ import annotations

from typing import Any

import orjson

from ..hints import count
from . import _genai_names as genai
from ._otlp_profiles import Instrumentation
from ._otlp_spans import json_attribute, listed

__all__ = ["ai_sdk_call"]


def _dumps(v: Any) -> str:
    return orjson.dumps(v).decode()


def _result(output: Any) -> tuple[Any, bool]:
    """A ``tool-result`` part's ``output`` as the text the provider sends (``text`` and
    ``error-text`` as they are, ``json`` / ``error-json`` / ``content`` as JSON), and whether it
    was read."""
    if not isinstance(output, dict):
        return None, False
    kind, value = output.get("type"), output.get("value")
    if kind in ("text", "error-text") and isinstance(value, str):
        return value, True
    if kind in ("json", "error-json", "content"):
        return _dumps(value), True
    return None, False


def _parts(content: Any, unread: list[str]) -> list[dict[str, Any]]:
    """The SDK's message content (a string, or its parts) as semconv parts; a part of a kind not
    read is named in ``unread``."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    out: list[dict[str, Any]] = []
    for p in listed(content):
        kind = p.get("type") if isinstance(p, dict) else None
        if kind == "text" and isinstance(p.get("text"), str):
            out.append({"type": "text", "content": p["text"]})
        elif kind == "reasoning" and isinstance(p.get("text"), str):
            out.append({"type": "reasoning", "content": p["text"]})
        elif kind == "tool-call" and isinstance(p.get("toolName"), str):
            args = p.get("input")
            args = json_attribute(args) if isinstance(args, str) else args
            out.append({"type": "tool_call", "id": p.get("toolCallId"), "name": p["toolName"],
                        "arguments": args})  # fmt: skip
        elif kind == "tool-result":
            said, ok = _result(p.get("output"))
            if ok:
                out.append({"type": "tool_call_response", "id": p.get("toolCallId"),
                            "response": said})  # fmt: skip
            else:
                unread.append(f"a tool-result output of type {str(p.get('output'))[:40]!r}")
        else:
            unread.append(f"a {str(kind)[:40]!r} part")
    return out


def _messages(raw: Any, unread: list[str]) -> list[dict[str, Any]] | None:
    """``ai.prompt.messages`` as semconv messages (``None``: not a list of messages)."""
    msgs = json_attribute(raw)
    if not isinstance(msgs, list):
        return None
    out = []
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            unread.append("a message of no known role")
            continue
        out.append({"role": m["role"], "parts": _parts(m.get("content"), unread)})
    return out


def _answer(a: dict[str, Any], own: Any, finish: str | None) -> dict[str, Any] | None:
    """The answer (``ai.response.*``) as a semconv output message, ``None`` if not recorded."""
    text, calls = a.get(own.text), json_attribute(a.get(own.tool_calls))
    reasoning = a.get(own.reasoning)
    if not isinstance(text, str) and not isinstance(calls, list):
        return None
    parts: list[dict[str, Any]] = []
    if isinstance(reasoning, str) and reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    if isinstance(text, str) and text:
        parts.append({"type": "text", "content": text})
    unread: list[str] = []
    # (a streamed answer's calls say their type; a generated one's do not: each is a call)
    made = [{**c, "type": "tool-call"} for c in listed(calls) if isinstance(c, dict)]
    parts += _parts(made, unread)
    said: dict[str, Any] = {"role": "assistant", "parts": parts}
    if finish:
        said["finish_reason"] = finish
    return said


def ai_sdk_call(
    a: dict[str, Any], prof: Instrumentation
) -> tuple[dict[str, Any], list[str], list[str]] | None:
    """The attributes of an AI SDK model call span in the conventions' names, its notes, and what
    of its content was not read; ``None``: not such a span."""
    own = prof.own
    if own is None or a.get(own.operation) not in own.calls:
        return None
    provider = str(a.get(own.provider) or "")
    named = own.providers.get(provider)
    out = {**a, genai.OPERATION: "chat", genai.STREAM: a[own.operation] in own.streamed}
    notes: list[str] = []
    if named is None:  # (its prompt is not what went on the wire in a shape looptap rebuilds)
        notes.append(
            f"imported: the AI SDK's provider {provider[:60]!r} is one looptap has no profile of: "
            "its model, usage and finish are read, its content is not, nothing is judged on it"
        )
        return {k: v for k, v in out.items() if k != genai.FINISH_REASONS}, notes, []
    out[genai.PROVIDER] = named
    renamed = own.finishes.get(named, {})
    reasons = [renamed.get(str(r), str(r)) for r in listed(a.get(genai.FINISH_REASONS))]
    if reasons:
        out[genai.FINISH_REASONS] = reasons
    unread: list[str] = []
    messages = _messages(a.get(own.messages), unread)
    if messages is not None:
        system = [m for m in messages if m["role"] == "system"]
        out[genai.SYSTEM_INSTRUCTIONS] = _dumps([p for m in system for p in m["parts"]])
        out[genai.INPUT_MESSAGES] = _dumps([m for m in messages if m["role"] != "system"])
    tools = [json_attribute(t) for t in listed(a.get(own.tools))]
    if tools:
        out[genai.TOOL_DEFINITIONS] = _dumps([t for t in tools if isinstance(t, dict)])
    answer = _answer(a, own, reasons[0] if reasons else None)
    if answer is not None:
        out[genai.OUTPUT_MESSAGES] = _dumps([answer])
    if unread:
        kinds = "; ".join(sorted(set(unread))[:3])
        notes.append(f"imported: {count(len(unread), 'part')} of the AI SDK's prompt not read "
                     f"({kinds}): nothing is judged on them")  # fmt: skip
    return out, notes, [f"messages: {u}, not read" for u in sorted(set(unread))]
