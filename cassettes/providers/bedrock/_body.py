"""Bedrock Converse bodies read into the normalised models: routes, finish classes, usage, content
blocks, tools and tool choice; shared by the Converse adapter (:mod:`cassettes.providers.bedrock`),
the stream reader (:mod:`cassettes.providers.bedrock._stream`) and InvokeModel
(:mod:`cassettes.providers.bedrock._invoke`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult, unquote

import orjson

from ...models import (
    FinishReason,
    Part,
    ToolResult,
    ToolSpec,
    Usage,
)
from .._values import as_int, as_obj, as_str, finish_lookup, media_part, tool_call_from_object

Block = dict[str, Any]

ACTIONS = {"converse": "generate", "converse-stream": "generate", "count-tokens": "count_tokens"}

FINISH = {
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

STRUCTURAL = {"messages", "system", "toolConfig", "inferenceConfig", "modelId"}

_DOC_TYPES = {
    "pdf": "application/pdf",
    "txt": "text/plain",
    "csv": "text/csv",
    "md": "text/markdown",
    "html": "text/html",
}


def model_action(url: SplitResult) -> tuple[str, str] | None:
    """(modelId, action) from ``…/model/{modelId}/{action}``; the id may contain encoded ``/``."""
    path = url.path.rstrip("/")
    i = path.find("/model/")
    if i < 0:
        return None
    head, sep, action = path[i + len("/model/") :].rpartition("/")
    if not sep or not head:
        return None
    return unquote(head), action


def priced_model(model: str) -> str:
    """``us.amazon.nova-pro-v1:0`` / an inference-profile ARN → the model id genai-prices knows."""
    m = model.rsplit("/", 1)[-1]
    head, _, rest = m.partition(".")
    return rest if head in ("us", "eu", "apac", "global", "jp", "au", "ca") and rest else m


def _guardrail_actions(v: Any, into: set[str]) -> set[str]:
    """Every policy ``action`` a guardrail trace names, at whatever depth its policies nest it
    (``topicPolicy.topics[].action``, ``sensitiveInformationPolicy.piiEntities[].action`` …)."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "action" and isinstance(x, str):
                into.add(x)
            else:
                _guardrail_actions(x, into)
    elif isinstance(v, list):
        for x in v:
            _guardrail_actions(x, into)
    return into


def guardrail_only_masked(trace: Any) -> bool:
    """The guardrail trace says the guardrail only *masked* sensitive data (some ``ANONYMIZED``,
    no ``BLOCKED``): Bedrock still reports that as an intervention (``guardrail_intervened``,
    ``guardrailAction: INTERVENED``), but the answer is the model's whole answer with some words
    replaced by ``{EMAIL}``-style tags, not an answer a filter cut or replaced."""
    actions = _guardrail_actions(as_obj(trace).get("guardrail"), set())
    return "ANONYMIZED" in actions and "BLOCKED" not in actions


#: Where a guardrail trace assessed what: the prompt (Converse ``inputAssessment``, InvokeModel
#: ``input``) or the answer (``outputAssessments`` / ``outputs``).
_ASSESSED = {
    "inputAssessment": "prompt",
    "input": "prompt",
    "outputAssessments": "answer",
    "outputs": "answer",
}


def _masked_kinds(v: Any, into: list[str], depth: int = 0) -> None:
    """The entity types (``EMAIL``) and regex names a guardrail assessment anonymised."""
    if depth > 12:
        return
    if isinstance(v, dict):
        policy = v.get("sensitiveInformationPolicy")
        if isinstance(policy, dict):
            for key, name in (("piiEntities", "type"), ("regexes", "name")):
                for e in policy.get(key) or []:
                    if isinstance(e, dict) and e.get("action") == "ANONYMIZED":
                        into.append(str(e.get(name) or "?")[:64])
        for k, x in v.items():
            if k != "sensitiveInformationPolicy":
                _masked_kinds(x, into, depth + 1)
    elif isinstance(v, list):
        for x in v[:64]:
            _masked_kinds(x, into, depth + 1)


