"""OpenAI Responses (WIRE.md §B) and the servers that speak it (Azure, OpenRouter, DeepSeek,
Bedrock Mantle, gateways).

Deviations handled here, each named where it is handled: OpenRouter streams without ``event:``
lines and with a trailing ``data: [DONE]``; reasoning items carrying ``content`` parts
(``reasoning_text``: gpt-oss via OpenRouter, DeepSeek) besides ``summary``; terminal events whose
``response.output`` is ``null`` (the SDK then rebuilds the output from ``output_item.done``);
hand-edited or future ``status`` values (kept raw, classed ``other``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, parse_qs

import orjson

from cassettes import bounds
from cassettes.parsing.models import (
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
    WsTurns,
    answer_calls,
    answer_text,
    as_int,
    as_str,
    call_arguments_text,
    error_from_body,
    media_part,
    pieces,
    sse,
    text_of,
    tool_call_from_string,
)
from cassettes.providers._parts import Slot, StreamParts
from cassettes.wire.framing import Framed

__all__ = ["OpenAIResponses"]

Item = dict[str, Any]

_STRUCTURAL = {"model", "input", "instructions", "tools", "tool_choice", "stream", "previous_response_id"}

#: Path segments under ``/responses`` that are other operations on the same resource.
_SUB_OPERATIONS = {"input_tokens": "count_tokens", "compact": "compact"}

#: Output items the *client* must execute: their presence makes a ``completed`` turn a tool call.
_CLIENT_CALLS = {
    "function_call",
    "custom_tool_call",
    "computer_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
}

#: Input items that carry the result of a client-executed call.
_CLIENT_OUTPUTS = {
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
}

_TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
_LIFECYCLE = {"response.created", "response.in_progress", "response.queued"}


def _responses_index(url: SplitResult) -> tuple[list[str], int] | None:
    """Path segments and the position of the last ``responses`` segment (at most 2 from the end)."""
    segs = [s for s in url.path.split("/") if s]
    for back in range(min(3, len(segs))):
        i = len(segs) - 1 - back
        if segs[i] == "responses":
            return segs, i
    return None


# --- usage and finish -------------------------------------------------------------------------


def usage_from(u: Any) -> Usage | None:
    """Responses usage is already inclusive: ``input_tokens`` counts cached tokens."""
    if not isinstance(u, dict):
        return None
    ind = u.get("input_tokens_details")
    outd = u.get("output_tokens_details")
    ind = ind if isinstance(ind, dict) else {}
    outd = outd if isinstance(outd, dict) else {}
    return Usage(
        input_tokens=as_int(u.get("input_tokens")),
        output_tokens=as_int(u.get("output_tokens")),
        cache_read_tokens=as_int(ind.get("cached_tokens")),
        cache_write_tokens=as_int(ind.get("cache_write_tokens")),
        reasoning_tokens=as_int(outd.get("reasoning_tokens")),
        total_tokens=as_int(u.get("total_tokens")),
        raw=u,
    )


def finish_of(
    status: str | None, reason: str | None, has_client_calls: bool
) -> tuple[str | None, FinishReason | None]:
    """The raw finish (``status`` or ``status:reason``) and its class (WIRE.md §G.1)."""
    if status is None:
        return None, None
    raw = f"{status}:{reason}" if reason else status
    if status == "completed":
        return raw, FinishReason.TOOL_CALL if has_client_calls else FinishReason.COMPLETE
    if status == "incomplete":
        if reason == "max_output_tokens":
            return raw, FinishReason.TRUNCATED_LENGTH
        if reason == "content_filter":
            return raw, FinishReason.FILTERED
        return raw, FinishReason.OTHER
    if status == "failed":
        return raw, FinishReason.ERROR
    if status == "cancelled":
        return raw, FinishReason.CANCELLED
    if status in ("queued", "in_progress"):
        return raw, None  # non-terminal snapshot (background mode)
    return raw, FinishReason.UNKNOWN if status == "" else FinishReason.OTHER


# --- items → parts ----------------------------------------------------------------------------


def _media_type(block: Item) -> str | None:
    for key in ("image_url", "file_data", "file_url"):
        v = block.get(key)
        if isinstance(v, str) and v.startswith("data:"):
            return v[5:].split(";", 1)[0].split(",", 1)[0] or None
    t = as_str(block.get("type")) or ""
    if t == "input_image":
        return "image"
    if t == "input_file":
        name = as_str(block.get("filename"))
        return f"file:{name}" if name else "file"
    return t or None


def _content_parts(content: Any, item_details: Item | None = None) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(kind="text", text=content, provider_details=item_details or None)] if content else []
    parts: list[Part] = []
    for block in content if isinstance(content, list) else [content]:
        if not isinstance(block, dict):
            parts.append(Part(kind="text", text=str(block)))
            continue
        t = block.get("type")
        if t in ("input_text", "output_text", "text", "summary_text"):
            details = dict(item_details or {})
            for key in ("annotations", "logprobs"):
                if block.get(key):
                    details[key] = block[key]
            parts.append(
                Part(kind="text", text=as_str(block.get("text")) or "", provider_details=details or None)
            )
        elif t == "refusal":
            parts.append(
                Part(kind="refusal", text=as_str(block.get("refusal")), provider_details=item_details or None)
            )
        elif t == "reasoning_text":
            parts.append(
                Part(kind="reasoning", text=as_str(block.get("text")), provider_details=item_details or None)
            )
        elif t in ("input_image", "input_file", "input_audio"):
            parts.append(media_part(block, _media_type(block)))
        else:
            parts.append(Part(kind="other", provider_details={"block": block}))
    return parts


def _reasoning_part(item: Item) -> Part:
    texts: list[str] = []
    for key in ("summary", "content"):
        for s in item.get(key) or []:
            if isinstance(s, dict) and isinstance(s.get("text"), str) and s["text"]:
                texts.append(s["text"])
            elif isinstance(s, str) and s:
                texts.append(s)
    details = {k: item[k] for k in ("id", "encrypted_content", "status") if item.get(k) is not None}
    if item.get("summary") and item.get("content"):
        details["has_summary_and_content"] = True
    return Part(
        kind="reasoning", text="\n\n".join(texts) if texts else None, provider_details=details or None
    )


def _call_part(item: Item) -> Part:
    """A client-executed call item (function, custom, computer, shell …) as a tool call."""
    t = as_str(item.get("type")) or "function_call"
    details = {k: item[k] for k in ("id", "status", "namespace", "caller") if item.get(k) is not None}
    if t == "function_call":
        call = tool_call_from_string(item.get("call_id"), item.get("name"), item.get("arguments", ""))
    elif t == "custom_tool_call":
        raw = as_str(item.get("input"))
        call = ToolCall(
            id=as_str(item.get("call_id")) or None,
            name=as_str(item.get("name")),
            arguments=raw,
            arguments_raw=raw,
            kind="custom",
        )
    else:
        args = item.get("action", item.get("operation"))
        call = ToolCall(
            id=as_str(item.get("call_id")) or None,
            name=as_str(item.get("name")) or t.removesuffix("_call"),
            arguments=args,
            arguments_raw=orjson.dumps(args).decode() if args is not None else None,
            kind=t,
        )
    return Part(kind="tool_call", tool_call=call, provider_details=details or None)


def _result_part(item: Item) -> Part:
    t = as_str(item.get("type"))
    output = item.get("output")
    details = {k: item[k] for k in ("id", "status") if item.get(k) is not None}
    if t != "function_call_output":
        details["type"] = t
    return Part(
        kind="tool_result",
        tool_result=ToolResult(call_id=as_str(item.get("call_id")), content=text_of(output)),
        provider_details=details or None,
    )


def _item_role_parts(item: Any) -> tuple[str, list[Part]]:
    """One input or output item → (role, parts). Roles: the message's own, ``assistant`` for
    model-produced items, ``tool`` for client-executed results."""
    if not isinstance(item, dict):
        return "unknown", [Part(kind="other", provider_details={"block": item})]
    t = item.get("type")
    if t in (None, "message") and "role" in item:
        role = as_str(item.get("role")) or "unknown"
        details = {k: item[k] for k in ("id", "phase", "status") if item.get(k) is not None}
        return role, _content_parts(item.get("content"), details or None)
    if t in _CLIENT_CALLS:
        return "assistant", [_call_part(item)]
    if t in _CLIENT_OUTPUTS:
        return "tool", [_result_part(item)]
    if t == "reasoning":
        return "assistant", [_reasoning_part(item)]
    if t == "item_reference":
        # An item the API holds (``store`` on) referred to by id instead of sent again: the
        # Vercel AI SDK sends the model's messages, reasoning and hosted calls this way. The
        # analysis puts the referenced item back (``item_reference`` names the id); unresolved,
        # it stands in the model-side turn it belongs to.
        ref = as_str(item.get("id"))
        return "assistant", [Part(kind="other", provider_details={"block": item, **({"item_reference": ref} if ref else {})})]
    if t == "agent_message":
        return "user", _agent_message_parts(item)
    # Hosted-tool calls and their outputs (web_search_call, tool_search_output, compaction …),
    # and items that carry a role but are no message (``additional_tools``).
    return as_str(item.get("role")) or "assistant", [Part(kind="other", provider_details={"block": item})]


def _agent_message_parts(item: Item) -> list[Part]:
    """Codex's message from another agent of its team (``{"type": "agent_message", "author":
    "/root", "recipient": "/root/task", "content": [input_text …, {"type": "encrypted_content",
    "encrypted_content": …}]}``): a sub-agent's task, an agent's final answer. Input to this
    agent, so a user message; the encrypted payload is the ``message`` argument of the
    ``spawn_agent`` call that sent it, as the model wrote it (opaque, compared as is)."""
    details = {k: item[k] for k in ("id", "author", "recipient") if isinstance(item.get(k), str)}
    parts: list[Part] = []
    content = item.get("content")
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "encrypted_content":
            parts.append(Part(kind="text", text=as_str(block.get("encrypted_content")) or "", provider_details={**details, "encrypted": True}))
        else:
            parts.extend(_content_parts(block, details or None))
    return parts


def _messages(input_value: Any) -> list[Message]:
    if input_value is None:
        return []
    if isinstance(input_value, str):
        return [Message(role="user", parts=[Part(kind="text", text=input_value)])]
    out: list[Message] = []
    for item in input_value if isinstance(input_value, list) else [input_value]:
        role, parts = _item_role_parts(item)
        is_message = isinstance(item, dict) and item.get("type") in (None, "message") and "role" in item
        # Consecutive model-side items (reasoning, calls, assistant text) form one assistant turn,
        # consecutive results one tool turn; user/system messages stay one message per item.
        if out and not is_message and role in ("assistant", "tool") and out[-1].role == role:
            out[-1].parts.extend(parts)
        elif out and is_message and role == "assistant" and out[-1].role == "assistant":
            out[-1].parts.extend(parts)
        else:
            out.append(Message(role=role, parts=parts))
    return out


def _output_parts(output: Any) -> list[Part]:
    parts: list[Part] = []
    for item in output if isinstance(output, list) else []:
        parts.extend(_item_role_parts(item)[1])
    return parts


# --- tools ------------------------------------------------------------------------------------


def _additional_tools(input_value: Any) -> list[ToolSpec]:
    """Tools offered in the input: Codex's ``additional_tools`` items (``{"type":
    "additional_tools", "role": "developer", "tools": [...]}``) carry its tools, namespaces and all."""
    out: list[ToolSpec] = []
    for item in input_value if isinstance(input_value, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            out.extend(_tools(item.get("tools")))
    return out


def _tools(tools: Any) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        kind = as_str(t.get("type")) or "other"
        if kind == "function":
            params = t.get("parameters")
            out.append(
                ToolSpec(
                    name=as_str(t.get("name")) or "",
                    description=as_str(t.get("description")),
                    parameters=params if isinstance(params, dict) else None,
                )
            )
        elif kind == "custom":
            out.append(
                ToolSpec(
                    name=as_str(t.get("name")) or "", description=as_str(t.get("description")), kind="custom"
                )
            )
        elif kind == "namespace":
            out.extend(_tools(t.get("tools")))
        else:
            name = t.get("name") or t.get("server_label") or kind
            out.append(
                ToolSpec(name=as_str(name) or kind, description=as_str(t.get("description")), kind=kind)
            )
    return out


def _tool_choice_mode(tc: Any) -> str | None:
    if tc is None:
        return None
    if isinstance(tc, str):
        return tc
    if not isinstance(tc, dict):
        return None
    t = tc.get("type")
    if t == "allowed_tools" or ("mode" in tc and "tools" in tc):
        return as_str(tc.get("mode"))
    if tc.get("name"):
        return f"tool:{tc['name']}"
    if t == "mcp" and tc.get("server_label"):
        return f"tool:{tc['server_label']}"
    if isinstance(t, str) and t not in ("function", "custom"):
        return f"tool:{t}"  # a forced hosted tool ({"type": "web_search"})
    return as_str(tc.get("mode") or t)


def _system(body: Item, messages: list[Message]) -> list[Part]:
    parts: list[Part] = []
    instr = body.get("instructions")
    if isinstance(instr, str):
        if instr:
            parts.append(Part(kind="text", text=instr, provider_details={"field": "instructions"}))
    elif isinstance(instr, list):
        for m in _messages(instr):
            parts.extend(m.parts)
    parts.extend(p for m in messages if m.role in ("system", "developer") for p in m.parts)
    return parts


# --- the adapter ------------------------------------------------------------------------------


def _usage_body(u: Usage | None) -> dict[str, Any] | None:
    if u is None:
        return None
    if isinstance(u.raw, dict) and "input_tokens" in u.raw:
        return u.raw
    i, o = u.input_tokens or 0, u.output_tokens or 0
    return {
        "input_tokens": i,
        "input_tokens_details": {"cached_tokens": u.cache_read_tokens or 0},
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens or 0},
        "total_tokens": u.total_tokens if u.total_tokens is not None else i + o,
    }


def render_responses(answer: NormalisedResponse, stream: bool, request: Any) -> Rendered:
    """An answer as a response object (JSON) or its event stream, ending ``response.completed``
    (``response.incomplete`` when cut by ``max_output_tokens`` or a content filter)."""
    text, refusal, calls = answer_text(answer), answer_text(answer, "refusal"), answer_calls(answer)
    finish = answer.finish_reason
    incomplete = {FinishReason.TRUNCATED_LENGTH: "max_output_tokens", FinishReason.FILTERED: "content_filter"}.get(finish or FinishReason.COMPLETE)
    rid = answer.id or "resp_looptap"
    content: list[Item] = []
    if text:
        content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    items: list[Item] = []
    if content:
        items.append({"type": "message", "id": f"msg_{rid}", "status": "incomplete" if incomplete else "completed", "role": "assistant", "content": content})
    for i, c in enumerate(calls):
        items.append({"type": "function_call", "id": f"fc_{rid}_{i}", "call_id": c.id or f"call_looptap_{i}", "name": c.name or "",
                      "arguments": call_arguments_text(c), "status": "incomplete" if incomplete else "completed"})
    req = request if isinstance(request, dict) else {}
    final: Item = {
        "id": rid, "object": "response", "created_at": 1700000000, "status": "incomplete" if incomplete else "completed",
        "error": None, "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": req.get("instructions"), "model": answer.model or as_str(req.get("model")) or "", "output": items,
        "parallel_tool_calls": True, "previous_response_id": req.get("previous_response_id"), "store": True,
        "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": req.get("tools") or [],
        "top_p": 1.0, "truncation": "disabled", "usage": _usage_body(answer.usage), "metadata": {},
    }
    if not stream:
        return Rendered("application/json", [orjson.dumps(final)])
    seq = 0
    out: list[bytes] = []

    def emit(etype: str, **fields: Any) -> None:
        nonlocal seq
        out.append(sse({"type": etype, "sequence_number": seq, **fields}, etype))
        seq += 1

    started = {**final, "status": "in_progress", "incomplete_details": None, "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for n, item in enumerate(items):
        if item["type"] == "message":
            emit("response.output_item.added", output_index=n, item={**item, "status": "in_progress", "content": []})
            for ci, part in enumerate(item["content"]):
                empty = {"type": "output_text", "text": "", "annotations": []} if part["type"] == "output_text" else {"type": "refusal", "refusal": ""}
                emit("response.content_part.added", item_id=item["id"], output_index=n, content_index=ci, part=empty)
                kind, field = ("output_text", "text") if part["type"] == "output_text" else ("refusal", "refusal")
                for piece in pieces(part[field]):
                    emit(f"response.{kind}.delta", item_id=item["id"], output_index=n, content_index=ci, delta=piece)
                emit(f"response.{kind}.done", item_id=item["id"], output_index=n, content_index=ci, **{field: part[field]})
                emit("response.content_part.done", item_id=item["id"], output_index=n, content_index=ci, part=part)
        else:
            emit("response.output_item.added", output_index=n, item={**item, "status": "in_progress", "arguments": ""})
            for piece in pieces(item["arguments"]):
                emit("response.function_call_arguments.delta", item_id=item["id"], output_index=n, delta=piece)
            emit("response.function_call_arguments.done", item_id=item["id"], output_index=n, arguments=item["arguments"])
        emit("response.output_item.done", output_index=n, item=item)
    emit("response.incomplete" if incomplete else "response.completed", response=final)
    return Rendered("text/event-stream", out)


_WS_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed", "response.cancelled", "error"})


def _ws_opens(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("type") == "response.create"


def _ws_closes(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("type") in _WS_TERMINAL


class OpenAIResponses(Provider):
    field_defaults = (("stream", False),)
    family = "openai_responses"
    otel_provider = "openai"
    pairing_errors = (
        r"No tool output found for (function|custom tool|computer|shell) call",
        r"No tool call found for (function|custom tool)? ?call output with call_id",
        r"Duplicate item found with id",
        r"of type 'reasoning' was provided without its required following item",
    )


    def fault_event(self, kind: str) -> bytes:
        return (b'event: error\ndata: {"type":"error","code":"server_error","message":"The server had an error while processing '
                b'your request. Sorry about that!","param":null,"sequence_number":0}\n\n')

    def history_tools(self, items: list[Any]) -> list[ToolSpec]:
        return _additional_tools(items)

    def body_operation(self, operation: str, body: Any) -> str:
        # Over a WebSocket, ``generate: false`` warms the connection up (tools, instructions)
        # and generates nothing: not a model call.
        if operation == "generate" and isinstance(body, dict) and body.get("generate") is False:
            return "prewarm"
        return operation

    def ws_turns(self) -> WsTurns:
        """Responses over a WebSocket: each ``response.create`` message is a turn, answered by the
        HTTP stream's events one per message up to the terminal one (or an ``error`` message)."""
        return WsTurns(_ws_opens, _ws_closes)

    def render_answer(self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any) -> Rendered | None:
        return render_responses(answer, stream, request) if self.operation("POST", url) == "generate" else None

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        found = _responses_index(url)
        if found is None:
            return 0
        segs, i = found
        if i == len(segs) - 1:
            if method.upper() != "POST":
                return 0
            return (
                3
                if isinstance(body, dict)
                and ("input" in body or "instructions" in body or "previous_response_id" in body)
                else 2
            )
        return 2  # /responses/{id}, /responses/{id}/cancel, /responses/input_tokens …

    def operation(self, method: str, url: SplitResult) -> str:
        found = _responses_index(url)
        if found is None:
            return "unknown"
        segs, i = found
        rest = segs[i + 1 :]
        if not rest:
            return "generate"
        if len(rest) == 1 and rest[0] in _SUB_OPERATIONS:
            return _SUB_OPERATIONS[rest[0]]
        if len(rest) == 2:
            return {"cancel": "cancel", "input_items": "input_items"}.get(rest[1], rest[1])
        return "delete" if method.upper() == "DELETE" else "retrieve"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        if isinstance(body, dict) and body.get("stream") is True:
            return True
        # GET /responses/{id}?stream=true resumes a background stream.
        return parse_qs(url.query).get("stream", [""])[-1].lower() == "true"

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: Item = body if isinstance(body, dict) else {}
        inp = b.get("input")
        messages = _messages(inp)
        tc = b.get("tool_choice")
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")),
            stream=b.get("stream") is True,
            system=_system(b, messages),
            messages=messages,
            tools=_tools(b.get("tools")) + _additional_tools(b.get("input")),
            tool_choice=tc,
            tool_choice_mode=_tool_choice_mode(tc),
            params={k: v for k, v in b.items() if k not in _STRUCTURAL},
            previous_response_id=as_str(b.get("previous_response_id")),
            history_key="input" if isinstance(inp, list) else None,
        )

    def item_path(self, body: Any, message_index: int, part_index: int | None = None) -> str | None:
        """Consecutive output items (reasoning, calls, results) are one normalised message: walk the
        items as :func:`_messages` merges them to find the one that holds the part."""
        inp = body.get("input") if isinstance(body, dict) else None
        if not isinstance(inp, list):
            return None
        msg = -1
        last_role: str | None = None
        seen_parts = 0
        for i, item in enumerate(inp[: bounds.MAX_LIST]):
            role, parts = _item_role_parts(item)
            is_message = isinstance(item, dict) and item.get("type") in (None, "message") and "role" in item
            merged = msg >= 0 and (
                (not is_message and role in ("assistant", "tool") and last_role == role)
                or (is_message and role == "assistant" and last_role == "assistant")
            )
            if not merged:
                msg += 1
                seen_parts = 0
                last_role = role
            if msg == message_index:
                if part_index is None or seen_parts + len(parts) > part_index:
                    return f"input[{i}]"
                seen_parts += len(parts)
            elif msg > message_index:
                break
        return None

    def api_key_env(self) -> tuple[str, ...]:
        return ("OPENAI_API_KEY",)

    def volatile_ids(self, body: Any, url: SplitResult) -> list[str]:
        # Besides call ids: the ids of echoed output items (fc_…, rs_…, msg_…) and the chained
        # response id are made up by the API per run.
        out = super().volatile_ids(body, url)
        b: Item = body if isinstance(body, dict) else {}
        inp = b.get("input")
        for item in inp if isinstance(inp, list) else []:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                out.append(item["id"])
        if isinstance(b.get("previous_response_id"), str):
            out.append(b["previous_response_id"])
        if isinstance(b.get("prompt_cache_key"), str):  # Codex: its session id, new every run
            out.append(b["prompt_cache_key"])
        return out

    #: Codex's per-session telemetry: thread, window and session ids and a start time in ms
    #: (``client_metadata``), a turn id and creation time on every input item.
    volatile_fields = frozenset({"client_metadata", "internal_chat_message_metadata_passthrough"})

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: Item = body if isinstance(body, dict) else {}
        if isinstance(b.get("error"), dict) and "output" not in b and "status" not in b:
            return NormalisedResponse(
                error=self.parse_error(b, None), finish_reason=FinishReason.ERROR, complete=True
            )
        return self._response(b, in_stream=False)

    def _response(self, r: Item, *, in_stream: bool) -> NormalisedResponse:
        parts = _output_parts(r.get("output"))
        has_calls = any(
            isinstance(it, dict) and it.get("type") in _CLIENT_CALLS for it in r.get("output") or []
        )
        inc = r.get("incomplete_details")
        reason = as_str(inc.get("reason")) if isinstance(inc, dict) else None
        status = as_str(r.get("status"))
        raw, cls = finish_of(status, reason, has_calls)
        error: ApiError | None = None
        err = r.get("error")
        if isinstance(err, dict):
            error = ApiError(
                type=as_str(err.get("type")),
                code=as_str(err.get("code")),
                message=as_str(err.get("message")),
                in_stream=in_stream,
                raw=err,
            )
            if cls is None:
                cls = FinishReason.ERROR
        details = {
            k: r[k]
            for k in (
                "service_tier",
                "background",
                "conversation",
                "previous_response_id",
                "incomplete_details",
            )
            if r.get(k) is not None
        }
        if r.get("object") not in (None, "response"):
            details["object"] = r["object"]
        notes: list[str] = []
        if status is not None and cls is FinishReason.OTHER and status not in ("incomplete",):
            details["unknown_status"] = status  # e.g. the hand-edited ``complete`` in the corpus
            notes.append(f"status {status!r} is not a value the Responses API sends; kept raw (hand-edited recording?)")
        return NormalisedResponse(
            id=as_str(r.get("id")),
            model=as_str(r.get("model")),
            parts=parts,
            finish_reason_raw=raw,
            finish_reason=cls,
            usage=usage_from(r.get("usage")),
            error=error,
            complete=True,
            provider_details=details or None,
            notes=notes,
        )

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        """The SDK's ``ResponseStreamState`` accumulation (WIRE.md §B.4), lenient for other servers."""
        return _ResponsesStream(self._response).read(framed)


