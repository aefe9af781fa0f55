"""Messages a span keeps in a shape other than the conventions' parts, told by their content and
read by the family's own provider (the code that reads the wire): the APIs' messages
(OpenAI Chat's with ``tool_calls``, Anthropic's content blocks, Gemini's ``contents``) inside
``gen_ai.input.messages`` / ``gen_ai.output.messages`` (also the conventions' text parts with
OpenAI's ``tool_calls`` / ``tool_call_id`` beside them: LiteLLM 1.110's OTel callback), and the
Bedrock Converse content blocks agent frameworks keep as their own (Strands Agents:
``[{"text": …}]``, ``[{"toolUse": …}]``,
``[{"toolResult": …}]``) in their events. Each is parsed as the request its family would have
sent, and its messages come back as semconv messages (``{"role", "parts"}``) for the import."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson

from ..providers import by_family
from . import _genai_names as genai
from ._otlp_spans import json_attribute
from ._span_attributes import output_message, semconv_message, semconv_tools

__all__ = ["adk_call", "as_semconv", "blocks", "result_text"]

#: Bedrock Converse's content blocks (each a one-key object): a framework's own blocks.
_CONVERSE = frozenset(
    "text toolUse toolResult image document video reasoningContent cachePoint guardContent".split()
)
#: Where each family's request is read (the path its adapter reads a generate call at).
_AT = {
    "openai_chat": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/m:generateContent",
    "bedrock": "/model/m/converse",
    "openai_responses": "/v1/responses",
}
#: The item types of a Responses request's ``input`` (its answers' items, and the results sent
#: back).
_RESPONSES_INPUT = frozenset(
    {"function_call_output", "custom_tool_call_output", "computer_call_output",
     "local_shell_call_output", "mcp_approval_response", "item_reference"}
)  # fmt: skip


def blocks(value: Any) -> list[dict[str, Any]] | None:
    """``value`` (a JSON string or a list) as Bedrock Converse content blocks, if it is a list of
    them (each an object of one block key), else ``None``."""
    v = json_attribute(value) if isinstance(value, str) else value
    if not isinstance(v, list) or not v:
        return None
    ok = all(isinstance(b, dict) and len(b) == 1 and next(iter(b)) in _CONVERSE for b in v)
    return v if ok else None


def result_text(response: Any) -> Any:
    """A tool result kept as content blocks of text alone (``[{"text": "…"}]``, a framework's
    own result) is its text; any other result is as it was."""
    found = blocks(response) if isinstance(response, list) else None
    if found is None or not all(isinstance(b.get("text"), str) for b in found):
        return response
    return "".join(b["text"] for b in found)


def _openai_of_parts(m: Any) -> dict[str, Any] | None:
    """A message of the conventions' text parts with OpenAI Chat's ``tool_calls`` /
    ``tool_call_id`` beside them (LiteLLM's OTel callback writes its messages so) as the OpenAI
    Chat message it was made from; ``None`` if ``m`` is not one (a part other than text)."""
    if not isinstance(m, dict) or not isinstance(m.get("parts"), list):
        return None
    parts = m["parts"]
    if not all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
        return None
    out = {k: m[k] for k in ("role", "tool_calls", "tool_call_id") if k in m}
    out["content"] = "".join(str(p.get("content") or "") for p in parts) if parts else None
    return out


def _openai_parted(messages: list[Any]) -> list[Any] | None:
    """``messages`` as OpenAI Chat messages when they are text parts with OpenAI's tool fields
    beside them (one of them has ``tool_calls`` or ``tool_call_id``), else ``None``."""
    if not any(
        isinstance(m, dict) and ("tool_calls" in m or "tool_call_id" in m) for m in messages
    ):
        return None
    if not all(isinstance(m, dict) and isinstance(m.get("parts"), list) for m in messages):
        return None
    out = [_openai_of_parts(m) for m in messages]
    return None if any(m is None for m in out) else out


def _family(messages: list[Any]) -> str | None:
    """The API whose message shape ``messages`` are in (``None``: the conventions' parts)."""
    for m in messages:
        if not isinstance(m, dict):
            return None
        if m.get("type") in _RESPONSES_ITEMS | _RESPONSES_INPUT and "parts" not in m:
            return "openai_responses"
        parts, content = m.get("parts"), m.get("content")
        if isinstance(parts, list) and parts and all(isinstance(p, dict) for p in parts):
            return None if any("type" in p for p in parts) else "gemini"
        if "tool_calls" in m or "tool_call_id" in m or m.get("role") == "tool":
            return "openai_chat"
        if blocks(content) is not None:
            return "bedrock"
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content
        ):
            return "anthropic"
    plain = all(isinstance(m, dict) and "role" in m and "parts" not in m for m in messages)
    return "openai_chat" if messages and plain else None


#: An API's own answers written as output messages: the family, the key its response body holds
#: them under, and the key each answer alone has (OpenAI's choices: ``message``; Gemini's
#: candidates: ``content``, an object), read by the family's provider as its response.
_ANSWERS = (("openai_chat", "choices", "message"), ("gemini", "candidates", "content"))
#: The content block types of Anthropic's message object, and the item types of a Responses
#: answer's ``output`` (a ``message`` item's content is ``output_text`` / ``refusal``).
_ANTHROPIC_BLOCKS = frozenset(
    "text tool_use thinking redacted_thinking server_tool_use web_search_tool_result "
    "web_fetch_tool_result code_execution_tool_result mcp_tool_use mcp_tool_result "
    "container_upload".split()
)
_RESPONSES_ITEMS = frozenset(
    "message function_call reasoning web_search_call file_search_call computer_call "
    "code_interpreter_call image_generation_call local_shell_call mcp_call mcp_list_tools "
    "custom_tool_call".split()
)


def _typed(blocks: Any, kinds: frozenset[str]) -> bool:
    return isinstance(blocks, list) and all(
        isinstance(b, dict) and b.get("type") in kinds for b in blocks
    )


def _whole_answers(messages: list[Any]) -> tuple[str, list[dict[str, Any]]] | None:
    """The family and the response bodies when ``messages`` are an API's whole answers:
    Anthropic message objects (``{"type": "message", "role": "assistant", "content": [blocks]}``,
    each one answer), a Responses answer (``{"object": "response", "output": [items]}``), or a
    Responses answer's output items (one answer)."""
    if all(
        isinstance(m, dict) and m.get("type") == "message" and m.get("role") == "assistant"
        and _typed(m.get("content"), _ANTHROPIC_BLOCKS) for m in messages
    ):  # fmt: skip
        return "anthropic", messages
    if all(isinstance(m, dict) and m.get("object") == "response" for m in messages):
        return "openai_responses", messages
    if _typed(messages, _RESPONSES_ITEMS) and all(
        m.get("role") == "assistant" and not _typed(m.get("content"), _ANTHROPIC_BLOCKS)
        for m in messages if m.get("type") == "message"
    ):  # fmt: skip
        return "openai_responses", [{"output": messages}]
    return None


def _answers(messages: list[Any]) -> list[dict[str, Any]] | None:
    """``messages`` as semconv output messages when they are an API's answers (OpenAI's choices
    list, Gemini's candidates, Anthropic's message objects, a Responses answer or its output
    items: an instrumentation that writes the response's own shape), each read by the family's
    provider as a response of that one answer; else ``None``."""
    bodies: tuple[str, list[dict[str, Any]]] | None = None
    for family, key, own in _ANSWERS:
        if all(
            isinstance(m, dict) and isinstance(m.get(own), dict) and "role" not in m
            for m in messages
        ):
            bodies = family, [{key: [m]} for m in messages]
            break
    bodies = bodies or _whole_answers(messages)
    adapter = by_family(bodies[0]) if bodies else None
    if bodies is None or adapter is None:
        return None
    try:
        read = [adapter.parse_response(b) for b in bodies[1]]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return [output_message(r) for r in read]


def as_semconv(messages: Any) -> Any:
    """``messages`` as semconv messages when they are in an API's shape (parsed by the family's
    provider: its request's messages, or its response's answers; an output message's
    ``finish_reason`` kept), else as they were."""
    if not isinstance(messages, list):
        return messages
    answers = _answers(messages) if messages else None
    if answers is not None:
        return answers
    parted = _openai_parted(messages)
    if parted is not None:  # (its finish reason, where it is an output, kept below)
        parted[-1] = {
            **parted[-1],
            **{k: v for k, v in messages[-1].items() if k == "finish_reason"},
        }
        messages = parted
    family = _family(messages)
    adapter = by_family(family) if family else None
    if adapter is None:
        return messages
    key = {"gemini": "contents", "openai_responses": "input"}.get(str(family), "messages")
    body = {key: messages}
    try:
        req = adapter.parse_request(body, urlsplit("http://trace" + _AT[str(family)]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return messages  # (said where it is read: no message content)
    out = [semconv_message(m) for m in req.messages]
    if family not in ("openai_chat", "openai_responses"):  # (they keep system messages inline)
        system = [{"type": "text", "content": p.text or ""} for p in req.system if p.kind == "text"]
        out = ([{"role": "system", "parts": system}] if system else []) + out
    finish = messages[-1].get("finish_reason") if isinstance(messages[-1], dict) else None
    if out and isinstance(finish, str):
        out[-1]["finish_reason"] = finish
    return out


#: Google ADK's ``call_llm`` span (its telemetry schema 1, ADK 1.x's only model span): its
#: ``LlmRequest`` and ``LlmResponse`` as JSON.
ADK_REQUEST, ADK_RESPONSE = "gcp.vertex.agent.llm_request", "gcp.vertex.agent.llm_response"


def _adk_body(req: dict[str, Any]) -> dict[str, Any]:
    """An ADK ``LlmRequest`` (JSON) as the Gemini request body it was sent as."""
    config = req.get("config")
    config = config if isinstance(config, dict) else {}
    body: dict[str, Any] = {"contents": req["contents"], "tools": config.get("tools") or []}
    si = config.get("system_instruction")
    if isinstance(si, str):  # (ADK keeps it as text; the API's is a content)
        body["systemInstruction"] = {"parts": [{"text": si}]}
    elif isinstance(si, dict):
        body["systemInstruction"] = si
    return body


def _adk_answer(resp: Any) -> dict[str, Any] | None:
    """An ADK ``LlmResponse`` (JSON) as the conventions' output message (its finish reason)."""
    content = resp.get("content") if isinstance(resp, dict) else None
    answer = as_semconv([{**content, "role": "model"}]) if isinstance(content, dict) else None
    if not (isinstance(answer, list) and len(answer) == 1 and isinstance(answer[0], dict)):
        return None
    said = {**answer[0], "role": "assistant"}
    finish = resp.get("finish_reason") if isinstance(resp, dict) else None
    if isinstance(finish, str):
        said["finish_reason"] = finish.lower()
    return said


def adk_call(a: dict[str, Any]) -> dict[str, Any] | None:
    """The attributes of a Google ADK ``call_llm`` span with its request and answer in the
    conventions' names, read by the Gemini provider: its ``LlmRequest`` (Gemini's ``contents``; its
    ``config`` with ``system_instruction`` and ``tools``, snake_case, as the API accepts them) and
    its ``LlmResponse`` (one candidate's ``content``). ``None``: not such a span (or its request
    is not what went on the wire: ``{}`` when ADK keeps no content, a LiteLLM model's call)."""
    req = json_attribute(a.get(ADK_REQUEST))
    if not isinstance(req, dict) or not isinstance(req.get("contents"), list):
        return None
    model = str(req.get("model") or "")
    if "/" in model and not model.startswith(("models/", "projects/", "tunedModels/")):
        return None  # (a LiteLLM model's, "openai/…": the request ADK keeps is not the wire's)
    adapter = by_family("gemini")
    if adapter is None:
        return None
    try:
        parsed = adapter.parse_request(_adk_body(req), urlsplit("http://trace" + _AT["gemini"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    system = [{"type": "text", "content": p.text or ""} for p in parsed.system if p.kind == "text"]
    out = {
        **a,
        genai.OPERATION: "generate_content",
        genai.PROVIDER: "gcp.gemini",  # (its gen_ai.system names ADK, not the API)
        genai.INPUT_MESSAGES: orjson.dumps([semconv_message(m) for m in parsed.messages]).decode(),
        genai.SYSTEM_INSTRUCTIONS: orjson.dumps(system).decode(),
        genai.TOOL_DEFINITIONS: orjson.dumps(semconv_tools(parsed)).decode(),
    }
    resp = json_attribute(a.get(ADK_RESPONSE))
    answer = _adk_answer(resp)
    if answer is not None:
        out[genai.OUTPUT_MESSAGES] = orjson.dumps([answer]).decode()
    if isinstance(resp, dict) and isinstance(resp.get("partial"), bool):
        out[genai.STREAM] = True  # (ADK sets `partial` in its streaming mode only)
    return out
