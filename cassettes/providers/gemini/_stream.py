"""Gemini's stream reassembly (WIRE.md §D.4): each SSE event (or each element of a JSON array
answer) is a full ``GenerateContentResponse``; the candidates' parts are joined across events
(text to text, a thought to a thought), function calls may arrive whole or as Vertex's
``partialArgs``, the last event carries the finish and the cumulative usage. The adapter is
:mod:`cassettes.providers.gemini`."""

from __future__ import annotations

import re
from itertools import pairwise
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
from .._parts import Pieces, StreamParts, grow, has_calls, settled
from .._values import as_int, as_str, error_from_body
from ._body import (
    JSON,
    camel,
    either_case,
    finish_class,
    part_of,
    snake,
    usage_from,
)
from ._enum_numbers import block_name, finish_name, named_ratings

__all__ = ["GenerateStream"]

# ---------------------------------------------------------------------------------------------
# Streams


def _set_path(root: JSON, path: str, value: Any, append: bool) -> None:
    """Set ``value`` at a JSON path like ``$.a.b[0].c`` inside ``root`` (Vertex ``partialArgs``)."""
    tokens: list[str | int] = []
    for name, idx in re.findall(r"\.([^.\[\]]+)|\[(\d+)\]", path.removeprefix("$")):
        tokens.append(int(idx) if idx else name)
    if not tokens:
        return
    node: Any = root
    for tok, nxt in pairwise(tokens):
        if not _addressable(node, tok):
            return
        if not isinstance(_at(node, tok), (dict, list)):
            node[tok] = [] if isinstance(nxt, int) else {}
        node = node[tok]
    last = tokens[-1]
    if _addressable(node, last):
        old = _at(node, last)
        node[last] = (
            old + value if append and isinstance(old, str) and isinstance(value, str) else value
        )


def _addressable(node: Any, tok: str | int) -> bool:
    """``node[tok]`` can be set: a list (padded with nulls up to ``tok``) or an object."""
    if isinstance(tok, int):
        if not isinstance(node, list):
            return False
        while len(node) <= tok:
            node.append(None)
        return True
    return isinstance(node, dict)


def _at(node: Any, tok: str | int) -> Any:
    return node[tok] if isinstance(tok, int) else node.get(tok)


def _partial_value(pa: JSON) -> tuple[bool, Any]:
    for key in ("stringValue", "numberValue", "boolValue"):
        v = either_case(pa, key)
        if v is not None:
            return True, v
    if either_case(pa, "nullValue") is not None:
        return True, None
    return False, None


def _event_payloads(data: str) -> list[Any]:
    """One event's JSON; a list (JSON-array framing, wrapped errors) yields its items."""
    value = bounds.loads(data)
    return value if isinstance(value, list) else [value]


