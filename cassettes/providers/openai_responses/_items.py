"""The Responses API's items as normalised parts (WIRE.md §B.2, §B.3): input items as history
messages, output items as the answer's parts, the tools offered (top level and in
``additional_tools`` input items) and the system text."""

from __future__ import annotations

from typing import Any

import orjson

from ...models import (
    Message,
    Part,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from .._values import as_str, function_spec, media_part, text_of, tool_call_from_string

#: What the adapter (the package's ``__init__``) reads.
__all__ = [
    "CLIENT_CALLS",
    "additional_tools",
    "item_role_parts",
    "messages_of",
    "output_parts",
    "roles_join",
    "system_of",
    "tool_choice_of",
    "tools_of",
]

Item = dict[str, Any]

#: Output items the *client* must execute: their presence makes a ``completed`` turn a tool call.
CLIENT_CALLS = {
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
#: The items of tools the API runs itself (and of context it manages), kept as sent: no client
#: dispatch judges them (the Responses API reference's output and input item types).
HOSTED_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "tool_search_call",
        "tool_search_output",
        "compaction",
        "additional_tools",
    }
)
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
        return (
            [Part(kind="text", text=content, provider_details=item_details or None)]
            if content
            else []
        )
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
                Part(
                    kind="text",
                    text=as_str(block.get("text")) or "",
                    provider_details=details or None,
                )
            )
        elif t == "refusal":
            parts.append(
                Part(
                    kind="refusal",
                    text=as_str(block.get("refusal")),
                    provider_details=item_details or None,
                )
            )
        elif t == "reasoning_text":
            parts.append(
                Part(
                    kind="reasoning",
                    text=as_str(block.get("text")),
                    provider_details=item_details or None,
                )
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
        kind="reasoning",
        text="\n\n".join(texts) if texts else None,
        provider_details=details or None,
    )


def _call_part(item: Item) -> Part:
    """A client-executed call item (function, custom, computer, shell …) as a tool call."""
    t = as_str(item.get("type")) or "function_call"
    details = {
        k: item[k] for k in ("id", "status", "namespace", "caller") if item.get(k) is not None
    }
    if t == "function_call":
        call = tool_call_from_string(
            item.get("call_id"), item.get("name"), item.get("arguments", "")
        )
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


def item_role_parts(item: Any) -> tuple[str, list[Part]]:
    """One input or output item → (role, parts). Roles: the message's own, ``assistant`` for
    model-produced items, ``tool`` for client-executed results."""
    if not isinstance(item, dict):
        return "unknown", [Part(kind="other", provider_details={"block": item})]
    t = item.get("type")
    if t in (None, "message") and "role" in item:
        role = as_str(item.get("role")) or "unknown"
        details = {k: item[k] for k in ("id", "phase", "status") if item.get(k) is not None}
        return role, _content_parts(item.get("content"), details or None)
    if t in CLIENT_CALLS:
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
        return "assistant", [
            Part(
                kind="other",
                provider_details={"block": item, **({"item_reference": ref} if ref else {})},
            )
        ]
    if t == "agent_message":
        return "user", _agent_message_parts(item)
    # Hosted-tool calls and their outputs (web_search_call, tool_search_output, compaction …),
    # and items that carry a role but are no message (``additional_tools``): kept as sent, read as
    # what they are; an item of any other type is one looptap does not know (said unread).
    kept: dict[str, Any] = {"block": item}
    if t in HOSTED_ITEMS:
        kept["kept"] = "hosted"
    return as_str(item.get("role")) or "assistant", [Part(kind="other", provider_details=kept)]


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
            parts.append(
                Part(
                    kind="text",
                    text=as_str(block.get("encrypted_content")) or "",
                    provider_details={**details, "encrypted": True},
                )
            )
        else:
            parts.extend(_content_parts(block, details or None))
    return parts


def messages_of(input_value: Any) -> list[Message]:
    if input_value is None:
        return []
    if isinstance(input_value, str):
        return [Message(role="user", parts=[Part(kind="text", text=input_value)])]
    out: list[Message] = []
    for item in input_value if isinstance(input_value, list) else [input_value]:
        role, parts = item_role_parts(item)
        if out and roles_join(out[-1].role, role):
            out[-1].parts.extend(parts)
        else:
            out.append(Message(role=role, parts=parts))
    return out


def roles_join(last_role: str, role: str) -> bool:
    """Whether an item of ``role`` continues the message before it (of ``last_role``): consecutive
    model-side items (reasoning, calls, assistant text) form one assistant turn. Everything else is
    one message per item: user and system messages, and each tool result (as Chat's ``tool``
    messages). Results are not grouped because a client that sends a result whose call it did not
    echo puts it right after the previous turn's last result: grouped, the later request's parse
    would fold the new result into a message the earlier request already had, so a history's
    parse would not extend its prefix's parse (and a parse of only the appended items, which
    keeps it apart, would disagree with the full one)."""
    return role == "assistant" and last_role == "assistant"


def output_parts(output: Any) -> list[Part]:
    parts: list[Part] = []
    for item in output if isinstance(output, list) else []:
        parts.extend(item_role_parts(item)[1])
    return parts


# --- tools ------------------------------------------------------------------------------------


def additional_tools(input_value: Any) -> list[ToolSpec]:
    """Tools offered in the input: Codex's ``additional_tools`` items (``{"type":
    "additional_tools", "role": "developer", "tools": [...]}``) carry its tools, namespaces and
    all."""
    out: list[ToolSpec] = []
    for item in input_value if isinstance(input_value, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            out.extend(tools_of(item.get("tools")))
    return out


def tools_of(tools: Any) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        kind = as_str(t.get("type")) or "other"
        if kind == "function":
            out.append(function_spec(t))
        elif kind == "custom":
            out.append(
                ToolSpec(
                    name=as_str(t.get("name")) or "",
                    description=as_str(t.get("description")),
                    kind="custom",
                )
            )
        elif kind == "namespace":
            out.extend(tools_of(t.get("tools")))
        else:
            name = t.get("name") or t.get("server_label") or kind
            out.append(
                ToolSpec(
                    name=as_str(name) or kind, description=as_str(t.get("description")), kind=kind
                )
            )
    return out


def tool_choice_of(tc: Any) -> str | None:
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


def system_of(body: Item, messages: list[Message]) -> list[Part]:
    parts: list[Part] = []
    instr = body.get("instructions")
    if isinstance(instr, str):
        if instr:
            parts.append(Part(kind="text", text=instr, provider_details={"field": "instructions"}))
    elif isinstance(instr, list):
        for m in messages_of(instr):
            parts.extend(m.parts)
    parts.extend(p for m in messages if m.role in ("system", "developer") for p in m.parts)
    return parts
