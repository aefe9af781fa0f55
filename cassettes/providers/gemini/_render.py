"""An answer rendered as Gemini's ``generateContent`` / ``streamGenerateContent`` sends it (for
replay and the fake upstreams)."""

from __future__ import annotations

import re
from typing import Any

import orjson

from ...models import (
    FinishReason,
    NormalisedResponse,
    Usage,
)
from .._replay import (
    Rendered,
    answer_calls,
    answer_text,
    arguments_not_json,
    call_arguments_object,
    pieces,
)

__all__ = ["render_generate"]

#: The ``finishReason`` for a normalised class (rendering an answer).
_RAW_FINISH = {
    FinishReason.COMPLETE: "STOP",
    FinishReason.TOOL_CALL: "STOP",
    FinishReason.TRUNCATED_LENGTH: "MAX_TOKENS",
    FinishReason.FILTERED: "SAFETY",
}


#: A ``finishReason`` as Gemini spells one (``STOP``, ``UNEXPECTED_TOOL_CALL`` …).
_GEMINI_FINISH = re.compile(r"[A-Z][A-Z_]{1,40}")


def _usage_body(u: Usage | None) -> dict[str, Any] | None:
    if u is None:
        return None
    if isinstance(u.raw, dict) and ("totalTokenCount" in u.raw or "promptTokenCount" in u.raw):
        return u.raw
    out = {
        "promptTokenCount": u.input_tokens or 0,
        "candidatesTokenCount": max(0, (u.output_tokens or 0) - (u.reasoning_tokens or 0)),
    }
    if u.reasoning_tokens:
        out["thoughtsTokenCount"] = u.reasoning_tokens
    out["totalTokenCount"] = (
        u.total_tokens
        if u.total_tokens is not None
        else (u.input_tokens or 0) + (u.output_tokens or 0)
    )
    return out


def _other_parts(answer: NormalisedResponse) -> list[dict[str, Any]]:
    """The answer's parts but its text, in its order: the client's function calls, the calls
    Gemini ran itself and their results (``toolCall`` / ``toolResponse``), and the media it names
    (an image it made: a rebuilt answer has its type, not its bytes)."""
    out: list[dict[str, Any]] = []
    for p in answer.parts:
        tc, tr = p.tool_call, p.tool_result
        if tc is not None and tc.kind == "function":
            said: dict[str, Any] = {"id": tc.id} if tc.id else {}
            out.append(
                {"functionCall": {**said, "name": tc.name or "", "args": call_arguments_object(tc)}}
            )
        elif tc is not None and tc.kind == "server":
            said = {"id": tc.id or "", "toolType": tc.name or ""}
            out.append({"toolCall": {**said, "args": call_arguments_object(tc)}})
        elif tr is not None and (p.provider_details or {}).get("server") is True:
            said = {"id": tr.call_id or "", "toolType": tr.name or ""}
            out.append({"toolResponse": {**said, "response": {"result": tr.content}}})
        elif p.kind == "media":
            mime = p.media_type or "application/octet-stream"
            out.append({"inlineData": {"mimeType": mime, "data": ""}})
    return out


def render_generate(answer: NormalisedResponse, stream: bool, sse_framing: bool) -> Rendered | None:
    """An answer as a GenerateContentResponse (JSON), or streamed: one response per piece, as
    server-sent events with ``alt=sse``, else one JSON array written as it grows. A filtered
    answer carries the safety rating that blocked it."""
    reason = _RAW_FINISH.get(answer.finish_reason or FinishReason.COMPLETE)
    raw = answer.finish_reason_raw
    if raw is not None and _GEMINI_FINISH.fullmatch(raw):  # the API's own word, kept
        reason = raw
    if answer.finish_reason is FinishReason.PROMPT_BLOCKED:  # no candidate: the prompt's feedback
        said = raw if raw is not None and _GEMINI_FINISH.fullmatch(raw) else "OTHER"
        blocked = {"promptFeedback": {"blockReason": said}, "modelVersion": answer.model or "",
                   "responseId": answer.id or "looptap"}  # fmt: skip
        if stream and sse_framing:
            return Rendered("text/event-stream", [b"data: " + orjson.dumps(blocked) + b"\r\n\r\n"])
        return Rendered("application/json", [orjson.dumps([blocked] if stream else blocked)])
    if reason is None:
        return None  # no finishReason says it (Gemini has no refusal field)
    text, calls = answer_text(answer), answer_calls(answer)
    if arguments_not_json(calls):
        return None  # ``args`` is an object, streamed or not
    tail: dict[str, Any] = {"finishReason": reason, "index": 0}
    if reason == "SAFETY":
        tail["safetyRatings"] = [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
        ]
    head = {"modelVersion": answer.model or "", "responseId": answer.id or "looptap"}
    usage = _usage_body(answer.usage)
    call_parts = _other_parts(answer)

    def response(parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}} if parts else {}
        if last:
            cand.update(tail)
        out: dict[str, Any] = {"candidates": [cand] if cand else [], **head}
        if last and usage is not None:
            out["usageMetadata"] = usage
        return out

    if not stream:
        parts = ([{"text": text}] if text else []) + call_parts
        return Rendered("application/json", [orjson.dumps(response(parts, True))])
    steps: list[list[dict[str, Any]]] = [[{"text": piece}] for piece in pieces(text)]
    if call_parts:
        steps.append(call_parts)  # a function call arrives whole, in one response
    steps = steps or [[]]
    bodies = [response(parts, i == len(steps) - 1) for i, parts in enumerate(steps)]
    if sse_framing:
        return Rendered(
            "text/event-stream", [b"data: " + orjson.dumps(b) + b"\r\n\r\n" for b in bodies]
        )
    chunks = [(b"[" if i == 0 else b",\r\n") + orjson.dumps(b) for i, b in enumerate(bodies)]
    chunks.append(b"]")
    return Rendered("application/json", chunks)
