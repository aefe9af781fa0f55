"""Realistic multi-turn round trips in the real wire format of every API family, for analysis tests.

Two levels:

* per family, ``<family>_turn(history, response_text=None, tool_calls=(), finish=None, usage=…,
  stream=False, …) -> Exchange`` builds one round trip from a wire-format history (list of message
  dicts as that API expects them), plus
  ``<family>_user``/``<family>_assistant``/``<family>_results`` to grow that history;
* :class:`Script`, a family-agnostic driver for whole conversations::

      s = Script("anthropic", tools=[WEATHER])
      s.user("Weather in Paris?")
      s.reply(calls=[Call("get_weather", {"city": "Paris"})])
      s.results("sunny")
      s.reply("It is sunny.")
      run = s.analyse()

Shapes follow the corpus recordings (``tests/corpus``). Families: ``openai_chat``,
``openai_responses``, ``anthropic``, ``gemini``, ``ollama``, ``bedrock`` (Bedrock: non-streamed
Converse only — its streams are binary AWS event streams). ``error(status, body)`` makes an error
reply; ``stream_error`` puts an error event inside a 200 stream; ``truncate_stream`` drops the
terminal event.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from looptap.cassettes.analysis import Conversation, RunAnalysis, analyse
from looptap.cassettes.wire import Exchange

__all__ = [
    "FAMILIES",
    "HISTORY_KEY",
    "STREAM_FAMILIES",
    "UNIT",
    "WEATHER",
    "AgentScript",
    "Call",
    "ErrorReply",
    "Script",
    "Tokens",
    "Tool",
    "assistant_of",
    "edit_request",
    "error",
    "error_results",
    "family_turn",
    "results_of",
    "rewrite_call_ids",
    "set_cache_read",
    "set_request_body",
    "set_system",
    "user_of",
]

FAMILIES = ("openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "bedrock")
STREAM_FAMILIES = ("openai_chat", "openai_responses", "anthropic", "gemini", "ollama")

Json = dict[str, Any]
Headers = list[tuple[str, str]]


@dataclass
class Tool:
    name: str
    parameters: Json
    description: str = ""


WEATHER = Tool(
    "get_weather",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "Get the current weather in a city.",
)
UNIT = Tool(
    "convert",
    {"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]},
    "Convert a temperature.",
)

_ids = itertools.count(1)


@dataclass
class Call:
    """A tool call the model emits. ``raw`` overrides the argument text (e.g. invalid JSON);
    ``signature``: Gemini's ``thoughtSignature`` on the call's part (Gemini 2.5 and 3 with
    thinking send one, to be sent back as it was)."""

    name: str
    args: Any = field(default_factory=dict)
    id: str | None = None
    raw: str | None = None
    signature: str | None = None

    def text(self) -> str:
        return self.raw if self.raw is not None else orjson.dumps(self.args).decode()


@dataclass
class Tokens:
    input: int = 120
    output: int = 24


@dataclass
class ErrorReply:
    status: int
    body: Any
    headers: Headers = field(default_factory=list)


def error(status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> ErrorReply:
    """An HTTP error reply: ``body`` is the JSON error body (or a string sent as is)."""
    return ErrorReply(status, body, list(headers))


def _new_id(prefix: str) -> str:
    return f"{prefix}{next(_ids):06d}"


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else orjson.dumps(data).decode()
        out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return "".join(out).encode()


def _exchange(
    url: str,
    body: Json,
    status: int,
    resp: bytes,
    content_type: str,
    headers: Sequence[tuple[str, str]] = (),
) -> Exchange:
    chunks: list[tuple[float | None, bytes]] = [(0.05, resp)] if resp else []
    return Exchange(
        method="POST",
        url=url,
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(body),
        status=status,
        response_headers=[("content-type", content_type), *headers],
        response_chunks=chunks,
        ttfb=0.04,
        duration=0.3,
    )


def _error_exchange(url: str, body: Json, err: ErrorReply) -> Exchange:
    raw = err.body.encode() if isinstance(err.body, str) else orjson.dumps(err.body)
    return _exchange(url, body, err.status, raw, "application/json", err.headers)


# --- OpenAI Chat Completions ------------------------------------------------------------------


def openai_chat_user(text: str) -> Json:
    return {"role": "user", "content": text}


def openai_chat_assistant(text: str | None = None, calls: Sequence[Call] = ()) -> Json:
    m: Json = {"role": "assistant", "content": text}
    if calls:
        m["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.text()}}
            for c in calls
        ]
    return m


def openai_chat_results(results: Sequence[tuple[Call, str]]) -> list[Json]:
    return [{"role": "tool", "tool_call_id": c.id, "content": out} for c, out in results]


def openai_chat_turn(
    history: list[Json],
    response_text: str | None = None,
    tool_calls: Sequence[Call] = (),
    finish: str | None = None,
    usage: Tokens | None = Tokens(),  # noqa: B008 - immutable in practice
    stream: bool = False,
    *,
    tools: Sequence[Tool] = (),
    model: str = "gpt-4o-mini",
    served_model: str | None = None,
    refusal: str | None = None,
    reasoning: str | None = None,
    tool_choice: Any = None,
    max_tokens: int | None = None,
    include_usage: bool = True,
    error: ErrorReply | None = None,
    stream_error: Json | None = None,
    truncate_stream: bool = False,
    headers: Sequence[tuple[str, str]] = (),
) -> Exchange:
    for c in tool_calls:
        c.id = c.id or _new_id("call_")
    body: Json = {"model": model, "messages": history}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if max_tokens is not None:
        body["max_completion_tokens"] = max_tokens
    if stream:
        body["stream"] = True
        if include_usage:
            body["stream_options"] = {"include_usage": True}
    url = "https://api.openai.com/v1/chat/completions"
    if error is not None:
        return _error_exchange(url, body, error)
    finish = finish or ("tool_calls" if tool_calls else "stop")
    served = served_model or f"{model}-2024-07-18"
    rid = _new_id("chatcmpl-")
    u = (
        {
            "prompt_tokens": usage.input,
            "completion_tokens": usage.output,
            "total_tokens": usage.input + usage.output,
        }
        if usage
        else None
    )
    if not stream:
        msg = openai_chat_assistant(response_text, tool_calls)
        msg["refusal"] = refusal
        if reasoning:
            msg["reasoning_content"] = reasoning
        resp: Json = {
            "id": rid,
            "object": "chat.completion",
            "created": 1742842885,
            "model": served,
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
            "system_fingerprint": "fp_b8bc95a0ac",
        }
        if u:
            resp["usage"] = u
        return _exchange(url, body, 200, orjson.dumps(resp), "application/json", headers)
    base = {"id": rid, "object": "chat.completion.chunk", "created": 1742842885, "model": served}

    def chunk(delta: Json, fin: str | None = None) -> Json:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": fin}],
        }

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    if reasoning:
        events.append((None, chunk({"reasoning_content": reasoning})))
    if response_text:
        half = len(response_text) // 2
        events += [
            (None, chunk({"content": response_text[:half]})),
            (None, chunk({"content": response_text[half:]})),
        ]
    if refusal:
        events.append((None, chunk({"refusal": refusal})))
    for i, c in enumerate(tool_calls):
        text = c.text()
        events.append(
            (
                None,
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": ""},
                            }
                        ]
                    }
                ),
            )
        )
        for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
            events.append(
                (None, chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
            )
    if stream_error is not None:
        events.append((None, {"error": stream_error}))
        return _exchange(url, body, 200, _sse(events), "text/event-stream", headers)
    if truncate_stream:
        return _exchange(url, body, 200, _sse(events), "text/event-stream", headers)
    events.append((None, chunk({}, finish)))
    if u and include_usage:
        events.append((None, {**base, "choices": [], "usage": u}))
    events.append((None, "[DONE]"))
    return _exchange(url, body, 200, _sse(events), "text/event-stream", headers)


# --- OpenAI Responses -------------------------------------------------------------------------


def openai_responses_user(text: str) -> Json:
    return {"role": "user", "content": text}


def _responses_output(
    text: str | None, calls: Sequence[Call], refusal: str | None, reasoning: str | None
) -> list[Json]:
    out: list[Json] = []
    if reasoning:
        out.append(
            {
                "id": _new_id("rs_"),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reasoning}],
            }
        )
    content: list[Json] = []
    if text:
        content.append({"type": "output_text", "text": text, "annotations": []})
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    if content:
        out.append(
            {
                "id": _new_id("msg_"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": content,
            }
        )
    for c in calls:
        out.append(
            {
                "id": _new_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "call_id": c.id,
                "name": c.name,
                "arguments": c.text(),
            }
        )
    return out


def openai_responses_assistant(text: str | None = None, calls: Sequence[Call] = ()) -> list[Json]:
    """The output items a client appends to ``input`` (as pydantic-ai and the SDK do)."""
    items: list[Json] = []
    if text:
        items.append({"role": "assistant", "content": text})
    items += [
        {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.text()}
        for c in calls
    ]
    return items


def openai_responses_results(results: Sequence[tuple[Call, str]]) -> list[Json]:
    return [{"type": "function_call_output", "call_id": c.id, "output": out} for c, out in results]


def openai_responses_turn(
    history: list[Json],
    response_text: str | None = None,
    tool_calls: Sequence[Call] = (),
    finish: str | None = None,
    usage: Tokens | None = Tokens(),  # noqa: B008
    stream: bool = False,
    *,
    tools: Sequence[Tool] = (),
    model: str = "gpt-5-mini",
    served_model: str | None = None,
    refusal: str | None = None,
    reasoning: str | None = None,
    tool_choice: Any = None,
    max_tokens: int | None = None,
    error: ErrorReply | None = None,
    stream_error: Json | None = None,
    truncate_stream: bool = False,
    headers: Sequence[tuple[str, str]] = (),
) -> Exchange:
    """``finish``: ``completed`` (default) or ``incomplete:<reason>`` (``max_output_tokens`` …)."""
    for c in tool_calls:
        c.id = c.id or _new_id("call_")
    body: Json = {"model": model, "input": history}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": False,
            }
            for t in tools
        ]
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    if stream:
        body["stream"] = True
    url = "https://api.openai.com/v1/responses"
    if error is not None:
        return _error_exchange(url, body, error)
    status, _, reason = (finish or "completed").partition(":")
    resp: Json = {
        "id": _new_id("resp_"),
        "object": "response",
        "created_at": 1759354093,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "model": served_model or f"{model}-2025-08-07",
        "output": _responses_output(response_text, tool_calls, refusal, reasoning),
        "parallel_tool_calls": True,
        "usage": (
            {
                "input_tokens": usage.input,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage.output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.input + usage.output,
            }
            if usage
            else None
        ),
    }
    if not stream:
        return _exchange(url, body, 200, orjson.dumps(resp), "application/json", headers)
    seq = itertools.count()
    start = {**resp, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str | None, Any]] = [
        (
            "response.created",
            {"type": "response.created", "sequence_number": next(seq), "response": start},
        ),
        (
            "response.in_progress",
            {"type": "response.in_progress", "sequence_number": next(seq), "response": start},
        ),
    ]
    for i, item in enumerate(resp["output"]):
        added = {**item, "status": "in_progress"}
        if item["type"] == "message":
            added["content"] = []
        if item["type"] == "function_call":
            added["arguments"] = ""
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": i,
                    "item": added,
                },
            )
        )
        if item["type"] == "message" and response_text:
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "sequence_number": next(seq),
                        "item_id": item["id"],
                        "output_index": i,
                        "content_index": 0,
                        "delta": response_text,
                    },
                )
            )
        if item["type"] == "function_call":
            events.append(
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "sequence_number": next(seq),
                        "item_id": item["id"],
                        "output_index": i,
                        "delta": item["arguments"],
                    },
                )
            )
        if truncate_stream:
            continue
        events.append(
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(seq),
                    "output_index": i,
                    "item": item,
                },
            )
        )
    if stream_error is not None:
        events.append(("error", {"type": "error", "sequence_number": next(seq), **stream_error}))
    elif not truncate_stream:
        terminal = "response.completed" if status == "completed" else f"response.{status}"
        events.append(
            (terminal, {"type": terminal, "sequence_number": next(seq), "response": resp})
        )
    return _exchange(url, body, 200, _sse(events), "text/event-stream", headers)


# --- Anthropic Messages -----------------------------------------------------------------------


def anthropic_user(text: str) -> Json:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _anthropic_blocks(
    text: str | None, calls: Sequence[Call], reasoning: str | None = None
) -> list[Json]:
    blocks: list[Json] = []
    if reasoning:
        blocks.append(
            {"type": "thinking", "thinking": reasoning, "signature": "EqQBCkgIBhABGAIiQL"}
        )
    if text:
        blocks.append({"type": "text", "text": text})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in calls]
    return blocks


def anthropic_assistant(text: str | None = None, calls: Sequence[Call] = ()) -> Json:
    return {"role": "assistant", "content": _anthropic_blocks(text, calls)}


def anthropic_results(results: Sequence[tuple[Call, str]]) -> list[Json]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": out, "is_error": False}
                for c, out in results
            ],
        }
    ]


def anthropic_turn(
    history: list[Json],
    response_text: str | None = None,
    tool_calls: Sequence[Call] = (),
    finish: str | None = None,
    usage: Tokens | None = Tokens(),  # noqa: B008
    stream: bool = False,
    *,
    tools: Sequence[Tool] = (),
    model: str = "claude-sonnet-4-5",
    served_model: str | None = None,
    refusal: str | None = None,
    reasoning: str | None = None,
    tool_choice: Any = None,
    max_tokens: int = 1024,
    error: ErrorReply | None = None,
    stream_error: Json | None = None,
    truncate_stream: bool = False,
    headers: Sequence[tuple[str, str]] = (),
) -> Exchange:
    """``refusal`` sets ``stop_reason: refusal``; a :class:`Call` with ``raw`` streams that raw text
    as ``partial_json`` (the only way invalid JSON reaches an Anthropic response)."""
    for c in tool_calls:
        c.id = c.id or _new_id("toolu_01")
    body: Json = {"model": model, "max_tokens": max_tokens, "messages": history}
    if tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if stream:
        body["stream"] = True
    url = "https://api.anthropic.com/v1/messages"
    if error is not None:
        return _error_exchange(url, body, error)
    stop = finish or (
        "refusal" if refusal is not None else "tool_use" if tool_calls else "end_turn"
    )
    u = (
        {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": usage.output,
        }
        if usage
        else None
    )
    msg: Json = {
        "id": _new_id("msg_01"),
        "type": "message",
        "role": "assistant",
        "model": served_model or f"{model}-20250929",
        "content": _anthropic_blocks(response_text, tool_calls, reasoning),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": u,
    }
    if not stream:
        return _exchange(url, body, 200, orjson.dumps(msg), "application/json", headers)
    start = {**msg, "content": [], "stop_reason": None, "usage": {**(u or {}), "output_tokens": 1}}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                )
            )
        elif block["type"] == "thinking":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                    },
                )
            )
        else:
            call = next(c for c in tool_calls if c.id == block["id"])
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {**block, "input": {}},
                    },
                )
            )
            text = call.text()
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
                )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    if stream_error is not None:
        events.append(("error", {"type": "error", "error": stream_error}))
        return _exchange(url, body, 200, _sse(events), "text/event-stream", headers)
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage.output if usage else 0},
            },
        )
    )
    if not truncate_stream:
        events.append(("message_stop", {"type": "message_stop"}))
    return _exchange(url, body, 200, _sse(events), "text/event-stream", headers)


# --- Gemini -----------------------------------------------------------------------------------


def gemini_user(text: str) -> Json:
    return {"role": "user", "parts": [{"text": text}]}


def _gemini_parts(
    text: str | None, calls: Sequence[Call], reasoning: str | None = None
) -> list[Json]:
    parts: list[Json] = []
    if reasoning:
        parts.append({"text": reasoning, "thought": True})
    if text:
        parts.append({"text": text})
    for c in calls:
        call: Json = {"functionCall": {"name": c.name, "args": c.args}}
        if c.signature:
            call["thoughtSignature"] = c.signature
        parts.append(call)
    return parts


def gemini_assistant(text: str | None = None, calls: Sequence[Call] = ()) -> Json:
    return {"role": "model", "parts": _gemini_parts(text, calls)}


def gemini_results(results: Sequence[tuple[Call, str]]) -> list[Json]:
    return [
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": c.name, "response": {"result": out}}}
                for c, out in results
            ],
        }
    ]


def _gemini_schema(schema: Any) -> Any:
    """JSON Schema → Gemini's OpenAPI subset (upper-case types), as older SDKs send it."""
    if isinstance(schema, dict):
        out = {k: _gemini_schema(v) for k, v in schema.items() if k != "additionalProperties"}
        if isinstance(schema.get("type"), str):
            out["type"] = schema["type"].upper()
        return out
    if isinstance(schema, list):
        return [_gemini_schema(s) for s in schema]
    return schema


