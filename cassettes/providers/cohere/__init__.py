"""Cohere chat, v2 (``POST …/v2/chat``) and v1 (``POST …/v1/chat``), and Cohere's own bodies where
another host serves them (Bedrock InvokeModel with a ``cohere.command-r*`` model uses the v1 body).

Schemas: the ``cohere`` SDK's ``ChatResponse`` (v2), ``NonStreamedChatResponse`` (v1) and their
stream event types (``tests/cassettes/providers/test_cohere.py`` checks the corpus bodies and the
fixtures against them).

v2 is OpenAI-like: ``messages`` with ``role`` ``system``/``user``/``assistant``/``tool``,
``content`` a string or a list of ``{"type": "text"|"thinking"|"image_url"|"document"}`` blocks,
``tool_calls`` of ``{"id", "type": "function", "function": {"name", "arguments": "<json>"}}``,
tool results as ``role: tool`` with ``tool_call_id``. The reply is ``message.content`` plus
``message.tool_plan`` (the model's plan before calling tools, kept as a reasoning part with
``provider_details.field = "tool_plan"``) and ``message.tool_calls``. Streams are SSE events whose
``type`` is ``message-start``, ``content-start/-delta/-end``, ``tool-plan-delta``,
``tool-call-start/-delta/-end``, ``citation-*`` and ``message-end`` (finish and usage). v1 and
``/v1/generate`` are read in :mod:`cassettes.providers.cohere._v1`.

Usage: ``usage.billed_units`` (v2; ``meta.billed_units`` in v1) is what Cohere charges and is used
as input/output tokens; ``usage.tokens`` (the full token counts, including the system template)
and ``cached_tokens`` stay in ``usage.raw``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ...models import (
    ApiError,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolResult,
    ToolSpec,
)
from ...wire import Framed
from .._base import Provider
from .._parts import StreamParts
from .._profile import Profile
from .._replay import ReplayShapes
from .._values import (
    as_int,
    as_obj,
    as_str,
    error_from_body,
    finish_lookup,
    function_spec,
    json_events,
    media_part,
    text_of,
    tool_call_from_string,
    tool_choice_mode,
)
from ..completions import OpenAICompletions
from ._v1 import (
    FINISH,
    reassemble_v1,
    usage_from,
    v1_request,
    v1_response,
)

__all__ = ["CohereChat", "reassemble_v1", "v1_request", "v1_response"]

JSON = dict[str, Any]

_V2_STRUCTURAL = {"model", "messages", "tools", "stream", "tool_choice"}


def _version(url: SplitResult) -> str | None:
    """``v1`` / ``v2`` for the chat routes, ``generate`` for v1's ``/v1/generate``."""
    segs = [s for s in url.path.split("/") if s]
    if len(segs) >= 2 and segs[-1] == "chat" and segs[-2] in ("v1", "v2"):
        return segs[-2]
    if len(segs) >= 2 and segs[-1] == "generate" and segs[-2] == "v1":
        return "generate"
    return None


# -- v2 ----------------------------------------------------------------------------------------


def _v2_content(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(kind="text", text=content)] if content else []
    out: list[Part] = []
    for block in content if isinstance(content, list) else [content]:
        if not isinstance(block, dict):
            out.append(Part(kind="text", text=str(block)))
            continue
        t = block.get("type")
        if t == "text":
            out.append(Part(kind="text", text=as_str(block.get("text")) or ""))
        elif t == "thinking":
            out.append(Part(kind="reasoning", text=as_str(block.get("thinking"))))
        elif t in ("image_url", "image", "document"):
            out.append(media_part(block, "image" if t != "document" else "document"))
        else:
            out.append(Part(kind="other", provider_details={"block": block}))
    return out


def _v2_calls(calls: Any) -> list[Part]:
    out: list[Part] = []
    for tc in calls if isinstance(calls, list) else []:
        if isinstance(tc, dict):
            fn = as_obj(tc.get("function"))
            out.append(
                Part(
                    kind="tool_call",
                    tool_call=tool_call_from_string(
                        tc.get("id"), fn.get("name"), fn.get("arguments")
                    ),
                )
            )
    return out


def _plan(text: Any) -> list[Part]:
    return (
        [Part(kind="reasoning", text=text, provider_details={"field": "tool_plan"})]
        if isinstance(text, str) and text
        else []
    )


def _v2_message(m: Any) -> Message:
    if not isinstance(m, dict):
        return Message(role="unknown", parts=[Part(kind="other", provider_details={"block": m})])
    role = as_str(m.get("role")) or "unknown"
    if role == "tool":
        result = ToolResult(
            call_id=as_str(m.get("tool_call_id")), content=text_of(m.get("content"))
        )
        return Message(role="tool", parts=[Part(kind="tool_result", tool_result=result)])
    parts = (
        _plan(m.get("tool_plan")) + _v2_content(m.get("content")) + _v2_calls(m.get("tool_calls"))
    )
    return Message(role=role, parts=parts)


def _v2_tools(tools: Any) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in tools if isinstance(tools, list) else []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict):
            out.append(function_spec(fn))
    return out


