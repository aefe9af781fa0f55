"""The chat turns of OpenAI Chat, the Anthropic Messages API, OpenAI Responses, Gemini and Bedrock
Converse as a trace's import rebuilds them (a
:class:`~cassettes.providers._rebuild_shape.RebuildShape` each, its family's ``profile.rebuild``):
the request in the API's shape and, where the API's own renderer does not render it from the
trace's parts (Responses, Gemini: as replay serves it), the answer.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import orjson

from ._rebuild_shape import CHAT_PARAMS, Built, Call, RebuildShape, finish, said_nothing

__all__ = ["ANTHROPIC", "BEDROCK", "CHAT", "GEMINI", "RESPONSES", "chat_ids"]

#: max_tokens is required by the Messages API; a trace that does not say gets this (inferred).
_MAX_TOKENS = 4096
#: Gemini on Vertex AI (:attr:`Call.vertex`): a trace names no project, perhaps no region. A
#: client's other project, region or API version is its base path (read under the recording's, as
#: for any recording); the query its transport adds (the Vertex AI SDK's REST
#: ``$alt=json;enum-encoding=int``, ``alt=sse``) is left out of the comparison (``query`` inferred).
_VERTEX = "https://{host}/v1/projects/unknown/locations/{region}/publishers/google/models/{model}"
#: A Vertex AI region, as its host names it (``{region}-aiplatform.googleapis.com``).
_REGION = re.compile(r"([a-z][a-z0-9-]{0,39})-aiplatform\.googleapis\.com")
#: Semconv (and other families') finish reasons → the Messages API's and Converse's own.
_END_TURN = {"stop": "end_turn", "tool_call": "tool_use", "tool_calls": "tool_use",
             "length": "max_tokens"}  # fmt: skip


# -- OpenAI Chat ---------------------------------------------------------------------------------


def _chat(call: Call) -> Built:
    system = [{"role": "system", "content": s} for s in call.system]
    req: dict[str, Any] = {"model": call.model or "unknown", "messages": system + call.messages}
    if call.tools:
        req["tools"] = call.tools
    req.update(call.params)
    if call.stream:
        req["stream"] = True
    url = "https://api.openai.com/v1/chat/completions"
    if call.output is None:
        return url, req, None
    message = {"role": "assistant", "content": None, **call.output}
    resp: dict[str, Any] = {
        "id": call.response_id,
        "object": "chat.completion",
        "created": int(call.started or 0),
        "model": call.served or call.model or "unknown",
        "choices": [{"index": 0, "message": message, "finish_reason": finish(call, CHAT)}]
        if not said_nothing(call)
        else [],
    }
    if call.usage:
        i, o = call.usage.get("input_tokens", 0), call.usage.get("output_tokens", 0)
        resp["usage"] = {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}
        prompt = {"cached_tokens": call.usage.get("cache_read"),
                  "cache_write_tokens": call.usage.get("cache_write")}  # fmt: skip
        if any(v is not None for v in prompt.values()):
            resp["usage"]["prompt_tokens_details"] = {
                k: v for k, v in prompt.items() if v is not None
            }
        if "reasoning" in call.usage:
            resp["usage"]["completion_tokens_details"] = {
                "reasoning_tokens": call.usage["reasoning"]
            }
    return url, req, resp


def _chat_settled(call: Call, parts: list[Any]) -> None:
    if any(isinstance(p, dict) and p.get("type") == "tool_call" for p in parts):
        # the history's calls as the model spelled them (or as an object): an agent may send
        # them back spelled its own way (pydantic-ai re-serialises them)
        call.inferred.add("arguments text")
    # ids the trace left out, as the next call will name them
    said = chat_ids([*call.messages, {"role": "assistant", **(call.output or {})}], call.inferred)
    call.messages = said[:-1]
    call.output = {k: v for k, v in said[-1].items() if k != "role"} if call.output else None


def chat_ids(messages: list[dict[str, Any]], inferred: set[str]) -> list[dict[str, Any]]:
    """OpenAI-shaped messages with the tool-call ids (and string arguments) a trajectory left out
    filled in: a call without an id gets one, a tool result without one answers the oldest call
    not answered yet."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for i, m in enumerate(messages):
        m = dict(m)
        if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            calls = []
            for j, c in enumerate(m["tool_calls"]):
                c = dict(c) if isinstance(c, dict) else {}
                if not c.get("id"):
                    c["id"] = f"call_imported_{i}_{j}"
                    inferred.add("tool_call.id")
                fn = c.get("function")
                if isinstance(fn, dict) and not isinstance(fn.get("arguments"), str):
                    c["function"] = {**fn, "arguments": orjson.dumps(fn.get("arguments")).decode()}
                c.setdefault("type", "function")
                pending.append(c["id"])
                calls.append(c)
            m["tool_calls"] = calls
        elif m.get("role") == "tool":
            if not m.get("tool_call_id") and pending:
                m["tool_call_id"] = pending[0]
                inferred.add("tool_result.tool_call_id")
            if m.get("tool_call_id") in pending:
                pending.remove(m["tool_call_id"])
        out.append(m)
    return out


