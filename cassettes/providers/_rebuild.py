"""A round trip rebuilt from a trace or a trajectory: the request and answer the API would have
carried for one model call whose messages (and perhaps usage, finish reason, ids) are all that was
kept, in the wire shape of OpenAI Chat, the Anthropic Messages API, OpenAI Responses or Gemini
(the last two: the request built here, the answer by the API's own renderer, as replay serves it).

What the source gave and what was made up here are listed on the exchange
(:attr:`~cassettes.wire.Exchange.reconstructed`): ``from`` (the source) and ``inferred``
(this module: ids the source lacked, a finish reason read off the answer's tool calls, the
framing — one JSON body, never a stream —, a model it did not name). An inferred finish reason is
only ever ``stop``/``tool_calls`` (``end_turn``/``tool_use``): looptap never infers a truncation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import providers
from ..models import FinishReason, NormalisedResponse, Part, ToolCall, ToolResult, Usage
from ..wire import Exchange
from ._base import Provider, Rebuilt
from ._semconv_history import arguments_object, arguments_text, kept_block, part_text

__all__ = ["API_PARAMS", "REBUILT", "Call", "chat_ids", "exchange", "link_items"]

#: The families a round trip is rebuilt in, with the URL it is given.
REBUILT = {
    "openai_chat": "https://api.openai.com/v1/chat/completions",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "openai_responses": "https://api.openai.com/v1/responses",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/models/{model}:{method}",
    # the region is not in a trace: the path is what a request is matched on
    "bedrock": "https://bedrock-runtime.us-east-1.amazonaws.com/model/{model}/{method}",
}
#: Gemini on Vertex AI (:attr:`Call.vertex`): a trace names no project, perhaps no region. A
#: client's other project, region or API version is its base path (read under the recording's, as
#: for any recording); the query its transport adds (the Vertex AI SDK's REST
#: ``$alt=json;enum-encoding=int``, ``alt=sse``) is left out of the comparison (``query`` inferred).
_VERTEX = "https://{host}/v1/projects/unknown/locations/{region}/publishers/google/models/{model}"
_JSON = [("content-type", "application/json")]
#: The request parameters of each family an invocation-parameters attribute may hold beside a
#: framework's own settings (LangChain's ``model_name``, ``_type``, ``streaming``, ``max_retries``
#: …), which no request carries.
API_PARAMS = {
    "openai_chat": frozenset(
        "temperature top_p max_tokens max_completion_tokens n stop presence_penalty "
        "frequency_penalty logit_bias logprobs top_logprobs seed response_format tool_choice "
        "parallel_tool_calls user stream_options reasoning_effort service_tier store metadata "
        "modalities prediction audio verbosity web_search_options prompt_cache_key "
        "safety_identifier".split()
    ),
    "anthropic": frozenset(
        "max_tokens temperature top_p top_k stop_sequences tool_choice metadata thinking "
        "service_tier container mcp_servers output_config".split()
    ),
}
#: The families whose every answer is rendered by the API's own renderer (as replay serves it).
_RENDERED = ("openai_responses", "gemini")
#: The start of a response id made up for a family's answer.
_ID_PREFIX = {"anthropic": "msg", "openai_responses": "resp", "gemini": "resp"}
#: The reason phrases of the error statuses an answer is rebuilt with most.
_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable",
            529: "Overloaded"}  # fmt: skip
#: max_tokens is required by the Messages API; a trace that does not say gets this (inferred).
_MAX_TOKENS = 4096


@dataclass
class Call:
    """One model call as a source kept it. ``messages``/``output`` are in ``family``'s wire shape
    (an OpenAI Chat message list and assistant message; Anthropic ``messages`` and a
    ``{"content": [blocks]}`` answer); ``given``/``inferred`` name the fields by origin."""

    family: str
    source: str
    messages: list[dict[str, Any]]
    output: dict[str, Any] | None = None
    #: The model asked for (the request's), and the one that answered when the source says it
    #: apart (the answer's; else the same).
    model: str | None = None
    served: str | None = None
    system: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    finish: str | None = None
    #: The finish's normalised class (:class:`~cassettes.models.FinishReason`), where the source
    #: says it (looptap's export): the class of a raw finish looptap reads no class from.
    finish_class: str | None = None
    response_id: str | None = None
    started: float | None = None
    duration: float | None = None
    error: str | None = None
    #: The HTTP status of an error answer, and its ``type`` and ``code``, where the source kept them
    #: (else 500 and ``api_error``: ``status`` inferred).
    status: int | None = None
    error_fields: dict[str, str] = field(default_factory=dict)
    #: Sampling parameters the source kept, by the family's own names (``max_tokens`` …).
    params: dict[str, Any] = field(default_factory=dict)
    #: ``params`` are the request's own, by its own names, as sent (looptap's export): a family
    #: whose rebuilt request names a few of them otherwise puts the rest back as they were.
    as_sent: bool = False
    #: The client asked for a stream: the answer is rendered as this API streams it.
    stream: bool = False
    given: set[str] = field(default_factory=set)
    inferred: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    #: The service that made the call (an OTLP resource's ``service.name``), if it was named.
    service: str | None = None
    #: A Gemini call to Vertex AI, and its region when the trace names it (its server's host).
    vertex: bool = False
    region: str | None = None
    #: The operation of a call that is not a chat turn (looptap's own export names it: ``embed``,
    #: ``image`` …), rebuilt in its family's own shape (:attr:`Provider.rebuilt_operations`).
    operation: str | None = None
    #: The URL the call went to, where the source kept it (``url.full``): the round trip is
    #: rebuilt there when the family's adapter reads it as this family's call (a compatible
    #: vendor's host, an Azure deployment's path), else at the family's own.
    url: str | None = None


def exchange(call: Call, n: int) -> Exchange:
    """The exchange of ``call`` (the ``n``-th of its run: inferred ids are made from it)."""
    from urllib.parse import urlsplit

    own = _own_shape(call)
    family = call.family if call.family in REBUILT or own is not None else "openai_chat"
    if not call.model:
        call.inferred.add("model")
    if not call.response_id:
        call.response_id = f"{_ID_PREFIX.get(family, 'chatcmpl')}_imported_{n}"
        call.inferred.add("response.id")
    if own is not None:
        return _marked(_own_exchange(call, own), call)
    url, req, resp = _request(family, call)
    url = _recorded_url(call, family, req) or url
    ex = Exchange(
        method="POST", url=url, request_headers=list(_JSON), request_body=orjson.dumps(req),
        started=call.started, duration=call.duration, notes=list(call.notes),
    )  # fmt: skip
    adapter = providers.by_family(family)
    answer: NormalisedResponse | None = None  # to render as the API sends it
    if call.error is not None and (family not in _RENDERED or call.output is None):
        _error_answer(ex, call)
    elif family in _RENDERED:
        answer = _answer(call) if call.output is not None else None
    elif resp is not None:
        ex.status, ex.reason = 200, "OK"
        ex.response_headers = list(_JSON)
        ex.response_chunks = [(None, orjson.dumps(resp))]
        call.inferred |= {"status", "framing"}
        if call.stream and adapter is not None:  # streamed as the API streams that answer
            answer = adapter.parse_response(resp)
    rendered = (
        adapter.replay.render_answer(answer, call.stream, urlsplit(url), req)
        if adapter is not None and answer is not None
        else None
    )
    if answer is not None:
        _media_note(ex, answer)
    if rendered is not None:
        ex.status, ex.reason = 200, "OK"
        ex.response_headers = [("content-type", rendered.content_type)]
        ex.response_chunks = [(None, c) for c in rendered.chunks]
        call.inferred |= {"status", "framing"}
    return _marked(ex, call)


def _error_answer(ex: Exchange, call: Call) -> None:
    ex.status = call.status or 500
    ex.reason = _REASONS.get(ex.status, "Error")
    error = {"type": "api_error", **call.error_fields, "message": call.error}
    ex.response_headers = list(_JSON)
    ex.response_chunks = [(None, orjson.dumps({"error": error}))]
    if call.status is None:
        call.inferred.add("status")


def _own_shape(call: Call) -> Provider | None:
    """The adapter that rebuilds ``call`` in its family's own shape: a call that is not a chat
    turn (an embedding, an image, a legacy completion: :attr:`Provider.rebuilt_operations`),
    at the URL the source kept, which the adapter reads as that call."""
    from urllib.parse import urlsplit

    adapter = providers.by_family(call.family)
    if call.family in REBUILT or adapter is None or not call.url or call.operation is None:
        return None
    if call.operation not in adapter.rebuilt_operations:
        return None
    where = urlsplit(call.url)
    if where.scheme not in ("http", "https") or adapter.operation("POST", where) != call.operation:
        return None
    return adapter


def _own_exchange(call: Call, adapter: Provider) -> Exchange:
    from urllib.parse import urlsplit

    texts = [m["content"] for m in call.messages if isinstance(m.get("content"), str)]
    asked = Rebuilt(call.model, texts, dict(call.params), call.stream, list(call.system))
    answer = _answer(call) if call.output is not None else None
    req, resp = adapter.rebuild(str(call.operation), urlsplit(str(call.url)), asked, answer)
    ex = Exchange(
        method="POST", url=str(call.url), request_headers=list(_JSON),
        request_body=orjson.dumps(req), started=call.started, duration=call.duration,
        notes=list(call.notes),
    )  # fmt: skip
    if call.error is not None:
        _error_answer(ex, call)
    elif resp is not None:
        ex.status, ex.reason = 200, "OK"
        ex.response_headers = [("content-type", resp[0])]
        ex.response_chunks = [(None, resp[1])] if resp[1] else []
        call.inferred |= {"status", "framing"}
    if answer is not None:
        _media_note(ex, answer)
    return ex


def _media_note(ex: Exchange, answer: NormalisedResponse) -> None:
    media = sorted({p.media_type or "media" for p in answer.parts if p.kind == "media"})
    if media:
        ex.notes.append(
            f"imported: the answer's {', '.join(media)} is not in a trace (only its type): "
            "rebuilt without its bytes"
        )


def _recorded_url(call: Call, family: str, req: dict[str, Any]) -> str | None:
    """The URL the source kept, when this family's adapter reads a call there (a Vertex AI
    call keeps its own, told apart above)."""
    from urllib.parse import urlsplit

    if not call.url or call.vertex or not call.url.startswith(("https://", "http://")):
        return None
    where = urlsplit(call.url)
    found = providers.detect("POST", where, req)
    if found is None or found.family != family or found.operation("POST", where) != "generate":
        return None
    return call.url


def _request(family: str, call: Call) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """(URL, request, the answer when it is built here) of ``call`` in ``family``'s shapes."""
    if family == "gemini":
        method = "streamGenerateContent?alt=sse" if call.stream else "generateContent"
        url = REBUILT["gemini"].format(model=call.model or "unknown", method=method)
        if call.vertex:
            url = _vertex_url(call, method)
        return url, _gemini_request(call), None
    if family == "openai_responses":
        return REBUILT[family], _responses_request(call), None
    if family == "bedrock":
        from urllib.parse import quote

        method = "converse-stream" if call.stream else "converse"
        url = REBUILT[family].format(model=quote(call.model or "unknown", safe=""), method=method)
        return url, *_bedrock(call)
    return REBUILT[family], *(_anthropic if family == "anthropic" else _chat)(call)