class _ResponsesStream(StreamParts):
    """Responses events → the terminal response, its output rebuilt from the item events (keyed
    by ``output_index``) when it has none; a cut stream is read from its last snapshot."""

    def __init__(self, response: Callable[..., NormalisedResponse]) -> None:
        super().__init__()
        #: The adapter's reading of a response object.
        self.response = response
        self.snapshot: Item | None = None
        self.terminal: Item | None = None

    def sentinel(self) -> None:
        self.details["done_sentinel"] = True  # OpenRouter ends Responses streams like Chat ones

    def on(self, name: str | None, d: Any) -> None:
        if not isinstance(d, dict):
            return
        etype = as_str(d.get("type")) or name or ""
        if etype in _LIFECYCLE and isinstance(d.get("response"), dict):
            self.snapshot = d["response"]
        elif etype in _TERMINAL and isinstance(d.get("response"), dict):
            self.terminal = d["response"]
        elif etype == "error":
            self.error = (
                error_from_body(d, None, in_stream=True)
                if isinstance(d.get("error"), dict)
                else ApiError(code=as_str(d.get("code")), message=as_str(d.get("message")), in_stream=True, raw=d)
            )
        else:
            self._item_event(etype, d)

    def _item_event(self, etype: str, d: Item) -> None:
        """Apply one item/content event to the accumulated output items (by ``output_index``)."""
        idx: Any = as_int(d.get("output_index"))
        if idx is None and isinstance(d.get("item_id"), str):
            idx = next((i for i, st in self.slots.items() if st.block.get("id") == d["item_id"]), None)
        if etype in ("response.output_item.added", "response.output_item.done"):
            if isinstance(d.get("item"), dict):
                self.slots[idx if idx is not None else len(self.slots)] = Slot("item", block=copy.deepcopy(d["item"]))
            return
        grow = _ITEM_EVENTS.get(etype)
        if idx is not None and idx in self.slots and grow is not None:
            grow(self.slots[idx].block, d)

    def close(self) -> NormalisedResponse:
        items = [self.slots[i].block for i in sorted(i for i in self.slots if isinstance(i, int))]
        if self.terminal is not None:
            resp = dict(self.terminal)
            if resp.get("output") is None or (resp.get("output") == [] and items):
                resp["output"] = items
                self.details["output_from_events"] = True
            return self.finish(self.response(resp, in_stream=True))
        resp = {**(self.snapshot or {}), "output": items, "usage": None}
        out = self.response(resp, in_stream=True)
        if out.finish_reason not in (None, FinishReason.ERROR):
            out.finish_reason = None  # a snapshot status is not how the stream ended
        return self.finish(out)

    def complete(self) -> bool:
        return self.terminal is not None