def gemini_turn(
    history: list[Json],
    response_text: str | None = None,
    tool_calls: Sequence[Call] = (),
    finish: str | None = None,
    usage: Tokens | None = Tokens(),  # noqa: B008
    stream: bool = False,
    *,
    tools: Sequence[Tool] = (),
    model: str = "gemini-2.5-flash",
    served_model: str | None = None,
    refusal: str | None = None,
    reasoning: str | None = None,
    tool_choice: Any = None,
    max_tokens: int | None = None,
    finish_message: str | None = None,
    block_reason: str | None = None,
    error: ErrorReply | None = None,
    stream_error: Json | None = None,
    truncate_stream: bool = False,
    headers: Sequence[tuple[str, str]] = (),
) -> Exchange:
    """``block_reason`` answers with ``promptFeedback.blockReason`` and no candidate."""
    body: Json = {"contents": history}
    if tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters": _gemini_schema(t.parameters),
                    }
                    for t in tools
                ]
            }
        ]
    if tool_choice is not None:
        body["toolConfig"] = {"functionCallingConfig": tool_choice}
    if max_tokens is not None:
        body["generationConfig"] = {"maxOutputTokens": max_tokens}
    op = "streamGenerateContent?alt=sse" if stream else "generateContent"
    url = f"https://generativelanguage.googleapis.com/v1beta/models/{model}:{op}"
    if error is not None:
        return _error_exchange(url, body, error)
    um = (
        {
            "promptTokenCount": usage.input,
            "candidatesTokenCount": usage.output,
            "totalTokenCount": usage.input + usage.output,
        }
        if usage
        else None
    )
    resp: Json = {"modelVersion": served_model or model, "responseId": _new_id("gRsp")}
    if block_reason:
        resp["promptFeedback"] = {
            "blockReason": block_reason,
            "blockReasonMessage": finish_message or "The prompt was blocked.",
        }
    else:
        cand: Json = {
            "content": {
                "role": "model",
                "parts": _gemini_parts(response_text, tool_calls, reasoning),
            },
            "finishReason": finish or "STOP",
            "index": 0,
        }
        if finish_message:
            cand["finishMessage"] = finish_message
        resp["candidates"] = [cand]
    if um:
        resp["usageMetadata"] = um
    if not stream:
        return _exchange(url, body, 200, orjson.dumps(resp), "application/json", headers)
    chunks: list[Json] = []
    if "candidates" in resp:
        parts = resp["candidates"][0]["content"]["parts"]
        for p in parts[:-1]:
            chunks.append(
                {
                    "candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}],
                    "modelVersion": resp["modelVersion"],
                    "responseId": resp["responseId"],
                }
            )
        last = {
            **resp,
            "candidates": [
                {**resp["candidates"][0], "content": {"role": "model", "parts": parts[-1:]}}
            ],
        }
        if truncate_stream:
            del last["candidates"][0]["finishReason"]
            last.pop("usageMetadata", None)
        chunks.append(last)
    else:
        chunks.append(resp)
    events: list[tuple[str | None, Any]] = [(None, c) for c in chunks]
    if stream_error is not None:
        events = events[:-1] + [(None, {"error": stream_error})]
    raw = b"".join(f"data: {orjson.dumps(d).decode()}\r\n\r\n".encode() for _, d in events)
    return _exchange(url, body, 200, raw, "text/event-stream", headers)


