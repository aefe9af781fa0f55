"""The values a body carries, read leniently into :mod:`cassettes.models`: scalars, text and
media, tool calls and tool declarations, errors, finish reasons, usage, a stream's events, where
a body holds each tool result (a bounded walk over an untrusted body). Every family reads them the
same way, importing them from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import SplitResult

import orjson

from .. import bounds
from ..jsonpath import walk
from ..models import (
    USAGE_COUNTS,
    ApiError,
    FinishReason,
    NormalisedResponse,
    Part,
    ToolCall,
    ToolSpec,
    Usage,
)
from ..wire import Event, Framed


def finish_lookup(
    table: dict[str, FinishReason], raw: str | None, has_calls: bool = False
) -> FinishReason | None:
    """The G.1 class of a raw finish value: ``None`` when absent, ``unknown`` for an empty string,
    ``other`` for a value the table does not know (kept raw by the caller). A turn that carries
    tool calls but says it completed (Cohere v1, Gemini- and Ollama-compatible servers) is a tool
    call."""
    if raw is None:
        return None
    cls = table.get(raw, FinishReason.UNKNOWN if raw == "" else FinishReason.OTHER)
    return FinishReason.TOOL_CALL if cls is FinishReason.COMPLETE and has_calls else cls


def json_events(framed: Framed) -> Iterator[tuple[str | None, Any]]:
    """A stream's events as (event name, parsed JSON payload), in order. The ``[DONE]`` sentinel
    is yielded as ``("[DONE]", None)``; a payload that is not JSON as (name, ``None``); empty
    payloads (keep-alives) are skipped."""
    for ev in framed.events:
        data = ev.data.strip()
        if not data:
            continue
        if data == "[DONE]":
            yield "[DONE]", None
            continue
        try:
            yield ev.event, bounds.loads(data)
        except orjson.JSONDecodeError:
            yield ev.event, None


def aws_payload_bytes(ev: Event) -> bytes | None:
    """The bytes an AWS event-stream ``chunk`` / ``PayloadPart`` frame carries: the base64
    ``{"bytes": …}`` / ``{"Bytes": …}`` of InvokeModel streams, or the raw payload of SageMaker's.
    ``None`` for exception and error frames and undecodable payloads."""
    import base64
    import binascii

    if (ev.headers or {}).get(":message-type") in ("exception", "error"):
        return None
    data = ev.data.strip()
    if data.startswith("{"):
        try:
            payload = bounds.loads(data)
        except orjson.JSONDecodeError:
            payload = None
        if isinstance(payload, dict):
            b64 = payload.get("bytes", payload.get("Bytes"))
            if isinstance(b64, str):
                try:
                    return base64.b64decode(b64)
                except (binascii.Error, ValueError):
                    return None
    return ev.data.encode()


def azure_deployment(url: SplitResult) -> str | None:
    """The deployment name of an Azure OpenAI URL (``/openai/deployments/{name}/…``): on Azure the
    deployment, not the body, chooses the model."""
    parts = url.path.split("/")
    if "deployments" in parts:
        i = parts.index("deployments")
        return parts[i + 1] if i + 1 < len(parts) else None
    return None


def as_obj(v: Any) -> dict[str, Any]:
    """``v`` when it is a JSON object, else an empty one (lenient reads of optional objects)."""
    return v if isinstance(v, dict) else {}


def as_int(v: Any) -> int | None:
    if type(v) is int:  # (the common case in one step: a bool is not this type)
        return v
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def summed_usage(inp: int | None, out: int | None, raw: Any) -> Usage | None:
    """The usage of an API that reports an input and an output count but no total: ``None`` when
    it reports neither, the total their sum when it reports both."""
    if inp is None and out is None:
        return None
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out if inp is not None and out is not None else None,
        raw=raw or None,
    )


def filled_usage(usage: Usage | None, inp: int | None, out: int | None) -> Usage | None:
    """``usage`` with the counts it lacks taken from elsewhere (response headers, invocation
    metrics), and its total when it has none; ``usage`` as it is when there are none."""
    if inp is None and out is None:
        return usage
    u = usage or Usage()
    u.input_tokens = u.input_tokens if u.input_tokens is not None else inp
    u.output_tokens = u.output_tokens if u.output_tokens is not None else out
    if u.input_tokens is not None and u.output_tokens is not None and u.total_tokens is None:
        u.total_tokens = u.input_tokens + u.output_tokens
    return u


def latest_count(before: int | None, now: int | None) -> int | None:
    """A count a stream repeats on its chunks: the latest, unless it is absent or 0 after a count
    (:func:`merged_usage`)."""
    return before if not now and before else now if now is not None else before


def merged_usage(before: Usage | None, now: Usage | None) -> Usage | None:
    """The usage of a stream that reports it on more than one chunk: each count as the latest
    chunk gives it, except that a 0 or an absent count never replaces the count an earlier chunk
    gave (watsonx sends the input count on its first chunk and 0 on the later ones; vLLM and Gemini
    repeat cumulative counts, the latest the largest). The total then covers what was kept."""
    if before is None or now is None:
        return now or before
    kept = {
        k: getattr(before, k)
        for k in USAGE_COUNTS
        if latest_count(getattr(before, k), getattr(now, k)) != getattr(now, k)
    }
    if not kept:
        return now
    merged = now.model_copy(update=kept)
    if isinstance(before.raw, dict) and isinstance(now.raw, dict):
        merged.raw = {
            **now.raw,
            **{k: v for k, v in before.raw.items() if v and not now.raw.get(k)},
        }
    if merged.input_tokens is not None and merged.output_tokens is not None:
        merged.total_tokens = max(
            merged.total_tokens or 0, merged.input_tokens + merged.output_tokens
        )
    return merged


def as_str(v: Any) -> str | None:
    if v is None or type(v) is str:
        return v  # type: ignore[no-any-return]
    return v if isinstance(v, str) else str(v)


def compact_json(v: Any) -> str:
    return orjson.dumps(v).decode()


def parse_arguments(raw: str | None) -> tuple[Any, str | None]:
    """Parse a tool call's argument string. Empty means ``{}`` (what SDKs send for no arguments)."""
    if raw is None:
        return None, None
    if not raw.strip():
        return {}, None
    try:
        return bounds.loads(raw), None
    except orjson.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON: {exc}"


