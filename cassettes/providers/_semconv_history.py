"""Semconv messages (``gen_ai.input.messages`` …: ``{"role", "parts": [...]}``) as a family's
history, in the wire shape of OpenAI Chat, the Anthropic Messages API, OpenAI Responses, Gemini or
Bedrock Converse,
and the readers of a semconv part that a rebuilt round trip (:mod:`cassettes.providers._rebuild`)
shares."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["arguments_object", "arguments_text", "from_parts", "part_text"]


def part_text(p: dict[str, Any]) -> str:
    c = p.get("content")
    return c if isinstance(c, str) else ("" if c is None else orjson.dumps(c).decode())


def _result_blocks(response: Any) -> Any:
    """A tool result's content: the text blocks it was sent as, where the trace kept them as
    semconv text parts (Logfire), else its text."""
    if (
        isinstance(response, list) and response
        and all(isinstance(p, dict) and p.get("type") == "text"
                and isinstance(p.get("content"), str) for p in response)
    ):  # fmt: skip
        return [{"type": "text", "text": p["content"]} for p in response]
    return part_text({"content": response})


def arguments_text(args: Any) -> str:
    return (
        args if isinstance(args, str) else orjson.dumps(args if args is not None else {}).decode()
    )


def arguments_object(args: Any) -> Any:
    if isinstance(args, str):
        try:
            return orjson.loads(args)
        except orjson.JSONDecodeError:
            return {"_raw": args}
    return args if args is not None else {}


def _chat_message(role: str, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    texts = [part_text(p) for p in parts if p.get("type") == "text"]
    calls = [p for p in parts if p.get("type") == "tool_call"]
    results = [p for p in parts if p.get("type") == "tool_call_response"]
    out: list[dict[str, Any]] = [
        {
            "role": "tool",
            "tool_call_id": str(r.get("id") or ""),
            "content": part_text({"content": r.get("response")}),
        }
        for r in results
    ]
    if texts or calls or not results:
        m: dict[str, Any] = {"role": role, "content": "".join(texts) if texts else None}
        if calls:
            m["tool_calls"] = [
                {
                    "id": str(c.get("id") or ""),
                    "type": "function",
                    "function": {
                        "name": str(c.get("name") or ""),
                        "arguments": arguments_text(c.get("arguments")),
                    },
                }
                for c in calls
            ]
        elif m["content"] is None:
            m["content"] = ""
        out.append(m)
    return out


def kept_block(p: dict[str, Any]) -> dict[str, Any] | None:
    """The raw block an ``other`` part keeps (looptap's export writes one so: ``details.block``),
    if any."""
    details = p.get("details") if p.get("type") == "other" else None
    block = details.get("block") if isinstance(details, dict) else None
    return block if isinstance(block, dict) else None


#: The block of a call the provider ran, by the kind looptap gives it.
_ANTHROPIC_CALLS = {"server": "server_tool_use", "mcp": "mcp_tool_use"}


def _anthropic_blocks(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in parts:
        t = p.get("type")
        if t == "text":
            blocks.append({"type": "text", "text": part_text(p)})
        elif t == "tool_call":
            blocks.append(
                {
                    # a call the provider ran (looptap's export says which: ``tool_kind``)
                    "type": _ANTHROPIC_CALLS.get(str(p.get("tool_kind")), "tool_use"),
                    "id": str(p.get("id") or ""),
                    "name": str(p.get("name") or ""),
                    "input": arguments_object(p.get("arguments")),
                }
            )
        elif t == "tool_call_response":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": str(p.get("id") or ""),
                "content": _result_blocks(p.get("response")),
            }
            if p.get("is_error") is True:
                block["is_error"] = True
            blocks.append(block)
        elif (kept := kept_block(p)) is not None:
            blocks.append(kept)  # a block looptap has no kind for (a server tool's result), whole
    return blocks


def _responses_items(role: str, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for p in parts:
        t = p.get("type")
        if t == "text" and role == "assistant":
            text = [
                {"type": "output_text", "text": part_text(p), "annotations": [], "logprobs": []}
            ]
            items.append({"type": "message", "role": "assistant", "content": text})
        elif t == "text":
            items.append({"role": role, "content": part_text(p)})
        elif t == "tool_call":
            args = arguments_text(p.get("arguments"))
            items.append({"type": "function_call", "call_id": str(p.get("id") or ""),
                          "name": str(p.get("name") or ""), "arguments": args})  # fmt: skip
        elif t == "tool_call_response":
            out = part_text({"content": p.get("response")})
            items.append({"type": "function_call_output", "call_id": str(p.get("id") or ""),
                          "output": out})  # fmt: skip
        elif (kept := kept_block(p)) is not None:  # an item looptap has no kind for, whole
            items.append(kept)
    return items


def _gemini_content(
    role: str, parts: list[dict[str, Any]], names: dict[str, str], ids: bool = False
) -> Any:
    """A Gemini content of semconv parts; ``ids``: the calls' and results' ids are the wire's
    (Gemini 3 sends them; other sources' are made by their instrumentation, google-genai's
    ``name_N``, and left out)."""
    out: list[dict[str, Any]] = []
    for p in parts:
        t = p.get("type")
        if t == "text":
            out.append({"text": part_text(p)})
        elif p.get("tool_kind") == "server" and t in ("tool_call", "tool_call_response"):
            out.append(_gemini_server_part(p))
        elif t == "tool_call":
            names[str(p.get("id") or "")] = str(p.get("name") or "")
            call = {"name": str(p.get("name") or ""), "args": arguments_object(p.get("arguments"))}
            said = {"id": p["id"]} if ids and isinstance(p.get("id"), str) and p["id"] else {}
            out.append({"functionCall": {**said, **call}})
        elif t == "tool_call_response":
            name = names.get(str(p.get("id") or ""), "")
            res = p.get("response")
            res = res if isinstance(res, dict) else {"result": res}
            said = {"id": p["id"]} if ids and isinstance(p.get("id"), str) and p["id"] else {}
            out.append({"functionResponse": {**said, "name": name, "response": res}})
    return {"role": "model" if role == "assistant" else "user", "parts": out}


def _gemini_server_part(p: dict[str, Any]) -> dict[str, Any]:
    """A call Gemini ran itself (a built-in tool, Gemini 3's server-side tool invocations), or
    its result: paired by their id, named by the tool's type."""
    said = {"id": str(p.get("id") or ""), "toolType": str(p.get("name") or "")}
    if p.get("type") == "tool_call":
        return {"toolCall": {**said, "args": arguments_object(p.get("arguments"))}}
    res = p.get("response")
    return {"toolResponse": {**said, "response": res if isinstance(res, dict) else {"result": res}}}


def _bedrock_blocks(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in parts:
        t = p.get("type")
        if t == "text":
            blocks.append({"text": part_text(p)})
        elif t == "tool_call":
            use = {"toolUseId": str(p.get("id") or ""), "name": str(p.get("name") or ""),
                   "input": arguments_object(p.get("arguments"))}  # fmt: skip
            blocks.append({"toolUse": use})
        elif t == "tool_call_response":
            text = part_text({"content": p.get("response")})
            result = {"toolUseId": str(p.get("id") or ""), "content": [{"text": text}]}
            if p.get("is_error") is True:
                result["status"] = "error"
            blocks.append({"toolResult": result})
    return blocks


def from_parts(
    family: str, messages: list[dict[str, Any]], ids: bool = False
) -> tuple[list[str], list[dict[str, Any]]]:
    """Semconv messages (``{"role", "parts": [...]}``) as ``family``'s history: (system texts
    that ride beside it, the messages). ``ids``: the parts' tool-call ids are the wire's (looptap's
    own export), kept where a family's calls may go without one (Gemini)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # Gemini names a result by its call's name
    for m in messages:
        role = str(m.get("role") or "user")
        role = "assistant" if role == "model" else role  # Gemini's own word (OTel contrib vertexai)
        parts = [p for p in m.get("parts") or [] if isinstance(p, dict)]
        apart = family in ("gemini", "openai_responses", "anthropic", "bedrock")  # system apart
        if family == "openai_responses" and any(kept_block(p) for p in parts):
            # an input item looptap has no kind for (a developer's additional_tools …): an item
            # of the history, kept whole where it was, never an instruction
            out.extend(_responses_items(role, parts))
        elif apart and role in ("system", "developer"):
            system.append("".join(part_text(p) for p in parts if p.get("type") == "text"))
        elif family == "gemini":
            out.append(_gemini_content(role, parts, names, ids))
        elif family == "bedrock":  # roles alternate: a tool message's results are the user's
            said = "assistant" if role == "assistant" else "user"
            if out and out[-1]["role"] == said:
                out[-1]["content"] += _bedrock_blocks(parts)
            else:
                out.append({"role": said, "content": _bedrock_blocks(parts)})
        elif family == "openai_responses":
            out.extend(_responses_items(role, parts))
        elif family == "anthropic":
            blocks = _anthropic_blocks(parts)
            out.append({"role": "assistant" if role == "assistant" else "user", "content": blocks})
        else:
            out.extend(_chat_message(role, parts))
    return system, out
