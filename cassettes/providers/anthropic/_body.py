"""Anthropic Messages bodies read into the normalised models: finish classes, usage, parts,
messages, tools, the answer, API errors and Bedrock payloads; shared by the adapter
(:mod:`cassettes.providers.anthropic`) and its stream reader
(:mod:`cassettes.providers.anthropic._stream`)."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import orjson

from ... import bounds
from ...models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedResponse,
    Part,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from ...wire import Event
from .._values import (
    as_int,
    as_str,
    error_from_body,
    finish_lookup,
    media_part,
    text_of,
    tool_call_from_object,
    tool_call_from_string,
)

#: A JSON object as it travelled (open-ended: unknown keys are kept).
JSONObject = dict[str, Any]

FINISH = {
    "end_turn": FinishReason.COMPLETE,
    "stop_sequence": FinishReason.COMPLETE,
    "max_tokens": FinishReason.TRUNCATED_LENGTH,
    "model_context_window_exceeded": FinishReason.TRUNCATED_CONTEXT,
    "tool_use": FinishReason.TOOL_CALL,
    "pause_turn": FinishReason.PAUSED,
    "refusal": FinishReason.REFUSED,
}

STRUCTURAL = {"model", "messages", "system", "tools", "tool_choice", "stream"}

#: Blocks whose ``input`` is streamed as ``input_json_delta`` fragments, with the call kind.
_CALL_KINDS = {"tool_use": "function", "server_tool_use": "server", "mcp_tool_use": "mcp"}
#: Blocks the API defines that carry no turn content of their own (files put in the code
#: container, tools added by tool search, search results given as context): kept as sent. A block
#: of any other type is one looptap does not know (said unread).
KEPT_BLOCKS = frozenset(
    {"container_upload", "tool_addition", "tool_reference", "search_result", "compaction"}
)

_TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}

_VERSION_SUFFIX = re.compile(r"_\d{8}$")
BEDROCK_PATH = re.compile(r"/model/(?P<model>[^/]+)/(?P<op>invoke|invoke-with-response-stream)$")
VERTEX_PATH = re.compile(
    r"/publishers/anthropic/models/(?P<model>[^/:]+):(?P<op>rawPredict|streamRawPredict)$"
)

#: Response keys that have a home in :class:`NormalisedResponse`; the rest go to provider_details.
_RESPONSE_KEYS = {"id", "type", "role", "model", "content", "stop_reason", "usage"}


def finish_class(raw: str | None) -> FinishReason | None:
    """The G.1 class of a ``stop_reason`` (``None`` when there is none)."""
    return finish_lookup(FINISH, raw)


def usage_from(u: Any) -> Usage | None:
    """Anthropic usage → the inclusive convention (``input_tokens`` excludes cache reads/writes)."""
    if not isinstance(u, dict):
        return None
    uncached = as_int(u.get("input_tokens"))
    cache_write = as_int(u.get("cache_creation_input_tokens"))
    cache_read = as_int(u.get("cache_read_input_tokens"))
    output = as_int(u.get("output_tokens"))
    details = u.get("output_tokens_details")
    reasoning = as_int(details.get("thinking_tokens")) if isinstance(details, dict) else None
    total_in = None if uncached is None else uncached + (cache_write or 0) + (cache_read or 0)
    return Usage(
        input_tokens=total_in,
        output_tokens=output,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning,
        total_tokens=total_in + output if total_in is not None and output is not None else None,
        raw=u,
    )


def _extra(block: JSONObject, used: set[str]) -> JSONObject | None:
    rest = {k: v for k, v in block.items() if k not in used}
    return rest or None


def _media_type(block: JSONObject) -> str | None:
    src = block.get("source")
    if isinstance(src, dict):
        mt = as_str(src.get("media_type"))
        if mt:
            return mt
    return as_str(block.get("type"))


def _call_part(block: JSONObject, json_buf: str | None) -> Part:
    kind = _CALL_KINDS[str(block.get("type"))]
    call: ToolCall
    if json_buf is not None:
        # Streamed: the fragments as they travelled are the raw arguments (empty means {}).
        call = tool_call_from_string(block.get("id"), block.get("name"), json_buf, kind=kind)
    else:
        call = tool_call_from_object(
            block.get("id"), block.get("name"), block.get("input"), kind=kind
        )
    return Part(
        kind="tool_call",
        tool_call=call,
        provider_details=_extra(block, {"type", "id", "name", "input"}),
    )


def _block_part(block: Any, names: dict[str, str], json_buf: str | None = None) -> Part:
    """One content block (request or response) → one part."""
    if isinstance(block, str):
        return Part(kind="text", text=block)
    if not isinstance(block, dict):
        return Part(kind="other", provider_details={"block": block})
    t = block.get("type")
    if t == "text":
        return Part(
            kind="text",
            text=as_str(block.get("text")) or "",
            provider_details=_extra(block, {"type", "text"}),
        )
    if t == "thinking":
        return Part(
            kind="reasoning",
            text=as_str(block.get("thinking")) or "",
            provider_details=_extra(block, {"type", "thinking"}),
        )
    if t == "redacted_thinking":
        return Part(
            kind="reasoning",
            text=None,
            provider_details={"redacted": True, **(_extra(block, {"type"}) or {})},
        )
    if t in _CALL_KINDS:
        return _call_part(block, json_buf)
    if t == "tool_result":
        call_id = as_str(block.get("tool_use_id"))
        err = block.get("is_error")
        result = ToolResult(
            call_id=call_id,
            name=names.get(call_id) if call_id else None,
            content=text_of(block.get("content")),
            is_error=err if isinstance(err, bool) else None,
        )
        return Part(
            kind="tool_result",
            tool_result=result,
            provider_details=_extra(block, {"type", "tool_use_id", "content", "is_error"}),
        )
    if t in ("image", "document"):
        return media_part(block, _media_type(block))
    details: JSONObject = {"block": block}
    if isinstance(t, str):
        details["type"] = t
    if "tool_use_id" in block:  # a server / MCP tool result, executed by the provider
        details["tool_use_id"] = block["tool_use_id"]
    elif t in KEPT_BLOCKS:
        details["kept"] = "control"
    return Part(kind="other", provider_details=details)


def parts_of(content: Any, names: dict[str, str]) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(kind="text", text=content)] if content else []
    return [_block_part(b, names) for b in (content if isinstance(content, list) else [content])]


def message_of(m: Any, names: dict[str, str]) -> Message:
    if not isinstance(m, dict):
        return Message(role="unknown", parts=[Part(kind="other", provider_details={"block": m})])
    return Message(
        role=as_str(m.get("role")) or "unknown",
        parts=parts_of(m.get("content"), names),
        provider_details=_extra(m, {"role", "content"}),
    )


def call_names(messages: list[Any]) -> dict[str, str]:
    """Call id → tool name for every call in the history (tool_result blocks carry only the id)."""
    out: dict[str, str] = {}
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        for b in content if isinstance(content, list) else []:
            if (
                isinstance(b, dict)
                and b.get("type") in _CALL_KINDS
                and b.get("id")
                and b.get("name")
            ):
                out[str(b["id"])] = str(b["name"])
    return out


def tools_of(body: JSONObject) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        typ = as_str(t.get("type"))
        schema = t.get("input_schema")
        params = schema if isinstance(schema, dict) else None
        if typ is None or typ == "custom":
            out.append(
                ToolSpec(
                    name=as_str(t.get("name")) or "",
                    description=as_str(t.get("description")),
                    parameters=params,
                )
            )
        else:
            name = as_str(t.get("name") or t.get("mcp_server_name")) or typ
            out.append(
                ToolSpec(
                    name=name,
                    description=as_str(t.get("description")),
                    parameters=params,
                    kind=_VERSION_SUFFIX.sub("", typ),
                )
            )
    return out


def tool_choice_of(tc: Any) -> str | None:
    if tc is None:
        return None
    typ = tc.get("type") if isinstance(tc, dict) else tc
    if not isinstance(typ, str):
        return None
    if typ == "tool" and isinstance(tc, dict) and tc.get("name"):
        return f"tool:{tc['name']}"
    return _TOOL_CHOICE.get(typ, typ)


def response_of(msg: JSONObject, bufs: dict[int, str] | None = None) -> NormalisedResponse:
    """A message object (non-streamed body or reassembled snapshot) → the normalised response."""
    bufs = bufs or {}
    content = msg.get("content")
    blocks = content if isinstance(content, list) else []
    parts = [_block_part(b, {}, bufs.get(i)) for i, b in enumerate(blocks)]
    raw_stop = as_str(msg.get("stop_reason"))
    details = {k: v for k, v in msg.items() if k not in _RESPONSE_KEYS and v is not None}
    if msg.get("type") not in (None, "message"):
        details["type"] = msg["type"]
    if raw_stop == "refusal":
        sd = msg.get("stop_details")
        explanation = as_str(sd.get("explanation")) if isinstance(sd, dict) else None
        parts.append(
            Part(
                kind="refusal",
                text=explanation,
                provider_details={"stop_details": sd} if sd is not None else None,
            )
        )
    return NormalisedResponse(
        id=as_str(msg.get("id")),
        model=as_str(msg.get("model")),
        role=as_str(msg.get("role")) or "assistant",
        parts=parts,
        finish_reason_raw=raw_stop,
        finish_reason=finish_class(raw_stop),
        usage=usage_from(msg.get("usage")),
        complete=True,
        provider_details=details or None,
    )


def anthropic_error(body: Any, status: int | None, in_stream: bool = False) -> ApiError:
    """``{"type":"error","error":{type,message},"request_id"}``, also wrapped by Vertex or
    Bedrock."""
    if isinstance(body, (str, bytes)):
        try:
            body = bounds.loads(body)
        except orjson.JSONDecodeError:
            return ApiError(
                status=status,
                message=body.decode("utf-8", "replace") if isinstance(body, bytes) else body,
                in_stream=in_stream,
                raw=body,
            )
    outer = body[0] if isinstance(body, list) and body and isinstance(body[0], dict) else body
    err = outer.get("error") if isinstance(outer, dict) else None
    if isinstance(err, dict):
        msg = err.get("message")
        if isinstance(msg, str) and msg.lstrip().startswith("{"):
            # Vertex: a Google error whose message is the Anthropic error as a JSON string.
            try:
                inner = bounds.loads(msg)
            except orjson.JSONDecodeError:
                inner = None
            if isinstance(inner, dict) and isinstance(inner.get("error"), dict):
                ie = inner["error"]
                return ApiError(
                    status=status if status is not None else as_int(err.get("code")),
                    type=as_str(ie.get("type")),
                    code=as_str(err.get("status")),
                    message=as_str(ie.get("message")),
                    in_stream=in_stream,
                    raw=body,
                )
        if "type" in err and "code" not in err:
            code = (
                err["details"].get("error_code") if isinstance(err.get("details"), dict) else None
            )
            return ApiError(
                status=status,
                type=as_str(err.get("type")),
                code=as_str(code),
                message=as_str(msg),
                in_stream=in_stream,
                raw=body,
            )
    return error_from_body(body, status, in_stream=in_stream)


def bedrock_payload(ev: Event) -> tuple[str | None, Any]:
    """One AWS event-stream frame → (event name, Anthropic event JSON). Exceptions become
    ``error``."""
    headers = ev.headers or {}
    mtype = headers.get(":message-type")
    try:
        payload = bounds.loads(ev.data) if ev.data.strip() else {}
    except orjson.JSONDecodeError:
        payload = ev.data
    if mtype in ("exception", "error"):
        etype = headers.get(":exception-type") or headers.get(":error-code")
        message = (
            payload.get("message") or payload.get("Message")
            if isinstance(payload, dict)
            else payload
        )
        message = message or headers.get(":error-message")
        return "error", {
            "type": "error",
            "error": {"type": etype, "message": message},
            "bedrock": payload,
        }
    if isinstance(payload, dict) and isinstance(payload.get("bytes"), str):
        try:
            inner = bounds.loads(base64.b64decode(payload["bytes"]))
        except (binascii.Error, ValueError):
            return None, None
        return (inner.get("type") if isinstance(inner, dict) else None), inner
    return ev.event, payload