# --- Ollama -----------------------------------------------------------------------------------


def ollama_user(text: str) -> Json:
    return {"role": "user", "content": text}


def ollama_assistant(text: str | None = None, calls: Sequence[Call] = ()) -> Json:
    m: Json = {"role": "assistant", "content": text or ""}
    if calls:
        m["tool_calls"] = [{"function": {"name": c.name, "arguments": c.args}} for c in calls]
    return m


def ollama_results(results: Sequence[tuple[Call, str]]) -> list[Json]:
    return [{"role": "tool", "content": out, "tool_name": c.name} for c, out in results]


def ollama_turn(
    history: list[Json],
    response_text: str | None = None,
    tool_calls: Sequence[Call] = (),
    finish: str | None = None,
    usage: Tokens | None = Tokens(),  # noqa: B008
    stream: bool = False,
    *,
    tools: Sequence[Tool] = (),
    model: str = "qwen3:8b",
    served_model: str | None = None,
    refusal: str | None = None,
    reasoning: str | None = None,
    tool_choice: Any = None,
    max_tokens: int | None = None,
    error: ErrorReply | None = None,
    stream_error: Json | None = None,
    truncate_stream: bool = False,
    headers: Sequence[tuple[str, str]] = (),
) -> Exchange:
    body: Json = {"model": model, "messages": history, "stream": stream}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
    if max_tokens is not None:
        body["options"] = {"num_predict": max_tokens}
    url = "http://localhost:11434/api/chat"
    if error is not None:
        return _error_exchange(url, body, error)
    served = served_model or model
    msg = ollama_assistant(response_text, tool_calls)
    if reasoning:
        msg["thinking"] = reasoning
    done: Json = {
        "model": served,
        "created_at": "2025-05-01T10:00:00.000000Z",
        "message": msg,
        "done_reason": finish or "stop",
        "done": True,
        "total_duration": 912345678,
        "load_duration": 1234567,
        "eval_duration": 812345678,
    }
    if usage:
        done["prompt_eval_count"] = usage.input
        done["eval_count"] = usage.output
    if not stream:
        return _exchange(url, body, 200, orjson.dumps(done), "application/json", headers)
    lines: list[Json] = []
    if response_text:
        lines.append(
            {
                "model": served,
                "created_at": done["created_at"],
                "message": {"role": "assistant", "content": response_text},
                "done": False,
            }
        )
    if tool_calls:
        lines.append(
            {
                "model": served,
                "created_at": done["created_at"],
                "message": {"role": "assistant", "content": "", "tool_calls": msg["tool_calls"]},
                "done": False,
            }
        )
    if stream_error is not None:
        lines.append({"error": stream_error.get("message", "error")})
    elif not truncate_stream:
        lines.append({**done, "message": {"role": "assistant", "content": ""}})
    raw = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    return _exchange(url, body, 200, raw, "application/x-ndjson", headers)


