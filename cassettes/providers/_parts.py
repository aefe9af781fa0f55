"""One builder for a streamed answer, and the template every adapter's stream reader follows.

Learnt from pydantic-ai's parts manager: a part is found by the key the vendor gives it (a block
or choice index, an item or call id, or a name such as ``"text"``), started by its first delta and
grown by the next ones; the answer lists the parts in the order they started, or ranked by the
adapter. Text, reasoning and refusal grow by pieces; a tool call by its id, its name and the
fragments of its arguments; a part the wire describes block by block keeps the adapter's own
``block`` until the adapter turns it into a part.

An adapter subclasses :class:`StreamParts` and writes a small dispatcher of its events (:meth:`on`);
:meth:`read` is the template (decode each event, dispatch it, :meth:`close`), and :meth:`finish`
holds the closing rules every adapter shares: the finish class is the adapter's
(:meth:`classify`); without one, an error the stream reported makes it ``error``; the stream is
complete when its terminal event came and no error did (:meth:`complete`); the events are counted;
what the wire said beside the parts (``unparsed_events``, ``unknown_events`` …) is in
``provider_details``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import orjson

from .. import bounds
from ..models import ApiError, FinishReason, NormalisedResponse, Part, PartKind, Usage
from ..wire import Framed
from ._values import (
    as_str,
    compact_json,
    finish_lookup,
    json_events,
    merged_usage,
    text_parts,
    tool_call_from_string,
)

__all__ = ["Pieces", "Slot", "StreamParts", "TextStream", "grow", "settled"]

Key = Hashable


class Pieces(list[str]):
    """A text field of a wire block that grows by the stream's deltas: each piece appended in
    place, the whole joined once when the block is read (:func:`settled`). Joining as they come
    (``block[key] = block[key] + piece``) copies the text so far on every delta: a long answer's
    thousands of deltas cost the square of its length."""


def grow(block: dict[str, Any], key: str, piece: str) -> None:
    """Add ``piece`` to the text ``block[key]`` (a value there that is not text is read as
    :func:`~cassettes.providers._values.as_str` reads it, none as empty)."""
    got = block.get(key)
    if type(got) is Pieces:
        got.append(piece)
    else:
        block[key] = Pieces((as_str(got) or "", piece))


def settled(block: dict[str, Any]) -> dict[str, Any]:
    """``block`` with each field grown by :func:`grow` joined into its text (in place)."""
    for key, value in block.items():
        if type(value) is Pieces:
            block[key] = "".join(value)
    return block


@dataclass
class Slot:
    """One part being built from its deltas."""

    kind: str
    #: Text pieces (``None`` until the first one).
    texts: list[str] | None = None
    #: A tool call: the vendor's call id, its name and its argument fragments (``None`` until
    #: the first one).
    id: Any = None
    name: Any = None
    args: list[str] | None = None
    #: The adapter's own state of a part it turns into a :class:`Part` itself (a wire block).
    block: dict[str, Any] = field(default_factory=dict)
    #: A part that arrived whole.
    whole: Part | None = None
    #: The vendor said the part is whole (a block's stop event).
    closed: bool = False

    @property
    def text(self) -> str | None:
        return None if self.texts is None else "".join(self.texts)

    @property
    def arguments(self) -> str | None:
        return None if self.args is None else "".join(self.args)

    def add_text(self, piece: str) -> None:
        if self.texts is None:
            self.texts = []
        self.texts.append(piece)

    def add_args(self, piece: str) -> None:
        if self.args is None:
            self.args = []
        self.args.append(piece)

    def part(self) -> Part:
        if self.whole is not None:
            return self.whole
        if self.kind == "tool_call":
            return Part(
                kind="tool_call",
                tool_call=tool_call_from_string(self.id, self.name, self.arguments or ""),
            )
        return Part(kind=cast(PartKind, self.kind), text=self.text)


class StreamParts:
    """The parts of one answer by key, what the stream said about it, and the closing rules."""

    #: Raw finish value → class, the family's profile's (:func:`~cassettes.providers._values.
    #: finish_lookup`; none: :meth:`classify` says nothing unless a family overrides it).
    finishes: ClassVar[dict[str, FinishReason]] = {}

    def __init__(self, *, in_stream: bool = True) -> None:
        self.slots: dict[Key, Slot] = {}
        self.id: str | None = None
        self.model: str | None = None
        self.role = "assistant"
        self.finish_raw: str | None = None
        self.usage: Usage | None = None
        #: The last error the stream reported (an error event, an exception frame).
        self.error: ApiError | None = None
        #: The terminal event was seen.
        self.done = False
        #: The stream ended inside an event (bytes after the last whole one): the connection cut,
        #: evidence of truncation whatever else came.
        self.cut = False
        #: Events read (``None`` for a body that was not streamed).
        self.events: int | None = 0 if in_stream else None
        self.in_stream = in_stream
        self.details: dict[str, Any] = {}

    # -- the template ---------------------------------------------------------------------------

    def read(self, framed: Framed) -> NormalisedResponse:
        """The answer a stream makes: each event decoded, dispatched, then closed."""
        self.cut = bool(framed.tail.strip())
        for name, data in self.payloads(framed):
            self.on(name, data)
        return self.close()

    def fold(self, chunks: Iterable[Any]) -> NormalisedResponse:
        """The answer a body made of stream chunks makes (a streamed method answered in one
        piece)."""
        for chunk in chunks:
            self.on(None, chunk)
        return self.close()

    def payloads(self, framed: Framed) -> Iterable[tuple[str | None, Any]]:
        """Each event's (name, JSON payload), counted. Keep-alives are skipped, the ``[DONE]``
        sentinel goes to :meth:`sentinel`, a payload that is not JSON is counted unparsed."""
        for ev in framed.events:
            data = ev.data.strip()
            if not data:
                continue
            if data == "[DONE]":
                self.sentinel()
                continue
            self.events = (self.events or 0) + 1
            try:
                value = bounds.loads(data)
            except orjson.JSONDecodeError:
                self.unparsed()
                continue
            yield ev.event, value

    def every_event(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        """:func:`json_events`, each counted (the sentinel and payloads that are not JSON too)."""
        for item in json_events(framed):
            self.count()
            yield item

    def dict_events(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        """:func:`json_events` that are JSON objects, each counted (the rest is passed over)."""
        for name, obj in json_events(framed):
            if isinstance(obj, dict):
                self.count()
                yield name, obj

    def sentinel(self) -> None:
        """``data: [DONE]``: the end of the stream."""
        self.done = True

    def on(self, name: str | None, data: Any) -> None:
        """The adapter's dispatcher: one decoded event."""
        raise NotImplementedError

    def close(self) -> NormalisedResponse:
        return self.finish()

    # -- what the stream says beside the parts ----------------------------------------------------

    def count(self) -> None:
        self.events = (self.events or 0) + 1

    def unparsed(self) -> None:
        self.details["unparsed_events"] = self.details.get("unparsed_events", 0) + 1

    def unknown(self, name: Any, *, repeat: bool = False) -> None:
        """An event of a type this reader does not know (each type once, or each time)."""
        seen = self.details.setdefault("unknown_events", [])
        if repeat or name not in seen:
            seen.append(name)

    def add_usage(self, usage: Usage | None) -> None:
        """Usage reported by one more chunk (:func:`~cassettes.providers._values.merged_usage`)."""
        self.usage = merged_usage(self.usage, usage)

    def first(self, attr: str, value: Any) -> None:
        """Set ``id`` or ``model`` from the first event that carries a non-empty one."""
        if getattr(self, attr) is None:
            setattr(self, attr, as_str(value) or None)

    # -- the parts --------------------------------------------------------------------------------

    def slot(self, key: Key, kind: str) -> Slot:
        """The part at ``key``, started as ``kind`` when it is new."""
        st = self.slots.get(key)
        if st is None:
            st = self.slots[key] = Slot(kind)
        return st

    def joined(self, key: Key) -> str:
        """The text of the part at ``key`` (empty when there is none)."""
        st = self.slots.get(key)
        return (st.text or "") if st is not None else ""

    def text(self, key: Key, piece: str, kind: str = "text") -> Slot:
        """Add a text piece to the ``kind`` part at ``key`` (written out, not through
        :meth:`slot` and :meth:`Slot.add_text`: it runs once per delta, and the two calls tripled
        its cost, 0.34 to 1.0 µs a delta)."""
        st = self.slots.get(key)
        if st is None:
            st = self.slots[key] = Slot(kind)
        if st.texts is None:
            st.texts = [piece]
        else:
            st.texts.append(piece)
        return st

    def call(self, key: Key, *, id: Any = None, name: Any = None, args: Any = None) -> Slot:
        """Grow the tool call at ``key``: a later id replaces an earlier one, a name repeated whole
        is kept once and name fragments are joined, argument fragments are joined (an object as
        JSON)."""
        st = self.slot(key, "tool_call")
        if id:
            st.id = id
        if isinstance(name, str):
            st.name = st.name + name if st.name and st.name != name else name
        if args is not None:
            st.add_args(args if isinstance(args, str) else compact_json(args))
        return st

    def append(self, kind: str, block: dict[str, Any] | None = None) -> Slot:
        """A new part with no key of its own (the wire just adds it after the others)."""
        st = self.slots[object()] = Slot(kind, block=block if block is not None else {})
        return st

    def last(self) -> Slot | None:
        return self.slots[next(reversed(self.slots))] if self.slots else None

    def add(self, part: Part) -> None:
        """A part that arrived whole."""
        self.append(part.kind).whole = part

    def parts(
        self,
        rank: Callable[[Key, Slot], Any] | None = None,
        convert: Callable[[Slot], Part] | None = None,
    ) -> list[Part]:
        """The parts in the order they started (stably sorted by ``rank`` when given); ``convert``
        turns the adapter's own slots into parts."""
        items: Iterator[tuple[Key, Slot]] | list[tuple[Key, Slot]] = iter(self.slots.items())
        if rank is not None:
            items = sorted(self.slots.items(), key=lambda kv: rank(*kv))
        return [convert(st) if convert is not None else st.part() for _, st in items]

    # -- the answer ------------------------------------------------------------------------------

    def classify(self, parts: list[Part]) -> FinishReason | None:
        """The finish class of ``finish_raw`` in :attr:`finishes` (a completed turn that carries
        calls is a tool call)."""
        return (
            finish_lookup(self.finishes, self.finish_raw, has_calls(parts))
            if self.finishes
            else None
        )

    def complete(self) -> bool:
        return self.done and self.error is None

    def finish(
        self, response: NormalisedResponse | None = None, parts: list[Part] | None = None
    ) -> NormalisedResponse:
        """The answer: ``response`` (a snapshot the adapter parsed) or one made of the parts, closed
        by the shared rules."""
        if response is None:
            parts = self.parts() if parts is None else parts
            finish = self.classify(parts)  # first: a class may come with its own raw value
            response = NormalisedResponse(
                id=self.id,
                model=self.model,
                role=self.role,
                parts=parts,
                finish_reason_raw=self.finish_raw,
                finish_reason=finish,
                usage=self.usage,
            )
        if self.error is not None:
            response.error = self.error
        if response.finish_reason is None and self.error is not None:
            response.finish_reason = FinishReason.ERROR
        response.complete = self.complete()
        response.events = self.events
        if self.details:
            response.provider_details = {**(response.provider_details or {}), **self.details}
        return response


class TextStream(StreamParts):
    """A stream whose answer is one text (a completion): its pieces joined under the key
    ``"text"``, its raw finish looked up in :attr:`finishes`."""

    def close(self) -> NormalisedResponse:
        return self.finish(parts=text_parts(self.joined("text")))


def has_calls(parts: list[Part]) -> bool:
    """The answer carries a call of the client's own functions."""
    return any(
        p.kind == "tool_call" and p.tool_call is not None and p.tool_call.kind == "function"
        for p in parts
    )
