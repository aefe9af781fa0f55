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

import re
from typing import Any
from urllib.parse import SplitResult

from cassettes import bounds
from cassettes.models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolResult,
    ToolSpec,
    Usage,
)
from cassettes.providers._base import (
    Chaining,
    Profile,
    Provider,
    as_int,
    as_obj,
    as_str,
    compact_json,
    function_spec,
    inline_history,
    json_events,
    media_part,
    parse_arguments,
    text_of,
    tool_call_from_object,
)
from cassettes.wire.framing import Framed

__all__ = ["GeminiInteractions"]

Item = dict[str, Any]

_VERSION = re.compile(r"^v1(?:alpha|beta\d*)?$")
_STRUCTURAL = {
    "model",
    "agent",
    "input",
    "system_instruction",
    "tools",
    "stream",
    "previous_interaction_id",
}
_MEDIA = {"image", "audio", "video", "document"}
#: Steps (and 1.x content types) the model produces; the rest of a history is the client's.
_STATUS: dict[str, FinishReason | None] = {
    "completed": FinishReason.COMPLETE,
    "requires_action": FinishReason.TOOL_CALL,
    "incomplete": FinishReason.TRUNCATED_LENGTH,
    "failed": FinishReason.ERROR,
    "cancelled": FinishReason.CANCELLED,
    "requires_continuation": FinishReason.PAUSED,
    "budget_exceeded": FinishReason.OTHER,
    "in_progress": None,
    "queued": None,
    "idle": None,
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
    if not any(_VERSION.match(s) for s in segs[:i]):
        return None
    rest = segs[i + 1 :]
    if not rest:
        return "create", None
    if len(rest) == 1:
        return "item", rest[0]
    if len(rest) == 2 and rest[1] == "cancel":
        return "cancel", rest[0]
    return None


def _google_host(url: SplitResult) -> bool:
    return (url.hostname or "").lower().endswith("googleapis.com")


# --- usage and finish -------------------------------------------------------------------------


def usage_from(u: Any) -> Usage | None:
    """The interaction's ``usage`` in the inclusive convention: output counts thoughts (reported
    apart, as ``generateContent``'s ``thoughtsTokenCount``), input counts tool-use prompts."""
    if not isinstance(u, dict):
        return None
    inp, tool_use = as_int(u.get("total_input_tokens")), as_int(u.get("total_tool_use_tokens"))
    out, thoughts = as_int(u.get("total_output_tokens")), as_int(u.get("total_thought_tokens"))
    return Usage(
        input_tokens=None if inp is None and tool_use is None else (inp or 0) + (tool_use or 0),
        output_tokens=None if out is None and thoughts is None else (out or 0) + (thoughts or 0),
        cache_read_tokens=as_int(u.get("total_cached_tokens")),
        reasoning_tokens=thoughts,
        total_tokens=as_int(u.get("total_tokens")),
        raw=u,
    )


def _finish(status: str | None, has_calls: bool) -> tuple[FinishReason | None, bool | None]:
    """(finish class, complete) of a status: a not-finished one (``in_progress`` …) neither."""
    if status is None:
        return None, None
    if status not in _STATUS:
        return (FinishReason.UNKNOWN if status == "" else FinishReason.OTHER), True
    cls = _STATUS[status]
    if cls is FinishReason.COMPLETE and has_calls:
        cls = FinishReason.TOOL_CALL
    return cls, (True if cls is not None else None)


# --- steps and content ------------------------------------------------------------------------


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part(kind="text", text=content)]
    parts: list[Part] = []
    for c in (
        content if isinstance(content, list) else [content] if isinstance(content, dict) else []
    ):
        parts.extend(_item_parts(c)[1])
    return parts


def _thought_part(item: Item) -> Part:
    summary = item.get("summary")
    text = (
        "".join(as_str(s.get("text")) or "" for s in summary if isinstance(s, dict))
        if isinstance(summary, list)
        else ""
    )
    sig = item.get("signature")
    return Part(
        kind="reasoning",
        text=text or None,
        provider_details={"signature": sig} if isinstance(sig, str) and sig else None,
    )


