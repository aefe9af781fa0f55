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

from typing import Any

import orjson

from ..models import FinishReason, NormalisedResponse, Part, ToolCall, ToolResult, Usage
from ..wire import Exchange
from ._base import Provider, Rebuilt
from ._rebuild_shape import NO_SHAPE, Call, RebuildShape, said_nothing
from ._registry import adapters, by_family, detect
from ._semconv_history import arguments_object, arguments_text, kept_block, part_text

__all__ = ["Call", "exchange", "link_items", "rebuilt_in", "shape_of", "trace_family"]

_JSON = [("content-type", "application/json")]
#: The reason phrases of the error statuses an answer is rebuilt with most.
_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable",
            529: "Overloaded"}  # fmt: skip


def exchange(call: Call, n: int) -> Exchange:
    """The exchange of ``call`` (the ``n``-th of its run: inferred ids are made from it)."""
    from urllib.parse import urlsplit

    own = _own_shape(call)
    adapter = own or rebuilt_in(call.family)
    shape = adapter.profile.rebuild or NO_SHAPE
    if not call.model:
        call.inferred.add("model")
    if not call.response_id:
        call.response_id = f"{shape.id_prefix}_imported_{n}"
        call.inferred.add("response.id")
    if own is not None or shape.build is None:
        return _marked(_own_exchange(call, adapter), call)
    url, req, resp = shape.build(call)
    url = _recorded_url(call, adapter.family, req) or url
    ex = Exchange(
        method="POST", url=url, request_headers=list(_JSON), request_body=orjson.dumps(req),
        started=call.started, duration=call.duration, notes=list(call.notes),
    )  # fmt: skip
    answer: NormalisedResponse | None = None  # to render as the API sends it
    if call.error is not None and (not shape.rendered or call.output is None):
        _error_answer(ex, call)
    elif shape.rendered:
        answer = _answer(call) if call.output is not None else None
    elif resp is not None:
        ex.status, ex.reason = 200, "OK"
        ex.response_headers = list(_JSON)
        ex.response_chunks = [(None, orjson.dumps(resp))]
        call.inferred |= {"status", "framing"}
        if call.stream:  # streamed as the API streams that answer
            answer = adapter.parse_response(resp)
    rendered = (
        adapter.replay.render_answer(answer, call.stream, urlsplit(url), req)
        if answer is not None
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

    adapter = by_family(call.family)
    if adapter is None or adapter.profile.rebuild or not call.url or call.operation is None:
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
    found = detect("POST", where, req)
    if found is None or found.family != family or found.operation("POST", where) != "generate":
        return None
    return call.url


def _marked(ex: Exchange, call: Call) -> Exchange:
    ex.reconstructed = {
        "v": 1,
        "source": call.source,
        "from": sorted(call.given),
        "inferred": sorted(call.inferred),
        **({"unread": sorted(set(call.unread))} if call.unread else {}),
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


def _answer_part(call: Call, p: dict[str, Any]) -> Part | None:
    """One part a source kept of the answer (``None``: one of no kind an answer carries)."""
    t = p.get("type")
    if t == "media":
        return Part(kind="media", media_type=str(p.get("mime_type") or "") or None)
    if t == "text":
        return Part(kind="text", text=part_text(p))
    if t == "tool_call":
        # Gemini's calls carry no id (they pair by name and order, as the rebuilt history
        # does): one in its trace was made by the instrumentation (google-genai's name_N)
        # (a server call's id pairs it with its result; looptap's own export's are the wire's)
        server = p.get("tool_kind") == "server" or "tool_call.id" in call.given
        tc = ToolCall(
            id=None
            if shape_of(call.family).call_ids_made_up and not server
            else str(p.get("id") or "") or None,
            name=str(p.get("name") or ""),
            arguments=arguments_object(p.get("arguments")),
            arguments_raw=arguments_text(p.get("arguments")),
        )
        if isinstance(p.get("tool_kind"), str):  # a call the provider ran itself
            tc.kind = p["tool_kind"]
        return Part(kind="tool_call", tool_call=tc)
    if t == "tool_call_response" and p.get("tool_kind") == "server":
        said = ToolResult(call_id=str(p.get("id") or "") or None, name=str(p.get("name") or ""),
                          content=part_text({"content": p.get("response")}))  # fmt: skip
        return Part(kind="tool_result", tool_result=said, provider_details={"server": True})
    if (block := kept_block(p)) is not None:  # (a hosted call's item), kept whole
        return Part(kind="other", provider_details={"block": block, "kept": "hosted"})
    return None


def _answer_finish(call: Call, parts: list[Part]) -> FinishReason | None:
    """The finish a source gave (its raw value or class), else the one the parts imply (said
    inferred); none for an answer not finished yet or a source that said nothing."""
    finish = _FINISHED.get((call.finish or "").lower())
    classes = {c.value: c for c in FinishReason}
    if finish is None and call.finish_class in classes:
        finish = classes[call.finish_class]
    if finish is None and ((call.finish or "").lower() in _PENDING or said_nothing(call)):
        return None  # an answer not finished yet (a background response polled for later), or none
    if finish is None:
        call.inferred.add("finish_reason")
        finish = (
            FinishReason.TOOL_CALL if any(p.tool_call for p in parts) else FinishReason.COMPLETE
        )
    return finish


def _answer(call: Call) -> NormalisedResponse:
    """The answer a source kept, with a part for each media part it names (whose bytes it does
    not keep: a renderer that answers media renders its type, with no bytes)."""
    kept = (call.output or {}).get("parts") or []
    parts = [part for p in kept if (part := _answer_part(call, p)) is not None]
    finish = _answer_finish(call, parts)
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
        if not shape_of(call.family).links_items:
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


# -- which family a trace's call is rebuilt in ----------------------------------------------------


def _shaped() -> list[tuple[Provider, RebuildShape]]:
    return [(p, p.profile.rebuild) for p in adapters() if p.profile.rebuild is not None]


def shape_of(family: str) -> RebuildShape:
    """``family``'s rebuild shape (:data:`NO_SHAPE` when it has none)."""
    return next((s for p, s in _shaped() if p.family == family), NO_SHAPE)


def rebuilt_in(family: str) -> Provider:
    """The adapter a chat turn of ``family`` is rebuilt as: its own, else the fallback's."""
    shaped = _shaped()
    return next((p for p, _ in shaped if p.family == family), None) or next(
        p for p, s in shaped if s.fallback
    )


def trace_family(provider: str, path: str, echoed: bool, host: str) -> str:
    """The family a trace's call is rebuilt in: the first (in recognition order) whose shape the
    span's provider, URL path, answer echo or server says, else the fallback."""
    said = [(p, s) for p, s in _shaped() if s.says(provider, path, echoed, host) or s.fallback]
    return next((p for p, s in said if not s.fallback), said[0][0]).family
