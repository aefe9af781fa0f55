"""The GenAI semantic conventions' messages of a span read as semconv messages (``{"role",
"parts"}``): ``gen_ai.input.messages``, ``gen_ai.output.messages`` and
``gen_ai.system_instructions`` as span attributes or on the
``gen_ai.client.inference.operation.details`` event; else the per-message events of semconv ≤ 1.36
(``gen_ai.{system,user,assistant,tool}.message``, ``gen_ai.choice``); else openllmetry's numbered
attributes (:mod:`cassettes.interop._otlp_numbered`). What instrumentations write beside the
conventions (pydantic-ai's ``result``, a ``tool_use`` block repeated as text, a system prompt
written twice, an empty assistant message) is read as the conventions mean it, and said on the
call."""

from __future__ import annotations

from typing import Any

from ..hints import count
from ..providers import Call
from . import _genai_names as genai
from ._otlp_numbered import function_calls, numbered
from ._otlp_profiles import Instrumentation
from ._otlp_shapes import as_semconv, blocks, result_text
from ._otlp_spans import BODY, attributes, json_attribute, listed

__all__ = ["semconv", "typed"]


def typed(parts: Any, kind: str) -> list[dict[str, Any]]:
    """The parts of type ``kind`` (``text``, ``tool_call`` …) of a semconv message's ``parts``."""
    return [p for p in listed(parts) if isinstance(p, dict) and p.get("type") == kind]


def semconv(
    a: dict[str, Any], span: dict[str, Any], call: Call, prof: Instrumentation
) -> tuple[list[Any] | None, list[str], dict[str, Any] | None, Any]:
    """(input messages, system texts, the output message, its finish reason) of a span."""
    events = [e for e in span.get("events") or [] if isinstance(e, dict)]
    for e in events:  # the inference details event carries the same attributes
        if e.get("name") == "gen_ai.client.inference.operation.details":
            a = {**attributes(e.get("attributes")), **a}
    # (in the APIs' own shapes too: read by the family's provider)
    inputs = as_semconv(_messages_json(a, genai.INPUT_MESSAGES, call))
    outputs = as_semconv(_messages_json(a, genai.OUTPUT_MESSAGES, call))
    sys_parts = _messages_json(a, genai.SYSTEM_INSTRUCTIONS, call)
    system = [str(p.get("content") or "") for p in typed(sys_parts, "text")]
    if not isinstance(inputs, list) and not isinstance(outputs, list):
        inputs, outputs = _old_events(events)
    if not isinstance(inputs, list) and not isinstance(outputs, list):
        inputs, outputs = numbered(a)  # openllmetry before 0.50: gen_ai.prompt.N / completion.N
    out = outputs[0] if isinstance(outputs, list) and outputs else None
    out = _parts_read(out, prof) if isinstance(out, dict) else None
    if isinstance(outputs, list) and len(outputs) > 1:  # (n=2: each choice an output message)
        n = len(outputs)
        call.unread.append(f"output messages 2 to {n} of {n} (n={n}), not read")
    if out is not None and not typed(out.get("parts"), "tool_call") and function_calls(a):
        out = {**out, "parts": [*listed(out.get("parts")), *function_calls(a)]}  # (LiteLLM)
    if out is not None and _written_empty(out, a):
        out = None  # (the answer unread, said where it is read)
    if isinstance(inputs, list):
        inputs = [_parts_read(m, prof) for m in inputs if isinstance(m, dict)]
        inputs = _system_once(inputs, system, call)
        empty = [m for m in inputs if m.get("role") == "assistant" and not m.get("parts")]
        if empty:  # pydantic-ai's Anthropic history: no API takes an assistant message of nothing
            inputs = [m for m in inputs if not any(m is e for e in empty)]
            call.notes.append(
                f"imported: {count(len(empty), 'empty assistant message')} in the span's input "
                "left out (no request carries one)"
            )
    return inputs, system, out, out.get("finish_reason") if out else None


def _written_empty(out: dict[str, Any], a: dict[str, Any]) -> bool:
    """An output message of empty text parts alone while the span reports output tokens: the
    instrumentation wrote the answer as nothing (a streamed answer some modes write so), not the
    model; read as not kept, never as an empty answer."""
    parts = listed(out.get("parts"))
    if not parts or any(
        not (isinstance(p, dict) and p.get("type") == "text" and not p.get("content"))
        for p in parts
    ):
        return False
    tokens = next((a[k] for k in genai.USAGE["output_tokens"] if k in a), None)
    try:
        return int(tokens) > 0 if tokens is not None else False
    except (TypeError, ValueError):
        return False


def _messages_json(a: dict[str, Any], key: str, call: Call) -> Any:
    """A messages attribute parsed; one that is not valid JSON is said on the round trip."""
    raw = a.get(key)
    value = json_attribute(raw)
    if isinstance(raw, str) and raw and value is None:
        call.notes.append(
            f"imported: the span's {key} is not valid JSON ({count(len(raw), 'character')}); "
            "read as missing"
        )
        call.inferred.add("malformed " + key.removeprefix("gen_ai."))
    return value