def _result_part(item: Item) -> Part:
    result = item.get("result")
    content = (
        result
        if isinstance(result, str)
        else text_of(result)
        if isinstance(result, list)
        else compact_json(result)
    )
    return Part(
        kind="tool_result",
        tool_result=ToolResult(
            call_id=as_str(item.get("call_id")),
            name=as_str(item.get("name")),
            named=True,
            content=content,
            is_error=item.get("is_error") if isinstance(item.get("is_error"), bool) else None,
        ),
    )


def _item_parts(item: Any) -> tuple[str, list[Part]]:
    """One step, 1.x turn or content block → (the role it speaks in, its parts): ``assistant``
    for what the model produced, ``tool`` for a function's result, ``user`` for the rest."""
    if not isinstance(item, dict):
        return (
            ("user", [Part(kind="text", text=item)])
            if isinstance(item, str)
            else ("user", [Part(kind="other", provider_details={"block": item})])
        )
    t = item.get("type")
    if t is None and "role" in item:
        return _turn_parts(item)
    return _step_parts(t, item)


def _turn_parts(item: Item) -> tuple[str, list[Part]]:
    """A 1.x turn (``role`` and ``content``): a user turn of function results only is the tool's."""
    role = "assistant" if item.get("role") == "model" else as_str(item.get("role")) or "user"
    parts = _content_parts(item.get("content"))
    if role == "user" and parts and all(p.kind == "tool_result" for p in parts):
        role = "tool"
    return role, parts


def _step_parts(t: Any, item: Item) -> tuple[str, list[Part]]:
    """A step or content block of type ``t``."""
    if t == "user_input":
        return "user", _content_parts(item.get("content"))
    if t == "model_output":
        return "assistant", _content_parts(item.get("content"))
    if t == "text":
        return "user", [Part(kind="text", text=as_str(item.get("text")) or "")]
    if t == "thought":
        return "assistant", [_thought_part(item)]
    if t == "function_call":
        call = tool_call_from_object(item.get("id"), item.get("name"), item.get("arguments"))
        return "assistant", [Part(kind="tool_call", tool_call=call)]
    if t == "function_result":
        return "tool", [_result_part(item)]
    if t in _MEDIA:
        return "user", [
            media_part(
                {k: v for k, v in item.items() if k != "data"}, as_str(item.get("mime_type"))
            )
        ]
    # a server-side tool's call or result (google_search_call, code_execution_result …): ran at the
    # API
    return "assistant", [Part(kind="other", provider_details={"block": item})]


def _joins(last_role: str, role: str) -> bool:
    """Consecutive model-side steps (thought, function calls, output) are one assistant turn, and
    a user's content blocks one user message; each function result is a message of its own."""
    return role == last_role and role in ("assistant", "user")


def _messages(inp: Any) -> list[Message]:
    if inp is None:
        return []
    if isinstance(inp, str):
        return [Message(role="user", parts=[Part(kind="text", text=inp)])]
    out: list[Message] = []
    for item in (inp if isinstance(inp, list) else [inp])[: bounds.MAX_LIST]:
        role, parts = _item_parts(item)
        if (
            out
            and _joins(out[-1].role, role)
            and not (isinstance(item, dict) and "role" in item and "type" not in item)
        ):
            out[-1].parts.extend(parts)
        else:
            out.append(Message(role=role, parts=parts))
    return out


def _tools(tools: Any) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "function" and isinstance(t.get("name"), str):
            out.append(function_spec(t))
        elif isinstance(t.get("type"), str):
            out.append(ToolSpec(name=t["type"], kind="server"))
    return out


def _output_items(r: Item) -> list[Any]:
    """The model's part of an interaction: its ``steps`` after the last ``user_input`` (a
    retrieve with ``include_input`` carries the input's steps too), or the 1.x ``outputs``."""
    steps = r.get("steps")
    if isinstance(steps, list):
        last_user = max(
            (
                i
                for i, s in enumerate(steps)
                if isinstance(s, dict) and s.get("type") in ("user_input", "function_result")
            ),
            default=-1,
        )
        return steps[last_user + 1 :]
    outputs = r.get("outputs")
    return outputs if isinstance(outputs, list) else []


