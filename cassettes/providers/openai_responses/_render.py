"""An answer rendered as the Responses API sends it (for replay and the fake upstreams): a
response object, or its event stream with ``sequence_number`` on every event, ending
``response.completed`` (``response.incomplete`` when cut by ``max_output_tokens`` or a content
filter)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ...models import FinishReason, NormalisedResponse, Usage
from .._replay import Rendered, answer_calls, answer_text, call_arguments_text, pieces, sse
from .._values import as_obj, as_str

__all__ = ["render_responses"]

Item = dict[str, Any]


def _usage_body(u: Usage | None) -> dict[str, Any] | None:
    if u is None:
        return None
    if isinstance(u.raw, dict) and "input_tokens" in u.raw:
        return u.raw
    i, o = u.input_tokens or 0, u.output_tokens or 0
    return {
        "input_tokens": i,
        "input_tokens_details": {"cached_tokens": u.cache_read_tokens or 0},
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens or 0},
        "total_tokens": u.total_tokens if u.total_tokens is not None else i + o,
    }


def _items(answer: NormalisedResponse, rid: str, incomplete: str | None) -> list[Item]:
    """The answer's output items: the items looptap has no kind for (the calls OpenAI ran itself,
    a file search, a web search …, kept whole), one message (text and refusal), then its function
    calls."""
    text, refusal, calls = answer_text(answer), answer_text(answer, "refusal"), answer_calls(answer)
    status = "incomplete" if incomplete else "completed"
    hosted = [
        block
        for p in answer.parts
        if p.kind == "other"
        and isinstance(block := (p.provider_details or {}).get("block"), dict)
        and isinstance(block.get("type"), str)
    ]
    content: list[Item] = []
    if text:
        content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    items: list[Item] = list(hosted)
    if content:
        items.append(
            {
                "type": "message",
                "id": f"msg_{rid}",
                "status": status,
                "role": "assistant",
                "content": content,
            }
        )
    for i, c in enumerate(calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{rid}_{i}",
                "call_id": c.id or f"call_looptap_{i}",
                "name": c.name or "",
                "arguments": call_arguments_text(c),
                "status": status,
            }
        )
    return items


#: The statuses of a response not finished yet (background mode).
_PENDING = ("queued", "in_progress")


def render_responses(answer: NormalisedResponse, stream: bool, request: Any) -> Rendered:
    """An answer as a response object (JSON) or its event stream, ending ``response.completed``
    (``response.incomplete`` when cut by ``max_output_tokens`` or a content filter)."""
    finish = answer.finish_reason
    incomplete = {
        FinishReason.TRUNCATED_LENGTH: "max_output_tokens",
        FinishReason.FILTERED: "content_filter",
    }.get(finish or FinishReason.COMPLETE)
    rid = answer.id or "resp_looptap"
    items = _items(answer, rid, incomplete)
    req = as_obj(request)
    # a background response's first answer: queued (its output comes with a later poll)
    pending = answer.finish_reason is None and answer.finish_reason_raw in _PENDING
    status = answer.finish_reason_raw if pending else "incomplete" if incomplete else "completed"
    final: Item = {
        "id": rid,
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": req.get("instructions"),
        "model": answer.model or as_str(req.get("model")) or "",
        "output": items,
        "parallel_tool_calls": True,
        "previous_response_id": req.get("previous_response_id"),
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": req.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _usage_body(answer.usage),
        "metadata": {},
    }
    if not stream:
        return Rendered("application/json", [orjson.dumps(final)])
    return Rendered("text/event-stream", _events(final, items, incomplete))


def _events(final: Item, items: list[Item], incomplete: str | None) -> list[bytes]:
    """The event stream of ``final``: created, in progress, each item's events, the end."""
    out: list[bytes] = []

    def emit(etype: str, **fields: Any) -> None:
        out.append(sse({"type": etype, "sequence_number": len(out), **fields}, etype))

    started = {
        **final,
        "status": "in_progress",
        "incomplete_details": None,
        "output": [],
        "usage": None,
    }
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for n, item in enumerate(items):
        if item["type"] == "message":
            _message_events(emit, n, item)
        elif item["type"] == "function_call":
            _call_events(emit, n, item)
        else:  # a call OpenAI ran: added, then done whole
            emit("response.output_item.added", output_index=n, item=item)
        emit("response.output_item.done", output_index=n, item=item)
    emit("response.incomplete" if incomplete else "response.completed", response=final)
    return out


def _message_events(emit: Callable[..., None], n: int, item: Item) -> None:
    emit(
        "response.output_item.added",
        output_index=n,
        item={**item, "status": "in_progress", "content": []},
    )
    for ci, part in enumerate(item["content"]):
        empty = (
            {"type": "output_text", "text": "", "annotations": []}
            if part["type"] == "output_text"
            else {"type": "refusal", "refusal": ""}
        )
        emit(
            "response.content_part.added",
            item_id=item["id"],
            output_index=n,
            content_index=ci,
            part=empty,
        )
        kind, field = (
            ("output_text", "text") if part["type"] == "output_text" else ("refusal", "refusal")
        )
        for piece in pieces(part[field]):
            emit(
                f"response.{kind}.delta",
                item_id=item["id"],
                output_index=n,
                content_index=ci,
                delta=piece,
            )
        emit(
            f"response.{kind}.done",
            item_id=item["id"],
            output_index=n,
            content_index=ci,
            **{field: part[field]},
        )
        emit(
            "response.content_part.done",
            item_id=item["id"],
            output_index=n,
            content_index=ci,
            part=part,
        )


def _call_events(emit: Callable[..., None], n: int, item: Item) -> None:
    emit(
        "response.output_item.added",
        output_index=n,
        item={**item, "status": "in_progress", "arguments": ""},
    )
    for piece in pieces(item["arguments"]):
        emit(
            "response.function_call_arguments.delta",
            item_id=item["id"],
            output_index=n,
            delta=piece,
        )
    emit(
        "response.function_call_arguments.done",
        item_id=item["id"],
        output_index=n,
        arguments=item["arguments"],
    )