def _content_index(d: Item) -> int:
    return as_int(d.get("content_index")) or 0


def _summary_index(d: Item) -> int:
    return as_int(d.get("summary_index")) or 0


def _append(slot: Item, key: str, d: Item) -> None:
    slot[key] = (as_str(slot.get(key)) or "") + (as_str(d.get("delta")) or "")


def _content_part(item: Item, d: Item) -> None:
    if not isinstance(d.get("part"), dict):
        return
    content = item.setdefault("content", [])
    if not isinstance(content, list):
        return
    ci = _content_index(d)
    while len(content) <= ci:
        content.append({})
    content[ci] = copy.deepcopy(d["part"])


def _text_done(kind: str) -> Callable[[Item, Item], None]:
    """``response.<kind>.done``: the whole text (``refusal`` for a refusal) replaces the pieces."""
    key = "refusal" if kind == "refusal" else "text"

    def done(item: Item, d: Item) -> None:
        if isinstance(d.get(key), str):
            _slot(item, "content", _content_index(d), kind)[key] = d[key]

    return done


def _annotation(item: Item, d: Item) -> None:
    if d.get("annotation") is not None:
        _slot(item, "content", _content_index(d), "output_text").setdefault("annotations", []).append(d["annotation"])


def _arguments_done(item: Item, d: Item) -> None:
    if isinstance(d.get("arguments"), str):
        item["arguments"] = d["arguments"]
    if isinstance(d.get("name"), str) and not item.get("name"):
        item["name"] = d["name"]