def _interaction_error(
    r: Item, status: str | None, cls: FinishReason | None, in_stream: bool
) -> ApiError | None:
    """The error of an interaction that failed or is not finished: its last step's error, else the
    last of its ``errors``."""
    errors = [e for e in r.get("errors") or [] if isinstance(e, dict)]
    step_errors = [
        as_obj(s.get("error"))
        for s in r.get("steps") or []
        if isinstance(s, dict) and isinstance(s.get("error"), dict)
    ]
    err = (step_errors or errors or [None])[-1]
    if isinstance(err, dict) and (status == "failed" or cls is None):
        return ApiError(
            code=as_str(err.get("code")),
            message=as_str(err.get("message")),
            in_stream=in_stream,
            raw=err,
        )
    return None


def _interaction(
    r: Item, *, in_stream: bool = False, parts: list[Part] | None = None
) -> NormalisedResponse:
    if parts is None:
        parts = []
        for item in _output_items(r):
            parts.extend(_item_parts(item)[1])
    has_calls = any(p.tool_call is not None for p in parts)
    status = as_str(r.get("status"))
    cls, complete = _finish(status, has_calls)
    error = _interaction_error(r, status, cls, in_stream)
    details = {
        k: r[k]
        for k in (
            "agent",
            "previous_interaction_id",
            "continuation_token",
            "service_tier",
            "errors",
        )
        if r.get(k) is not None
    }
    resp = NormalisedResponse(
        id=as_str(r.get("id")) or None,
        model=as_str(r.get("model")) or as_str(r.get("agent")),
        parts=parts,
        finish_reason_raw=status,
        finish_reason=cls,
        usage=usage_from(r.get("usage")),
        error=error,
        complete=complete,
        provider_details=details or None,
    )
    if status is not None and cls is None:
        resp.notes.append(
            f"interaction {status}: not finished; the answer "
            "so far (a later retrieve holds the rest)"
        )
    elif cls in (FinishReason.OTHER, FinishReason.UNKNOWN):
        resp.notes.append(f"interaction status {status!r} is not one the SDK knows; kept raw")
    return resp


# --- the stream -------------------------------------------------------------------------------