def tool_call_from_string(call_id: Any, name: Any, raw: Any, kind: str = "function") -> ToolCall:
    raw_s = raw if isinstance(raw, str) else (compact_json(raw) if raw is not None else None)
    parsed, err = parse_arguments(raw_s)
    return ToolCall(
        id=as_str(call_id) or None,
        name=as_str(name),
        arguments=parsed,
        arguments_raw=raw_s,
        arguments_error=err,
        kind=kind,
    )


def tool_call_from_object(call_id: Any, name: Any, args: Any, kind: str = "function") -> ToolCall:
    """A call whose arguments travel as a JSON object (Anthropic, Gemini, Ollama, Bedrock)."""
    if isinstance(args, str):
        return tool_call_from_string(call_id, name, args, kind)
    return ToolCall(
        id=as_str(call_id) or None,
        name=as_str(name),
        arguments=args,
        arguments_raw=compact_json(args) if args is not None else None,
        kind=kind,
    )


#: The modes a ``tool_choice`` string names, in the normalised spelling (Cohere v2 sends capitals).
_MODES = {"AUTO": "auto", "NONE": "none", "REQUIRED": "required"}


def tool_choice_mode(tc: Any) -> str | None:
    """The normalised mode of an OpenAI-style ``tool_choice`` (Chat Completions, and Cohere v2's
    ``REQUIRED`` / ``NONE``): ``auto``, ``none`` or ``required`` in any case, another string as
    sent, ``tool:NAME`` for a forced function or custom tool, an ``allowed_tools`` object's mode."""
    if tc is None:
        return None
    if isinstance(tc, str):
        return _MODES.get(tc.upper(), tc)
    if isinstance(tc, dict):
        for key in ("function", "custom"):
            if isinstance(tc.get(key), dict) and tc[key].get("name"):
                return f"tool:{tc[key]['name']}"
        if tc.get("name"):
            return f"tool:{tc['name']}"
        if isinstance(tc.get("allowed_tools"), dict):
            return as_str(tc["allowed_tools"].get("mode"))
        return as_str(tc.get("mode") or tc.get("type"))
    return None


def function_spec(f: dict[str, Any]) -> ToolSpec:
    """A function tool as OpenAI declares one (``name``, ``description``, JSON-schema
    ``parameters``): Chat's ``tools[].function`` and ``functions[]``, the Responses and Realtime
    APIs' function tools, Ollama's, Cohere v2's and Gemini Interactions'."""
    params = f.get("parameters")
    return ToolSpec(
        name=as_str(f.get("name")) or "",
        description=as_str(f.get("description")),
        parameters=params if isinstance(params, dict) else None,
    )


def other_spec(t: dict[str, Any]) -> ToolSpec:
    """A tool that is no function (a provider's built-in), named by its name or else its type."""
    return ToolSpec(
        name=as_str(t.get("name") or t.get("type")) or "", kind=as_str(t.get("type")) or "other"
    )


