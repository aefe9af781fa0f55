"""Cohere chat v1 (``POST …/v1/chat``) and ``/v1/generate``, also the body Bedrock InvokeModel
carries for a ``cohere.command-r*`` model; with the finish values and the billed units v2 kept.

v1: ``message`` (the new user turn), ``chat_history`` (``role`` ``USER``/``CHATBOT``/``SYSTEM``/
``TOOL``), ``preamble`` (system), ``tools`` with ``parameter_definitions``, and ``tool_results``
(``{"call": {"name", "parameters"}, "outputs": [...]}``). The reply is ``text``, ``tool_calls``
(``{"name", "parameters"}``, no id: the call is matched to its result by name and parameters)
and ``finish_reason``. Streams are NDJSON events with ``event_type`` ``stream-start``,
``text-generation``, ``tool-calls-chunk``, ``tool-calls-generation`` and ``stream-end`` (which
carries the whole response).

v1 ``/v1/generate`` (text generation; the SDK's ``Generation`` and ``GenerateStreamedResponse``):
``{"prompt", "model", "max_tokens", …}`` → ``{"id", "generations": [{"id", "text",
"finish_reason"}], "prompt", "meta"}``; streamed as the v1 NDJSON events (``text-generation`` with
``text``, then ``stream-end`` with ``finish_reason`` and ``response.generations``). Read by the v1
code.
"""

from __future__ import annotations

from typing import Any

from ...models import (
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from ...wire import Framed
from .._parts import StreamParts
from .._values import as_int, as_obj, as_str, compact_json, finish_lookup, tool_call_from_object

__all__ = ["FINISH", "reassemble_v1", "usage_from", "v1_request", "v1_response"]

JSON = dict[str, Any]

FINISH = {
    "COMPLETE": FinishReason.COMPLETE,
    "STOP_SEQUENCE": FinishReason.COMPLETE,
    "END_TURN": FinishReason.COMPLETE,  # Bedrock's Cohere models
    "MAX_TOKENS": FinishReason.TRUNCATED_LENGTH,
    "TOOL_CALL": FinishReason.TOOL_CALL,
    "ERROR": FinishReason.ERROR,
    "ERROR_TOXIC": FinishReason.FILTERED,
    "ERROR_LIMIT": FinishReason.TRUNCATED_CONTEXT,
    "USER_CANCEL": FinishReason.CANCELLED,
    "TIMEOUT": FinishReason.ERROR,
}

_V1_ROLES = {"USER": "user", "CHATBOT": "assistant", "SYSTEM": "system", "TOOL": "tool"}
_V1_STRUCTURAL = {"model", "message", "chat_history", "preamble", "tools", "tool_results", "stream"}


def usage_from(u: Any) -> Usage | None:
    """v2 ``usage`` or v1 ``meta``: billed units as the counts, the rest kept raw."""
    if not isinstance(u, dict):
        return None
    billed = as_obj(u.get("billed_units"))
    tokens = as_obj(u.get("tokens"))
    src = billed or tokens
    if not src:
        return None
    inp, out = as_int(src.get("input_tokens")), as_int(src.get("output_tokens"))
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out if inp is not None and out is not None else None,
        raw={k: u[k] for k in ("billed_units", "tokens", "cached_tokens") if k in u},
    )


def _v1_call(tc: Any) -> ToolCall:
    d = as_obj(tc)
    return tool_call_from_object(d.get("id"), d.get("name"), d.get("parameters"))


def _v1_results(results: Any) -> list[Part]:
    out: list[Part] = []
    for r in results if isinstance(results, list) else []:
        if not isinstance(r, dict):
            continue
        call = as_obj(r.get("call"))
        outputs = r.get("outputs")
        content = (
            outputs
            if isinstance(outputs, str)
            else compact_json(outputs)
            if outputs is not None
            else ""
        )
        out.append(
            Part(
                kind="tool_result",
                tool_result=ToolResult(name=as_str(call.get("name")), content=content),
                provider_details={"call": call},
            )
        )
    return out


def _v1_message(m: Any) -> Message:
    if not isinstance(m, dict):
        return Message(role="unknown", parts=[Part(kind="other", provider_details={"block": m})])
    role = _V1_ROLES.get(str(m.get("role")).upper(), as_str(m.get("role")) or "unknown")
    parts: list[Part] = []
    if isinstance(m.get("message"), str) and m["message"]:
        parts.append(Part(kind="text", text=m["message"]))
    for tc in m.get("tool_calls") or []:
        parts.append(Part(kind="tool_call", tool_call=_v1_call(tc)))
    parts.extend(_v1_results(m.get("tool_results")))
    return Message(role=role, parts=parts)