def _vertex_url(call: Call, method: str) -> str:
    from urllib.parse import quote

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


def _marked(ex: Exchange, call: Call) -> Exchange:
    ex.reconstructed = {
        "v": 1,
        "source": call.source,
        "from": sorted(call.given),
        "inferred": sorted(call.inferred),
    }
    return ex


#: Semconv finish reasons → the normalised class the renderers take.
_FINISHED = {
    "stop": FinishReason.COMPLETE,
    "end_turn": FinishReason.COMPLETE,
    "completed": FinishReason.COMPLETE,
    "tool_call": FinishReason.TOOL_CALL,
    "tool_calls": FinishReason.TOOL_CALL,
    "tool_use": FinishReason.TOOL_CALL,
    "length": FinishReason.TRUNCATED_LENGTH,
    "max_tokens": FinishReason.TRUNCATED_LENGTH,
    "content_filter": FinishReason.FILTERED,
}
#: The finishes of an answer that has not finished (OpenAI Responses' background mode: the POST's
#: answer is queued, a later poll delivers it): no class, never a normal end.
_PENDING = ("queued", "in_progress")


def _answer(call: Call) -> NormalisedResponse:
    """The answer a source kept, with a part for each media part it names (whose bytes it does
    not keep: a renderer that answers media renders its type, with no bytes)."""
    parts: list[Part] = []
    for p in (call.output or {}).get("parts") or []:
        if p.get("type") == "media":
            parts.append(Part(kind="media", media_type=str(p.get("mime_type") or "") or None))
        elif p.get("type") == "text":
            parts.append(Part(kind="text", text=part_text(p)))
        elif p.get("type") == "tool_call":
            args = arguments_object(p.get("arguments"))
            # Gemini's calls carry no id (they pair by name and order, as the rebuilt history
            # does): one in its trace was made by the instrumentation (google-genai's name_N)
            # (a server call's id pairs it with its result; looptap's own export's are the wire's)
            server = p.get("tool_kind") == "server" or "tool_call.id" in call.given
            tc = ToolCall(
                id=None
                if call.family == "gemini" and not server
                else str(p.get("id") or "") or None,
                name=str(p.get("name") or ""),
                arguments=args,
                arguments_raw=arguments_text(p.get("arguments")),
            )
            if isinstance(p.get("tool_kind"), str):  # a call the provider ran itself
                tc.kind = p["tool_kind"]
            parts.append(Part(kind="tool_call", tool_call=tc))
        elif p.get("type") == "tool_call_response" and p.get("tool_kind") == "server":
            said = ToolResult(call_id=str(p.get("id") or "") or None, name=str(p.get("name") or ""),
                              content=part_text({"content": p.get("response")}))  # fmt: skip
            parts.append(
                Part(kind="tool_result", tool_result=said, provider_details={"server": True})
            )
        elif (block := kept_block(p)) is not None:  # (a hosted call's item), kept whole
            parts.append(Part(kind="other", provider_details={"block": block}))
    finish = _FINISHED.get((call.finish or "").lower())
    classes = {c.value: c for c in FinishReason}
    if finish is None and call.finish_class in classes:
        finish = classes[call.finish_class]
    if finish is None and ((call.finish or "").lower() in _PENDING or _said_nothing(call)):
        pass  # an answer not finished yet (a background response polled for later), or none
    elif finish is None:
        call.inferred.add("finish_reason")
        finish = (
            FinishReason.TOOL_CALL if any(p.tool_call for p in parts) else FinishReason.COMPLETE
        )
    usage = None
    if call.usage:
        usage = Usage(
            input_tokens=call.usage.get("input_tokens"),
            output_tokens=call.usage.get("output_tokens"),
            cache_read_tokens=call.usage.get("cache_read"),
            cache_write_tokens=call.usage.get("cache_write"),
            reasoning_tokens=call.usage.get("reasoning"),
        )
    return NormalisedResponse(
        id=call.response_id,
        model=call.served or call.model,
        parts=parts,
        finish_reason=finish,
        finish_reason_raw=call.finish,
        usage=usage,
    )


