"""Amazon Bedrock Converse: ``/model/{modelId}/converse`` and ``/converse-stream``.

Not in WIRE.md; the shapes follow the recordings in the corpus (pydantic-ai ``test_bedrock``) and
the Bedrock Runtime API reference. ``/model/{id}/invoke*`` with Anthropic's Messages body belongs
to the Anthropic adapter; every other InvokeModel body is :class:`BedrockInvoke`'s (at the end).

Usage: Bedrock's ``inputTokens`` *excludes* cache reads and writes. Every cached recording in the
corpus has ``totalTokens == inputTokens + outputTokens + cacheReadInputTokens +
cacheWriteInputTokens`` (e.g. 433 + 16 + 2752 + 0 = 3201), so the adapter adds both cache counts
to reach the inclusive ``input_tokens`` of :mod:`cassettes.parsing.models`.

Streams are AWS event-stream frames; the event name is the ``:event-type`` header and the
payload carries no ``type``. A stream is complete when ``messageStop`` *and* the trailing
``metadata`` event (the only carrier of usage) were both seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import SplitResult, unquote

import orjson

from cassettes import bounds
from cassettes.parsing.models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolResult,
    ToolSpec,
    Usage,
)
from cassettes.providers._base import (
    Provider,
    as_int,
    as_str,
    aws_payload_bytes,
    error_from_body,
    finish_lookup,
    media_part,
    tool_call_from_object,
    tool_call_from_string,
)
from cassettes.providers._facets import ReplayShape
from cassettes.providers._parts import StreamParts
from cassettes.wire.framing import Framed

__all__ = ["BedrockConverse", "BedrockInvoke"]

Block = dict[str, Any]

_ACTIONS = {"converse": "generate", "converse-stream": "generate", "count-tokens": "count_tokens"}

_FINISH = {
    "end_turn": FinishReason.COMPLETE,
    "stop_sequence": FinishReason.COMPLETE,
    "tool_use": FinishReason.TOOL_CALL,
    "max_tokens": FinishReason.TRUNCATED_LENGTH,
    "model_context_window_exceeded": FinishReason.TRUNCATED_CONTEXT,
    "guardrail_intervened": FinishReason.FILTERED,
    "content_filtered": FinishReason.FILTERED,
    "malformed_model_output": FinishReason.TOOL_CALL_ERROR,
    "malformed_tool_use": FinishReason.TOOL_CALL_ERROR,
}

_STRUCTURAL = {"messages", "system", "toolConfig", "inferenceConfig", "modelId"}

_DOC_TYPES = {
    "pdf": "application/pdf",
    "txt": "text/plain",
    "csv": "text/csv",
    "md": "text/markdown",
    "html": "text/html",
}


def _split(url: SplitResult) -> tuple[str, str] | None:
    """(modelId, action) from ``…/model/{modelId}/{action}``; the id may contain encoded ``/``."""
    path = url.path.rstrip("/")
    i = path.find("/model/")
    if i < 0:
        return None
    head, sep, action = path[i + len("/model/") :].rpartition("/")
    if not sep or not head:
        return None
    return unquote(head), action


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def finish_class(raw: str | None) -> FinishReason | None:
    return finish_lookup(_FINISH, raw)


def usage_from(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    inp = as_int(u.get("inputTokens"))
    read = as_int(u.get("cacheReadInputTokens", u.get("cacheReadInputTokenCount")))
    write = as_int(u.get("cacheWriteInputTokens", u.get("cacheWriteInputTokenCount")))
    return Usage(
        input_tokens=None if inp is None else inp + (read or 0) + (write or 0),
        output_tokens=as_int(u.get("outputTokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
        total_tokens=as_int(u.get("totalTokens")),
        raw=u,
    )


def _media(block: Block, key: str) -> Part:
    body = block[key] if isinstance(block.get(key), dict) else {}
    fmt = as_str(body.get("format"))
    if key == "document":
        media = _DOC_TYPES.get(fmt or "", f"document/{fmt}" if fmt else "document")
    else:
        media = f"{key}/{fmt}" if fmt else key
    return media_part(block, media)


def _result_text(content: Any) -> str:
    out: list[str] = []
    for c in content if isinstance(content, list) else []:
        if not isinstance(c, dict):
            out.append(str(c))
        elif isinstance(c.get("text"), str):
            out.append(c["text"])
        elif "json" in c:
            out.append(orjson.dumps(c["json"]).decode())
        else:
            kind = next(iter(c), "part")
            fmt = c[kind].get("format") if isinstance(c.get(kind), dict) else None
            out.append(f"[{kind}{': ' + fmt if fmt else ''}]")
    return "".join(out)


def _block(block: Any) -> Part:
    if not isinstance(block, dict):
        return Part(kind="other", provider_details={"block": block})
    if isinstance(block.get("text"), str):
        return Part(kind="text", text=block["text"])
    if isinstance(block.get("toolUse"), dict):
        tu = block["toolUse"]
        kind = "server" if tu.get("type") == "server_tool_use" else "function"
        return Part(
            kind="tool_call",
            tool_call=tool_call_from_object(tu.get("toolUseId"), tu.get("name"), tu.get("input"), kind=kind),
        )
    if isinstance(block.get("toolResult"), dict):
        tr = block["toolResult"]
        status = as_str(tr.get("status"))
        return Part(
            kind="tool_result",
            tool_result=ToolResult(
                call_id=as_str(tr.get("toolUseId")),
                content=_result_text(tr.get("content")),
                is_error=None if status is None else status == "error",
            ),
            provider_details={"type": tr["type"]} if tr.get("type") else None,
        )
    if isinstance(block.get("reasoningContent"), dict):
        rc = block["reasoningContent"]
        rt = _obj(rc.get("reasoningText"))
        details: dict[str, Any] = {}
        if rt.get("signature") is not None:
            details["signature"] = rt["signature"]
        if rc.get("redactedContent") is not None:
            details["redacted"] = rc["redactedContent"]
        return Part(kind="reasoning", text=as_str(rt.get("text")), provider_details=details or None)
    for key in ("image", "document", "video", "audio"):
        if key in block:
            return _media(block, key)
    return Part(kind="other", provider_details={"block": block})


def _tools(tool_config: Any) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("toolSpec"), dict):
            spec = t["toolSpec"]
            schema = spec.get("inputSchema")
            params = schema.get("json") if isinstance(schema, dict) else None
            out.append(
                ToolSpec(
                    name=as_str(spec.get("name")) or "",
                    description=as_str(spec.get("description")),
                    parameters=params if isinstance(params, dict) else None,
                )
            )
        elif isinstance(t.get("systemTool"), dict):
            out.append(ToolSpec(name=as_str(t["systemTool"].get("name")) or "", kind="system_tool"))
        # ``cachePoint`` entries mark a cache boundary, not a tool.
    return out


def _tool_choice_mode(tc: Any) -> str | None:
    if not isinstance(tc, dict):
        return None
    if "auto" in tc:
        return "auto"
    if "any" in tc:
        return "required"
    if isinstance(tc.get("tool"), dict):
        return f"tool:{tc['tool'].get('name')}"
    return next(iter(tc), None)


def _details(b: dict[str, Any]) -> dict[str, Any]:
    return {
        k: b[k]
        for k in ("metrics", "trace", "additionalModelResponseFields", "performanceConfig", "serviceTier")
        if b.get(k) is not None
    }


class BedrockConverse(Provider):
    # toolUse.input and a toolResult's {"json": …} are the caller's data
    free_form_fields = frozenset({*ReplayShape.free_form_fields, "input", "json"})
    family = "bedrock"
    price_provider = "aws"
    otel_provider = "aws.bedrock"
    tool_error_flag = True  # toolResult.status
    pairing_errors = (
        r"(?i)toolResult blocks? .{0,80}exceeds? the number of toolUse blocks",
        r"(?i)number of toolResult blocks .{0,60}toolUse blocks",
        r"(?i)`tool_use` ids were found without `tool_result` blocks",
        r"(?i)toolUse.{0,60}without.{0,20}toolResult",
        r"Expected toolResult blocks at messages\.\d+\.content",
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        found = _split(url)
        if method.upper() != "POST" or found is None or found[1] not in _ACTIONS:
            return 0
        return 3 if found[1] != "count-tokens" else 2

    def operation(self, method: str, url: SplitResult) -> str:
        found = _split(url)
        return _ACTIONS.get(found[1], "unknown") if found else "unknown"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        found = _split(url)
        return found is not None and found[1] == "converse-stream"

    def model_from_url(self, url: SplitResult) -> str | None:
        found = _split(url)
        return found[0] if found else None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: dict[str, Any] = body if isinstance(body, dict) else {}
        messages: list[Message] = []
        for m in b.get("messages") or []:
            if not isinstance(m, dict):
                messages.append(
                    Message(role="unknown", parts=[Part(kind="other", provider_details={"block": m})])
                )
                continue
            content = m.get("content")
            parts = [_block(c) for c in content] if isinstance(content, list) else [_block(content)]
            messages.append(Message(role=as_str(m.get("role")) or "unknown", parts=parts))
        system = [_block(s) for s in b.get("system") or []] if isinstance(b.get("system"), list) else []
        tool_config = b.get("toolConfig")
        tc = tool_config.get("toolChoice") if isinstance(tool_config, dict) else None
        params = {k: v for k, v in b.items() if k not in _STRUCTURAL}
        if isinstance(b.get("inferenceConfig"), dict):
            params.update(b["inferenceConfig"])  # maxTokens, temperature, topP, stopSequences
        return NormalisedRequest(
            family=self.family,
            model=self.model_from_url(url),
            stream=self.is_stream(url, b),
            system=system,
            messages=messages,
            tools=_tools(tool_config),
            tool_choice=tc,
            tool_choice_mode=_tool_choice_mode(tc),
            params=params,
            history_key="messages",
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: dict[str, Any] = body if isinstance(body, dict) else {}
        if "output" not in b and ("message" in b or "Message" in b):
            return NormalisedResponse(
                error=self.parse_error(b, None), finish_reason=FinishReason.ERROR, complete=True
            )
        msg = _obj(_obj(b.get("output")).get("message"))
        content = msg.get("content")
        raw = as_str(b.get("stopReason"))
        return NormalisedResponse(
            role=as_str(msg.get("role")) or "assistant",
            parts=[_block(c) for c in content] if isinstance(content, list) else [],
            finish_reason_raw=raw,
            finish_reason=finish_class(raw),
            usage=usage_from(b.get("usage")),
            complete=True,
            provider_details=_details(b) or None,
        )

    def replay_error(self, status: int, message: str, code: str) -> Any:
        return {"message": message, "__type": code}

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        if isinstance(body, str):
            try:
                body = bounds.loads(body)
            except orjson.JSONDecodeError:
                pass
        return error_from_body(body, status)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _ConverseStream().read(framed)


class _ConverseStream(StreamParts):
    """Converse stream events (named by ``:event-type``) → the answer; blocks keyed by
    ``contentBlockIndex``, a block without one continues the last."""

    def __init__(self) -> None:
        super().__init__()
        self.have_metadata = False

    def payloads(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        for ev in framed.events:
            self.count()
            headers = ev.headers or {}
            try:
                d = bounds.loads(ev.data) if ev.data.strip() else {}
            except orjson.JSONDecodeError:
                d = {"raw": ev.data}
            if not isinstance(d, dict):
                d = {"raw": d}
            if headers.get(":message-type") in ("exception", "error"):
                # Modeled exceptions (throttlingException, validationException …) or an error frame.
                etype = headers.get(":exception-type") or headers.get(":error-code") or ev.event
                msg = d.get("message") or d.get("Message") or headers.get(":error-message")
                self.error = ApiError(type=as_str(etype), message=as_str(msg), in_stream=True, raw=d)
                continue
            yield ev.event or headers.get(":event-type"), d

    def on(self, name: str | None, d: Any) -> None:
        handler = _CONVERSE_EVENTS.get(name or "")
        if handler is not None:
            handler(self, d)
        elif name != "contentBlockStop":
            self.unknown(name, repeat=True)

    def block(self, index: Any, kind: str) -> Block:
        """The block at ``index`` (the last one when there is none), started as ``kind``."""
        i = as_int(index)
        st = self.slot(i if i is not None else self.last_key(0), "block")
        st.block.setdefault("kind", kind)
        return st.block

    def message_start(self, d: Block) -> None:
        self.role = as_str(d.get("role")) or self.role

    def block_start(self, d: Block) -> None:
        start = _obj(d.get("start"))
        if isinstance(start.get("toolUse"), dict):
            st = self.block(d.get("contentBlockIndex"), "toolUse")
            st["start"] = start["toolUse"]
            st.setdefault("input", "")
        elif isinstance(start.get("toolResult"), dict):
            self.block(d.get("contentBlockIndex"), "toolResult")["start"] = start["toolResult"]
        else:
            self.block(d.get("contentBlockIndex"), "other")["start"] = start

    def block_delta(self, d: Block) -> None:
        delta = _obj(d.get("delta"))
        idx = d.get("contentBlockIndex")
        if isinstance(delta.get("text"), str):
            st = self.block(idx, "text")
            st["text"] = st.get("text", "") + delta["text"]
        elif isinstance(delta.get("toolUse"), dict):
            st = self.block(idx, "toolUse")
            piece = delta["toolUse"].get("input")
            st["input"] = st.get("input", "") + (piece if isinstance(piece, str) else orjson.dumps(piece).decode())
        elif isinstance(delta.get("reasoningContent"), dict):
            _reasoning_delta(self.block(idx, "reasoning"), delta["reasoningContent"])
        elif "toolResult" in delta:
            content = delta["toolResult"]
            self.block(idx, "toolResult").setdefault("content", []).extend(content if isinstance(content, list) else [content])
        else:
            self.block(idx, "other").setdefault("deltas", []).append(delta)

    def message_stop(self, d: Block) -> None:
        self.done = True
        self.finish_raw = as_str(d.get("stopReason"))
        if d.get("additionalModelResponseFields") is not None:
            self.details["additionalModelResponseFields"] = d["additionalModelResponseFields"]

    def metadata(self, d: Block) -> None:
        self.have_metadata = True
        self.usage = usage_from(d.get("usage"))
        self.details.update({k: d[k] for k in ("metrics", "trace", "performanceConfig", "serviceTier") if d.get(k) is not None})

    def close(self) -> NormalisedResponse:
        if self.done and not self.have_metadata:
            self.details["metadata_missing"] = True
        return self.finish(parts=self.parts(convert=lambda st: _stream_part(st.block)))

    def classify(self, parts: list[Part]) -> FinishReason | None:
        return finish_class(self.finish_raw)

    def complete(self) -> bool:
        return self.done and self.have_metadata


_CONVERSE_EVENTS: dict[str, Callable[[_ConverseStream, Block], None]] = {
    "messageStart": _ConverseStream.message_start,
    "contentBlockStart": _ConverseStream.block_start,
    "contentBlockDelta": _ConverseStream.block_delta,
    "messageStop": _ConverseStream.message_stop,
    "metadata": _ConverseStream.metadata,
}


def _reasoning_delta(st: Block, rc: Block) -> None:
    if isinstance(rc.get("text"), str):
        st["text"] = st.get("text", "") + rc["text"]
    if rc.get("signature") is not None:
        st["signature"] = rc["signature"]
    if rc.get("redactedContent") is not None:
        st["redacted"] = st.get("redacted", "") + str(rc["redactedContent"])


def _stream_part(st: Block) -> Part:
    kind = st["kind"]
    if kind == "text":
        return Part(kind="text", text=st.get("text", ""))
    if kind == "toolUse":
        start = st.get("start") or {}
        call_kind = "server" if start.get("type") == "server_tool_use" else "function"
        return Part(
            kind="tool_call",
            tool_call=tool_call_from_string(
                start.get("toolUseId"), start.get("name"), st.get("input", ""), kind=call_kind
            ),
        )
    if kind == "reasoning":
        details: dict[str, Any] = {k: st[k] for k in ("signature", "redacted") if k in st}
        return Part(kind="reasoning", text=st.get("text"), provider_details=details or None)
    if kind == "toolResult":
        start = st.get("start") or {}
        return _block({"toolResult": {**start, "content": st.get("content", [])}})
    return Part(kind="other", provider_details={k: v for k, v in st.items() if k != "kind"})


# -- InvokeModel with the model's own body (everything but Anthropic Messages) ------------------
#
# ``/model/{id}/invoke`` and ``/invoke-with-response-stream`` carry each model vendor's native body
# (Bedrock's "inference parameters for foundation models" reference). Anthropic Messages bodies
# (``anthropic_version`` with ``messages``) belong to the Anthropic adapter; everything else is
# read here by its shape, and the model id in the URL tells the rest:
#
# * Amazon Nova — the Converse shapes (``schemaVersion: messages-v1``; ``output.message``,
#   ``stopReason``, ``usage``); the stream's chunks are Converse events keyed by name.
# * Amazon Titan Text — ``inputText`` → ``results[0].outputText`` / ``completionReason``
#   (``FINISH``, ``LENGTH``, ``CONTENT_FILTERED``), ``inputTextTokenCount``, ``tokenCount``.
# * Meta Llama — ``prompt`` → ``generation``, ``stop_reason``, ``prompt_token_count``,
#   ``generation_token_count``.
# * Mistral — text ``prompt`` → ``outputs[0].text`` / ``stop_reason``; chat ``messages`` (Mistral
#   Large) → OpenAI-like ``choices`` whose finish is ``stop_reason``.
# * Cohere — Command R ``message``/``chat_history`` (Cohere v1 chat, read by the Cohere adapter's
#   code); Command ``prompt`` → ``generations[0].text`` / ``finish_reason``; Embed ``texts``.
# * AI21 — Jamba ``messages`` → OpenAI-like ``choices`` and ``usage``; Jurassic-2 ``prompt`` →
#   ``completions[0].data.text`` / ``finishReason.reason``.
# * Anthropic's legacy ``prompt`` (Claude 2 / Instant) → read as the Text Completions API.
# * Embedding models (an ``embed`` model id): Titan ``inputText`` → ``embedding``,
#   ``inputTextTokenCount``; Cohere ``texts`` → ``embeddings``. Operation ``embed`` (not a turn).
#
# * A custom-imported model (Custom Model Import) → its container's OpenAI Completions body
#   (``choices[].text``, ``finish_reason``, ``usage``), streamed as the same chunks.
#
# With a guardrail applied, InvokeModel puts ``amazon-bedrock-guardrailAction`` (``INTERVENED`` /
# ``NONE``) and ``amazon-bedrock-trace`` beside the model's keys, in the body and in stream
# chunks; they are taken out before the model's format is read (a key beside a known event never
# hides it), and an intervention ends the answer as blocked (``prompt_blocked`` when the trace
# says the input was, else ``filtered``), whole.
#
# Usage the body lacks comes from the ``x-amzn-bedrock-input-token-count`` /
# ``-output-token-count`` response headers, and in streams from the last chunk's
# ``amazon-bedrock-invocationMetrics``.

_INVOKE_ACTIONS = ("invoke", "invoke-with-response-stream")

_TEXT_FINISH = {
    # Titan
    "FINISH": FinishReason.COMPLETE,
    "LENGTH": FinishReason.TRUNCATED_LENGTH,
    "CONTENT_FILTERED": FinishReason.FILTERED,
    "STOP_CRITERIA_MET": FinishReason.COMPLETE,
    "RAG_QUERY_WHEN_RAG_DISABLED": FinishReason.OTHER,
    # Llama, Mistral
    "stop": FinishReason.COMPLETE,
    "length": FinishReason.TRUNCATED_LENGTH,
    "tool_calls": FinishReason.TOOL_CALL,
    "model_length": FinishReason.TRUNCATED_CONTEXT,
    # Cohere Command
    "COMPLETE": FinishReason.COMPLETE,
    "MAX_TOKENS": FinishReason.TRUNCATED_LENGTH,
    "ERROR_TOXIC": FinishReason.FILTERED,
    "ERROR": FinishReason.ERROR,
    # AI21 Jurassic-2
    "endoftext": FinishReason.COMPLETE,
    "stop_sequence": FinishReason.COMPLETE,
    "max_tokens": FinishReason.TRUNCATED_LENGTH,
}


def _invoke_target(url: SplitResult) -> tuple[str, str] | None:
    found = _split(url)
    return found if found is not None and found[1] in _INVOKE_ACTIONS else None


def _is_embed_model(model: str | None) -> bool:
    return "embed" in (model or "").lower()


TextChunk = tuple[str, str | None, int | None, int | None]


def _text_chunk(d: dict[str, Any]) -> TextChunk:
    """(text piece, finish, input tokens, output tokens) of a text-model body or stream chunk."""
    for key, read in _TEXT_SHAPES:
        if key in d:
            return read(d)
    if "text" in d and "is_finished" in d:  # Cohere Command stream chunk
        return as_str(d.get("text")) or "", as_str(d.get("finish_reason")), None, None
    return "", None, None, None


def _first(d: dict[str, Any], key: str) -> dict[str, Any]:
    return _obj((d.get(key) or [{}])[0])


def _titan(d: dict[str, Any]) -> TextChunk:
    r = _first(d, "results")
    return as_str(r.get("outputText")) or "", as_str(r.get("completionReason")), as_int(d.get("inputTextTokenCount")), as_int(r.get("tokenCount"))


def _jurassic(d: dict[str, Any]) -> TextChunk:
    c = _first(d, "completions")
    prompt_tokens = _obj(d.get("prompt")).get("tokens")
    out_tokens = _obj(c.get("data")).get("tokens")
    return (
        as_str(_obj(c.get("data")).get("text")) or "",
        as_str(_obj(c.get("finishReason")).get("reason")),
        len(prompt_tokens) if isinstance(prompt_tokens, list) else None,
        len(out_tokens) if isinstance(out_tokens, list) else None,
    )


def _chat_choice(d: dict[str, Any]) -> TextChunk:
    """Mistral / Jamba chat (a message, or a chunk with a delta) and the OpenAI Completions body of
    a custom-imported or OpenAI-compatible model (``choices[0].text``, ``usage``)."""
    ch = _first(d, "choices")
    text = _obj(ch.get("message") or ch.get("delta")).get("content")
    if not isinstance(text, str):
        text = ch.get("text")
    usage = _obj(d.get("usage"))
    return (
        text if isinstance(text, str) else "",
        as_str(ch.get("finish_reason") or ch.get("stop_reason")),
        as_int(usage.get("prompt_tokens")),
        as_int(usage.get("completion_tokens")),
    )


#: The keys InvokeModel adds beside a model's own body or stream chunk when a guardrail is
#: applied (InvokeModel API reference): the action (``INTERVENED`` / ``NONE``) and its trace.
_GUARDRAIL_ACTION = "amazon-bedrock-guardrailAction"
_GUARDRAIL_KEYS = (_GUARDRAIL_ACTION, "amazon-bedrock-trace")


def _pop_guardrail(d: dict[str, Any], into: dict[str, Any]) -> None:
    """Move the guardrail keys out of a body or chunk into ``into`` (an intervention is kept over
    a later ``NONE``)."""
    for key in _GUARDRAIL_KEYS:
        if key in d:
            value = d.pop(key)
            if key != _GUARDRAIL_ACTION or into.get(key) != "INTERVENED":
                into[key] = value


def _input_blocked(trace: Any) -> bool:
    """The guardrail trace says the *input* was blocked (``guardrail.input.{id}.…action: BLOCKED``)."""
    guard = _obj(_obj(trace).get("guardrail"))
    return "BLOCKED" in orjson.dumps(guard.get("input")).decode() if guard.get("input") else False


def _apply_guardrail(resp: NormalisedResponse, found: dict[str, Any]) -> NormalisedResponse:
    """A guardrail that intervened ended the answer: it is blocked (``prompt_blocked`` when the
    trace says the input was, else ``filtered``), whole, never truncated."""
    if not found:
        return resp
    resp.provider_details = {**(resp.provider_details or {}), **{k.removeprefix("amazon-bedrock-"): v for k, v in found.items()}}
    if found.get(_GUARDRAIL_ACTION) != "INTERVENED":
        return resp
    if resp.finish_reason not in (FinishReason.FILTERED, FinishReason.PROMPT_BLOCKED):
        resp.finish_reason = FinishReason.PROMPT_BLOCKED if _input_blocked(found.get("amazon-bedrock-trace")) else FinishReason.FILTERED
        resp.finish_reason_raw = resp.finish_reason_raw or "guardrailAction: INTERVENED"
    resp.complete = True
    return resp


#: The text models' shapes, by the key that tells them (first present wins).
_TEXT_SHAPES: tuple[tuple[str, Callable[[dict[str, Any]], TextChunk]], ...] = (
    ("results", _titan),
    ("outputText", lambda d: (  # Titan stream chunk
        as_str(d.get("outputText")) or "", as_str(d.get("completionReason")), as_int(d.get("inputTextTokenCount")), as_int(d.get("totalOutputTextTokenCount")))),
    ("generation", lambda d: (  # Llama
        as_str(d.get("generation")) or "", as_str(d.get("stop_reason")), as_int(d.get("prompt_token_count")), as_int(d.get("generation_token_count")))),
    ("outputs", lambda d: (as_str(_first(d, "outputs").get("text")) or "", as_str(_first(d, "outputs").get("stop_reason")), None, None)),  # Mistral text
    ("generations", lambda d: (as_str(_first(d, "generations").get("text")) or "", as_str(_first(d, "generations").get("finish_reason")), None, None)),  # Cohere Command
    ("completions", _jurassic),  # AI21 Jurassic-2
    ("choices", _chat_choice),
)


def _metrics_usage(usage: Usage | None, metrics: Any) -> Usage | None:
    m = _obj(metrics)
    inp, out = as_int(m.get("inputTokenCount")), as_int(m.get("outputTokenCount"))
    if inp is None and out is None:
        return usage
    u = usage or Usage()
    u.input_tokens = u.input_tokens if u.input_tokens is not None else inp
    u.output_tokens = u.output_tokens if u.output_tokens is not None else out
    if u.input_tokens is not None and u.output_tokens is not None and u.total_tokens is None:
        u.total_tokens = u.input_tokens + u.output_tokens
    u.raw = {**(u.raw or {}), "invocationMetrics": m}
    return u


def _synthetic(kind: Any, items: Sequence[tuple[str | None, Any]]) -> Framed:
    from cassettes.wire.framing import Event

    return Framed(kind, [Event(data=orjson.dumps(v).decode(), event=name) for name, v in items])


class BedrockInvoke(Provider):
    family = "bedrock_invoke"
    price_provider = "aws"
    otel_provider = "aws.bedrock"

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST" or _invoke_target(url) is None:
            return 0
        if isinstance(body, dict) and "anthropic_version" in body and "messages" in body:
            return 0  # Anthropic Messages on Bedrock: the Anthropic adapter's
        if isinstance(body, dict) and "prompt" in body and "anthropic" in (self.model_from_url(url) or ""):
            return 4  # Claude 2's legacy prompt, even with anthropic_version set
        return 2

    def operation(self, method: str, url: SplitResult) -> str:
        return "embed" if _is_embed_model(self.model_from_url(url)) else "generate"

    def parses(self, operation: str) -> bool:
        return operation in ("generate", "embed")

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        found = _invoke_target(url)
        return found is not None and found[1] == "invoke-with-response-stream"

    def model_from_url(self, url: SplitResult) -> str | None:
        found = _split(url)
        return found[0] if found else None

    def price_model(self, model: str) -> str:
        """``us.amazon.nova-pro-v1:0`` / an inference-profile ARN → the model id genai-prices knows."""
        m = model.rsplit("/", 1)[-1]
        head, _, rest = m.partition(".")
        return rest if head in ("us", "eu", "apac", "global", "jp", "au", "ca") and rest else m

    def history_key(self, body: Any) -> str | None:
        if isinstance(body, dict):
            for key in ("messages", "chat_history"):
                if isinstance(body.get(key), list):
                    return key
        return None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        from cassettes.providers.anthropic_complete import complete_request
        from cassettes.providers.cohere import v1_request
        from cassettes.providers.openai_chat import OpenAIChat
        from cassettes.providers.openai_completions import prompt_messages

        b: dict[str, Any] = body if isinstance(body, dict) else {}
        model = self.model_from_url(url)
        stream = self.is_stream(url, b)
        if "anthropic" in (model or "") and "prompt" in b:
            return complete_request(b, self.family, model, stream)
        if "message" in b or "chat_history" in b:
            return v1_request(b, self.family, model, stream)
        if "messages" in b and ("schemaVersion" in b or "nova" in (model or "")):
            req = BedrockConverse().parse_request(b, url)
            req.family = self.family
            return req
        if "messages" in b:
            req = OpenAIChat().parse_request(b, url)
            req.family, req.model, req.stream = self.family, model, stream
            return req
        key = next((k for k in ("inputText", "prompt", "texts") if k in b), None)
        params = {k: v for k, v in b.items() if k != key}
        if isinstance(b.get("textGenerationConfig"), dict):
            params.update(params.pop("textGenerationConfig"))
        return NormalisedRequest(
            family=self.family, model=model, stream=stream, messages=prompt_messages(b.get(key)) if key else [], params=params
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
        guard: dict[str, Any] = {}
        _pop_guardrail(b, guard)
        return _apply_guardrail(self._parse_body(b), guard)

    def _parse_body(self, b: dict[str, Any]) -> NormalisedResponse:
        from cassettes.providers.anthropic_complete import complete_response
        from cassettes.providers.cohere import v1_response
        from cassettes.providers.embeddings import vectors_summary
        from cassettes.providers.openai_chat import OpenAIChat

        if ("message" in b or "Message" in b) and len(b) <= 2 and not isinstance(b.get("message"), dict):
            return NormalisedResponse(error=self.parse_error(b, None), finish_reason=FinishReason.ERROR, complete=True)
        if isinstance(b.get("output"), dict):  # Nova: Converse's response shape
            return BedrockConverse().parse_response(b)
        if "embedding" in b or "embeddings" in b:
            n = as_int(b.get("inputTextTokenCount"))
            return NormalisedResponse(
                id=as_str(b.get("id")),
                usage=Usage(input_tokens=n, total_tokens=n, raw={"inputTextTokenCount": n}) if n is not None else None,
                complete=True,
                provider_details=vectors_summary(b.get("embeddings") if "embeddings" in b else [b.get("embedding")]) or None,
            )
        if "completion" in b and "stop_reason" in b:
            return complete_response(b)
        if "response_id" in b or "generation_id" in b or ("text" in b and "finish_reason" in b and "is_finished" not in b):
            return v1_response(b)
        if "choices" in b and any(isinstance(c, dict) and "text" in c and "message" not in c for c in b["choices"]):
            pass  # an OpenAI Completions body (a custom-imported model): read below as text
        elif "choices" in b:
            resp = OpenAIChat().parse_response(b)
            if resp.finish_reason_raw is None:  # Mistral on Bedrock: ``stop_reason`` in the choice
                raw = _text_chunk(b)[1]
                has_calls = bool(resp.tool_calls)
                resp.finish_reason_raw = raw
                resp.finish_reason = finish_lookup(_TEXT_FINISH, raw)
                if resp.finish_reason is FinishReason.COMPLETE and has_calls:
                    resp.finish_reason = FinishReason.TOOL_CALL
            return resp
        text, raw, inp, out = _text_chunk(b)
        return NormalisedResponse(
            id=as_str(b.get("id")),
            parts=[Part(kind="text", text=text)] if text else [],
            finish_reason_raw=raw,
            finish_reason=finish_lookup(_TEXT_FINISH, raw),
            usage=_metrics_usage(None, {"inputTokenCount": inp, "outputTokenCount": out}),
            complete=True,
        )

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _InvokeStream().read(framed)

    def add_header_facts(self, response: NormalisedResponse, header: Callable[[str], str | None]) -> None:
        response.usage = _metrics_usage(
            response.usage,
            {"inputTokenCount": header("x-amzn-bedrock-input-token-count"), "outputTokenCount": header("x-amzn-bedrock-output-token-count")},
        )

    def replay_error(self, status: int, message: str, code: str) -> Any:
        return {"message": message, "__type": code}

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        return BedrockConverse().parse_error(body, status)


class _InvokeStream(StreamParts):
    """InvokeModel stream chunks (each the model's own stream event, base64 in a frame) → the
    answer, read by the reader of the model's own format (told by the chunks' shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[dict[str, Any]] = []
        self.metrics: Any = None
        #: The guardrail keys InvokeModel put beside the chunks (``_pop_guardrail``).
        self.guardrail: dict[str, Any] = {}

    def payloads(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        for ev in framed.events:
            self.count()
            headers = ev.headers or {}
            if headers.get(":message-type") in ("exception", "error"):
                self.error = BedrockConverse().parse_error(ev.data, None)
                self.error.type = self.error.type or as_str(headers.get(":exception-type") or headers.get(":error-code"))
                self.error.in_stream = True
                continue
            raw = aws_payload_bytes(ev)
            try:
                d = bounds.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                d = None
            yield None, d

    def on(self, name: str | None, d: Any) -> None:
        if isinstance(d, dict):
            self.metrics = d.pop("amazon-bedrock-invocationMetrics", self.metrics)
            _pop_guardrail(d, self.guardrail)
            for v in d.values():  # a Converse-shaped chunk may carry the keys inside its event
                if isinstance(v, dict):
                    _pop_guardrail(v, self.guardrail)
            if d:
                self.chunks.append(d)

    def close(self) -> NormalisedResponse:
        resp = _apply_guardrail(_read_chunks(self.chunks), self.guardrail)
        resp.usage = _metrics_usage(resp.usage, self.metrics)
        self.done = resp.complete is True
        return self.finish(resp)


def _chunk_format(chunks: list[dict[str, Any]]) -> str:
    """Whose stream format an InvokeModel stream's chunks are in."""
    if any(k in c for c in chunks for k in ("messageStart", "contentBlockDelta", "contentBlockStart")):
        return "nova"  # Converse's events, keyed by name
    if any("event_type" in c for c in chunks):
        return "cohere"  # Command R: Cohere v1 chat
    if any("completion" in c for c in chunks):
        return "anthropic"  # Claude 2's Text Completions
    if any("delta" in ch for c in chunks for ch in c.get("choices") or [] if isinstance(ch, dict)):
        return "chat"  # Mistral / Jamba chat: OpenAI's chunks
    return "text"


#: The Converse stream's event names (Nova's InvokeModel chunks are keyed by them).
_NOVA_EVENTS = frozenset({*_CONVERSE_EVENTS, "contentBlockStop"})


def _read_chunks(chunks: list[dict[str, Any]]) -> NormalisedResponse:
    from cassettes.providers.anthropic_complete import AnthropicComplete
    from cassettes.providers.cohere import reassemble_v1
    from cassettes.providers.openai_chat import OpenAIChat

    fmt = _chunk_format(chunks)
    if fmt == "nova":
        # Each chunk is one Converse event keyed by its name; a key beside it that is no event
        # (one InvokeModel or a later model version adds) never hides the event.
        named = [(k, v) for c in chunks for k, v in c.items() if k in _NOVA_EVENTS]
        extra = {k: v for c in chunks for k, v in c.items() if k not in _NOVA_EVENTS}
        resp = BedrockConverse().reassemble(_synthetic("aws_eventstream", named))
        if extra:
            resp.provider_details = {**(resp.provider_details or {}), "chunk_keys": extra}
        if not resp.complete and resp.finish_reason_raw is not None:
            resp.complete = True  # Nova's invoke stream may end without Converse's metadata event
        return resp
    if fmt == "cohere":
        return reassemble_v1(_synthetic("ndjson", [(None, c) for c in chunks]))
    if fmt == "anthropic":
        return AnthropicComplete().reassemble(_synthetic("sse", [("completion", c) for c in chunks]))
    if fmt == "chat":
        resp = OpenAIChat().reassemble(_synthetic("sse", [(None, c) for c in chunks]))
        resp.complete = resp.finish_reason_raw is not None
        return resp
    return _text_stream(chunks)


def _text_stream(chunks: list[dict[str, Any]]) -> NormalisedResponse:
    """The chunks of a text model (Titan, Llama, Mistral, Cohere Command, AI21)."""
    text: list[str] = []
    finish: str | None = None
    inp = out = None
    for c in chunks:
        piece, f, i, o = _text_chunk(c)
        text.append(piece)
        finish = f or finish
        inp, out = (i if i is not None else inp), (o if o is not None else out)
    joined = "".join(text)
    return NormalisedResponse(
        parts=[Part(kind="text", text=joined)] if joined else [],
        finish_reason_raw=finish,
        finish_reason=finish_lookup(_TEXT_FINISH, finish),
        usage=_metrics_usage(None, {"inputTokenCount": inp, "outputTokenCount": out}),
        complete=finish is not None,
    )