def text_of(content: Any) -> str:
    """Flatten a content value (string, list of text-ish blocks, object) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_block_text(b) for b in content)
    if isinstance(content, dict):
        return _block_text(content)
    return str(content)


def _block_text(b: Any) -> str:
    if isinstance(b, str):
        return b
    if not isinstance(b, dict):
        return str(b)
    for key in ("text", "output", "content", "refusal"):
        v = b.get(key)
        if isinstance(v, str):
            return v
        if isinstance(v, list):
            return text_of(v)
    kind = b.get("type") or next(iter(b), "part")
    media = b.get("mime_type") or b.get("media_type") or b.get("mimeType")
    if media is None and isinstance(b.get("source"), dict):
        media = b["source"].get("media_type")
    return f"[{kind}{': ' + media if media else ''}]"


def text_parts(text: Any) -> list[Part]:
    """A text as the parts of an answer: one text part, none for an empty or missing one."""
    return [Part(kind="text", text=text)] if isinstance(text, str) and text else []


def media_part(block: dict[str, Any], media_type: str | None) -> Part:
    return Part(kind="media", media_type=media_type, provider_details={"block": block})


#: The response header in which a service tells an error's type beside (or instead of) a body:
#: AWS's (``ValidationException:http://internal…``), on every API served there (Bedrock's own,
#: Anthropic's Messages on Bedrock, SageMaker, Bedrock's OpenAI-compatible endpoints).
ERROR_TYPE_HEADERS = ("x-amzn-errortype",)


def error_type_header(response: NormalisedResponse, header: Callable[[str], str | None]) -> None:
    """An error answered without a body (a 4xx sent empty) still says what it is in a header
    (:data:`ERROR_TYPE_HEADERS`): its type, when the body named none."""
    err = response.error
    if err is None or err.type is not None:
        return
    raw = next((v for v in map(header, ERROR_TYPE_HEADERS) if v), None)
    if raw:
        err.type = raw.split(":", 1)[0].strip()[:200] or None


def error_from_body(body: Any, status: int | None, in_stream: bool = False) -> ApiError:
    """The common error shapes: ``{"error": {...}}``, ``{"error": "text"}``, ``{"message":
    ...}``."""
    if isinstance(body, list) and body:
        body = body[0]
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return ApiError(
            status=status if status is not None else as_int(err.get("code")),
            type=as_str(err.get("type") or err.get("status")),
            code=as_str(err.get("code")),
            message=as_str(err.get("message")),
            in_stream=in_stream,
            raw=body,
        )
    if isinstance(err, str):
        return ApiError(status=status, message=err, in_stream=in_stream, raw=body)
    if isinstance(body, dict):
        msg = body.get("message") or body.get("Message") or body.get("detail")
        return ApiError(
            status=status,
            type=as_str(body.get("type") or body.get("__type") or body.get("code")),
            message=as_str(msg),
            in_stream=in_stream,
            raw=body,
        )
    return ApiError(status=status, message=as_str(body), in_stream=in_stream, raw=body)


def error_from_text(body: Any, status: int | None) -> ApiError:
    """:func:`error_from_body` of an error body that may have come as text (sent without a JSON
    content type): read as JSON when it is JSON, else kept whole as the error's text."""
    if isinstance(body, (str, bytes)):
        try:
            body = bounds.loads(body)
        except orjson.JSONDecodeError:
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            return ApiError(status=status, message=text or None, raw=text)
    return error_from_body(body, status)


# -- where a body holds each tool result (Provider.tool_result_paths) ---------------------------

#: Keys of a tool *call*'s object (its arguments): an object with one is never a result's.
_CALL_KEYS = frozenset({"input", "arguments", "args", "function"})
#: How deep and how many objects :func:`locate_results` looks at (a body is untrusted).
_LOCATE_DEPTH = 16
_LOCATE_NODES = 200_000


def locate_results(
    body: Any, results: list[tuple[str | None, str | None, str]]
) -> list[tuple[tuple[str | int, ...], str | None]]:
    """For :meth:`Provider.tool_result_paths`: each result's content path, found in body order
    (:func:`cassettes.jsonpath.walk`), no deeper than ``_LOCATE_DEPTH`` and within
    ``_LOCATE_NODES`` objects and lists looked at."""
    out: list[tuple[tuple[str | int, ...], str | None]] = []
    pending = [r for r in results if r[2] and (r[0] or r[1])]
    seen = 0
    for node, path, _, _ in walk(body, _LOCATE_DEPTH + 1):
        if not pending or seen >= _LOCATE_NODES:
            break
        seen += isinstance(node, dict | list)
        if len(path) > _LOCATE_DEPTH or not isinstance(node, dict) or _CALL_KEYS & node.keys():
            continue
        found = _result_in(node, pending)
        if found is not None:
            j, key = found
            out.append(((*path, key), pending[j][1]))
            del pending[j]
    return out


def _result_in(
    node: dict[str, Any], pending: list[tuple[str | None, str | None, str]]
) -> tuple[int, str] | None:
    """The first pending result ``node`` holds — it carries the result's call id (or, without one,
    its name) and a value that flattens to its content — as (its index in ``pending``, the key
    of that value); ``None`` when it holds none."""
    values = {v for v in node.values() if isinstance(v, str)}
    for j, (call_id, name, content) in enumerate(pending):
        ident = call_id or name
        if ident not in values:
            continue
        key = next(
            (
                k
                for k, v in node.items()
                if not (isinstance(v, str) and v in (call_id, name)) and _flattens_to(v, content)
            ),
            None,
        )
        if key is not None:
            return j, key
    return None


def _flattens_to(value: Any, content: str) -> bool:
    """Whether ``value`` is what an adapter flattened to ``content`` (its text, or its JSON)."""
    if isinstance(value, str):
        return value == content
    try:
        return (
            text_of(value) == content
            or compact_json(value) == content
            or (
                isinstance(value, dict)
                and len(value) == 1
                and next(iter(value.values())) == content
            )
        )
    except Exception:
        return False