def _input_done(item: Item, d: Item) -> None:
    if isinstance(d.get("input"), str):
        item["input"] = d["input"]


def _summary_part(item: Item, d: Item) -> None:
    si = _summary_index(d)
    if isinstance(d.get("part"), dict):
        _slot(item, "summary", si, "summary_text").update(copy.deepcopy(d["part"]))


def _summary_done(item: Item, d: Item) -> None:
    if isinstance(d.get("text"), str):
        _slot(item, "summary", _summary_index(d), "summary_text")["text"] = d["text"]


#: Item and content events → what they do to the item they name.
_ITEM_EVENTS: dict[str, Callable[[Item, Item], None]] = {
    "response.content_part.added": _content_part,
    "response.content_part.done": _content_part,
    "response.output_text.delta": lambda item, d: _append(_slot(item, "content", _content_index(d), "output_text"), "text", d),
    "response.reasoning_text.delta": lambda item, d: _append(_slot(item, "content", _content_index(d), "reasoning_text"), "text", d),
    "response.refusal.delta": lambda item, d: _append(_slot(item, "content", _content_index(d), "refusal"), "refusal", d),
    "response.output_text.done": _text_done("output_text"),
    "response.reasoning_text.done": _text_done("reasoning_text"),
    "response.refusal.done": _text_done("refusal"),
    "response.output_text.annotation.added": _annotation,
    "response.function_call_arguments.delta": lambda item, d: _append(item, "arguments", d),
    "response.function_call_arguments.done": _arguments_done,
    "response.custom_tool_call_input.delta": lambda item, d: _append(item, "input", d),
    "response.custom_tool_call_input.done": _input_done,
    "response.reasoning_summary_part.added": _summary_part,
    "response.reasoning_summary_part.done": _summary_part,
    "response.reasoning_summary_text.delta": lambda item, d: _append(_slot(item, "summary", _summary_index(d), "summary_text"), "text", d),
    "response.reasoning_summary_text.done": _summary_done,
}


def _slot(item: Item, key: str, index: int, default_type: str) -> Item:
    """``item[key][index]``, created (with ``type``) when a delta arrives before its part."""
    seq = item.get(key)
    if not isinstance(seq, list):
        seq = item[key] = []
    while len(seq) <= index:
        seq.append({"type": default_type})
    if not isinstance(seq[index], dict):
        seq[index] = {"type": default_type}
    slot: Item = seq[index]
    return slot
