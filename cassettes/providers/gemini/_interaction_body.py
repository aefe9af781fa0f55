"""The Interactions API's bodies read into the normalised models: steps, 1.x turns and content
blocks as parts and messages, tools, statuses as finish classes, usage, and a whole
``Interaction`` as an answer; shared by the adapter and its stream reader
(:mod:`cassettes.providers.gemini._interactions`, whose docstring draws the shapes)."""

from __future__ import annotations

from typing import Any

from ... import bounds
from ...models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedResponse,
    Part,
    ToolResult,
    ToolSpec,
    Usage,
)
from .._values import (
    as_int,
    as_obj,
    as_str,
    compact_json,
    function_spec,
    media_part,
    text_of,
    tool_call_from_object,
)

Item = dict[str, Any]

MEDIA = {"image", "audio", "video", "document"}
_STATUS: dict[str, FinishReason | None] = {
    "completed": FinishReason.COMPLETE,
    "requires_action": FinishReason.TOOL_CALL,
    "incomplete": FinishReason.TRUNCATED_LENGTH,
    "failed": FinishReason.ERROR,
    "cancelled": FinishReason.CANCELLED,
    "requires_continuation": FinishReason.PAUSED,
    "budget_exceeded": FinishReason.OTHER,
    "in_progress": None,
    "queued": None,
    "idle": None,
}


# --- usage and finish -------------------------------------------------------------------------


def usage_from(u: Any) -> Usage | None:
    """The interaction's ``usage`` in the inclusive convention: output counts thoughts (reported
    apart, as ``generateContent``'s ``thoughtsTokenCount``), input counts tool-use prompts."""
    if not isinstance(u, dict):
        return None
    inp, tool_use = as_int(u.get("total_input_tokens")), as_int(u.get("total_tool_use_tokens"))
    out, thoughts = as_int(u.get("total_output_tokens")), as_int(u.get("total_thought_tokens"))
    return Usage(
        input_tokens=None if inp is None and tool_use is None else (inp or 0) + (tool_use or 0),
        output_tokens=None if out is None and thoughts is None else (out or 0) + (thoughts or 0),
        cache_read_tokens=as_int(u.get("total_cached_tokens")),
        reasoning_tokens=thoughts,
        total_tokens=as_int(u.get("total_tokens")),
        raw=u,
    )


def _finish(status: str | None, has_calls: bool) -> tuple[FinishReason | None, bool | None]:
    """(finish class, complete) of a status: a not-finished one (``in_progress`` …) neither."""
    if status is None:
        return None, None
    if status not in _STATUS:
        return (FinishReason.UNKNOWN if status == "" else FinishReason.OTHER), True
    cls = _STATUS[status]
    if cls is FinishReason.COMPLETE and has_calls:
        cls = FinishReason.TOOL_CALL
    return cls, (True if cls is not None else None)


# --- steps and content ------------------------------------------------------------------------


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part(kind="text", text=content)]
    parts: list[Part] = []
    for c in (
        content if isinstance(content, list) else [content] if isinstance(content, dict) else []
    ):
        parts.extend(item_parts(c)[1])
    return parts


def _thought_part(item: Item) -> Part:
    summary = item.get("summary")
    text = (
        "".join(as_str(s.get("text")) or "" for s in summary if isinstance(s, dict))
        if isinstance(summary, list)
        else ""
    )
    sig = item.get("signature")
    return Part(
        kind="reasoning",
        text=text or None,
        provider_details={"signature": sig} if isinstance(sig, str) and sig else None,
    )


def _result_part(item: Item) -> Part:
    result = item.get("result")
    content = (
        result
        if isinstance(result, str)
        else text_of(result)
        if isinstance(result, list)
        else compact_json(result)
    )
    return Part(
        kind="tool_result",
        tool_result=ToolResult(
            call_id=as_str(item.get("call_id")),
            name=as_str(item.get("name")),
            named=True,
            content=content,
            is_error=item.get("is_error") if isinstance(item.get("is_error"), bool) else None,
        ),
    )


def item_parts(item: Any) -> tuple[str, list[Part]]:
    """One step, 1.x turn or content block → (the role it speaks in, its parts): ``assistant``
    for what the model produced, ``tool`` for a function's result, ``user`` for the rest."""
    if not isinstance(item, dict):
        return (
            ("user", [Part(kind="text", text=item)])
            if isinstance(item, str)
            else ("user", [Part(kind="other", provider_details={"block": item})])
        )
    t = item.get("type")
    if t is None and "role" in item:
        return _turn_parts(item)
    return _step_parts(t, item)


def _turn_parts(item: Item) -> tuple[str, list[Part]]:
    """A 1.x turn (``role`` and ``content``): a user turn of function results only is the tool's."""
    role = "assistant" if item.get("role") == "model" else as_str(item.get("role")) or "user"
    parts = _content_parts(item.get("content"))
    if role == "user" and parts and all(p.kind == "tool_result" for p in parts):
        role = "tool"
    return role, parts


