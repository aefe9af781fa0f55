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

An instrumentation may also split a call into the span of its request, which ends before the answer
does (no output, no error), and a span of the answer with the same request (Logfire's
``streaming response from … took …`` of a streamed call): they are one round trip too, the answer's
span kept at the place and start of the request's. And a framework that traces its model call
over an SDK instrumentation that traces the same call (pydantic-ai's ``chat`` span over Logfire's
OpenAI span) gives two spans with content, one inside the other: the inner one, what the SDK sent,
is the round trip, at the outer one's place; the outer one adds what the inner one did not keep.
"""

from __future__ import annotations

from typing import Any

from ..providers import Call
from ._otlp_spans import ancestors, span_id

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


def _unanswered(call: Call) -> bool:
    return call.output is None and call.error is None and "messages" in call.given


def _same_request(a: Call, b: Call) -> bool:
    return (a.family, a.model, a.system, a.messages, a.tools) == (
        b.family, b.model, b.system, b.messages, b.tools
    )  # fmt: skip


def _answers(items: list[Item]) -> list[Item]:
    """``items`` with each span of a request that ended before its answer merged with the next
    span of the same request that has the answer (kept at the request's place)."""
    out: list[Item] = []
    taken: set[int] = set()
    for i, (span, call) in enumerate(items):
        if i in taken:
            continue
        if _unanswered(call):
            j = next((j for j in range(i + 1, len(items)) if j not in taken
                      and not _unanswered(items[j][1]) and items[j][1].output is not None
                      and _same_request(call, items[j][1])), None)  # fmt: skip
            if j is not None:
                taken.add(j)
                answer = items[j][1]
                end = (answer.started or 0) + (answer.duration or 0)
                if call.started is not None and end >= call.started:
                    answer.started, answer.duration = call.started, end - call.started
                answer.params = {**call.params, **answer.params}
                name = str(items[j][0].get("name") or "a span")[:80]
                answer.notes.append(
                    f"imported: one call, two spans: its request's and its answer's ({name!r})"
                )
                out.append((span, answer))
                continue
        out.append((span, call))
    return out


def _nested(items: list[Item], by_id: dict[str, dict[str, Any]]) -> list[Item]:
    """``items`` with each call span that holds another call span of the same family (both with
    content) replaced by that inner one, which takes what only the outer one said."""
    at = {span_id(s.get("spanId")): i for i, (s, c) in enumerate(items) if not _bare(c)}
    inner_of: dict[int, int] = {}
    for i, (span, call) in enumerate(items):
        if _bare(call):
            continue
        for parent in ancestors(span, by_id):
            j = at.get(parent)
            if j is not None and items[j][1].family == call.family and j not in inner_of:
                inner_of[j] = i
                break
    inners = set(inner_of.values())
    out: list[Item] = []
    for j, (span, outer) in enumerate(items):
        if j in inners:
            continue
        if j not in inner_of:
            out.append((span, outer))
            continue
        inner = items[inner_of[j]][1]
        _take(inner, outer)
        name = str(span.get("name") or "a span")[:80]
        inner.notes.append(f"imported: one call, two spans: the SDK's, inside {name!r}")
        out.append((span, inner))
    return out


def _take(inner: Call, outer: Call) -> None:
    """What only the outer span of the same call said, given to the inner one."""
    if outer.stream and not inner.stream:
        inner.stream = True
    if "stream" not in outer.inferred:
        inner.inferred.discard("stream")
    if not inner.tools and outer.tools:
        inner.tools = outer.tools
        inner.inferred.discard("tools")
        inner.given.add("tools")
    inner.params = {**outer.params, **inner.params}
    marks = (("response_id", "response.id"), ("usage", "usage"), ("finish", "finish_reason"))
    for attr, mark in marks:
        if not getattr(inner, attr) and getattr(outer, attr):
            setattr(inner, attr, getattr(outer, attr))
            inner.given.add(mark)
    if inner.started is None or (outer.started is not None and outer.started < inner.started):
        end = max((inner.started or 0) + (inner.duration or 0),
                  (outer.started or 0) + (outer.duration or 0))  # fmt: skip
        inner.started = outer.started
        inner.duration = end - outer.started if outer.started is not None else inner.duration


def _same_bare(items: list[Item]) -> list[Item]:
    """Spans without content of one response id (an SDK's own span and an instrumentation's span
    whose content was not read) are one call: the later merged into the first."""
    first: dict[str, Call] = {}
    kept: list[Item] = []
    for span, call in items:
        rid = call.response_id if _bare(call) else None
        if rid and rid in first:
            into = first[rid]
            _absorb(into, call, str(span.get("name") or "a span"), "the same response id")
            into.notes += [n for n in call.notes if n not in into.notes]  # (what each said)
            into.unread += [u for u in call.unread if u not in into.unread]
            continue
        if rid:
            first[rid] = call
        kept.append((span, call))
    return kept


def merged(items: list[Item], by_id: dict[str, dict[str, Any]]) -> list[Item]:
    """``items`` (call spans in start order, with their calls) with every span that kept no
    content merged into the call span it is part of, where the trace says which."""
    items = _same_bare(_nested(_answers(items), by_id))
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