def _system_once(inputs: list[Any], system: list[str], call: Call) -> list[Any]:
    """The input without its leading system messages where ``gen_ai.system_instructions`` says the
    same (an instrumentation that writes the system prompt in both, OpenLIT): taken once."""
    lead = 0
    while lead < len(inputs) and inputs[lead].get("role") == "system":
        lead += 1
    texts = [
        str(p.get("content") or "") for m in inputs[:lead] for p in typed(m.get("parts"), "text")
    ]
    if not lead or not system or "".join(texts) != "".join(system):
        return inputs
    call.notes.append("imported: the system prompt is in the span twice (its system "
                      "instructions and its input messages): taken once")  # fmt: skip
    return inputs[lead:]


def _parts_read(m: dict[str, Any], prof: Instrumentation) -> dict[str, Any]:
    """A semconv message whose tool results are under ``result`` (pydantic-ai) as under
    ``response``, a result kept as text blocks (Strands: ``[{"text": …}]``) its text, and
    without the text part that only repeats a tool call of the same message as JSON
    (openllmetry's LangChain instrumentation writes each Anthropic ``tool_use`` block so, beside
    its ``tool_call`` part)."""
    parts = m.get("parts")
    if not isinstance(parts, list):
        return m
    calls = {p.get("id") for p in typed(parts, "tool_call")}
    fixed = [
        {**p, "response": result_text(p.get("response", p.get("result")))}
        if isinstance(p, dict) and p.get("type") == "tool_call_response"
        else p
        for p in parts
        if not (isinstance(p, dict) and prof.tool_use_as_text and _echoed_call(p, calls))
    ]  # fmt: skip
    return {**m, "parts": fixed}


def _echoed_call(p: dict[str, Any], calls: set[Any]) -> bool:
    """A text part that is a ``tool_use`` block, as JSON, of a call the message has."""
    if p.get("type") != "text" or not str(p.get("content") or "").startswith('{"id": '):
        return False
    block = json_attribute(p.get("content"))
    return isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") in calls


_OLD_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _old_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    content = body.get("content")
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    for tc in json_attribute(body.get("tool_calls")) or []:
        if isinstance(tc, dict):
            fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else tc
            parts.append(
                {"type": "tool_call", "id": tc.get("id"), "name": fn.get("name"),
                 "arguments": fn.get("arguments")}
            )  # fmt: skip
    return parts


def _blocks_message(role: str, value: Any) -> dict[str, Any] | None:
    """An event's content kept as Bedrock Converse content blocks (Strands Agents' default
    events), read by the Converse provider as a message of ``role`` (a tool's result is in a
    user message there); a system message's blocks are its text."""
    found = blocks(value)
    if found is None:
        return None
    if role == "system":
        texts = [
            {"type": "text", "content": b["text"]} for b in found if isinstance(b.get("text"), str)
        ]
        return {"role": "system", "parts": texts}
    read = as_semconv([{"role": "assistant" if role == "assistant" else "user", "content": found}])
    return read[0] if isinstance(read, list) and len(read) == 1 else None


def _api_message(body: dict[str, Any]) -> dict[str, Any] | None:
    """An event body that is an API's whole message (a ``role`` beside its content: Semantic
    Kernel logs OpenAI Chat's), read by the family's provider as a semconv message."""
    whole = body.get("object") == "response" or body.get("type") == "message"
    if not whole and (
        not isinstance(body.get("role"), str) or not ({"content", "tool_calls"} & set(body))
    ):
        return None
    read = as_semconv([body])
    ok = isinstance(read, list) and len(read) == 1 and isinstance(read[0], dict)
    return read[0] if ok and "parts" in read[0] else None


def _old_events(events: list[dict[str, Any]]) -> tuple[list[Any] | None, list[Any] | None]:
    """The per-message events of semconv ≤ 1.36 (content on the event's attributes, or in the
    body of the log record it was sent as: as text, a framework's content blocks, or an API's
    whole message)."""
    inputs: list[Any] = []
    outputs: list[Any] = []
    for e in events:
        body = {**attributes(e.get("attributes")), **(e.get(BODY) or {})}
        role = _OLD_ROLES.get(str(e.get("name")))
        said = _blocks_message(role or "assistant", body.get("content" if role else "message"))
        message = body.get("message") if e.get("name") == "gen_ai.choice" else body
        message = json_attribute(message) if isinstance(message, str) else message
        whole = _api_message(message) if isinstance(message, dict) and role != "system" else None
        if whole is not None and role is not None:
            inputs.append(whole)
        elif whole is not None:
            outputs.append({"parts": whole["parts"], "finish_reason": body.get("finish_reason")})
        elif said is not None and role is not None:
            inputs.append(said)
        elif said is not None and e.get("name") == "gen_ai.choice":
            outputs.append({"parts": said["parts"], "finish_reason": body.get("finish_reason")})
        elif role == "tool":
            inputs.append(
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": body.get("id"),
                                            "response": body.get("content")}]}
            )  # fmt: skip
        elif role is not None:
            inputs.append({"role": role, "parts": _old_parts(body)})
        elif e.get("name") == "gen_ai.choice":
            msg = json_attribute(body.get("message"))
            parts = _old_parts(msg if isinstance(msg, dict) else body)
            outputs.append({"parts": parts, "finish_reason": body.get("finish_reason")})
    return (inputs or None), (outputs or None)
