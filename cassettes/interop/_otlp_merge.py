"""One model call, several spans: an SDK that traces its own calls (anthropic 2.x, scope
``com.anthropic.sdk.python``: model, usage, response id, no content) writes a span beside the
instrumentation's span of the same call. They are one round trip, never two: a span that kept no
content is merged into the span of the same call that did — the one with the same response id,
its parent or child among the call spans, else (instrumentations that set no parent, LangChain's
callbacks) the call span of the same family and model whose time holds it, the tightest.

What the span without content adds: the usage it read off the API's answer (kept over the
instrumentation's where they differ, which the round trip's notes say: instrumentations count a
streamed answer's usage events themselves, and some count them wrong), the response id, the model,
the stream flag and the parameters the other did not keep.
"""

from __future__ import annotations

from typing import Any

from ..providers import Call
from ._otlp_spans import span_id

__all__ = ["merged"]

Item = tuple[dict[str, Any], Call]


def _bare(call: Call) -> bool:
    return {"messages", "output"} <= call.inferred


def _times(span: dict[str, Any]) -> tuple[int, int]:
    try:
        return int(span.get("startTimeUnixNano") or 0), int(span.get("endTimeUnixNano") or 0)
    except (TypeError, ValueError):
        return 0, 0


def _related(bare: Item, full: list[Item], by_id: dict[str, dict[str, Any]]) -> tuple[int, str]:
    """The position in ``full`` of the call span ``bare`` is part of, and how it was told
    (-1: none)."""
    span, call = bare
    sid = span_id(span.get("spanId"))
    if call.response_id:
        for i, (_, c) in enumerate(full):
            if c.response_id == call.response_id:
                return i, "the same response id"
    ids = {span_id(s.get("spanId")): i for i, (s, _) in enumerate(full)}
    seen: set[str] = set()
    parent = span_id(span.get("parentSpanId"))
    while parent and parent in by_id and parent not in seen:  # an ancestor among the calls
        if parent in ids:
            return ids[parent], "its parent span"
        seen.add(parent)
        parent = span_id(by_id[parent].get("parentSpanId"))
    for i, (s, _) in enumerate(full):  # a child
        if sid and span_id(s.get("parentSpanId")) == sid:
            return i, "its child span"
    t0, t1 = _times(span)
    holding = [
        (_times(s)[0], i)
        for i, (s, c) in enumerate(full)
        if c.family == call.family
        and (not c.model or not call.model or c.model == call.model)
        and (not c.response_id or not call.response_id)
        and _times(s)[0] <= t0 <= t1 <= _times(s)[1]
        and t0 > 0
    ]
    if holding:
        return max(holding)[1], "the time it ran in"
    return -1, ""


def _absorb(into: Call, bare: Call, name: str, how: str) -> None:
    said = f"imported: one call, two spans: merged with {name!r} ({how})"
    if bare.usage and into.usage and bare.usage != into.usage:
        old = into.usage
        diff = ", ".join(
            f"{k} {old.get(k)} → {v}" for k, v in bare.usage.items() if old.get(k) != v
        )
        said += f"; its usage kept, as the API gave it ({diff})"
    into.notes.append(said)
    if bare.usage:
        into.usage = {**into.usage, **bare.usage}
        into.given.add("usage")
    for attr, mark in (("response_id", "response.id"), ("model", "model")):
        if getattr(bare, attr) and not getattr(into, attr):
            setattr(into, attr, getattr(bare, attr))
            into.given.add(mark)
    into.stream = into.stream or bare.stream
    if "stream" not in bare.inferred:
        into.inferred.discard("stream")
    into.params = {**bare.params, **into.params}
    if into.finish is None and bare.finish is not None:
        into.finish = bare.finish
        into.given.add("finish_reason")


def merged(items: list[Item], by_id: dict[str, dict[str, Any]]) -> list[Item]:
    """``items`` (call spans in start order, with their calls) with every span that kept no
    content merged into the call span it is part of, where the trace says which."""
    full = [it for it in items if not _bare(it[1])]
    if not full:
        return items
    kept: list[Item] = []
    for item in items:
        if not _bare(item[1]):
            kept.append(item)
            continue
        i, how = _related(item, full, by_id)
        if i < 0:
            kept.append(item)
        else:
            _absorb(full[i][1], item[1], str(item[0].get("name") or "a span"), how)
    return kept
