"""Gemini Live
(``wss://…/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent``), read
from its WebSocket turns.

The client opens with ``setup`` (model, system instruction, tools, generation config), then sends
``clientContent`` (turns of content, ``turnComplete``), ``realtimeInput`` (audio, video, text as it
comes) and ``toolResponse`` (function results). The server answers with ``serverContent``
(``modelTurn`` parts, ``generationComplete``, ``turnComplete``, ``interrupted``, transcriptions),
``toolCall`` (function calls the client must run) and ``usageMetadata``. A turn opens with a
``clientContent`` or ``toolResponse`` message and closes with ``turnComplete`` or a ``toolCall``;
the client messages before it (``setup``, ``realtimeInput``) are gathered into its request
envelope (``cassettes.recording.websocket``). Audio and video are stored by size and hash. Live has
no response ids: the recorder numbers the turns of a connection to thread them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ...models import (
    FinishReason,
    Message,
    NormalisedResponse,
    Part,
    ToolResult,
)
from ...wire import Framed
from .._base import WsProvider, WsRequest, WsTurns, audio_ref
from .._parts import StreamParts
from .._profile import Profile
from .._values import as_str, compact_json, error_from_body, tool_call_from_object
from ._body import either_case, message_of, parts_of, tools_of, usage_from

__all__ = ["GeminiLive"]

Item = dict[str, Any]


def _has(msg: Any, key: str) -> bool:
    return isinstance(msg, dict) and either_case(msg, key) is not None


def _closes(msg: Any) -> bool:
    if _has(msg, "toolCall"):
        return True
    content = either_case(msg, "serverContent") if isinstance(msg, dict) else None
    return isinstance(content, dict) and bool(either_case(content, "turnComplete"))


def _scrub(msg: Any) -> Any:
    """``realtimeInput`` media chunks by size and hash (``audio``/``video``/``mediaChunks``
    data)."""
    rt = either_case(msg, "realtimeInput") if isinstance(msg, dict) else None
    if not isinstance(rt, dict):
        return None
    out = dict(rt)
    changed = False
    for key in ("audio", "video"):
        blob = out.get(key)
        if isinstance(blob, dict) and isinstance(blob.get("data"), str):
            out[key] = {**blob, "data": audio_ref(blob["data"])}
            changed = True
    chunks = out.get("mediaChunks") or out.get("media_chunks")
    if isinstance(chunks, list):
        out["mediaChunks" if "mediaChunks" in out else "media_chunks"] = [
            {**c, "data": audio_ref(c["data"])}
            if isinstance(c, dict) and isinstance(c.get("data"), str)
            else c
            for c in chunks
        ]
        changed = True
    if not changed:
        return None
    key = "realtimeInput" if "realtimeInput" in msg else "realtime_input"
    return {**msg, key: out}


_TURNS = WsTurns(
    opens=lambda m: _has(m, "clientContent") or _has(m, "toolResponse"),
    closes=_closes,
    gathers=lambda m: True,  # setup and realtime input belong to the next turn's request
    response_id=None,  # Live has none: the recorder numbers the turns
    scrub=_scrub,
)


class _LiveRequest(WsRequest):
    """A turn's gathered client messages folded into one request: ``setup`` (model, system
    instruction, tools, generation config), ``clientContent`` turns, ``realtimeInput`` text and
    ``toolResponse`` function responses."""

    def take(self, ev: Item) -> None:
        setup = either_case(ev, "setup")
        if isinstance(setup, dict):
            self.setup(setup)
        content = either_case(ev, "clientContent")
        if isinstance(content, dict):
            self.messages.extend(message_of(turn) for turn in either_case(content, "turns") or [])
        rt = either_case(ev, "realtimeInput")
        if isinstance(rt, dict) and isinstance(either_case(rt, "text"), str):
            self.messages.append(
                Message(role="user", parts=[Part(kind="text", text=either_case(rt, "text"))])
            )
        resp = either_case(ev, "toolResponse")
        if isinstance(resp, dict):
            self.messages.append(
                Message(
                    role="user",
                    parts=[
                        _function_response(fr)
                        for fr in either_case(resp, "functionResponses") or []
                        if isinstance(fr, dict)
                    ],
                )
            )

    def setup(self, setup: Item) -> None:
        self.model = as_str(either_case(setup, "model")) or self.model
        si = either_case(setup, "systemInstruction")
        if si is not None:
            self.system = parts_of(si)
        self.tools = tools_of(either_case(setup, "tools")) or self.tools
        gen = either_case(setup, "generationConfig")
        if isinstance(gen, dict):
            self.params["generationConfig"] = gen


class GeminiLive(WsProvider):
    family = "gemini_live"
    profile = Profile(
        price_provider="google",
        otel_provider="gcp.gemini",
        api_key_env=("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    )

    turns = _TURNS
    gathered = _LiveRequest

    def at(self, url: SplitResult) -> bool:
        return url.path.rstrip("/").endswith(
            ("BidiGenerateContent", "BidiGenerateContentConstrained")
        )

    def session_model(self, named: str | None, url: SplitResult) -> str | None:
        return named.removeprefix("models/") if named is not None else None

    def parse_response(self, body: Any) -> NormalisedResponse:
        return self.error_answer(body)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _LiveTurn().read(framed)


def _function_response(fr: Item) -> Part:
    out = either_case(fr, "response")
    return Part(
        kind="tool_result",
        tool_result=ToolResult(
            call_id=as_str(either_case(fr, "id")),
            name=as_str(either_case(fr, "name")),
            named=True,
            content=out if isinstance(out, str) else compact_json(out),
        ),
    )


class _LiveTurn(StreamParts):
    """A Live API turn's server messages → the answer: model turn parts (adjacent text joined),
    tool calls, and how the turn ended (complete, interrupted, or a call)."""

    def __init__(self) -> None:
        super().__init__()
        self.finish_class: FinishReason | None = None

    payloads = StreamParts.dict_events

    def on(self, name: str | None, obj: Any) -> None:
        content = either_case(obj, "serverContent")
        if isinstance(content, dict):
            self._content(content)
        call = either_case(obj, "toolCall")
        if isinstance(call, dict):
            for fc in either_case(call, "functionCalls") or []:
                if isinstance(fc, dict):
                    self.add(
                        Part(
                            kind="tool_call",
                            tool_call=tool_call_from_object(
                                either_case(fc, "id"),
                                either_case(fc, "name"),
                                either_case(fc, "args"),
                            ),
                        )
                    )
            self.finish_class, self.finish_raw = FinishReason.TOOL_CALL, "toolCall"
        if either_case(obj, "usageMetadata") is not None:
            self.add_usage(usage_from(either_case(obj, "usageMetadata")))
        if "error" in obj:
            self.error = error_from_body(obj, None, in_stream=True)

    def _content(self, content: dict[str, Any]) -> None:
        turn = either_case(content, "modelTurn")
        if isinstance(turn, dict):
            for p in parts_of(turn):
                last = self.last()
                if (
                    p.kind == "text"
                    and last is not None
                    and last.kind == "text"
                    and p.text is not None
                ):
                    last.whole = Part(kind="text", text=(last.part().text or "") + p.text)
                else:
                    self.add(p)
        if either_case(content, "interrupted"):
            self.finish_class, self.finish_raw = FinishReason.CANCELLED, "interrupted"
        elif either_case(content, "turnComplete"):
            self.finish_class, self.finish_raw = (
                self.finish_class or FinishReason.COMPLETE,
                self.finish_raw or "turnComplete",
            )

    def close(self) -> NormalisedResponse:
        # A turn cut without an end is not classed an error here (as a Live session reports it).
        return NormalisedResponse(
            parts=self.parts(),
            finish_reason=self.finish_class,
            finish_reason_raw=self.finish_raw,
            usage=self.usage,
            complete=self.finish_class is not None,
            events=self.events,
            error=self.error,
        )