CHAT = RebuildShape(
    _chat, fallback=True, title="OpenAI Chat", api_params=CHAT_PARAMS, continues_history=True,
    finishes={"tool_call": "tool_calls", "tool_use": "tool_calls", "end_turn": "stop",
              "max_tokens": "length"},
    unsure_names={"max_tokens": "max_tokens name"},  # (or max_completion_tokens: not said)
    settle=_chat_settled,
)  # fmt: skip


# -- the Anthropic Messages API ------------------------------------------------------------------


def _anthropic(call: Call) -> Built:
    req: dict[str, Any] = {"model": call.model or "unknown", "max_tokens": _MAX_TOKENS}
    if call.system:
        req["system"] = "\n\n".join(call.system)
    req["messages"] = call.messages
    if call.tools:
        req["tools"] = call.tools
    if "max_tokens" not in call.params:
        call.inferred.add("max_tokens")
    req.update(call.params)
    if call.stream:
        req["stream"] = True
    url = "https://api.anthropic.com/v1/messages"
    if call.output is None:
        return url, req, None
    resp: dict[str, Any] = {
        "id": call.response_id,
        "type": "message",
        "role": "assistant",
        "model": call.served or call.model or "unknown",
        "content": call.output.get("content") or [],
        "stop_reason": finish(call, ANTHROPIC),
        "stop_sequence": None,
    }
    if call.usage:
        # The Messages API counts cache reads and writes outside input_tokens (the trace's input
        # count is the inclusive one, as the semconv has it).
        read, write = call.usage.get("cache_read"), call.usage.get("cache_write")
        resp["usage"] = {
            "input_tokens": call.usage.get("input_tokens", 0) - (read or 0) - (write or 0),
            "output_tokens": call.usage.get("output_tokens", 0),
        }
        if read is not None:
            resp["usage"]["cache_read_input_tokens"] = read
        if write is not None:
            resp["usage"]["cache_creation_input_tokens"] = write
        if "reasoning" in call.usage:
            resp["usage"]["output_tokens_details"] = {"thinking_tokens": call.usage["reasoning"]}
    return url, req, resp


def _anthropic_tool(d: dict[str, Any], params: dict[str, Any], strict: Any) -> dict[str, Any]:
    tool = {"name": d["name"], "input_schema": params}
    if d.get("description"):
        tool["description"] = d["description"]
    return tool


def _anthropic_settled(call: Call, parts: list[Any]) -> None:
    blocks = [b for m in call.messages if isinstance(m.get("content"), list) for b in m["content"]]
    if any(
        isinstance(b, dict) and b.get("type") == "tool_result" and "is_error" not in b
        for b in blocks
    ):
        call.inferred.add("tool_result.is_error")  # an SDK may send is_error: false