class _Stream:
    """The SDK's accumulation of a stream: steps by index, their deltas joined."""

    def __init__(self) -> None:
        self.steps: dict[int, Item] = {}
        self.text: dict[int, list[str]] = {}
        self.args: dict[int, list[str]] = {}
        self.start: Item = {}
        self.end: Item | None = None
        self.status: str | None = None
        self.usage: Any = None
        self.error: Item | None = None
        self.events = 0

    def feed(self, name: str | None, ev: Item) -> None:
        self.events += 1
        kind = as_str(ev.get("event_type")) or name
        idx = as_int(ev.get("index"))
        if kind in _STARTS:
            self.start = as_obj(ev.get("interaction"))
        elif kind in ("step.start", "content.start") and idx is not None:
            step = ev.get("step") if kind == "step.start" else ev.get("content")
            self.steps[idx] = dict(step) if isinstance(step, dict) else {}
        elif kind in ("step.delta", "content.delta") and idx is not None:
            self._delta(idx, as_obj(ev.get("delta")))
            self.usage = as_obj(ev.get("metadata")).get("total_usage") or self.usage
        elif kind in ("step.stop", "content.stop"):
            self.usage = ev.get("usage") or self.usage
        elif kind == "interaction.status_update":
            self.status = as_str(ev.get("status")) or self.status
            self.usage = ev.get("usage") or self.usage
        elif kind in _TERMINAL_EVENTS:
            self.end = as_obj(ev.get("interaction"))
        elif kind == "error":
            self.error = as_obj(ev.get("error")) or ev

    def _delta(self, idx: int, d: Item) -> None:
        step = self.steps.setdefault(idx, {})
        t = d.get("type")
        if t == "text":
            self.text.setdefault(idx, []).append(as_str(d.get("text")) or "")
            step.setdefault("type", "model_output")
        elif t == "arguments_delta":
            self.args.setdefault(idx, []).append(as_str(d.get("arguments")) or "")
        elif t == "thought_summary":
            c = as_obj(d.get("content"))
            step.setdefault("type", "thought")
            step.setdefault("summary", []).append(c)
        elif t == "thought_signature":
            step.setdefault("type", "thought")
            step["signature"] = d.get("signature")
        elif t == "function_call":  # 1.x: the whole call in one delta
            self.steps[idx] = {**step, **d}
        elif t in _MEDIA:
            if step.get("type") in (None, "model_output"):
                step["type"] = "model_output"
                step.setdefault("content", []).append(d)
            else:
                self.steps[idx] = {**step, **d}
        elif isinstance(t, str):
            self.steps[idx] = (
                {**step, **d} if not step.get("type") or step.get("type") == t else step
            )

    def parts(self) -> list[Part]:
        parts: list[Part] = []
        for idx in sorted(self.steps):
            step = dict(self.steps[idx])
            text = "".join(self.text.get(idx, []))
            if text:
                if step.get("type") == "text":  # 1.x: a text content block
                    step = {
                        "type": "model_output",
                        "content": [
                            {"type": "text", "text": (as_str(step.get("text")) or "") + text}
                        ],
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
            if idx in self.args:
                raw = "".join(self.args[idx])
                args, err = parse_arguments(raw)
                if (
                    err is None
                    and isinstance(step.get("arguments"), dict)
                    and not step["arguments"]
                ):
                    step["arguments"] = args
                elif err is None and not step.get("arguments"):
                    step["arguments"] = args
                elif err is not None:
                    step["arguments"] = raw  # cut arguments: kept as the text that came
            parts.extend(_item_parts(step)[1])
        return parts

    def response(self) -> NormalisedResponse:
        end = self.end if self.end is not None else {}
        merged: Item = {**self.start, **{k: v for k, v in end.items() if v is not None}}
        if self.end is None:
            merged["status"] = self.status if self.status not in (None, "in_progress") else None
        if merged.get("usage") is None and self.usage is not None:
            merged["usage"] = self.usage
        resp = _interaction(merged, in_stream=True, parts=self.parts())
        resp.events = self.events
        if self.error is not None:
            resp.error = ApiError(
                code=as_str(self.error.get("code")),
                message=as_str(self.error.get("message")),
                in_stream=True,
                raw=self.error,
            )
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
        and all(isinstance(i, dict) and i.get("type") in _MEDIA | {"text"} for i in inp)
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
        items.extend(_output_items(r))
    return prev, as_str(r.get("id")) or None, items


_standalone = inline_history(_thread, "previous_interaction_id")


class GeminiInteractions(Provider):
    family = "gemini_interactions"
    history_keys = ("input",)
    profile = Profile(
        price_provider="google",
        model_vendor="google",
        otel_provider="gcp.gemini",
        api_key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = _route(url)
        if route is None:
            return 0
        google = _google_host(url)
        segs = [s for s in url.path.split("/") if s]
        i = segs.index("interactions")
        if not google and not _VERSION.match(segs[i - 1] if i else ""):
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
        return _joins(_item_parts(prev)[0], _item_parts(item)[0])

    def item_path(self, body: Any, message_index: int, part_index: int | None = None) -> str | None:
        """Consecutive model-side steps are one message: walk the items as :func:`_messages`
        does."""
        inp = body.get("input") if isinstance(body, dict) else None
        if not isinstance(inp, list):
            return None
        msg, last, seen = -1, "", 0
        for i, item in enumerate(inp[: bounds.MAX_LIST]):
            role, parts = _item_parts(item)
            if not (msg >= 0 and self.joins(inp[i - 1], item) and _joins(last, role)):
                msg, seen, last = msg + 1, 0, role
            if msg == message_index:
                if part_index is None or seen + len(parts) > part_index:
                    return f"input[{i}]"
                seen += len(parts)
            elif msg > message_index:
                break
        return None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: Item = as_obj(body)
        inp = b.get("input")
        system = b.get("system_instruction")
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or as_str(b.get("agent")),
            stream=b.get("stream") is True,
            system=[Part(kind="text", text=system)] if isinstance(system, str) and system else [],
            messages=_messages(inp),
            tools=_tools(b.get("tools")),
            tool_choice=as_obj(b.get("generation_config")).get("tool_choice"),
            params={k: v for k, v in b.items() if k not in _STRUCTURAL},
            previous_response_id=as_str(b.get("previous_interaction_id")),
            history_key="input" if isinstance(inp, list) else None,
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: Item = as_obj(body)
        if isinstance(b.get("error"), dict) and "status" not in b:
            return self.error_answer(b)
        return _interaction(b)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if framed.kind == "json":
            return self.parse_response(framed.value)
        stream = _Stream()
        for name, ev in json_events(framed):
            if isinstance(ev, dict):
                stream.feed(name, ev)
        return stream.response()