class GenerateStream(StreamParts):
    """``GenerateContentResponse`` chunks (one, or a stream's) → one answer: candidate 0's wire
    parts, merged as the SDK merges them (WIRE.md §D.4), then read as a body's parts are."""

    def __init__(self, in_stream: bool = True) -> None:
        super().__init__(in_stream=in_stream)
        self.blocked: str | None = None
        #: Events that are not JSON, kept to find an error object spread over lines.
        self.not_json: list[str] = []
        #: The Vertex streamed call still receiving ``partialArgs`` (``willContinue: true``).
        self._open_call: JSON | None = None
        #: json paths whose last fragment said ``willContinue`` (the next fragment appends).
        self._continuing: set[str] = set()
        #: ``finishReason`` as it came: a name, or a proto number (``enum-encoding=int``), read
        #: when the answer is closed, once the whole answer says which API sent it.
        self.finish_value: Any = None

    def payloads(self, framed: Framed) -> list[tuple[str | None, Any]]:
        out: list[tuple[str | None, Any]] = []
        for ev in framed.events:
            data = ev.data.strip()
            if not data or data == "[DONE]":
                continue
            self.count()
            try:
                out.extend((None, p) for p in _event_payloads(data))
            except orjson.JSONDecodeError:
                self.not_json.append(data)
        return out

    def on(self, name: str | None, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        if "error" in chunk and not either_case(chunk, "candidates"):
            self.error = error_from_body(chunk, None, in_stream=self.in_stream)
            return
        self.first("id", either_case(chunk, "responseId"))
        self.first("model", either_case(chunk, "modelVersion"))
        if either_case(chunk, "usageMetadata") is not None:
            self.add_usage(usage_from(either_case(chunk, "usageMetadata")))
        for key in ("createTime", "modelStatus"):
            if either_case(chunk, key) is not None:
                self.details[snake(key)] = either_case(chunk, key)
        feedback = either_case(chunk, "promptFeedback")
        if isinstance(feedback, dict):
            self.details["prompt_feedback"] = feedback
            if either_case(feedback, "blockReason") is not None:
                self.blocked = block_name(either_case(feedback, "blockReason"))
        candidates = either_case(chunk, "candidates")
        for cand in candidates if isinstance(candidates, list) else []:
            if isinstance(cand, dict):
                self._candidate(cand)

    def _candidate(self, cand: JSON) -> None:
        idx = as_int(either_case(cand, "index")) or 0
        if idx != 0:
            self.details["candidates"] = max(self.details.get("candidates", 1), idx + 1)
            return
        parts = either_case(either_case(cand, "content"), "parts")
        for p in parts if isinstance(parts, list) else []:
            self._add(p)
        fr = either_case(cand, "finishReason")
        if fr is not None:
            self.finish_value = fr
            self.done = True
        extra = {
            camel(k): v
            for k, v in cand.items()
            if camel(k) not in ("content", "finishReason", "index")
        }
        if extra:
            self.details.setdefault("candidate", {}).update(extra)

    def _add(self, p: Any) -> None:
        if not isinstance(p, dict):
            self.append("wire", {"_raw": p})
            return
        fc = either_case(p, "functionCall")
        if isinstance(fc, dict):
            self._add_call(p, fc)
            return
        self._open_call = None
        if not self._add_text(p):
            self.append("wire", dict(p))

    def _add_text(self, p: JSON) -> bool:
        """A part of text only (a thought, a signature): joined to the text before it when they
        are alike. ``False`` when ``p`` is not one."""
        text = either_case(p, "text")
        sig = either_case(p, "thoughtSignature")
        if not all(camel(k) in ("text", "thought", "thoughtSignature") for k in p):
            return False
        if text is None and sig is not None:
            text = ""  # a signature-only part: protobuf-JSON may drop the empty text beside it
        if not isinstance(text, str):
            return False
        thought = either_case(p, "thought") is True
        last = self.last()
        prev = last.block if last is not None else None
        if prev is not None and _joins(prev, thought, sig):
            grow(prev, "text", text)
            if sig is not None:
                prev["thoughtSignature"] = sig
        elif text != "" or sig is not None:  # not the empty text that rides on the final chunk
            new: JSON = {"text": text}
            if thought:
                new["thought"] = True
            if sig is not None:
                new["thoughtSignature"] = sig
            self.append("wire", new)
        return True

    def _add_call(self, p: JSON, fc: JSON) -> None:
        name = either_case(fc, "name")
        cur = self._open_call
        if cur is not None and (name is None or name == cur["functionCall"].get("name")):
            call = cur["functionCall"]
            if either_case(fc, "id") is not None and call.get("id") is None:
                call["id"] = either_case(fc, "id")
            if isinstance(either_case(fc, "args"), dict):
                call.setdefault("args", {}).update(either_case(fc, "args"))
            sig = either_case(p, "thoughtSignature")
            if sig is not None:
                cur.setdefault("thoughtSignature", sig)
        else:
            call = {
                k: v
                for k, v in ((camel(k), v) for k, v in fc.items())
                if k not in ("partialArgs", "willContinue")
            }
            cur = {camel(k): v for k, v in p.items() if camel(k) != "functionCall"}
            cur["functionCall"] = call
            self.append("wire", cur)
            self._continuing = set()
        partial = either_case(fc, "partialArgs")
        if isinstance(partial, list):
            self._partial_args(call.setdefault("args", {}), partial)
        self._open_call = cur if either_case(fc, "willContinue") is True else None

    def _partial_args(self, args: JSON, partial: list[Any]) -> None:
        """Vertex's streamed arguments: values set at json paths, strings continued over
        fragments."""
        for pa in partial:
            if not isinstance(pa, dict):
                continue
            path = as_str(either_case(pa, "jsonPath"))
            has, value = _partial_value(pa)
            if path is None or not has:
                continue
            _set_path(args, path, value, append=path in self._continuing)
            if either_case(pa, "willContinue") is True:
                self._continuing.add(path)
            else:
                self._continuing.discard(path)

    def close(self) -> NormalisedResponse:
        if self.not_json:
            self.details["unparsed_events"] = len(self.not_json)
            # An error object spread over lines without the data: prefix (WIRE.md §D.6).
            bad = next((u for u in self.not_json if u.lstrip("[ \n").startswith('{"error"')), None)
            if bad is not None and self.error is None:
                self.error = ApiError(message=bad, in_stream=True, raw=bad)
        return self.finish(
            parts=self.parts(
                convert=lambda st: part_of(
                    st.block.get("_raw") if set(st.block) == {"_raw"} else settled(st.block)
                )
            )
        )

    def _vertex(self) -> bool:
        """Vertex AI sent it: only Vertex's answers carry ``createTime``. Asked only where the
        two APIs number an enum differently."""
        return "create_time" in self.details

    def classify(self, parts: list[Part]) -> FinishReason | None:
        if self.finish_value is not None:
            self.finish_raw = finish_name(self.finish_value, self._vertex())
        cand = self.details.get("candidate")
        if isinstance(cand, dict) and "safetyRatings" in cand:
            cand["safetyRatings"] = named_ratings(cand["safetyRatings"], self._vertex())
        finish = finish_class(self.finish_raw, has_calls(parts))
        if finish is None and self.blocked is not None:
            self.finish_raw = self.blocked
            finish = FinishReason.PROMPT_BLOCKED
        return finish

    def complete(self) -> bool:
        return (self.done or self.blocked is not None) and self.error is None


def _joins(prev: JSON, thought: bool, sig: Any) -> bool:
    """A text part continues the one before: both text, both thoughts or neither, not two signed."""
    return (
        isinstance(prev.get("text"), str | Pieces)
        and (prev.get("thought") is True) == thought
        and not (sig is not None and prev.get("thoughtSignature") is not None)
    )