# --- Bedrock Converse ---------------------------------------------------------------------------


def bedrock_user(text: str) -> Json:
    return {"role": "user", "content": [{"text": text}]}


def _bedrock_blocks(text: str | None, calls: Sequence[Call]) -> list[Json]:
    blocks: list[Json] = [{"text": text}] if text else []
    blocks += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.args}} for c in calls]
    return blocks


def bedrock_assistant(text: str | None = None, calls: Sequence[Call] = ()) -> Json:
    return {"role": "assistant", "content": _bedrock_blocks(text, calls)}


def bedrock_results(results: Sequence[tuple[Call, str]]) -> list[Json]:
    return [
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": c.id, "content": [{"text": out}], "status": "success"}}
                for c, out in results
            ],
        }
    ]


def bedrock_turn(
    history: list[Json],
    response_text: str | None = None,
    tool_calls: Sequence[Call] = (),
    finish: str | None = None,
    usage: Tokens | None = Tokens(),  # noqa: B008
    stream: bool = False,
    *,
    tools: Sequence[Tool] = (),
    model: str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    served_model: str | None = None,
    refusal: str | None = None,
    reasoning: str | None = None,
    tool_choice: Any = None,
    max_tokens: int | None = None,
    error: ErrorReply | None = None,
    stream_error: Json | None = None,
    truncate_stream: bool = False,
    headers: Sequence[tuple[str, str]] = (),
) -> Exchange:
    if stream:
        raise NotImplementedError(
            "Bedrock streams are binary AWS event streams; use the non-streamed Converse form"
        )
    for c in tool_calls:
        c.id = c.id or _new_id("tooluse_")
    body: Json = {
        "messages": history,
        "inferenceConfig": {"maxTokens": max_tokens} if max_tokens else {},
    }
    if tools:
        body["toolConfig"] = {
            "tools": [
                {
                    "toolSpec": {
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": {"json": t.parameters},
                    }
                }
                for t in tools
            ]
        }
        if tool_choice is not None:
            body["toolConfig"]["toolChoice"] = tool_choice
    url = f"https://bedrock-runtime.us-east-1.amazonaws.com/model/{model}/converse"
    if error is not None:
        return _error_exchange(url, body, error)
    resp: Json = {
        "metrics": {"latencyMs": 401},
        "output": {
            "message": {"role": "assistant", "content": _bedrock_blocks(response_text, tool_calls)}
        },
        "stopReason": finish or ("tool_use" if tool_calls else "end_turn"),
    }
    if usage:
        resp["usage"] = {
            "inputTokens": usage.input,
            "outputTokens": usage.output,
            "totalTokens": usage.input + usage.output,
        }
    return _exchange(url, body, 200, orjson.dumps(resp), "application/json", headers)


