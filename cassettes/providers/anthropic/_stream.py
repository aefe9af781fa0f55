"""The Messages stream's reassembly (WIRE.md §C.4): ``message_start``, the content blocks'
``content_block_start/delta/stop`` keyed by ``index``, ``message_delta`` (finish and usage),
``message_stop``; also the AWS event-stream frames Bedrock wraps the same events in. The adapter
is :mod:`cassettes.providers.anthropic`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from ... import bounds
from ...models import (
    NormalisedResponse,
)
from ...wire import Framed
from .._parts import Slot, StreamParts, grow, settled
from .._values import as_int, as_str
from ._body import (
    JSONObject,
    anthropic_error,
    bedrock_payload,
    response_of,
)

__all__ = ["MessagesStream"]

_IMPLIED = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "tool_use"}


class MessagesStream(StreamParts):
    """Messages events → the message snapshot (blocks keyed by ``index``), read as a body is."""

    def __init__(self, bedrock: bool) -> None:
        super().__init__()
        self.bedrock = bedrock
        self.snapshot: JSONObject = {}
        self.usage_raw: JSONObject | None = None

    def payloads(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        for ev in framed.events:
            if self.bedrock:
                name, data = bedrock_payload(ev)
            else:
                if not ev.data.strip():
                    continue
                try:
                    data = bounds.loads(ev.data)
                except orjson.JSONDecodeError:
                    data = None
                name = ev.event
            if not isinstance(data, dict):
                self.unparsed()
                continue
            self.count()
            yield name, data

    def on(self, name: str | None, data: Any) -> None:
        kind = as_str(data.get("type")) or name
        handler = _MESSAGES_EVENTS.get(kind or "")
        if handler is not None:
            handler(self, data)
        elif kind != "ping":
            self.unknown(kind)

    def message_start(self, data: JSONObject) -> None:
        msg = data.get("message")
        if isinstance(msg, dict):
            self.snapshot = {k: v for k, v in msg.items() if k != "content"}
            self.usage_raw = (
                dict(msg["usage"]) if isinstance(msg.get("usage"), dict) else self.usage_raw
            )
            for i, b in enumerate(msg.get("content") or []):
                if isinstance(b, dict):
                    self.slots[i] = Slot("block", block=dict(b))

    def block_start(self, data: JSONObject) -> None:
        idx = as_int(data.get("index"))
        cb = data.get("content_block")
        if idx is not None and isinstance(cb, dict):
            self.slots[idx] = Slot("block", block=dict(cb))

    def block_delta(self, data: JSONObject) -> None:
        idx = as_int(data.get("index"))
        delta = data.get("delta")
        if idx is None or not isinstance(delta, dict):
            return
        st = self.slots.get(idx)
        if st is None:
            # A delta without its content_block_start (a lossy gateway): start the block it implies.
            st = self.slots[idx] = Slot(
                "block", block={"type": _IMPLIED.get(str(delta.get("type")), "unknown")}
            )
            self.details.setdefault("deltas_without_start", []).append(idx)
        _grow_block(st, delta)

    def block_stop(self, data: JSONObject) -> None:
        idx = as_int(data.get("index"))
        if idx is not None and idx in self.slots:
            self.slots[idx].closed = True

    def message_delta(self, data: JSONObject) -> None:
        delta = data.get("delta")
        if isinstance(delta, dict):
            for k, v in delta.items():
                if k != "container" or v is not None:
                    self.snapshot[k] = v
        for k, v in data.items():
            if k not in ("type", "delta", "usage") and v is not None:
                self.snapshot[k] = v
        u = data.get("usage")
        if isinstance(u, dict):
            # Cumulative totals: overwrite. Absent optional counts keep the start value.
            self.usage_raw = dict(self.usage_raw or {})
            self.usage_raw.update(
                {k: v for k, v in u.items() if v is not None or k == "output_tokens"}
            )

    def message_stop(self, data: JSONObject) -> None:
        self.done = True
        extra = {k: v for k, v in data.items() if k != "type"}
        if extra:  # Bedrock: amazon-bedrock-invocationMetrics
            self.details.update(extra)

    def error_event(self, data: JSONObject) -> None:
        self.error = anthropic_error(data, None, in_stream=True)

    def close(self) -> NormalisedResponse:
        # block indices (all of the keys)
        order = sorted(i for i in self.slots if isinstance(i, int))
        blocks = [self.slots[i] for i in order]
        self.snapshot["content"] = [settled(st.block) for st in blocks]
        if self.usage_raw is not None:
            self.snapshot["usage"] = self.usage_raw
        bufs = {pos: st.arguments for pos, st in enumerate(blocks) if st.arguments is not None}
        resp = response_of(self.snapshot, bufs)
        unfinished = [i for i, st in zip(order, blocks, strict=True) if not st.closed]
        if unfinished and not self.done:
            self.details["unfinished_blocks"] = unfinished
        if order != list(range(len(order))):
            self.details["block_indices"] = order
        return self.finish(resp)


_MESSAGES_EVENTS: dict[str, Callable[[MessagesStream, JSONObject], None]] = {
    "message_start": MessagesStream.message_start,
    "content_block_start": MessagesStream.block_start,
    "content_block_delta": MessagesStream.block_delta,
    "content_block_stop": MessagesStream.block_stop,
    "message_delta": MessagesStream.message_delta,
    "message_stop": MessagesStream.message_stop,
    "error": MessagesStream.error_event,
}


def _grow_block(st: Slot, delta: JSONObject) -> None:
    """Apply one ``content_block_delta`` to its block."""
    b = st.block
    dtype = delta.get("type")
    if dtype == "text_delta":
        grow(b, "text", as_str(delta.get("text")) or "")
    elif dtype == "input_json_delta":
        st.add_args(as_str(delta.get("partial_json")) or "")
    elif dtype == "thinking_delta":
        grow(b, "thinking", as_str(delta.get("thinking")) or "")
    elif dtype == "signature_delta":
        b["signature"] = delta.get("signature")
    elif dtype == "citations_delta":
        # In place (the list is the block's, or a parsed event's nobody keeps): a copy on each
        # delta would cost the square of the citations' count.
        cites = b.get("citations")
        if not isinstance(cites, list):
            cites = b["citations"] = []
        cites.append(delta.get("citation"))
    else:
        # compaction_delta and future delta types carry the block's fields whole: set them.
        b.update((k, v) for k, v in delta.items() if k != "type")
