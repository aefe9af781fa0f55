"""Gemini's request and answer bodies read into the normalised models: routes, parts, messages,
tools, finish classes and usage; shared by the adapter (:mod:`cassettes.providers.gemini`), its
stream reader (:mod:`cassettes.providers.gemini._stream`) and Gemini Live."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import SplitResult, unquote

from ...models import (
    FinishReason,
    Message,
    Part,
    PartKind,
    ToolResult,
    ToolSpec,
    Usage,
)
from .._values import as_int, as_str, compact_json, media_part, tool_call_from_object

JSON = dict[str, Any]

# ---------------------------------------------------------------------------------------------
# Recognition

#: ``…/models/{model}:{method}`` (also tuned models and Vertex endpoints), anchored at the end.
_METHOD_RE = re.compile(r"/(?:models|tunedModels|endpoints)/([^/:]+):([A-Za-z]+)$")
_PUBLISHER_RE = re.compile(r"/publishers/([^/]+)/")
#: A Gemini API version segment (``v1``, ``v1alpha``, ``v1beta``, ``v1beta2`` …).
VERSION_RE = re.compile(r"^v1(?:alpha|beta\d*)?$")

METHODS: dict[str, str] = {
    "generateContent": "generate",
    "streamGenerateContent": "generate",
    "countTokens": "count_tokens",
    "computeTokens": "compute_tokens",
    "embedContent": "embed",
    "batchEmbedContents": "embed",
    "batchGenerateContent": "batch",
    "asyncBatchEmbedContent": "batch",
}

#: Gemini-only collections under ``/v1beta/…`` (and ``/upload/v1beta/…``) that are not model calls.
_SIDE_APIS: dict[str, str] = {
    "cachedContents": "cached_contents",
    "fileSearchStores": "file_search_stores",
    "files": "files",
    "corpora": "corpora",
    "tunedModels": "tuned_models",
    "batches": "batches",
    "operations": "operations",
    "generatedFiles": "files",
}
#: Of those, the ones unique enough to claim on any ``v1*`` version (``/v1/files`` is OpenAI's too).
_UNIQUE_SIDE_APIS = {
    "cachedContents",
    "fileSearchStores",
    "corpora",
    "tunedModels",
    "generatedFiles",
}


def model_method(url: SplitResult) -> tuple[str, str] | None:
    """(model, method) when the path is a Gemini model method, else ``None``."""
    path = url.path.rstrip("/")
    m = _METHOD_RE.search(path)
    if m is None:
        return None
    pub = _PUBLISHER_RE.search(path)
    if pub is not None and pub.group(1) != "google":
        return None  # Vertex Model Garden: anthropic, meta, mistralai … are other families
    return unquote(m.group(1)), m.group(2)


def side_api(url: SplitResult) -> str | None:
    segs = [s for s in url.path.split("/") if s]
    if segs and segs[0] == "upload":
        segs = segs[1:]
    if len(segs) < 2 or not VERSION_RE.match(segs[0]):
        return None
    coll = segs[1].split(":")[0]
    if coll not in _SIDE_APIS:
        return None
    if coll not in _UNIQUE_SIDE_APIS and segs[0] in ("v1",):
        return None
    return _SIDE_APIS[coll]


# ---------------------------------------------------------------------------------------------
# Casing


def snake(key: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def either_case(d: Any, key: str, default: Any = None) -> Any:
    """``d[key]`` in lowerCamelCase or in snake_case (the API accepts both on input)."""
    if not isinstance(d, dict):
        return default
    if key in d:
        return d[key]
    return d.get(snake(key), default)


def camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


# ---------------------------------------------------------------------------------------------
# Finish reasons and usage

FINISH: dict[str, FinishReason] = {
    "STOP": FinishReason.COMPLETE,
    "MAX_TOKENS": FinishReason.TRUNCATED_LENGTH,
    "CONTINUATION": FinishReason.TRUNCATED_LENGTH,
    "SAFETY": FinishReason.FILTERED,
    "RECITATION": FinishReason.FILTERED,
    "BLOCKLIST": FinishReason.FILTERED,
    "PROHIBITED_CONTENT": FinishReason.FILTERED,
    "SPII": FinishReason.FILTERED,
    "IMAGE_SAFETY": FinishReason.FILTERED,
    "IMAGE_PROHIBITED_CONTENT": FinishReason.FILTERED,
    "IMAGE_RECITATION": FinishReason.FILTERED,
    "MODEL_ARMOR": FinishReason.FILTERED,
    "ESCALATION": FinishReason.FILTERED,
    "PUP_LIMITED_DISABLED": FinishReason.FILTERED,
    "MALFORMED_FUNCTION_CALL": FinishReason.TOOL_CALL_ERROR,
    "UNEXPECTED_TOOL_CALL": FinishReason.TOOL_CALL_ERROR,
    "TOO_MANY_TOOL_CALLS": FinishReason.TOOL_LOOP_LIMIT,
    "MALFORMED_RESPONSE": FinishReason.ERROR,
}


def finish_class(raw: str | None, has_calls: bool) -> FinishReason | None:
    """WIRE.md §G.1 for Gemini: ``STOP`` with ``functionCall`` parts is a tool call."""
    if raw is None:
        return None
    cls = FINISH.get(raw, FinishReason.OTHER)
    if cls is FinishReason.COMPLETE and has_calls:
        return FinishReason.TOOL_CALL
    return cls


def _sum(*vals: int | None) -> int | None:
    present = [v for v in vals if v is not None]
    return sum(present) if present else None


def usage_from(u: Any) -> Usage | None:
    """``usageMetadata`` in the inclusive convention (see the module docstring).

    Protobuf-JSON drops zero counts, so a missing ``candidatesTokenCount`` next to a reported
    ``totalTokenCount`` means 0; the output count is then derived as ``total - input`` instead of
    being reported as unknown. A count that cannot be derived stays ``None``.
    """
    if not isinstance(u, dict):
        return None
    prompt = as_int(either_case(u, "promptTokenCount"))
    tool_use = as_int(either_case(u, "toolUsePromptTokenCount"))
    candidates = as_int(either_case(u, "candidatesTokenCount"))
    thoughts = as_int(either_case(u, "thoughtsTokenCount"))
    total = as_int(either_case(u, "totalTokenCount"))
    input_tokens = _sum(prompt, tool_use)
    output_tokens = _sum(candidates, thoughts)
    if output_tokens is None and total is not None and input_tokens is not None:
        output_tokens = max(total - input_tokens, 0)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=as_int(either_case(u, "cachedContentTokenCount")),
        cache_write_tokens=None,
        reasoning_tokens=thoughts,
        total_tokens=total,
        raw=u,
    )


# ---------------------------------------------------------------------------------------------
# Parts

#: Part keys that carry content (anything else on a part is metadata kept in provider_details).
_CONTENT_KEYS = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "toolCall",
    "toolResponse",
)


def _details(part: JSON, used: set[str]) -> dict[str, Any] | None:
    """Provider-only data of a part: its signature and any metadata keys not already consumed."""
    out: dict[str, Any] = {}
    sig = either_case(part, "thoughtSignature")
    if sig is not None:
        out["thought_signature"] = sig
    for k, v in part.items():
        ck = camel(k)
        if ck in used or ck in ("thoughtSignature", "thought"):
            continue
        out[ck] = v
    return out or None


def _media_type(block: Any) -> str | None:
    return as_str(either_case(block, "mimeType"))


def _flatten_response(resp: Any, parts: Any) -> str:
    """A ``functionResponse.response`` object (plus multimodal ``parts``) flattened to text."""
    if isinstance(resp, dict) and len(resp) == 1:
        (only,) = resp.values()
        if isinstance(only, str) and next(iter(resp)) in (
            "output",
            "result",
            "return_value",
            "content",
        ):
            text = only
        else:
            text = compact_json(resp)
    elif resp is None or resp == {}:
        text = ""
    else:
        text = resp if isinstance(resp, str) else compact_json(resp)
    for p in parts if isinstance(parts, list) else []:
        if not isinstance(p, dict):
            continue
        if isinstance(either_case(p, "text"), str):
            text += p["text"]
            continue
        blob = either_case(p, "inlineData") or either_case(p, "fileData")
        text += f"[{_media_type(blob) or 'media'}]"
    return text


def part_of(p: Any) -> Part:
    """One wire part → a normalised part."""
    if not isinstance(p, dict):
        return Part(kind="other", provider_details={"block": p})
    text = either_case(p, "text")
    if isinstance(text, str):
        kind: PartKind = "reasoning" if either_case(p, "thought") is True else "text"
        return Part(kind=kind, text=text, provider_details=_details(p, {"text"}))
    fc = either_case(p, "functionCall")
    if isinstance(fc, dict):
        call = tool_call_from_object(
            either_case(fc, "id"), either_case(fc, "name"), either_case(fc, "args")
        )
        extra = {camel(k): v for k, v in fc.items() if camel(k) not in ("id", "name", "args")}
        det = _details(p, {"functionCall"}) or {}
        if extra:
            det["function_call"] = extra
        return Part(kind="tool_call", tool_call=call, provider_details=det or None)
    fr = either_case(p, "functionResponse")
    if isinstance(fr, dict):
        result = ToolResult(
            call_id=as_str(either_case(fr, "id")),
            name=as_str(either_case(fr, "name")),
            named=True,
            content=_flatten_response(either_case(fr, "response"), either_case(fr, "parts")),
        )
        return Part(
            kind="tool_result",
            tool_result=result,
            provider_details=_details(p, {"functionResponse"}),
        )
    for key in ("inlineData", "fileData"):
        blob = either_case(p, key)
        if isinstance(blob, dict):
            part = media_part(p, _media_type(blob))
            sig = either_case(p, "thoughtSignature")
            if sig is not None and part.provider_details is not None:
                part.provider_details["thought_signature"] = sig
            return part
    tc = either_case(p, "toolCall")
    if isinstance(tc, dict):
        tool_type = as_str(either_case(tc, "toolType"))
        call = tool_call_from_object(
            either_case(tc, "id"), tool_type, either_case(tc, "args"), kind="server"
        )
        return Part(kind="tool_call", tool_call=call, provider_details=_details(p, {"toolCall"}))
    tr = either_case(p, "toolResponse")
    if isinstance(tr, dict):
        result = ToolResult(
            call_id=as_str(either_case(tr, "id")),
            name=as_str(either_case(tr, "toolType")),
            content=_flatten_response(either_case(tr, "response"), None),
        )
        det = _details(p, {"toolResponse"}) or {}
        det["server"] = True
        return Part(kind="tool_result", tool_result=result, provider_details=det)
    # The hosted code tool's parts and parts of metadata alone (a signature-only part) are kept
    # as sent, read as what they are; a part of any other kind is one looptap does not know,
    # named by its key (said unread, issue 102).
    kinds = sorted(ck for ck in map(camel, p) if ck not in _PART_METADATA)
    if kinds and not set(kinds) <= _KEPT_PARTS:
        return Part(kind="other", provider_details={"block": p, "type": kinds[0]})
    det = _details(p, set()) or {}
    det["block"] = p
    det["kept"] = "hosted" if kinds else "control"
    return Part(kind="other", provider_details=det)


#: A part's keys that say something of its content, never content of their own.
_PART_METADATA = frozenset(
    {"thought", "thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"}
)
#: Parts the API defines that looptap keeps as sent (the code execution tool's code and its
#: result, run by the provider).
_KEPT_PARTS = frozenset({"executableCode", "codeExecutionResult"})


def parts_of(content: Any) -> list[Part]:
    if isinstance(content, str):  # SDK shorthand; not valid on the wire but harmless
        return [Part(kind="text", text=content)]
    raw = either_case(content, "parts")
    return [part_of(p) for p in raw] if isinstance(raw, list) else []


def _role(raw: Any) -> str:
    if raw is None or raw == "":
        return "user"  # a missing role means user [SDK]
    if raw == "model":
        return "assistant"
    return str(raw)


def message_of(c: Any) -> Message:
    if not isinstance(c, dict):
        return Message(role="unknown", parts=[Part(kind="other", provider_details={"block": c})])
    extra = {k: v for k, v in c.items() if k not in ("role", "parts")}
    return Message(role=_role(c.get("role")), parts=parts_of(c), provider_details=extra or None)


# ---------------------------------------------------------------------------------------------
# Request

STRUCTURAL = {
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "generationConfig",
    "model",
}


def tools_of(raw: Any) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in raw if isinstance(raw, list) else []:
        if not isinstance(t, dict):
            continue
        for key, val in t.items():
            ck = camel(key)
            if ck == "functionDeclarations":
                for f in val if isinstance(val, list) else []:
                    if not isinstance(f, dict):
                        continue
                    params = either_case(f, "parametersJsonSchema")
                    if params is None:
                        params = either_case(f, "parameters")
                    out.append(
                        ToolSpec(
                            name=as_str(either_case(f, "name")) or "",
                            description=as_str(either_case(f, "description")),
                            parameters=params if isinstance(params, dict) else None,
                        )
                    )
            else:
                # Hosted tools: googleSearch, codeExecution, urlContext, fileSearch, googleMaps …
                out.append(ToolSpec(name=ck, kind=ck))
    return out


_MODES = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "validated"}


def tool_choice_of(tool_config: Any) -> str | None:
    fcc = either_case(tool_config, "functionCallingConfig")
    if not isinstance(fcc, dict):
        return None
    mode = as_str(either_case(fcc, "mode"))
    if mode is None:
        return None
    names = either_case(fcc, "allowedFunctionNames")
    if mode == "ANY" and isinstance(names, list) and len(names) == 1:
        return f"tool:{names[0]}"
    return _MODES.get(mode.upper(), mode.lower())