def _v1_tools(tools: Any) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        defs = t.get("parameter_definitions")
        params: JSON | None = None
        if isinstance(defs, dict):  # {"city": {"type": "str", "description": …, "required": true}}
            params = {
                "type": "object",
                "properties": {
                    k: {kk: vv for kk, vv in v.items() if kk != "required"}
                    for k, v in defs.items()
                    if isinstance(v, dict)
                },
                "required": [
                    k for k, v in defs.items() if isinstance(v, dict) and v.get("required")
                ],
            }
        out.append(
            ToolSpec(
                name=as_str(t.get("name")) or "",
                description=as_str(t.get("description")),
                parameters=params,
            )
        )
    return out


def v1_request(b: JSON, family: str, model: str | None, stream: bool) -> NormalisedRequest:
    """A v1 chat body (also Bedrock's ``cohere.command-r*`` InvokeModel body)."""
    messages = [_v1_message(m) for m in b.get("chat_history") or []]
    if b.get("tool_results"):
        messages.append(Message(role="tool", parts=_v1_results(b["tool_results"])))
    if isinstance(b.get("message"), str) and b["message"]:
        messages.append(Message(role="user", parts=[Part(kind="text", text=b["message"])]))
    system = (
        [Part(kind="text", text=b["preamble"])]
        if isinstance(b.get("preamble"), str) and b["preamble"]
        else []
    )
    system += [p for m in messages if m.role == "system" for p in m.parts]
    return NormalisedRequest(
        family=family,
        model=as_str(b.get("model")) or model,
        stream=stream,
        system=system,
        messages=messages,
        tools=_v1_tools(b.get("tools")),
        params={k: v for k, v in b.items() if k not in _V1_STRUCTURAL},
        history_key="chat_history",
    )


def v1_response(b: JSON) -> NormalisedResponse:
    """A v1 chat response (also the ``stream-end`` event's ``response``, and Bedrock's)."""
    parts: list[Part] = []
    if isinstance(b.get("text"), str) and b["text"]:
        parts.append(Part(kind="text", text=b["text"]))
    generations = [g for g in b.get("generations") or [] if isinstance(g, dict)]
    if "text" not in b and generations:  # /v1/generate: the first generation is the answer
        b = {**b, "finish_reason": b.get("finish_reason") or generations[0].get("finish_reason")}
        if isinstance(generations[0].get("text"), str) and generations[0]["text"]:
            parts.append(Part(kind="text", text=generations[0]["text"]))
    for tc in b.get("tool_calls") or []:
        parts.append(Part(kind="tool_call", tool_call=_v1_call(tc)))
    raw = as_str(b.get("finish_reason"))
    details: JSON = {k: b[k] for k in ("generation_id", "citations", "search_queries") if b.get(k)}
    if len(generations) > 1:
        details["generations"] = len(generations)
    return NormalisedResponse(
        id=as_str(b.get("response_id") or b.get("id")),
        parts=parts,
        finish_reason_raw=raw,
        finish_reason=finish_lookup(FINISH, raw, any(p.kind == "tool_call" for p in parts)),
        usage=usage_from(b.get("meta")),
        complete=True,
        provider_details=details or None,
    )


class _V1Stream(StreamParts):
    """v1 NDJSON events: the text as generated, then ``stream-end`` with the whole response."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Part] = []
        self.end: NormalisedResponse | None = None

    payloads = StreamParts.every_event

    def on(self, name: str | None, ev: Any) -> None:
        if not isinstance(ev, dict):
            return
        kind = ev.get("event_type")
        # /v1/generate's events before event_type was added
        if kind is None and "is_finished" in ev:
            kind = "stream-end" if ev.get("is_finished") else "text-generation"
        if kind == "text-generation" and isinstance(ev.get("text"), str):
            self.text("text", ev["text"])
        elif kind == "tool-calls-generation":
            self.calls = [
                Part(kind="tool_call", tool_call=_v1_call(tc)) for tc in ev.get("tool_calls") or []
            ]
        elif kind == "stream-end":
            resp = as_obj(ev.get("response"))
            self.end = v1_response(
                {**resp, "finish_reason": ev.get("finish_reason", resp.get("finish_reason"))}
            )
            # a generate stream's end may hold no text
            if not self.end.parts and self.joined("text"):
                self.end.parts = [Part(kind="text", text=self.joined("text"))]

    def close(self) -> NormalisedResponse:
        if self.end is not None:
            self.end.events = self.events
            return self.end
        return self.finish(parts=self.parts() + self.calls)


def reassemble_v1(framed: Framed) -> NormalisedResponse:
    return _V1Stream().read(framed)
