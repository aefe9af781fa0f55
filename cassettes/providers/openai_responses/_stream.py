"""The Responses API's stream reassembly (WIRE.md §B.4): the SDK's ``ResponseStreamState``
accumulation, lenient for the other servers that speak it. The adapter
(:mod:`cassettes.providers.openai_responses`) reads the response objects; this module folds the
events into the terminal one, rebuilding its output from the item events when it has none.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ...models import ApiError, FinishReason, NormalisedResponse
from .._parts import Slot, StreamParts, grow, settled
from .._values import as_int, as_str, error_from_body

__all__ = ["ResponsesStream"]

Item = dict[str, Any]

_TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
_LIFECYCLE = {"response.created", "response.in_progress", "response.queued"}


class ResponsesStream(StreamParts):
    """Responses events → the terminal response, its output rebuilt from the item events (keyed
    by ``output_index``) when it has none; a cut stream is read from its last snapshot."""

    def __init__(self, response: Callable[..., NormalisedResponse]) -> None:
        super().__init__()
        #: The adapter's reading of a response object.
        self.response = response
        self.snapshot: Item | None = None
        self.terminal: Item | None = None

    def sentinel(self) -> None:
        self.details["done_sentinel"] = True  # OpenRouter ends Responses streams like Chat ones

    def on(self, name: str | None, d: Any) -> None:
        if not isinstance(d, dict):
            return
        etype = as_str(d.get("type")) or name or ""
        if etype in _LIFECYCLE and isinstance(d.get("response"), dict):
            self.snapshot = d["response"]
        elif etype in _TERMINAL and isinstance(d.get("response"), dict):
            self.terminal = d["response"]
        elif etype == "error":
            self.error = (
                error_from_body(d, None, in_stream=True)
                if isinstance(d.get("error"), dict)
                else ApiError(
                    code=as_str(d.get("code")),
                    message=as_str(d.get("message")),
                    in_stream=True,
                    raw=d,
                )
            )
        else:
            self._item_event(etype, d)

    def _item_event(self, etype: str, d: Item) -> None:
        """Apply one item/content event to the accumulated output items (by ``output_index``)."""
        idx: Any = as_int(d.get("output_index"))
        if idx is None and isinstance(d.get("item_id"), str):
            idx = next(
                (i for i, st in self.slots.items() if st.block.get("id") == d["item_id"]), None
            )
        if etype in ("response.output_item.added", "response.output_item.done"):
            if isinstance(d.get("item"), dict):
                self.slots[idx if idx is not None else len(self.slots)] = Slot(
                    "item", block=copy.deepcopy(d["item"])
                )
            return
        grow = _ITEM_EVENTS.get(etype)
        if idx is not None and idx in self.slots and grow is not None:
            grow(self.slots[idx].block, d)

    def close(self) -> NormalisedResponse:
        items = [
            _settled(self.slots[i].block)
            for i in sorted(i for i in self.slots if isinstance(i, int))
        ]
        if self.terminal is not None:
            resp = dict(self.terminal)
            if resp.get("output") is None or (resp.get("output") == [] and items):
                resp["output"] = items
                self.details["output_from_events"] = True
            return self.finish(self.response(resp, in_stream=True))
        resp = {**(self.snapshot or {}), "output": items, "usage": None}
        out = self.response(resp, in_stream=True)
        if out.finish_reason not in (None, FinishReason.ERROR):
            out.finish_reason = None  # a snapshot status is not how the stream ended
        return self.finish(out)

    def complete(self) -> bool:
        return self.terminal is not None


def _content_index(d: Item) -> int:
    return as_int(d.get("content_index")) or 0


def _summary_index(d: Item) -> int:
    return as_int(d.get("summary_index")) or 0


def _append(slot: Item, key: str, d: Item) -> None:
    grow(slot, key, as_str(d.get("delta")) or "")


def _settled(item: Item) -> Item:
    """The item with its grown texts joined: its own (arguments, input) and its content's and
    summary's parts' (where :func:`_append` grows them)."""
    for key in ("content", "summary"):
        parts = item.get(key)
        if isinstance(parts, list):
            for part in parts:
                if isinstance(part, dict):
                    settled(part)
    return settled(item)


def _content_part(item: Item, d: Item) -> None:
    if not isinstance(d.get("part"), dict):
        return
    content = item.setdefault("content", [])
    if not isinstance(content, list):
        return
    ci = _content_index(d)
    while len(content) <= ci:
        content.append({})
    content[ci] = copy.deepcopy(d["part"])


def _text_done(kind: str) -> Callable[[Item, Item], None]:
    """``response.<kind>.done``: the whole text (``refusal`` for a refusal) replaces the pieces."""
    key = "refusal" if kind == "refusal" else "text"

    def done(item: Item, d: Item) -> None:
        if isinstance(d.get(key), str):
            _slot(item, "content", _content_index(d), kind)[key] = d[key]

    return done


def _annotation(item: Item, d: Item) -> None:
    if d.get("annotation") is not None:
        _slot(item, "content", _content_index(d), "output_text").setdefault(
            "annotations", []
        ).append(d["annotation"])


def _arguments_done(item: Item, d: Item) -> None:
    if isinstance(d.get("arguments"), str):
        item["arguments"] = d["arguments"]
    if isinstance(d.get("name"), str) and not item.get("name"):
        item["name"] = d["name"]


def _input_done(item: Item, d: Item) -> None:
    if isinstance(d.get("input"), str):
        item["input"] = d["input"]


def _summary_part(item: Item, d: Item) -> None:
    si = _summary_index(d)
    if isinstance(d.get("part"), dict):
        _slot(item, "summary", si, "summary_text").update(copy.deepcopy(d["part"]))


def _summary_done(item: Item, d: Item) -> None:
    if isinstance(d.get("text"), str):
        _slot(item, "summary", _summary_index(d), "summary_text")["text"] = d["text"]


#: Item and content events → what they do to the item they name.
_ITEM_EVENTS: dict[str, Callable[[Item, Item], None]] = {
    "response.content_part.added": _content_part,
    "response.content_part.done": _content_part,
    "response.output_text.delta": lambda item, d: _append(
        _slot(item, "content", _content_index(d), "output_text"), "text", d
    ),
    "response.reasoning_text.delta": lambda item, d: _append(
        _slot(item, "content", _content_index(d), "reasoning_text"), "text", d
    ),
    "response.refusal.delta": lambda item, d: _append(
        _slot(item, "content", _content_index(d), "refusal"), "refusal", d
    ),
    "response.output_text.done": _text_done("output_text"),
    "response.reasoning_text.done": _text_done("reasoning_text"),
    "response.refusal.done": _text_done("refusal"),
    "response.output_text.annotation.added": _annotation,
    "response.function_call_arguments.delta": lambda item, d: _append(item, "arguments", d),
    "response.function_call_arguments.done": _arguments_done,
    "response.custom_tool_call_input.delta": lambda item, d: _append(item, "input", d),
    "response.custom_tool_call_input.done": _input_done,
    "response.reasoning_summary_part.added": _summary_part,
    "response.reasoning_summary_part.done": _summary_part,
    "response.reasoning_summary_text.delta": lambda item, d: _append(
        _slot(item, "summary", _summary_index(d), "summary_text"), "text", d
    ),
    "response.reasoning_summary_text.done": _summary_done,
}


def _slot(item: Item, key: str, index: int, default_type: str) -> Item:
    """``item[key][index]``, created (with ``type``) when a delta arrives before its part."""
    seq = item.get(key)
    if not isinstance(seq, list):
        seq = item[key] = []
    while len(seq) <= index:
        seq.append({"type": default_type})
    if not isinstance(seq[index], dict):
        seq[index] = {"type": default_type}
    slot: Item = seq[index]
    return slot