def _step_parts(t: Any, item: Item) -> tuple[str, list[Part]]:
    """A step or content block of type ``t``."""
    if t == "user_input":
        return "user", _content_parts(item.get("content"))
    if t == "model_output":
        return "assistant", _content_parts(item.get("content"))
    if t == "text":
        return "user", [Part(kind="text", text=as_str(item.get("text")) or "")]
    if t == "thought":
        return "assistant", [_thought_part(item)]
    if t == "function_call":
        call = tool_call_from_object(item.get("id"), item.get("name"), item.get("arguments"))
        return "assistant", [Part(kind="tool_call", tool_call=call)]
    if t == "function_result":
        return "tool", [_result_part(item)]
    if t in MEDIA:
        return "user", [
            media_part(
                {k: v for k, v in item.items() if k != "data"}, as_str(item.get("mime_type"))
            )
        ]
    # a server-side tool's call or result (google_search_call, code_execution_result …): ran at the
    # API
    return "assistant", [Part(kind="other", provider_details={"block": item})]


def joins(last_role: str, role: str) -> bool:
    """Consecutive model-side steps (thought, function calls, output) are one assistant turn, and
    a user's content blocks one user message; each function result is a message of its own."""
    return role == last_role and role in ("assistant", "user")


def messages_of(inp: Any) -> list[Message]:
    if inp is None:
        return []
    if isinstance(inp, str):
        return [Message(role="user", parts=[Part(kind="text", text=inp)])]
    out: list[Message] = []
    for item in (inp if isinstance(inp, list) else [inp])[: bounds.MAX_LIST]:
        role, parts = item_parts(item)
        if (
            out
            and joins(out[-1].role, role)
            and not (isinstance(item, dict) and "role" in item and "type" not in item)
        ):
            out[-1].parts.extend(parts)
        else:
            out.append(Message(role=role, parts=parts))
    return out


def tools_of(tools: Any) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "function" and isinstance(t.get("name"), str):
            out.append(function_spec(t))
        elif isinstance(t.get("type"), str):
            out.append(ToolSpec(name=t["type"], kind="server"))
    return out


def output_items(r: Item) -> list[Any]:
    """The model's part of an interaction: its ``steps`` after the last ``user_input`` (a
    retrieve with ``include_input`` carries the input's steps too), or the 1.x ``outputs``."""
    steps = r.get("steps")
    if isinstance(steps, list):
        last_user = max(
            (
                i
                for i, s in enumerate(steps)
                if isinstance(s, dict) and s.get("type") in ("user_input", "function_result")
            ),
            default=-1,
        )
        return steps[last_user + 1 :]
    outputs = r.get("outputs")
    return outputs if isinstance(outputs, list) else []


def _interaction_error(
    r: Item, status: str | None, cls: FinishReason | None, in_stream: bool
) -> ApiError | None:
    """The error of an interaction that failed or is not finished: its last step's error, else the
    last of its ``errors``."""
    errors = [e for e in r.get("errors") or [] if isinstance(e, dict)]
    step_errors = [
        as_obj(s.get("error"))
        for s in r.get("steps") or []
        if isinstance(s, dict) and isinstance(s.get("error"), dict)
    ]
    err = (step_errors or errors or [None])[-1]
    if isinstance(err, dict) and (status == "failed" or cls is None):
        return ApiError(
            code=as_str(err.get("code")),
            message=as_str(err.get("message")),
            in_stream=in_stream,
            raw=err,
        )
    return None


def interaction_response(
    r: Item, *, in_stream: bool = False, parts: list[Part] | None = None
) -> NormalisedResponse:
    if parts is None:
        parts = []
        for item in output_items(r):
            parts.extend(item_parts(item)[1])
    has_calls = any(p.tool_call is not None for p in parts)
    status = as_str(r.get("status"))
    cls, complete = _finish(status, has_calls)
    error = _interaction_error(r, status, cls, in_stream)
    details = {
        k: r[k]
        for k in (
            "agent",
            "previous_interaction_id",
            "continuation_token",
            "service_tier",
            "errors",
        )
        if r.get(k) is not None
    }
    resp = NormalisedResponse(
        id=as_str(r.get("id")) or None,
        model=as_str(r.get("model")) or as_str(r.get("agent")),
        parts=parts,
        finish_reason_raw=status,
        finish_reason=cls,
        usage=usage_from(r.get("usage")),
        error=error,
        complete=complete,
        provider_details=details or None,
    )
    if status is not None and cls is None:
        resp.notes.append(
            f"interaction {status}: not finished; the answer "
            "so far (a later retrieve holds the rest)"
        )
    elif cls in (FinishReason.OTHER, FinishReason.UNKNOWN):
        resp.notes.append(f"interaction status {status!r} is not one the SDK knows; kept raw")
    return resp