ANTHROPIC = RebuildShape(
    _anthropic, id_prefix="msg", finishes=_END_TURN, otel_names=("anthropic",), blocks=True,
    api_params=frozenset(
        "max_tokens temperature top_p top_k stop_sequences tool_choice metadata thinking "
        "service_tier container mcp_servers output_config".split()
    ),
    continues_history=True, tool=_anthropic_tool, settle=_anthropic_settled,
)  # fmt: skip


# -- OpenAI Responses ----------------------------------------------------------------------------


def _responses(call: Call) -> Built:
    req: dict[str, Any] = {"model": call.model or "unknown"}
    if call.system:
        req["instructions"] = "\n\n".join(call.system)
    req["input"] = call.messages
    if call.tools:
        req["tools"] = [
            {"type": "function", **{k: v for k, v in t["function"].items()}}
            for t in call.tools
            if isinstance(t.get("function"), dict)
        ]
    params = dict(call.params)
    if "max_tokens" in params:
        params["max_output_tokens"] = params.pop("max_tokens")
    req.update(params)
    if call.stream:
        req["stream"] = True
    return "https://api.openai.com/v1/responses", req, None


RESPONSES = RebuildShape(
    _responses, rendered=True, id_prefix="resp", path_end="/responses", echoed=True,
    links_items=True,
)  # fmt: skip


# -- Gemini --------------------------------------------------------------------------------------


_GEMINI_PARAMS = {"max_tokens": "maxOutputTokens", "temperature": "temperature", "top_p": "topP",
                  "top_k": "topK", "stop": "stopSequences", "seed": "seed"}  # fmt: skip


def _gemini(call: Call) -> Built:
    method = "streamGenerateContent?alt=sse" if call.stream else "generateContent"
    url = (
        _vertex_url(call, method)
        if call.vertex
        else "https://generativelanguage.googleapis.com/v1beta/models/"
        f"{call.model or 'unknown'}:{method}"
    )
    req: dict[str, Any] = {"contents": call.messages}
    if call.system:
        req["systemInstruction"] = {"parts": [{"text": s} for s in call.system]}
        call.inferred.add("system role")
    if call.tools:
        decls = [t["function"] for t in call.tools if isinstance(t.get("function"), dict)]
        req["tools"] = [{"functionDeclarations": decls}]
        call.inferred.add("schema key")
    config = {_GEMINI_PARAMS[k]: v for k, v in call.params.items() if k in _GEMINI_PARAMS}
    if call.as_sent:  # the rest of generationConfig, as the request named it
        config.update(
            (k, v) for k, v in call.params.items() if k not in _GEMINI_PARAMS and k != "tool_choice"
        )
    if config:
        req["generationConfig"] = config
    if isinstance(call.params.get("tool_choice"), dict):  # (its own shape: functionCallingConfig)
        req["toolConfig"] = call.params["tool_choice"]
    return url, req, None


def _vertex_url(call: Call, method: str) -> str:
    region = call.region or "unknown"
    host = (
        f"{call.region}-aiplatform.googleapis.com" if call.region else "aiplatform.googleapis.com"
    )
    call.inferred |= {"project", "query"} | (set() if call.region else {"location"})
    call.notes.append(
        "imported: a Gemini call to Vertex AI whose trace names no project"
        + ("" if call.region else " nor location")
        + ": placeholders in the URL; a request for the same model and method under any project, "
        "location and API version matches it, whatever query its transport adds"
    )
    model = quote(call.model or "unknown", safe="")
    return f"{_VERTEX.format(host=host, region=region, model=model)}:{method}"


def _vertex_placed(call: Call, provider: str, host: str) -> None:
    """A call to Vertex AI: its provider says so, or its server does where none is named."""
    if provider in ("gcp.vertex_ai", "vertex_ai") or (
        host.endswith("aiplatform.googleapis.com") and not provider
    ):
        call.vertex = True
        region = _REGION.fullmatch(host)
        call.region = region.group(1) if region else None


