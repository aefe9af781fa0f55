"""The ``looptap.roundtrip/1`` object of a round trip: :func:`roundtrip_json`, built from plain
values.

The object of ``looptap show --json`` (documented in ``docs/show-json.md``). Its schema is the
models of :mod:`cassettes.views.schema`, which this module does not import: ``looptap show``
builds the objects without building the model classes (pydantic's field collection for them was
about 2 % of a small ``show``). :data:`KEYS` holds each model's keys in order; the schema module
checks them against its models when it is imported, and the tests do on every corpus round trip.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cassettes.models import emitted_calls
from cassettes.parsing.roundtrip import side_call

if TYPE_CHECKING:
    from cassettes.models import ApiError, NormalisedRequest, NormalisedResponse, Part, Usage
    from cassettes.parsing.roundtrip import RoundTrip
    from cassettes.wire.exchange import Exchange

__all__ = ["KEYS", "SCHEMA", "roundtrip_json"]

SCHEMA = "looptap.roundtrip/1"

#: Each model's JSON keys (a field's alias, else its name), in order: the field order of the
#: models of :mod:`cassettes.views.schema`, which checks it.
KEYS: dict[str, tuple[str, ...]] = {
    "RoundTripJson": (
        "schema",
        "seq",
        "started",
        "family",
        "operation",
        "method",
        "host",
        "path",
        "model_requested",
        "model_served",
        "stream",
        "transport",
        "status",
        "finish_reason",
        "usage",
        "tool_calls",
        "text",
        "reasoning",
        "refusal",
        "error",
        "complete",
        "truncated",
        "timing",
        "request",
        "transport_error",
        "analysis_errors",
        "notes",
        "mcp",
    ),
    "FinishReasonJson": ("raw", "normalised"),
    "UsageJson": ("input", "output", "cache_read", "cache_write", "reasoning", "total"),
    "ToolCallJson": ("id", "name", "arguments", "arguments_raw", "arguments_error", "ran_by"),
    "ErrorJson": ("status", "type", "code", "message", "in_stream"),
    "TimingJson": ("ttfb", "ttft", "duration"),
    "RequestJson": ("messages", "tools", "tool_choice", "previous_response_id", "history"),
}


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _joined(parts: list[Part], kind: str) -> str | None:
    texts = [p.text for p in parts if p.kind == kind and p.text is not None]
    return "".join(texts) if texts else None


def ordered_object(model: str, **values: Any) -> dict[str, Any]:
    """``values``, checked to be the JSON keys of the model named ``model`` in its order
    (:data:`KEYS`): what ``model.model_validate(values).model_dump(mode="json", by_alias=True)``
    gives for values that are JSON values of the field types already (the tests check it on every
    corpus round trip).

    Not that pydantic call itself: each recorded round trip is turned into this object once, by
    the recorder's writer, and validating and dumping it doubles the cost of the whole function
    (``model_construct`` and dumping triple it; this check adds a third). Keywords keep the order
    they are passed in, so the check is a tuple comparison."""
    if tuple(values) != KEYS[model]:
        raise TypeError(
            f"{model} takes {', '.join(KEYS[model])} in this order, not {', '.join(values)}"
        )
    return values


def roundtrip_json(rt: RoundTrip, ex: Exchange | None = None) -> dict[str, Any]:
    """``rt`` (and its exchange, when at hand) as a ``RoundTripJson`` object
    (:mod:`cassettes.views.schema`), in JSON values."""
    resp = rt.response
    req = rt.request
    url = urlsplit(rt.url)
    complete = rt.complete
    return ordered_object(
        "RoundTripJson",
        **{"schema": SCHEMA},  # (the key is the field's alias: ``schema`` is a BaseModel method)
        seq=rt.seq,
        started=_iso(ex.started) if ex is not None else None,
        family=rt.family,
        operation=rt.operation,
        method=rt.method,
        host=url.netloc,
        path=url.path,
        model_requested=req.model if req else None,
        model_served=resp.model if resp else None,
        stream=rt.stream,
        transport=_transport(ex),
        status=rt.status,
        finish_reason=_finish_json(resp),
        usage=_usage_json(resp.usage if resp else None),
        tool_calls=_tool_calls_json(resp),
        text=_joined(resp.parts, "text") if resp else None,
        reasoning=_joined(resp.parts, "reasoning") if resp else None,
        refusal=_joined(resp.parts, "refusal") if resp else None,
        error=_error_json(resp.error if resp else None),
        complete=complete,
        truncated=complete is False,
        timing=ordered_object("TimingJson", ttfb=rt.ttfb, ttft=rt.ttft, duration=rt.duration),
        request=_request_json(req, ex),
        transport_error=rt.transport_error,
        analysis_errors=list(rt.analysis_errors),
        notes=list(rt.notes),
        mcp=side_call(ex, rt) if ex is not None else None,
    )


def _transport(ex: Exchange | None) -> str:
    # A turn recorded from a WebSocket session (cassettes.recording.websocket) says so in its notes.
    return (
        "websocket"
        if ex is not None and any(n.startswith("websocket ") for n in ex.notes)
        else "http"
    )


def _finish_json(resp: NormalisedResponse | None) -> dict[str, Any]:
    return ordered_object(
        "FinishReasonJson",
        raw=resp.finish_reason_raw if resp else None,
        normalised=resp.finish_reason.value if resp and resp.finish_reason else None,
    )


def _usage_json(usage: Usage | None) -> dict[str, Any]:
    if usage is None:
        return ordered_object(
            "UsageJson",
            input=None,
            output=None,
            cache_read=None,
            cache_write=None,
            reasoning=None,
            total=None,
        )
    return ordered_object(
        "UsageJson",
        input=usage.input_tokens,
        output=usage.output_tokens,
        cache_read=usage.cache_read_tokens,
        cache_write=usage.cache_write_tokens,
        reasoning=usage.reasoning_tokens,
        total=usage.total_tokens,
    )


def _tool_calls_json(resp: NormalisedResponse | None) -> list[dict[str, Any]]:
    return [
        ordered_object(
            "ToolCallJson",
            id=tc.id,
            name=tc.name,
            arguments=tc.arguments,
            arguments_raw=tc.arguments_raw,
            arguments_error=tc.arguments_error,
            ran_by="server" if tc.by_server else "client",
        )
        for tc in emitted_calls(resp)
    ]


def _error_json(err: ApiError | None) -> dict[str, Any] | None:
    if err is None:
        return None
    return ordered_object(
        "ErrorJson",
        status=err.status,
        type=err.type,
        code=err.code,
        message=err.message,
        in_stream=err.in_stream,
    )


def _request_json(req: NormalisedRequest | None, ex: Exchange | None) -> dict[str, Any] | None:
    if req is None:
        return None
    return ordered_object(
        "RequestJson",
        messages=len(req.messages),
        tools=[t.name for t in req.tools],
        tool_choice=req.tool_choice_mode,
        previous_response_id=req.previous_response_id,
        history=ex.history_delta if ex is not None else None,
    )