def _v2_response(b: JSON) -> NormalisedResponse:
    msg = as_obj(b.get("message"))
    parts = _v2_message({**msg, "role": "assistant"}).parts
    raw = as_str(b.get("finish_reason"))
    has_calls = any(p.kind == "tool_call" for p in parts)
    details = {"citations": msg["citations"]} if msg.get("citations") else {}
    return NormalisedResponse(
        id=as_str(b.get("id")),
        parts=parts,
        finish_reason_raw=raw,
        finish_reason=finish_lookup(FINISH, raw, has_calls),
        usage=usage_from(b.get("usage")),
        complete=True,
        provider_details=details or None,
    )


class _V2Stream(StreamParts):
    """v2 stream events (``type``-tagged) → one response: the tool plan, the content blocks and
    the tool calls, each keyed by ``index``."""

    finishes = FINISH

    def __init__(self) -> None:
        super().__init__()
        self.plan: list[str] = []

    payloads = StreamParts.every_event

    def on(self, name: str | None, ev: Any) -> None:
        if not isinstance(ev, dict):
            return
        if ev.get("type") == "error" or ("message" in ev and "type" not in ev):
            self.error = error_from_body(ev, None, in_stream=True)
            return
        t = ev.get("type")
        delta = as_obj(ev.get("delta"))
        msg = as_obj(delta.get("message"))
        idx = as_int(ev.get("index")) or 0
        if t == "message-start":
            self.id = as_str(ev.get("id"))
        elif t in ("content-start", "content-delta"):
            self._content(idx, as_obj(msg.get("content")))
        elif t == "tool-plan-delta":
            if isinstance(msg.get("tool_plan"), str):
                self.plan.append(msg["tool_plan"])
        elif t in ("tool-call-start", "tool-call-delta"):
            self._call(idx, as_obj(msg.get("tool_calls")))
        elif t == "message-end":
            self._end(ev, delta)

    def _content(self, idx: int, content: JSON) -> None:
        kind = "reasoning" if content.get("type") == "thinking" or "thinking" in content else "text"
        st = self.slot((1, idx), kind)
        piece = content.get("thinking") if st.kind == "reasoning" else content.get("text")
        st.add_text(piece if isinstance(piece, str) else "")

    def _call(self, idx: int, tc: JSON) -> None:
        fn = as_obj(tc.get("function"))
        st = self.slot((2, idx), "tool_call")
        st.id = st.id or tc.get("id")
        st.name = st.name or fn.get("name")
        if isinstance(fn.get("arguments"), str):
            st.add_args(fn["arguments"])

    def _end(self, ev: JSON, delta: JSON) -> None:
        self.done = True
        self.finish_raw = as_str(delta.get("finish_reason"))
        self.usage = usage_from(delta.get("usage"))
        if delta.get("error"):
            self.error = ApiError(message=as_str(delta["error"]), in_stream=True, raw=ev)

    def close(self) -> NormalisedResponse:
        return self.finish(parts=_plan("".join(self.plan)) + self.parts(rank=lambda key, st: key))

    def complete(self) -> bool:
        return self.done


class CohereReplay(ReplayShapes):
    """How replay answers as Cohere: its error body is ``{"message": …}``."""

    def error(self, status: int, message: str, code: str) -> Any:
        return {"message": message}


class CohereChat(Provider):
    family = "cohere"
    history_keys = ("messages", "chat_history")
    profile = Profile(
        stream_end=(
            "v1: stream-end (is_finished with finish_reason); v2: message-end (its delta's "
            "finish_reason)"
        ),
        finishes=FINISH,
        price_provider="cohere",
        otel_provider="cohere",
        api_key_env=("CO_API_KEY", "COHERE_API_KEY"),
    )
    replay = CohereReplay()

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        v = _version(url)
        if method.upper() != "POST" or v is None:
            return 0
        if v == "generate":
            return (
                3
                if isinstance(body, dict) and "prompt" in body
                else (1 if "cohere" in url.netloc.lower() else 0)
            )
        shaped = isinstance(body, dict) and (
            ("messages" in body) if v == "v2" else ("message" in body or "chat_history" in body)
        )
        if shaped:
            return 3
        # Another service's /v1/chat is not Cohere's: only Cohere's own hosts are claimed unshaped.
        return 1 if "cohere" in url.netloc.lower() else 0

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        stream = b.get("stream") is True
        if _version(url) == "generate":  # a prompt and sampling parameters, no history
            req = OpenAICompletions().parse_request(b, url)
            req.family = self.family
            return req
        if _version(url) == "v1" or (
            "messages" not in b and ("message" in b or "chat_history" in b)
        ):
            return v1_request(b, self.family, None, stream)
        messages = [_v2_message(m) for m in b.get("messages") or []]
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")),
            stream=stream,
            system=[p for m in messages if m.role == "system" for p in m.parts],
            messages=messages,
            tools=_v2_tools(b.get("tools")),
            tool_choice=b.get("tool_choice"),
            # v2: REQUIRED or NONE; absent is auto
            tool_choice_mode=tool_choice_mode(b.get("tool_choice")),
            params={k: v for k, v in b.items() if k not in _V2_STRUCTURAL},
            history_key="messages",
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if "message" in b and isinstance(b["message"], str) and "text" not in b:
            return self.error_answer(b)
        if "text" in b or "response_id" in b or "generation_id" in b or "generations" in b:
            return v1_response(b)
        return _v2_response(b)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if framed.kind == "ndjson" or any(
            isinstance(ev, dict) and "event_type" in ev for _, ev in json_events(framed)
        ):
            return reassemble_v1(framed)
        return _V2Stream().read(framed)