GEMINI = RebuildShape(
    _gemini, rendered=True, id_prefix="resp", hosts=("aiplatform.googleapis.com",),
    otel_names=("gcp.gemini", "gcp.vertex_ai", "gemini", "google", "vertex_ai"),
    place=_vertex_placed, call_ids_made_up=True,
)  # fmt: skip


# -- Bedrock Converse ----------------------------------------------------------------------------


_BEDROCK_PARAMS = {"max_tokens": "maxTokens", "maxTokens": "maxTokens", "top_p": "topP",
                   "topP": "topP", "temperature": "temperature", "stop": "stopSequences",
                   "stopSequences": "stopSequences"}  # fmt: skip


def _bedrock_url(call: Call) -> str:
    """The Converse URL of ``call``'s model (a trace has no region: the path is what a request is
    matched on); a model id without its provider prefix said inferred."""
    method = "converse-stream" if call.stream else "converse"
    url = (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        f"{quote(call.model or 'unknown', safe='')}/{method}"
    )
    if call.model and "." not in call.model and not call.model.startswith("arn:"):
        # a Bedrock model id or inference profile is PROVIDER.MODEL (or an ARN)
        call.inferred.add("model id")
        call.notes.append(
            f"imported: the trace's model {call.model[:80]!r} is not a whole Bedrock model id "
            "(its provider prefix left out, as openllmetry writes it): the URL's model is a "
            "guess, and an agent's request to /model/ID/… will not match it"
        )
    return url


def _bedrock_tools(call: Call) -> dict[str, Any]:
    """``toolConfig``: each tool as a ``toolSpec``, and the tool choice in its own shape."""
    specs = []
    for t in call.tools:
        fn: dict[str, Any] = t["function"] if isinstance(t.get("function"), dict) else t
        spec = {"name": fn.get("name"), "inputSchema": {"json": fn.get("parameters") or {}}}
        if fn.get("description"):
            spec["description"] = fn["description"]
        specs.append({"toolSpec": spec})
    config: dict[str, Any] = {"tools": specs}
    if isinstance(call.params.get("tool_choice"), dict):  # (its own shape: {"auto": {}} …)
        config["toolChoice"] = call.params["tool_choice"]
    return config


def _bedrock_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """Converse's usage: cache reads and writes counted outside ``inputTokens`` (a trace's input
    count is inclusive)."""
    i, o = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    read, write = usage.get("cache_read"), usage.get("cache_write")
    uncached = i - (read or 0) - (write or 0)
    out: dict[str, Any] = {"inputTokens": uncached, "outputTokens": o, "totalTokens": i + o}
    if read is not None:
        out["cacheReadInputTokens"] = read
    if write is not None:
        out["cacheWriteInputTokens"] = write
    return out


def _bedrock(call: Call) -> Built:
    """Bedrock Converse: the request body (the model is in the URL) and its answer."""
    url = _bedrock_url(call)
    req: dict[str, Any] = {"messages": call.messages}
    if call.system:
        req["system"] = [{"text": s} for s in call.system]
    config = {_BEDROCK_PARAMS[k]: v for k, v in call.params.items() if k in _BEDROCK_PARAMS}
    if config:
        req["inferenceConfig"] = config
    if call.tools:
        req["toolConfig"] = _bedrock_tools(call)
    if call.output is None:
        return url, req, None
    content = [b for b in call.output.get("content") or [] if isinstance(b, dict)]
    stop = call.finish or ""
    if not stop:
        call.inferred.add("finish_reason")
        stop = "tool_use" if any("toolUse" in b for b in content) else "end_turn"
    resp: dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": _END_TURN.get(stop, stop),
    }
    if call.usage:
        resp["usage"] = _bedrock_usage(call.usage)
    resp["metrics"] = {"latencyMs": int((call.duration or 0) * 1000)}
    return url, req, resp


BEDROCK = RebuildShape(_bedrock, otel_names=("aws.bedrock", "aws", "bedrock"))
