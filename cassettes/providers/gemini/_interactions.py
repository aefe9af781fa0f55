"""Gemini's Interactions API: ``POST /{version}/interactions`` (a model or agent call, JSON or
server-sent events with ``stream: true``), ``GET /{version}/interactions/{id}`` (a retrieve of
the same resource) and ``POST …/{id}/cancel``.

Shapes from the google-genai SDK's own types (``google.genai.interactions``, 3.x; the 1.x/2.x
``google/genai/_interactions/types``). The answer is an ``Interaction``: ``{"id", "model" |
"agent", "status", "steps": [...], "usage", "previous_interaction_id" …}``. ``status`` is
``completed``, ``requires_action`` (function calls for the client to run), ``incomplete`` (the
answer was cut off), ``failed``, ``cancelled``, ``budget_exceeded``, ``requires_continuation``
(decoding paused, resumable with its ``continuation_token``) or, not finished, ``in_progress`` /
``queued`` / ``idle``. A step is ``model_output`` (``content``: text, image, audio …),
``thought`` (``summary``, ``signature``), ``function_call`` (``id``, ``name``, ``arguments``),
``function_result`` (``call_id``, ``result``), ``user_input`` or a server-side tool's call or
result (``google_search_call`` …). The API's first version answered ``outputs`` (a list of
content: ``text``, ``thought``, ``function_call`` …) instead of steps, and took ``{"role",
"content"}`` turns as input; both are read.

Usage: ``total_input_tokens``, ``total_output_tokens`` (without thoughts, as in
``generateContent``), ``total_thought_tokens``, ``total_cached_tokens``,
``total_tool_use_tokens``, ``total_tokens``.

The stream: ``interaction.created`` (1.x ``interaction.start``) with the interaction so far,
``step.start`` / ``step.delta`` / ``step.stop`` (1.x ``content.start`` / ``content.delta`` /
``content.stop``) by ``index``, ``interaction.status_update``, and ``interaction.completed``
(1.x ``interaction.complete``) with the final status and usage but without the output, or
``error``. Without one of the last two the stream was cut.

``previous_interaction_id`` continues an interaction the server stored: the new ``input`` holds
only the new turn (the Responses API's ``previous_response_id``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ...models import (
    ApiError,
    FinishReason,
    NormalisedRequest,
    NormalisedResponse,
    Part,
)
from ...wire import Framed
from .._base import Chaining, Provider, inline_history
from .._parts import Slot, StreamParts
from .._profile import Profile
from .._values import as_int, as_obj, as_str, parse_arguments
from ._body import VERSION_RE
from ._interaction_body import (
    MEDIA,
    Item,
    interaction_response,
    item_parts,
    joins,
    messages_of,
    output_items,
    tools_of,
)

__all__ = ["GeminiInteractions"]

_STRUCTURAL = {
    "model",
    "agent",
    "input",
    "system_instruction",
    "tools",
    "stream",
    "previous_interaction_id",
}
_TERMINAL_EVENTS = ("interaction.completed", "interaction.complete")
_STARTS = ("interaction.created", "interaction.start")


def _route(url: SplitResult) -> tuple[str, str | None] | None:
    """(``create`` | ``item`` | ``cancel``, the interaction id) for an Interactions path: a
    ``v1*`` version segment somewhere before ``interactions`` (Gemini's ``/v1beta/…``, a gateway's
    prefix before it)."""
    segs = [s for s in url.path.split("/") if s]
    if "interactions" not in segs:
        return None
    i = len(segs) - 1 - segs[::-1].index("interactions")
    if not any(VERSION_RE.match(s) for s in segs[:i]):
        return None
    rest = segs[i + 1 :]
    if not rest:
        return "create", None
    if len(rest) == 1:
        return "item", rest[0]
    if len(rest) == 2 and rest[1] == "cancel":
        return "cancel", rest[0]
    return None


# --- the stream -------------------------------------------------------------------------------


class _Stream(StreamParts):
    """The SDK's accumulation of a stream: steps by index (a slot's block), their deltas joined."""

    payloads = StreamParts.dict_events

    def __init__(self) -> None:
        super().__init__()
        self.start: Item = {}
        self.end: Item | None = None
        self.status: str | None = None
        #: The wire's usage object (read with the rest of the interaction when it closes).
        self.wire_usage: Any = None

    def on(self, name: str | None, ev: Item) -> None:
        kind = as_str(ev.get("event_type")) or name
        idx = as_int(ev.get("index"))
        if kind in _STARTS:
            self.start = as_obj(ev.get("interaction"))
        elif kind in ("step.start", "content.start") and idx is not None:
            step = ev.get("step") if kind == "step.start" else ev.get("content")
            self.slot(idx, "step").block = dict(step) if isinstance(step, dict) else {}
        elif kind in ("step.delta", "content.delta") and idx is not None:
            self._delta(self.slot(idx, "step"), as_obj(ev.get("delta")))
            self.wire_usage = as_obj(ev.get("metadata")).get("total_usage") or self.wire_usage
        elif kind in ("step.stop", "content.stop"):
            self.wire_usage = ev.get("usage") or self.wire_usage
        elif kind == "interaction.status_update":
            self.status = as_str(ev.get("status")) or self.status
            self.wire_usage = ev.get("usage") or self.wire_usage
        elif kind in _TERMINAL_EVENTS:
            self.end = as_obj(ev.get("interaction"))
        elif kind == "error":
            err = as_obj(ev.get("error")) or ev
            self.error = ApiError(
                code=as_str(err.get("code")),
                message=as_str(err.get("message")),
                in_stream=True,
                raw=err,
            )

    def _delta(self, st: Slot, d: Item) -> None:
        step = st.block
        t = d.get("type")
        if t == "text":
            st.add_text(as_str(d.get("text")) or "")
            step.setdefault("type", "model_output")
        elif t == "arguments_delta":
            st.add_args(as_str(d.get("arguments")) or "")
        elif t == "thought_summary":
            c = as_obj(d.get("content"))
            step.setdefault("type", "thought")
            step.setdefault("summary", []).append(c)
        elif t == "thought_signature":
            step.setdefault("type", "thought")
            step["signature"] = d.get("signature")
        elif t == "function_call":  # 1.x: the whole call in one delta
            st.block = {**step, **d}
        elif t in MEDIA:
            if step.get("type") in (None, "model_output"):
                step["type"] = "model_output"
                step.setdefault("content", []).append(d)
            else:
                st.block = {**step, **d}
        elif isinstance(t, str) and (not step.get("type") or step.get("type") == t):
            st.block = {**step, **d}

    @staticmethod
    def _step_parts(st: Slot) -> list[Part]:
        step = dict(st.block)
        text = st.text or ""
        if text:
            if step.get("type") == "text":  # 1.x: a text content block
                step = {
                    "type": "model_output",
                    "content": [{"type": "text", "text": (as_str(step.get("text")) or "") + text}],
                }
            else:
                step["content"] = [
                    *[
                        c
                        for c in step.get("content") or []
                        if isinstance(c, dict) and c.get("type") != "text"
                    ],
                    {"type": "text", "text": text},
                ]
        if st.args is not None:
            raw = st.arguments or ""
            args, err = parse_arguments(raw)
            if err is not None:
                step["arguments"] = raw  # cut arguments: kept as the text that came
            elif not step.get("arguments"):
                step["arguments"] = args
        return item_parts(step)[1]

    def close(self) -> NormalisedResponse:
        end = self.end if self.end is not None else {}
        merged: Item = {**self.start, **{k: v for k, v in end.items() if v is not None}}
        if self.end is None:
            merged["status"] = self.status if self.status not in (None, "in_progress") else None
        if merged.get("usage") is None and self.wire_usage is not None:
            merged["usage"] = self.wire_usage
        order = sorted(i for i in self.slots if isinstance(i, int))  # every key is a step index
        parts = [p for idx in order for p in self._step_parts(self.slots[idx])]
        resp = interaction_response(merged, in_stream=True, parts=parts)
        resp.events = self.events
        if self.error is not None:
            resp.error = self.error
            resp.finish_reason = FinishReason.ERROR
            resp.complete = True
        elif self.end is None:
            resp.complete = False
            resp.notes.append("interaction stream without interaction.completed: cut")
        return resp


# --- the adapter ------------------------------------------------------------------------------


def _thread(request: Any, answer: Any) -> tuple[str | None, str | None, list[Any]]:
    """(previous_interaction_id, the answer's id, the turn's input items then the answer's
    steps)."""
    req = as_obj(request)
    prev = as_str(req.get("previous_interaction_id"))
    inp = req.get("input")
    if isinstance(inp, str):
        items: list[Any] = [{"type": "user_input", "content": [{"type": "text", "text": inp}]}]
    elif (
        isinstance(inp, list)
        and inp
        and all(isinstance(i, dict) and i.get("type") in MEDIA | {"text"} for i in inp)
    ):
        items = [{"type": "user_input", "content": inp}]
    elif isinstance(inp, list):
        items = list(inp)
    else:
        items = [{"type": "user_input", "content": [inp]}] if isinstance(inp, dict) else []
    r = as_obj(answer)
    if r.get("event_type") in _TERMINAL_EVENTS:
        r = as_obj(r.get("interaction"))
    if r.get("outputs") is not None and r.get("steps") is None:
        items.append({"role": "model", "content": r.get("outputs")})
    else:
        items.extend(output_items(r))
    return prev, as_str(r.get("id")) or None, items


_standalone = inline_history(_thread, "previous_interaction_id")


class GeminiInteractions(Provider):
    family = "gemini_interactions"
    history_keys = ("input",)
    profile = Profile(
        continuity=frozenset({"signature"}),  # a thought's
        price_provider="google",
        model_vendor="google",
        otel_provider="gcp.gemini",
        api_key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = _route(url)
        if route is None:
            return 0
        google = (url.hostname or "").lower().endswith("googleapis.com")
        segs = [s for s in url.path.split("/") if s]
        i = segs.index("interactions")
        if not google and not VERSION_RE.match(segs[i - 1] if i else ""):
            return 0  # elsewhere only as the SDK writes it, ``…/{version}/interactions``
        asked = (route[0], method.upper())
        if asked == ("create", "POST"):
            b = as_obj(body)
            return 4 if google else 3 if "input" in b and ("model" in b or "agent" in b) else 0
        if asked in (("item", "GET"), ("item", "DELETE"), ("cancel", "POST")):
            return 3 if google else 2
        return 0

    def operation(self, method: str, url: SplitResult) -> str:
        route = _route(url)
        kind = route[0] if route else ""
        if kind == "create":
            return "generate"
        if kind == "item":
            return "delete" if method.upper() == "DELETE" else "retrieve"
        return "cancel" if kind == "cancel" else "unknown"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        if isinstance(body, dict) and body.get("stream") is True:
            return True
        return "stream=true" in (url.query or "").lower()

    def chaining(self) -> Chaining:
        """``previous_interaction_id`` names an interaction the server stored; made
        self-contained, the request carries that interaction's steps in its ``input``."""
        return Chaining(_thread, _standalone)

    def joins(self, prev: Any, item: Any) -> bool:
        if isinstance(item, dict) and "role" in item and "type" not in item:
            return False
        return joins(item_parts(prev)[0], item_parts(item)[0])

    def item_path(self, body: Any, message_index: int, part_index: int | None = None) -> str | None:
        """Consecutive model-side steps are one message (as :func:`messages_of` has them)."""
        return self.merged_item_path(body, message_index, part_index, item_parts)

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: Item = as_obj(body)
        inp = b.get("input")
        system = b.get("system_instruction")
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or as_str(b.get("agent")),
            stream=b.get("stream") is True,
            system=[Part(kind="text", text=system)] if isinstance(system, str) and system else [],
            messages=messages_of(inp),
            tools=tools_of(b.get("tools")),
            tool_choice=as_obj(b.get("generation_config")).get("tool_choice"),
            params={k: v for k, v in b.items() if k not in _STRUCTURAL},
            previous_response_id=as_str(b.get("previous_interaction_id")),
            history_key="input" if isinstance(inp, list) else None,
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: Item = as_obj(body)
        if isinstance(b.get("error"), dict) and "status" not in b:
            return self.error_answer(b)
        return interaction_response(b)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if framed.kind == "json":
            return self.parse_response(framed.value)
        return _Stream().read(framed)