def guardrail_masks(trace: Any) -> dict[str, list[str]] | None:
    """What a guardrail that only masked masked, by where (``prompt``, ``answer``): the entity
    types and regex names, one per masked value, never the values themselves; ``None`` when the
    guardrail did not only mask."""
    if not guardrail_only_masked(trace):
        return None
    guard = as_obj(as_obj(trace).get("guardrail"))
    out: dict[str, list[str]] = {}
    for key, where in _ASSESSED.items():
        kinds: list[str] = []
        _masked_kinds(guard.get(key), kinds)
        if kinds:
            out.setdefault(where, []).extend(kinds)
    return out or None


def with_masks(details: dict[str, Any]) -> dict[str, Any]:
    """``details`` (a response's provider details, with the guardrail ``trace``), with
    ``guardrail_masked`` (:func:`guardrail_masks`) when the guardrail only masked."""
    masks = guardrail_masks(details.get("trace"))
    return {**details, "guardrail_masked": masks} if masks else details


def converse_finish(raw: str | None, trace: Any, calls: bool) -> FinishReason | None:
    """Converse's stop reason, read with its guardrail trace: ``guardrail_intervened`` after a
    guardrail that only masked is the end of a whole answer (Converse puts the guardrail's stop
    reason in place of the model's, so the class comes from the content: calls or text)."""
    if raw == "guardrail_intervened" and guardrail_only_masked(trace):
        return FinishReason.TOOL_CALL if calls else FinishReason.COMPLETE
    return finish_lookup(FINISH, raw)


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


def part_of(block: Any) -> Part:
    if not isinstance(block, dict):
        return Part(kind="other", provider_details={"block": block})
    if isinstance(block.get("text"), str):
        return Part(kind="text", text=block["text"])
    if isinstance(block.get("toolUse"), dict):
        tu = block["toolUse"]
        kind = "server" if tu.get("type") == "server_tool_use" else "function"
        return Part(
            kind="tool_call",
            tool_call=tool_call_from_object(
                tu.get("toolUseId"), tu.get("name"), tu.get("input"), kind=kind
            ),
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
    if isinstance(block.get("citationsContent"), dict):
        return _cited(block["citationsContent"])
    if isinstance(block.get("reasoningContent"), dict):
        rc = block["reasoningContent"]
        rt = as_obj(rc.get("reasoningText"))
        details: dict[str, Any] = {}
        if rt.get("signature") is not None:
            details["signature"] = rt["signature"]
        if rc.get("redactedContent") is not None:
            details["redacted"] = rc["redactedContent"]
        return Part(kind="reasoning", text=as_str(rt.get("text")), provider_details=details or None)
    for key in ("image", "document", "video", "audio"):
        if key in block:
            return _media(block, key)
    if any(k in block for k in _KEPT_BLOCKS):
        return Part(kind="other", provider_details={"block": block, "kept": "control"})
    # a block of a kind looptap does not know, named by its key (said unread, issue 102)
    named = next((k for k in block if isinstance(k, str)), None)
    return Part(
        kind="other", provider_details={"block": block, **({"type": named} if named else {})}
    )


#: Content blocks Converse defines that carry no turn content looptap reads (a prompt cache
#: checkpoint, content a guardrail assesses, citations): kept as sent.
_KEPT_BLOCKS = ("cachePoint", "guardContent", "citationsContent", "searchResult")


def _cited(cc: dict[str, Any]) -> Part:
    """A ``citationsContent`` block: the text the model wrote (``content``: ``[{"text"}]``, read
    whole) with the sources it cites kept beside it (``citations``)."""
    content = cc.get("content")
    pieces = content if isinstance(content, list) else []
    text = "".join(
        p["text"] for p in pieces if isinstance(p, dict) and isinstance(p.get("text"), str)
    )
    citations = cc.get("citations")
    return Part(
        kind="text",
        text=text,
        provider_details={"citations": citations} if citations else None,
    )


def tools_of(tool_config: Any) -> list[ToolSpec]:
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


def tool_choice_of(tc: Any) -> str | None:
    if not isinstance(tc, dict):
        return None
    if "auto" in tc:
        return "auto"
    if "any" in tc:
        return "required"
    if isinstance(tc.get("tool"), dict):
        return f"tool:{tc['tool'].get('name')}"
    return next(iter(tc), None)


def details_of(b: dict[str, Any]) -> dict[str, Any]:
    return with_masks(
        {
            k: b[k]
            for k in (
                "metrics",
                "trace",
                "additionalModelResponseFields",
                "performanceConfig",
                "serviceTier",
            )
            if b.get(k) is not None
        }
    )