def link_items(calls: list[Call]) -> None:
    """OpenAI Responses: give the history items that echo an earlier answer's output items the ids
    that answer was rendered with (``msg_RID``, ``fc_RID_i``: an SDK sends the items back as it got
    them), so the agent that produced the trace matches the rebuilt requests."""
    fcs: dict[str, str] = {}  # call id → its function_call item's id
    msgs: dict[str, str] = {}  # an answer's text → its message item's id
    for n, call in enumerate(calls):
        if call.family != "openai_responses":
            continue
        for item in call.messages:
            if item.get("type") == "function_call" and item.get("call_id") in fcs:
                item.update(id=fcs[item["call_id"]], status="completed")
            elif item.get("type") == "message" and _item_text(item) in msgs:
                item.update(id=msgs[_item_text(item)], status="completed")
        if not call.response_id:
            call.response_id = f"resp_imported_{n}"
            call.inferred.add("response.id")
        parts = (call.output or {}).get("parts") or []
        made = [p for p in parts if p.get("type") == "tool_call"]
        fcs.update(
            (str(p.get("id") or ""), f"fc_{call.response_id}_{i}") for i, p in enumerate(made)
        )
        text = "".join(part_text(p) for p in parts if p.get("type") == "text")
        if text:
            msgs[text] = f"msg_{call.response_id}"
        if fcs or msgs:
            call.inferred.add("item ids")