# --- family dispatch and the Script driver ----------------------------------------------------

_TURN = {
    "openai_chat": openai_chat_turn,
    "openai_responses": openai_responses_turn,
    "anthropic": anthropic_turn,
    "gemini": gemini_turn,
    "ollama": ollama_turn,
    "bedrock": bedrock_turn,
}
_USER = {
    "openai_chat": openai_chat_user,
    "openai_responses": openai_responses_user,
    "anthropic": anthropic_user,
    "gemini": gemini_user,
    "ollama": ollama_user,
    "bedrock": bedrock_user,
}
_RESULTS = {
    "openai_chat": openai_chat_results,
    "openai_responses": openai_responses_results,
    "anthropic": anthropic_results,
    "gemini": gemini_results,
    "ollama": ollama_results,
    "bedrock": bedrock_results,
}


def _assistant(family: str, text: str | None, calls: Sequence[Call]) -> list[Json]:
    if family == "openai_responses":
        return openai_responses_assistant(text, calls)
    fn = {
        "openai_chat": openai_chat_assistant,
        "anthropic": anthropic_assistant,
        "gemini": gemini_assistant,
        "ollama": ollama_assistant,
        "bedrock": bedrock_assistant,
    }[family]
    return [fn(text, calls)]


def family_turn(family: str, history: list[Json], **kw: Any) -> Exchange:
    """``<family>_turn`` by name."""
    return _TURN[family](history, **kw)


