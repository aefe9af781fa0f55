"""The answer of a span that keeps the API's own request and answer (:class:`._otlp_profiles.
Bodies`): the message inside a whole answer, and a streamed answer reassembled from the chunks the
instrumentation kept as span events, by the family's own provider (as a recorded stream is)."""

from __future__ import annotations

from typing import Any

import orjson

from .. import bounds
from ..providers import by_family, from_parts
from ..wire import frame
from ._otlp_spans import attributes, json_attribute

__all__ = ["message_at", "plain", "reassembled"]


def message_at(answer: Any, path: tuple[str | int, ...]) -> Any:
    """The message at ``path`` in ``answer``, or ``answer`` itself where it has none there (an
    API whose answer is the message)."""
    v = answer
    for step in path:
        if isinstance(step, int) and isinstance(v, list) and -len(v) <= step < len(v):
            v = v[step]
        elif isinstance(step, str) and isinstance(v, dict) and step in v:
            v = v[step]
        else:
            return answer
    return v


def reassembled(
    span: dict[str, Any], family: str, where: tuple[str, str]
) -> dict[str, Any] | None:
    """The assistant message of a stream whose chunks are the span's events named ``where[0]``…
    (in order), each the JSON of one chunk in attribute ``where[1]``; ``None`` without any, or
    where the family's provider reads no answer from them."""
    prefix, key = where
    events = [
        e for e in span.get("events") or []
        if isinstance(e, dict) and str(e.get("name") or "").startswith(prefix)
    ]  # fmt: skip
    datas = [attributes(e.get("attributes")).get(key) for e in events]
    chunks = [d for d in datas if isinstance(d, str) and isinstance(json_attribute(d), dict)]
    adapter = by_family(family)
    if not chunks or adapter is None:
        return None
    body = b"".join(b"data: " + c.encode() + b"\n\n" for c in chunks)
    try:
        r = adapter.reassemble(frame([(None, body)], "text/event-stream"))
    except (ValueError, TypeError, KeyError):
        return None
    parts: list[dict[str, Any]] = []
    for p in r.parts:
        if p.kind == "text" and p.text:
            parts.append({"type": "text", "content": p.text})
        elif p.kind == "tool_call" and p.tool_call is not None:
            c = p.tool_call
            # (as the wire spelled them: the history an agent sends back spells them so)
            args = c.arguments_raw if c.arguments_raw is not None else c.arguments
            parts.append({"type": "tool_call", "id": c.id, "name": c.name, "arguments": args})
    if not parts and not r.text:
        return None
    _, out = from_parts(family, [{"role": "assistant", "parts": parts}])
    return {k: v for k, v in (out[-1] if out else {}).items() if k != "role"}


def plain(v: Any) -> Any:
    """An attribute written as a JSON string (MLflow's ``"\\"gpt-4o-mini\\""``): the string."""
    if isinstance(v, str) and v[:1] == '"':
        try:
            return bounds.loads(v)
        except orjson.JSONDecodeError:
            return v
    return v
