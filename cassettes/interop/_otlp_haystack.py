"""Haystack's OpenTelemetry tracer (opentelemetry-haystack, scope ``haystack``) read as the
conventions' attributes. With its content tracing on (``HAYSTACK_CONTENT_TRACING_ENABLED``) a
model call's span keeps the chat generator's input and output as JSON in Haystack's own
``ChatMessage`` format (``{"role", "meta", "name", "content": [{"text"} | {"tool_call"} |
{"tool_call_result"} | {"reasoning"} …]}``): an Agent's ``haystack.agent.step.llm`` span
(``haystack.agent.step.llm.input`` / ``.output``), a chat generator run as a pipeline component
(``haystack.component.run`` whose ``haystack.component.type`` is a ``…ChatGenerator``;
``haystack.component.input`` / ``.output``) or inside another component
(``haystack.chat_generator.run``). The input's ``messages`` and ``tools`` are the request; the
output's ``replies`` the answer, each reply's ``meta`` its model, finish reason (Haystack's,
OpenAI's words) and usage.

Said, never judged: content not traced (no input or output on the span), a part of a kind not
read (an image, a file), a second reply. Its spans name no model asked for (the reply's is the
one that answered), no stream flag and no parameters set when the generator was made: inferred.
"""

from __future__ import annotations

from typing import Any

import orjson

from . import _genai_names as genai
from ._otlp_profiles import Instrumentation
from ._otlp_spans import json_attribute, listed

__all__ = ["haystack_call"]

#: The span names that are a model call, and the attribute prefix their content is under.
_CALLS = {
    "haystack.agent.step.llm": "haystack.agent.step.llm",
    "haystack.component.run": "haystack.component",
    "haystack.chat_generator.run": "haystack.component",
}
_TYPE = "haystack.component.type"
#: The chat generators whose API is known (its Agent's step spans do not name theirs).
_PROVIDERS = {"OpenAIChatGenerator": "openai", "AnthropicChatGenerator": "anthropic"}


def _dumps(v: Any) -> str:
    return orjson.dumps(v).decode()


def _parts(content: Any, unread: list[str]) -> list[dict[str, Any]]:
    """A ``ChatMessage``'s content parts as semconv parts; a part not read is named in
    ``unread``."""
    out: list[dict[str, Any]] = []
    for p in listed(content):
        kind = next(iter(p), None) if isinstance(p, dict) and len(p) == 1 else None
        v = p.get(kind) if kind else None
        if kind == "text" and isinstance(v, str):
            if v:  # (an empty text beside tool calls: no part on the wire)
                out.append({"type": "text", "content": v})
        elif kind == "tool_call" and isinstance(v, dict) and isinstance(v.get("tool_name"), str):
            out.append({"type": "tool_call", "id": v.get("id"), "name": v["tool_name"],
                        "arguments": v.get("arguments")})  # fmt: skip
        elif (
            kind == "tool_call_result" and isinstance(v, dict) and isinstance(v.get("result"), str)
        ):
            origin: dict[str, Any] = v["origin"] if isinstance(v.get("origin"), dict) else {}
            out.append({"type": "tool_call_response", "id": origin.get("id"),
                        "response": v["result"]})  # fmt: skip
        elif (
            kind == "reasoning" and isinstance(v, dict) and isinstance(v.get("reasoning_text"), str)
        ):
            out.append({"type": "reasoning", "content": v["reasoning_text"]})
        else:
            unread.append(f"a {str(kind)[:40]!r} part" if kind else "a part of no known kind")
    return out


def _message(m: Any, unread: list[str]) -> dict[str, Any] | None:
    if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
        unread.append("a message of no known role")
        return None
    return {"role": m["role"], "parts": _parts(m.get("content"), unread)}


def _usage(meta: dict[str, Any]) -> dict[str, Any]:
    """A reply's ``meta.usage`` (the API's, as the generator copied it) as the conventions'."""
    usage: dict[str, Any] = meta["usage"] if isinstance(meta.get("usage"), dict) else {}
    out = {}
    for attr, names in (
        ("gen_ai.usage.input_tokens", ("prompt_tokens", "input_tokens")),
        ("gen_ai.usage.output_tokens", ("completion_tokens", "output_tokens")),
    ):
        v = next((usage[n] for n in names if isinstance(usage.get(n), int)), None)
        if v is not None:
            out[attr] = v
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        out["gen_ai.usage.cache_read.input_tokens"] = details["cached_tokens"]
    return out


def haystack_call(
    a: dict[str, Any], name: Any, prof: Instrumentation
) -> tuple[dict[str, Any], list[str], list[str]] | None:
    """A Haystack model call span's attributes in the conventions' names, its notes, and what of
    its content was not read; ``None``: not such a span."""
    prefix = _CALLS.get(name) if prof.name == "Haystack" else None
    kind = str(a.get(_TYPE) or "")
    if prefix is None or (name == "haystack.component.run" and not kind.endswith("ChatGenerator")):
        return None
    out = {**a, genai.OPERATION: "chat"}
    notes: list[str] = []
    provider = _PROVIDERS.get(kind) or ("openai" if not kind else None)
    if provider is not None:
        out[genai.PROVIDER] = provider
    if not kind:
        notes.append("imported: Haystack's Agent step spans do not name its chat generator: "
                      "rebuilt as OpenAI Chat (inferred)")  # fmt: skip
    unread: list[str] = []
    given = json_attribute(a.get(f"{prefix}.input"))
    if isinstance(given, dict) and isinstance(given.get("messages"), list):
        messages = [m for m in (_message(x, unread) for x in given["messages"]) if m]
        system = [m for m in messages if m["role"] == "system"]
        out[genai.SYSTEM_INSTRUCTIONS] = _dumps([p for m in system for p in m["parts"]])
        out[genai.INPUT_MESSAGES] = _dumps([m for m in messages if m["role"] != "system"])
        tools = [t.get("data") for t in listed(given.get("tools")) if isinstance(t, dict)]
        out[genai.TOOL_DEFINITIONS] = _dumps([t for t in tools if isinstance(t, dict)])
    got = json_attribute(a.get(f"{prefix}.output"))
    replies = [r for r in listed(got.get("replies") if isinstance(got, dict) else None)
               if isinstance(r, dict)]  # fmt: skip
    answers = []  # (a second reply is said by the conventions' reader, as a second choice)
    for n, reply in enumerate(replies):
        answer = _message(reply, unread)
        meta = reply["meta"] if isinstance(reply.get("meta"), dict) else {}
        if answer is None:
            continue
        if isinstance(meta.get("finish_reason"), str):
            answer["finish_reason"] = meta["finish_reason"]
        answers.append(answer)
        if n == 0:
            out[genai.FINISH_REASONS] = [meta["finish_reason"]] if "finish_reason" in answer else []
            if isinstance(meta.get("model"), str):  # (the one that answered: no model asked for)
                out[genai.RESPONSE_MODEL] = meta["model"]
            out.update(_usage(meta))
    if answers:
        out[genai.OUTPUT_MESSAGES] = _dumps(answers)
    if unread:
        kinds = "; ".join(sorted(set(unread))[:3])
        notes.append(f"imported: {len(unread)} of Haystack's message parts not read ({kinds}): "
                     "nothing is judged on them")  # fmt: skip
    return out, notes, [f"messages: {u}, not read" for u in sorted(set(unread))]