# Per-family spelling of common finish reasons and tool choices, for family-parametrised tests.
LENGTH = {
    "openai_chat": "length",
    "openai_responses": "incomplete:max_output_tokens",
    "anthropic": "max_tokens",
    "gemini": "MAX_TOKENS",
    "ollama": "length",
    "bedrock": "max_tokens",
}
REQUIRED = {
    "openai_chat": "required",
    "openai_responses": "required",
    "anthropic": {"type": "any"},
    "gemini": {"mode": "ANY"},
    "bedrock": {"any": {}},
}


@dataclass
class Script:
    """One conversation, built turn by turn in one family's wire format."""

    family: str
    tools: Sequence[Tool] = (WEATHER,)
    model: str | None = None
    history: list[Json] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    last_calls: list[Call] = field(default_factory=list)
    defaults: dict[str, Any] = field(default_factory=dict)

    def user(self, text: str) -> Script:
        self.history.append(_USER[self.family](text))
        return self

    def _add(self, ex: Exchange) -> Exchange:
        ex.seq = len(self.exchanges)
        self.exchanges.append(ex)
        return ex

    def reply(
        self, text: str | None = None, calls: Sequence[Call] = (), echo: bool = True, **kw: Any
    ) -> Exchange:
        """The next round trip: the current history as request, the given emission as response; the
        assistant message is then appended to the history (``echo=False`` leaves it out)."""
        opts = {**self.defaults, **kw}
        if self.model:
            opts.setdefault("model", self.model)
        calls = list(calls)
        ex = _TURN[self.family](list(self.history), text, calls, tools=self.tools, **opts)
        self.last_calls = calls
        if echo and "error" not in opts:
            self.history.extend(_assistant(self.family, text, calls))
        return self._add(ex)

    def fail(self, status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> Exchange:
        """The next round trip fails with an HTTP error; the history is left as it was."""
        return self.reply(error=error(status, body, headers), echo=False)

    def results(self, *outputs: str) -> Script:
        """Tool results for the last reply's calls, in order (default output ``"ok"``)."""
        outs = list(outputs) + ["ok"] * (len(self.last_calls) - len(outputs))
        self.history.extend(_RESULTS[self.family](list(zip(self.last_calls, outs, strict=False))))
        return self

    def analyse(self) -> RunAnalysis:
        return analyse(self.exchanges)


# --- request/response edits, system prompts, error results (dispatch and threading tests) ------

HISTORY_KEY = {
    "openai_chat": "messages",
    "openai_responses": "input",
    "anthropic": "messages",
    "gemini": "contents",
    "ollama": "messages",
    "bedrock": "messages",
}


def edit_request(ex: Exchange, fn: Any) -> Exchange:
    """Rewrite a recorded request body: ``fn(body)`` edits the parsed JSON in place."""
    body = orjson.loads(ex.request_body)
    fn(body)
    ex.request_body = orjson.dumps(body)
    ex.forget_request_json()
    return ex


def set_request_body(ex: Exchange, raw: bytes) -> Exchange:
    """Replace the request bytes as sent (e.g. another serialiser's whitespace and key order)."""
    ex.request_body = raw
    ex.forget_request_json()
    return ex


def set_system(family: str, body: Json, text: str) -> None:
    """Put a system prompt where ``family`` carries it."""
    key = HISTORY_KEY[family]
    if family in ("openai_chat", "ollama"):
        body[key] = [
            {"role": "system", "content": text},
            *[m for m in body[key] if m.get("role") != "system"],
        ]
    elif family == "openai_responses":
        body["instructions"] = text
    elif family == "anthropic":
        body["system"] = [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]
    elif family == "gemini":
        body["systemInstruction"] = {"parts": [{"text": text}]}
    else:
        body["system"] = [{"text": text}]


def set_cache_read(ex: Exchange, family: str, tokens: int) -> Exchange:
    """Report ``tokens`` cache-read input tokens in a non-streamed response (Ollama has no
    cache)."""
    resp = orjson.loads(ex.response_body)
    if family == "openai_chat":
        resp["usage"]["prompt_tokens_details"] = {"cached_tokens": tokens, "audio_tokens": 0}
    elif family == "openai_responses":
        resp["usage"]["input_tokens_details"] = {"cached_tokens": tokens}
    elif family == "anthropic":
        resp["usage"]["cache_read_input_tokens"] = tokens
    elif family == "gemini":
        resp["usageMetadata"]["cachedContentTokenCount"] = tokens
    elif family == "bedrock":
        resp["usage"]["cacheReadInputTokens"] = tokens
    else:
        raise ValueError(f"{family} reports no cache reads")
    ex.response_chunks = [(0.05, orjson.dumps(resp))]
    return ex


def error_results(family: str, results: Sequence[tuple[Call, str]]) -> list[Json]:
    """Tool results flagged as errors the way ``family`` can flag them: Anthropic ``is_error``,
    Bedrock ``status: error``, Gemini ``{"error": …}``; the others only have the text."""
    if family == "anthropic":
        return [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c.id, "content": out, "is_error": True}
                    for c, out in results
                ],
            }
        ]
    if family == "bedrock":
        return [
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": c.id,
                            "content": [{"text": out}],
                            "status": "error",
                        }
                    }
                    for c, out in results
                ],
            }
        ]
    if family == "gemini":
        return [
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": c.name, "response": {"error": out}}}
                    for c, out in results
                ],
            }
        ]
    return _RESULTS[family](results)


