"""Amazon Bedrock Converse: ``/model/{modelId}/converse`` and ``/converse-stream``.

Not in WIRE.md; the shapes follow the recordings in the corpus (pydantic-ai ``test_bedrock``) and
the Bedrock Runtime API reference. ``/model/{id}/invoke*`` with Anthropic's Messages body belongs
to the Anthropic adapter; every other InvokeModel body is :class:`BedrockInvoke`'s
(:mod:`cassettes.providers.bedrock_invoke`); the stream reader is in
:mod:`cassettes.providers.bedrock_stream`.

Usage: Bedrock's ``inputTokens`` *excludes* cache reads and writes. Every cached recording in the
corpus has ``totalTokens == inputTokens + outputTokens + cacheReadInputTokens +
cacheWriteInputTokens`` (e.g. 433 + 16 + 2752 + 0 = 3201), so the adapter adds both cache counts
to reach the inclusive ``input_tokens`` of :mod:`cassettes.models`.

Streams are AWS event-stream frames; the event name is the ``:event-type`` header and the
payload carries no ``type``. A stream is complete when ``messageStop`` *and* the trailing
``metadata`` event (the only carrier of usage) were both seen.
"""

from __future__ import annotations

from typing import Any
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
    ToolResult,
    ToolSpec,
    Usage,
)
from cassettes.providers._base import (
    Provider,
    as_int,
    as_str,
    error_from_body,
    finish_lookup,
    media_part,
    tool_call_from_object,
)
from cassettes.providers._facets import ReplayShape
from cassettes.wire.framing import Framed

__all__ = ["BedrockConverse"]  # BedrockInvoke still importable from here (module __getattr__)

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
        from cassettes.providers.bedrock_stream import ConverseStream

        return ConverseStream().read(framed)


def __getattr__(name: str) -> Any:  # PEP 562: BedrockInvoke lives in bedrock_invoke (it imports this module)
    if name == "BedrockInvoke":
        from cassettes.providers.bedrock_invoke import BedrockInvoke

        return BedrockInvoke
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
