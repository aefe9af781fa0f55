"""The ``looptap.roundtrip/1`` object of a round trip: :func:`roundtrip_json`, built from plain
values.

The object of ``looptap show --json`` (documented in ``docs/show-json.md``). Its schema is the
models of :mod:`cassettes.views.schema`, which this module does not import: ``looptap show``
builds the objects as plain dicts, without the model classes, and the tests check on every corpus
round trip that the model validates and dumps each one to the same bytes (its keys, their order
and the types of their values).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..models import emitted_calls
from ..parsing import side_call

if TYPE_CHECKING:
    from ..models import ApiError, NormalisedRequest, NormalisedResponse, Part, Usage
    from ..parsing import RoundTrip
    from ..wire import Exchange

__all__ = ["SCHEMA", "roundtrip_json"]

SCHEMA = "looptap.roundtrip/1"


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _joined(parts: list[Part], kind: str) -> str | None:
    texts = [p.text for p in parts if p.kind == kind and p.text is not None]
    return "".join(texts) if texts else None


def roundtrip_json(rt: RoundTrip, ex: Exchange | None = None) -> dict[str, Any]:
    """``rt`` (and its exchange, when at hand) as a ``RoundTripJson`` object
    (:mod:`cassettes.views.schema`), in JSON values."""
    resp = rt.response
    req = rt.request
    url = urlsplit(rt.url)
    complete = rt.complete
    tool = _tool_http(ex)
    return dict(
        schema=SCHEMA,  # (the model's field is ``schema_``, aliased: a BaseModel method)
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
        read=rt.read,
        unread=rt.unread,
        timing=dict(ttfb=rt.ttfb, ttft=rt.ttft, duration=rt.duration),
        request=_request_json(req, ex),
        transport_error=rt.transport_error,
        analysis_errors=list(rt.analysis_errors),
        notes=list(rt.notes),
        mcp=side_call(ex, rt) if ex is not None else None,
        # only on a tool's HTTP call (most round trips are not one)
        **({"tool_http": tool} if tool is not None else {}),
    )


def _tool_http(ex: Exchange | None) -> dict[str, Any] | None:
    """A tool's HTTP call (an exchange the recorder marked ``tool``): what it sent and got."""
    if ex is None or not ex.tool:
        return None
    from ..analysis import tool_http

    return tool_http(ex).model_dump(mode="json")


def _transport(ex: Exchange | None) -> str:
    # A turn recorded from a WebSocket session (cassettes.recording.websocket) says so in its
    # notes.
    return (
        "websocket"
        if ex is not None and any(n.startswith("websocket ") for n in ex.notes)
        else "http"
    )


def _finish_json(resp: NormalisedResponse | None) -> dict[str, Any]:
    return dict(
        raw=resp.finish_reason_raw if resp else None,
        normalised=resp.finish_reason.value if resp and resp.finish_reason else None,
    )


def _usage_json(usage: Usage | None) -> dict[str, Any]:
    if usage is None:
        return dict.fromkeys(("input", "output", "cache_read", "cache_write", "reasoning", "total"))
    return dict(
        input=usage.input_tokens,
        output=usage.output_tokens,
        cache_read=usage.cache_read_tokens,
        cache_write=usage.cache_write_tokens,
        reasoning=usage.reasoning_tokens,
        total=usage.total_tokens,
    )


def _tool_calls_json(resp: NormalisedResponse | None) -> list[dict[str, Any]]:
    return [
        dict(
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
    return dict(
        status=err.status,
        type=err.type,
        code=err.code,
        message=err.message,
        in_stream=err.in_stream,
    )


def _request_json(req: NormalisedRequest | None, ex: Exchange | None) -> dict[str, Any] | None:
    if req is None:
        return None
    return dict(
        messages=len(req.messages),
        tools=[t.name for t in req.tools],
        tool_choice=req.tool_choice_mode,
        previous_response_id=req.previous_response_id,
        history=ex.history_delta if ex is not None else None,
    )
