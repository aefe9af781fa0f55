"""The Converse stream's reassembly: AWS event-stream frames named by ``:event-type``
(``messageStart``, ``contentBlockStart/Delta/Stop``, ``messageStop``, ``metadata``) into the
answer. Complete when ``messageStop`` *and* the trailing ``metadata`` event (the only carrier of
usage) were both seen. Nova's InvokeModel streams carry the same events
(:mod:`cassettes.providers.bedrock._invoke`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from ... import bounds
from ...models import (
    ApiError,
    FinishReason,
    NormalisedResponse,
    Part,
)
from ...wire import Framed
from .._parts import StreamParts, grow, has_calls, settled
from .._values import as_int, as_obj, as_str, tool_call_from_string
from ._body import (
    Block,
    converse_finish,
    part_of,
    usage_from,
    with_masks,
)

__all__ = ["CONVERSE_EVENTS", "ConverseStream"]


class ConverseStream(StreamParts):
    """Converse stream events (named by ``:event-type``) → the answer; blocks keyed by
    ``contentBlockIndex``, a block without one continues the last."""

    def __init__(self) -> None:
        super().__init__()
        self.have_metadata = False

    def payloads(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        for ev in framed.events:
            self.count()
            headers = ev.headers or {}
            try:
                d = bounds.loads(ev.data) if ev.data.strip() else {}
            except orjson.JSONDecodeError:
                d = {"raw": ev.data}
            if not isinstance(d, dict):
                d = {"raw": d}
            if headers.get(":message-type") in ("exception", "error"):
                # Modeled exceptions (throttlingException, validationException …) or an error frame.
                etype = headers.get(":exception-type") or headers.get(":error-code") or ev.event
                msg = d.get("message") or d.get("Message") or headers.get(":error-message")
                self.error = ApiError(
                    type=as_str(etype), message=as_str(msg), in_stream=True, raw=d
                )
                continue
            yield ev.event or headers.get(":event-type"), d

    def on(self, name: str | None, d: Any) -> None:
        handler = CONVERSE_EVENTS.get(name or "")
        if handler is not None:
            handler(self, d)
        elif name != "contentBlockStop":
            self.unknown(name, repeat=True)

    def block(self, index: Any, kind: str) -> Block:
        """The block at ``index`` (the last one when there is none), started as ``kind``."""
        i = as_int(index)
        st = self.slot(i if i is not None else next(reversed(self.slots), 0), "block")
        st.block.setdefault("kind", kind)
        return st.block

    def message_start(self, d: Block) -> None:
        self.role = as_str(d.get("role")) or self.role

    def block_start(self, d: Block) -> None:
        start = as_obj(d.get("start"))
        if isinstance(start.get("toolUse"), dict):
            st = self.block(d.get("contentBlockIndex"), "toolUse")
            st["start"] = start["toolUse"]
            st.setdefault("input", "")
        elif isinstance(start.get("toolResult"), dict):
            self.block(d.get("contentBlockIndex"), "toolResult")["start"] = start["toolResult"]
        else:
            self.block(d.get("contentBlockIndex"), "other")["start"] = start

    def block_delta(self, d: Block) -> None:
        delta = as_obj(d.get("delta"))
        idx = d.get("contentBlockIndex")
        if isinstance(delta.get("text"), str):
            grow(self.block(idx, "text"), "text", delta["text"])
        elif isinstance(delta.get("citation"), dict):
            # A cited passage: its text comes in the block's text deltas, before or after this.
            self.block(idx, "text").setdefault("citations", []).append(delta["citation"])
        elif isinstance(delta.get("toolUse"), dict):
            piece = delta["toolUse"].get("input")
            grow(
                self.block(idx, "toolUse"),
                "input",
                piece if isinstance(piece, str) else orjson.dumps(piece).decode(),
            )
        elif isinstance(delta.get("reasoningContent"), dict):
            _reasoning_delta(self.block(idx, "reasoning"), delta["reasoningContent"])
        elif "toolResult" in delta:
            content = delta["toolResult"]
            self.block(idx, "toolResult").setdefault("content", []).extend(
                content if isinstance(content, list) else [content]
            )
        else:
            self.block(idx, "other").setdefault("deltas", []).append(delta)

    def message_stop(self, d: Block) -> None:
        self.done = True
        self.finish_raw = as_str(d.get("stopReason"))
        if d.get("additionalModelResponseFields") is not None:
            self.details["additionalModelResponseFields"] = d["additionalModelResponseFields"]

    def metadata(self, d: Block) -> None:
        self.have_metadata = True
        self.usage = usage_from(d.get("usage"))
        self.details.update(
            {
                k: d[k]
                for k in ("metrics", "trace", "performanceConfig", "serviceTier")
                if d.get(k) is not None
            }
        )

    def close(self) -> NormalisedResponse:
        if self.done and not self.have_metadata:
            self.details["metadata_missing"] = True
        self.details = with_masks(self.details)
        resp = self.finish(parts=self.parts(convert=lambda st: _stream_part(settled(st.block))))
        if self.done and not self.have_metadata:
            resp.unread.append("usage: the stream ended after messageStop, before its metadata")
        return resp

    def classify(self, parts: list[Part]) -> FinishReason | None:
        return converse_finish(self.finish_raw, self.details.get("trace"), has_calls(parts))

    def complete(self) -> bool:
        """``messageStop`` (its stop reason) ends the answer whole; the ``metadata`` event after it
        carries only usage and metrics, said unread when it is missing. A frame cut short is the
        connection cut: truncated."""
        return self.done and not self.cut


CONVERSE_EVENTS: dict[str, Callable[[ConverseStream, Block], None]] = {
    "messageStart": ConverseStream.message_start,
    "contentBlockStart": ConverseStream.block_start,
    "contentBlockDelta": ConverseStream.block_delta,
    "messageStop": ConverseStream.message_stop,
    "metadata": ConverseStream.metadata,
}


def _reasoning_delta(st: Block, rc: Block) -> None:
    if isinstance(rc.get("text"), str):
        grow(st, "text", rc["text"])
    if rc.get("signature") is not None:
        st["signature"] = rc["signature"]
    if rc.get("redactedContent") is not None:
        grow(st, "redacted", str(rc["redactedContent"]))


def _stream_part(st: Block) -> Part:
    kind = st["kind"]
    if kind == "text":
        cites = st.get("citations")
        return Part(
            kind="text",
            text=st.get("text", ""),
            provider_details={"citations": cites} if cites else None,
        )
    if kind == "toolUse":
        start = st.get("start") or {}
        call_kind = "server" if start.get("type") == "server_tool_use" else "function"
        return Part(
            kind="tool_call",
            tool_call=tool_call_from_string(
                start.get("toolUseId"), start.get("name"), st.get("input", ""), kind=call_kind
            ),
        )
    if kind == "reasoning":
        details: dict[str, Any] = {k: st[k] for k in ("signature", "redacted") if k in st}
        return Part(kind="reasoning", text=st.get("text"), provider_details=details or None)
    if kind == "toolResult":
        start = st.get("start") or {}
        return part_of({"toolResult": {**start, "content": st.get("content", [])}})
    # a block of a kind looptap does not know, named by its start's or first delta's key (said
    # unread, issue 102)
    block = {k: v for k, v in st.items() if k != "kind"}
    firsts = [*as_obj(st.get("start")), *(k for d in st.get("deltas", [])[:1] for k in d)]
    name = next((k for k in firsts if isinstance(k, str)), None)
    return Part(kind="other", provider_details={"block": block, **({"type": name} if name else {})})
