"""Anthropic Messages, direct and through Vertex, Bedrock and gateways (WIRE.md §C).

Endpoints recognised: ``POST …/v1/messages`` (also ``?beta=true`` and behind a gateway prefix such
as ``/anthropic/v1/messages``), ``…/v1/messages/count_tokens`` (operation ``count_tokens``), Vertex
``…/publishers/anthropic/models/{m}:rawPredict`` / ``:streamRawPredict`` (model in the URL, not the
body; ``count-tokens:rawPredict`` is token counting) and Bedrock ``…/model/{id}/invoke`` /
``invoke-with-response-stream`` when the body carries ``anthropic_version`` (Bedrock Converse is
another adapter's). Bedrock streams arrive as AWS event-stream frames whose payload is
``{"bytes": "<base64 of the Anthropic event JSON>"}``; they are unwrapped and reassembled like SSE.

Mapping choices:

* ``system`` holds the top-level ``system`` parts followed by the parts of any mid-conversation
  ``role: "system"`` message; those messages also stay in ``messages`` at their position (as the
  OpenAI Chat adapter does with its system messages).
* ``server_tool_use`` becomes a tool call of kind ``server`` and ``mcp_tool_use`` one of kind
  ``mcp``: they are model emissions with a name and an input. Their results
  (``web_search_tool_result``, ``bash_code_execution_tool_result``, ``mcp_tool_result`` …) are
  provider-executed, not sent by the client, so they are ``other`` parts with the block kept and
  ``tool_use_id`` / ``type`` lifted into ``provider_details``.
* Thinking blocks are ``reasoning`` parts with the ``signature`` in ``provider_details``;
  ``redacted_thinking`` is a ``reasoning`` part without text and with ``redacted`` / ``data``.
* ``stop_reason: "refusal"`` adds a ``refusal`` part (text = ``stop_details.explanation``) so the
  model-emission fact is visible next to the finish class.
* Server tools are ``ToolSpec`` with ``kind`` = their type without the version date
  (``web_search_20250305`` → ``web_search``).
* Usage is converted to the inclusive convention: ``input_tokens`` = ``input_tokens`` +
  ``cache_creation_input_tokens`` + ``cache_read_input_tokens``.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, ClassVar
from urllib.parse import SplitResult, unquote

import orjson

from cassettes import bounds
from cassettes.models import (
    ApiError,
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
from cassettes.providers._base import (
    Provider,
    Rendered,
    as_int,
    as_str,
    error_from_body,
    finish_lookup,
    media_part,
    text_of,
    tool_call_from_object,
    tool_call_from_string,
)
from cassettes.providers._facets import ReplayShape, _seconds, reset_at
from cassettes.providers.anthropic_render import render_messages
from cassettes.wire.framing import Event, Framed

__all__ = ["AnthropicMessages", "finish_class", "render_messages", "usage_from"]

#: A JSON object as it travelled (open-ended: unknown keys are kept).
JSONObject = dict[str, Any]

_FINISH = {
    "end_turn": FinishReason.COMPLETE,
    "stop_sequence": FinishReason.COMPLETE,
    "max_tokens": FinishReason.TRUNCATED_LENGTH,
    "model_context_window_exceeded": FinishReason.TRUNCATED_CONTEXT,
    "tool_use": FinishReason.TOOL_CALL,
    "pause_turn": FinishReason.PAUSED,
    "refusal": FinishReason.REFUSED,
}

_STRUCTURAL = {"model", "messages", "system", "tools", "tool_choice", "stream"}

#: Blocks whose ``input`` is streamed as ``input_json_delta`` fragments, with the call kind.
_CALL_KINDS = {"tool_use": "function", "server_tool_use": "server", "mcp_tool_use": "mcp"}

_TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}

_VERSION_SUFFIX = re.compile(r"_\d{8}$")
_BEDROCK_PATH = re.compile(r"/model/(?P<model>[^/]+)/(?P<op>invoke|invoke-with-response-stream)$")
_VERTEX_PATH = re.compile(
    r"/publishers/anthropic/models/(?P<model>[^/:]+):(?P<op>rawPredict|streamRawPredict)$"
)

#: Response keys that have a home in :class:`NormalisedResponse`; the rest go to provider_details.
_RESPONSE_KEYS = {"id", "type", "role", "model", "content", "stop_reason", "usage"}



def finish_class(raw: str | None) -> FinishReason | None:
    """The G.1 class of a ``stop_reason`` (``None`` when there is none)."""
    return finish_lookup(_FINISH, raw)


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
        call = tool_call_from_object(block.get("id"), block.get("name"), block.get("input"), kind=kind)
    return Part(
        kind="tool_call", tool_call=call, provider_details=_extra(block, {"type", "id", "name", "input"})
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
    return Part(kind="other", provider_details=details)


def _parts(content: Any, names: dict[str, str]) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(kind="text", text=content)] if content else []
    return [_block_part(b, names) for b in (content if isinstance(content, list) else [content])]


def _message(m: Any, names: dict[str, str]) -> Message:
    if not isinstance(m, dict):
        return Message(role="unknown", parts=[Part(kind="other", provider_details={"block": m})])
    return Message(
        role=as_str(m.get("role")) or "unknown",
        parts=_parts(m.get("content"), names),
        provider_details=_extra(m, {"role", "content"}),
    )


def _call_names(messages: list[Any]) -> dict[str, str]:
    """Call id → tool name for every call in the history (tool_result blocks carry only the id)."""
    out: dict[str, str] = {}
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        for b in content if isinstance(content, list) else []:
            if isinstance(b, dict) and b.get("type") in _CALL_KINDS and b.get("id") and b.get("name"):
                out[str(b["id"])] = str(b["name"])
    return out


def _tools(body: JSONObject) -> list[ToolSpec]:
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


def _tool_choice_mode(tc: Any) -> str | None:
    if tc is None:
        return None
    typ = tc.get("type") if isinstance(tc, dict) else tc
    if not isinstance(typ, str):
        return None
    if typ == "tool" and isinstance(tc, dict) and tc.get("name"):
        return f"tool:{tc['name']}"
    return _TOOL_CHOICE.get(typ, typ)


def _response(msg: JSONObject, bufs: dict[int, str] | None = None) -> NormalisedResponse:
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


def _anthropic_error(body: Any, status: int | None, in_stream: bool = False) -> ApiError:
    """``{"type":"error","error":{type,message},"request_id"}``, also wrapped by Vertex or Bedrock."""
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
            code = err["details"].get("error_code") if isinstance(err.get("details"), dict) else None
            return ApiError(
                status=status,
                type=as_str(err.get("type")),
                code=as_str(code),
                message=as_str(msg),
                in_stream=in_stream,
                raw=body,
            )
    return error_from_body(body, status, in_stream=in_stream)


def _bedrock_payload(ev: Event) -> tuple[str | None, Any]:
    """One AWS event-stream frame → (event name, Anthropic event JSON). Exceptions become ``error``."""
    headers = ev.headers or {}
    mtype = headers.get(":message-type")
    try:
        payload = bounds.loads(ev.data) if ev.data.strip() else {}
    except orjson.JSONDecodeError:
        payload = ev.data
    if mtype in ("exception", "error"):
        etype = headers.get(":exception-type") or headers.get(":error-code")
        message = payload.get("message") or payload.get("Message") if isinstance(payload, dict) else payload
        message = message or headers.get(":error-message")
        return "error", {"type": "error", "error": {"type": etype, "message": message}, "bedrock": payload}
    if isinstance(payload, dict) and isinstance(payload.get("bytes"), str):
        try:
            inner = bounds.loads(base64.b64decode(payload["bytes"]))
        except (binascii.Error, ValueError):
            return None, None
        return (inner.get("type") if isinstance(inner, dict) else None), inner
    return ev.event, payload


class AnthropicMessages(Provider):
    # a tool_use block's ``input`` is the call's arguments as the model gave them
    free_form_fields = frozenset({*ReplayShape.free_form_fields, "input"})
    field_defaults = (("stream", False),)
    family = "anthropic"
    results_in_one_message = True
    tool_error_flag = True
    #: ``metadata.user_id`` names the client's device and session (Claude Code puts a new
    #: session id there every run); it changes nothing the model does.
    volatile_top_fields = frozenset({"metadata"})
    price_provider = "anthropic"
    otel_provider = "anthropic"
    pairing_errors = (
        r"`tool_use` ids were found without `tool_result` blocks immediately after",
        r"unexpected `tool_use_id` found in `tool_result` blocks",
        r"Did not find \d+ `tool_result` block\(s\) at the beginning of this message",
        r"If an assistant message contains any thinking blocks, the first block must be thinking",
        r"Expected thinking or redacted_thinking, but found",
    )

    def price_usage(self, usage: Usage) -> dict[str, int]:
        """Adds the 5-minute / 1-hour split of cache writes (``usage.cache_creation``), priced apart."""
        out = super().price_usage(usage)
        split = (usage.raw or {}).get("cache_creation")
        if "cache_write_tokens" in out and isinstance(split, dict):
            for wire, key in (("ephemeral_5m_input_tokens", "cache_write_5m_tokens"), ("ephemeral_1h_input_tokens", "cache_write_1h_tokens")):
                n = as_int(split.get(wire))
                if n:
                    out[key] = n
        return out

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST":
            return 0
        path = url.path.rstrip("/")
        is_dict = isinstance(body, dict)
        if path.endswith("/messages/count_tokens"):
            return 3
        if path.endswith("/v1/messages"):
            return 3 if is_dict and "messages" in body else 2
        if _VERTEX_PATH.search(path) or path.endswith("/publishers/anthropic/models/count-tokens:rawPredict"):
            return 3
        if _BEDROCK_PATH.search(path):
            return 3 if is_dict and "anthropic_version" in body else 0
        if (
            path.endswith("/messages")
            and "/threads/" not in path
            and is_dict
            and "messages" in body
            and "max_tokens" in body
        ):
            return 2  # a gateway that dropped the version segment
        return 0

    def operation(self, method: str, url: SplitResult) -> str:
        path = url.path.rstrip("/")
        if path.endswith("/count_tokens") or path.endswith("/count-tokens:rawPredict"):
            return "count_tokens"
        return "generate"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        path = url.path.rstrip("/")
        if path.endswith(":streamRawPredict") or path.endswith("/invoke-with-response-stream"):
            return True
        return isinstance(body, dict) and body.get("stream") is True

    def model_from_url(self, url: SplitResult) -> str | None:
        path = url.path.rstrip("/")
        m = _VERTEX_PATH.search(path) or _BEDROCK_PATH.search(path)
        model = unquote(m.group("model")) if m else None
        return None if model == "count-tokens" else model  # Vertex's token-counting pseudo-model

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: JSONObject = body if isinstance(body, dict) else {}
        msgs = b.get("messages")
        raw_messages: list[Any] = msgs if isinstance(msgs, list) else []
        names = _call_names(raw_messages)
        messages = [_message(m, names) for m in raw_messages]
        system = _parts(b.get("system"), names)
        system += [p for m in messages if m.role == "system" for p in m.parts]
        tc = b.get("tool_choice")
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or self.model_from_url(url),
            stream=self.is_stream(url, b),
            system=system,
            messages=messages,
            tools=_tools(b),
            tool_choice=tc,
            tool_choice_mode=_tool_choice_mode(tc),
            params={k: v for k, v in b.items() if k not in _STRUCTURAL},
            history_key="messages",
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: JSONObject = body if isinstance(body, dict) else {}
        if b.get("type") == "error" or ("error" in b and "content" not in b):
            return NormalisedResponse(
                error=self.parse_error(b, None), finish_reason=FinishReason.ERROR, complete=True
            )
        return _response(b)

    def replay_headers(self) -> tuple[str, ...]:
        return ("anthropic-version", "anthropic-beta")

    def render_answer(self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any) -> Rendered | None:
        if _BEDROCK_PATH.search(url.path.rstrip("/")):
            return None  # Bedrock frames the events in its binary event stream
        return render_messages(answer, stream)

    def api_key_env(self) -> tuple[str, ...]:
        return ("ANTHROPIC_API_KEY",)

    fault_bodies: ClassVar[dict[str, tuple[int, Any]]] = {
        "rate_limit": (429, {"type": "error", "error": {"type": "rate_limit_error", "message":
            "This request would exceed the rate limit for your organization of 50 requests per minute. For details, "
            "refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage."},
            "request_id": "req_looptap_fault"}),
        "overloaded": (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_looptap_fault"}),
        "server_error": (500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}, "request_id": "req_looptap_fault"}),
        "context_length": (400, {"type": "error", "error": {"type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum"}, "request_id": "req_looptap_fault"}),
    }

    def fault_headers(self, kind: str, retry_after: float) -> list[tuple[str, str]]:
        out = [("request-id", "req_looptap_fault")]
        if kind == "rate_limit":
            out += [("retry-after", _seconds(retry_after)), ("anthropic-ratelimit-requests-limit", "50"),
                    ("anthropic-ratelimit-requests-remaining", "0"), ("anthropic-ratelimit-requests-reset", reset_at(retry_after))]
        elif kind in ("overloaded", "server_error"):
            out.append(("retry-after", _seconds(retry_after)))
        return out

    def fault_event(self, kind: str) -> bytes:
        return b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'

    def replay_error(self, status: int, message: str, code: str) -> Any:
        kind = "invalid_request_error" if status < 500 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": message, "code": code}, "request_id": None}

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        return _anthropic_error(body, status)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        """``accumulate_event`` of the SDK (WIRE.md §C.4), lenient about order and unknown events."""
        from cassettes.providers.anthropic_stream import MessagesStream

        return MessagesStream(bedrock=framed.kind == "aws_eventstream").read(framed)


#: The block a delta implies when its ``content_block_start`` is missing.