def _item_text(item: dict[str, Any]) -> str:
    return "".join(
        str(c.get("text") or "") for c in item.get("content") or [] if isinstance(c, dict)
    )


def _responses_request(call: Call) -> dict[str, Any]:
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
    return req


_GEMINI_PARAMS = {"max_tokens": "maxOutputTokens", "temperature": "temperature", "top_p": "topP",
                  "top_k": "topK", "stop": "stopSequences", "seed": "seed"}  # fmt: skip


def _gemini_request(call: Call) -> dict[str, Any]:
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
    return req


_BEDROCK_PARAMS = {"max_tokens": "maxTokens", "maxTokens": "maxTokens", "top_p": "topP",
                   "topP": "topP", "temperature": "temperature", "stop": "stopSequences",
                   "stopSequences": "stopSequences"}  # fmt: skip
_BEDROCK_STOP = {"stop": "end_turn", "tool_call": "tool_use", "tool_calls": "tool_use",
                 "length": "max_tokens"}  # fmt: skip


def _bedrock(call: Call) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Bedrock Converse: the request body (the model is in the URL) and its answer."""
    if call.model and "." not in call.model and not call.model.startswith("arn:"):
        # a Bedrock model id or inference profile is PROVIDER.MODEL (or an ARN)
        call.inferred.add("model id")
        call.notes.append(
            f"imported: the trace's model {call.model[:80]!r} is not a whole Bedrock model id "
            "(its provider prefix left out, as openllmetry writes it): the URL's model is a "
            "guess, and an agent's request to /model/ID/… will not match it"
        )
    req: dict[str, Any] = {"messages": call.messages}
    if call.system:
        req["system"] = [{"text": s} for s in call.system]
    config = {_BEDROCK_PARAMS[k]: v for k, v in call.params.items() if k in _BEDROCK_PARAMS}
    if config:
        req["inferenceConfig"] = config
    if call.tools:
        specs = []
        for t in call.tools:
            fn: dict[str, Any] = t["function"] if isinstance(t.get("function"), dict) else t
            spec = {"name": fn.get("name"), "inputSchema": {"json": fn.get("parameters") or {}}}
            if fn.get("description"):
                spec["description"] = fn["description"]
            specs.append({"toolSpec": spec})
        req["toolConfig"] = {"tools": specs}
        if isinstance(call.params.get("tool_choice"), dict):  # (its own shape: {"auto": {}} …)
            req["toolConfig"]["toolChoice"] = call.params["tool_choice"]
    if call.output is None:
        return req, None
    content = [b for b in call.output.get("content") or [] if isinstance(b, dict)]
    stop = call.finish or ""
    if not stop:
        call.inferred.add("finish_reason")
        stop = "tool_use" if any("toolUse" in b for b in content) else "end_turn"
    resp: dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": _BEDROCK_STOP.get(stop, stop),
    }
    if call.usage:
        i, o = call.usage.get("input_tokens", 0), call.usage.get("output_tokens", 0)
        # Converse counts cache reads and writes outside inputTokens (the trace's is inclusive)
        read, write = call.usage.get("cache_read"), call.usage.get("cache_write")
        uncached = i - (read or 0) - (write or 0)
        resp["usage"] = {"inputTokens": uncached, "outputTokens": o, "totalTokens": i + o}
        if read is not None:
            resp["usage"]["cacheReadInputTokens"] = read
        if write is not None:
            resp["usage"]["cacheWriteInputTokens"] = write
    resp["metrics"] = {"latencyMs": int((call.duration or 0) * 1000)}
    return req, resp


def _calls_of(out: dict[str, Any] | None, chat: bool) -> bool:
    if out is None:
        return False
    if chat:
        return bool(out.get("tool_calls"))
    blocks = out.get("content")
    return isinstance(blocks, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks
    )


def _said_nothing(call: Call) -> bool:
    """The source kept the call's content, and its answer holds nothing (no text, no call) and
    says no finish: a body with no response in it, which no finish is inferred for (a normal
    end would make it an empty answer)."""
    out = call.output or {}
    return (
        not call.finish
        and "messages" in call.given
        and not any(out.get(k) for k in ("content", "tool_calls", "parts"))
    )


def _finish(call: Call, chat: bool) -> str | None:
    if call.finish:
        return call.finish
    if _said_nothing(call):
        return None
    call.inferred.add("finish_reason")
    calls = _calls_of(call.output, chat)
    if chat:
        return "tool_calls" if calls else "stop"
    return "tool_use" if calls else "end_turn"


def _chat(call: Call) -> tuple[dict[str, Any], dict[str, Any] | None]:
    system = [{"role": "system", "content": s} for s in call.system]
    req: dict[str, Any] = {"model": call.model or "unknown", "messages": system + call.messages}
    if call.tools:
        req["tools"] = call.tools
    req.update(call.params)
    if call.stream:
        req["stream"] = True
    if call.output is None:
        return req, None
    message = {"role": "assistant", "content": None, **call.output}
    resp: dict[str, Any] = {
        "id": call.response_id,
        "object": "chat.completion",
        "created": int(call.started or 0),
        "model": call.served or call.model or "unknown",
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(call, True)}]
        if not _said_nothing(call)
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
    return req, resp


def _anthropic(call: Call) -> tuple[dict[str, Any], dict[str, Any] | None]:
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
    if call.output is None:
        return req, None
    resp: dict[str, Any] = {
        "id": call.response_id,
        "type": "message",
        "role": "assistant",
        "model": call.served or call.model or "unknown",
        "content": call.output.get("content") or [],
        "stop_reason": _finish(call, False),
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
    return req, resp


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