def results_of(family: str, results: Sequence[tuple[Call, str]]) -> list[Json]:
    """``<family>_results`` by name."""
    return _RESULTS[family](results)


def assistant_of(family: str, text: str | None = None, calls: Sequence[Call] = ()) -> list[Json]:
    """The history items a client appends for an answer (``<family>_assistant``)."""
    return _assistant(family, text, calls)


def user_of(family: str, text: str) -> Json:
    """``<family>_user`` by name."""
    return _USER[family](text)


@dataclass
class AgentScript(Script):
    """A :class:`Script` with a system prompt (changeable between turns) and request headers."""

    system: str | None = None
    request_headers: Headers = field(default_factory=list)

    def _add(self, ex: Exchange) -> Exchange:
        if self.system is not None:
            system = self.system
            edit_request(ex, lambda body: set_system(self.family, body, system))
        ex.request_headers = [*ex.request_headers, *self.request_headers]
        return super()._add(ex)

    def results_for(self, *results: tuple[Call, str]) -> AgentScript:
        """Results for chosen calls only (a dispatcher that lost some), in the family's format."""
        self.history.extend(_RESULTS[self.family](list(results)))
        return self


def rewrite_call_ids(family: str, body: Json, new: Callable[[str], str]) -> None:
    """Rewrite every call id in a request history (echoed calls and results alike) to ``new(old)``,
    as frameworks do; for Gemini, which sends no ids, ``new(kind)`` invents them."""
    for item in body[HISTORY_KEY[family]]:
        if family == "openai_chat":
            for tc in item.get("tool_calls") or []:
                tc["id"] = new(tc["id"])
            if item.get("role") == "tool":
                item["tool_call_id"] = new(item["tool_call_id"])
        elif family == "openai_responses":
            if "call_id" in item:
                item["call_id"] = new(item["call_id"])
        elif family == "anthropic":
            for b in item["content"] if isinstance(item["content"], list) else []:
                if b["type"] == "tool_use":
                    b["id"] = new(b["id"])
                elif b["type"] == "tool_result":
                    b["tool_use_id"] = new(b["tool_use_id"])
        elif family == "bedrock":
            for b in item["content"]:
                if "toolUse" in b:
                    b["toolUse"]["toolUseId"] = new(b["toolUse"]["toolUseId"])
                if "toolResult" in b:
                    b["toolResult"]["toolUseId"] = new(b["toolResult"]["toolUseId"])
        elif family == "gemini":
            # the client invents ids Gemini never sent, calls and results in order
            for p in item["parts"]:
                for kind in ("functionCall", "functionResponse"):
                    if kind in p:
                        p[kind]["id"] = new(kind)


# -- reading an analysed run -------------------------------------------------------------------


def run_of(exchanges: Sequence[Exchange]) -> RunAnalysis:
    """Analyse round trips in the given (recording) order."""
    exchanges = list(exchanges)
    for i, ex in enumerate(exchanges):
        ex.seq = i
    return analyse(exchanges)


def threads(run: RunAnalysis) -> list[list[int]]:
    """Each conversation's turns (their seqs)."""
    return [c.turns for c in run.conversations]


def conv_of(run: RunAnalysis, seq: int) -> Conversation:
    """The conversation that holds round trip ``seq``."""
    return next(c for c in run.conversations if seq in c.turns)


def serious(run: RunAnalysis) -> list[tuple[str, int | None]]:
    """The warnings and errors, each as (code, seq)."""
    return [(f.code, f.seq) for f in run.findings if f.severity in ("warning", "error")]
