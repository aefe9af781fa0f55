"""OpenAI Realtime (``wss://api.openai.com/v1/realtime?model=…``), read from its WebSocket turns.

A Realtime session keeps the conversation on the server: the client adds items
(``conversation.item.create``: user messages, function-call outputs), sets the session
(``session.update``: instructions, tools) and asks for an answer (``response.create``); the server
streams ``response.*`` events and ends each answer with ``response.done``, which carries the whole
response (output items, status, usage). The recorder gathers a turn's client messages into one
request envelope (``{"type": "looptap.ws_turn", "previous_response_id", "events": [...]}``, see
``cassettes.recording.websocket``) and the server's events into its stream. Audio is stored by size
and hash (``{"looptap_audio": {"bytes", "sha256"}}``); transcripts and text are read.

The request holds only what the turn added (the server keeps the rest), threaded to the
previous turn of the connection by ``previous_response_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, parse_qs

from ..models import (
    ApiError,
    Message,
    NormalisedResponse,
    Part,
    ToolResult,
    ToolSpec,
)
from ..wire import Framed
from ._base import WsProvider, WsRequest, WsTurns, audio_ref
from ._parts import Slot, StreamParts
from ._profile import Profile
from ._values import (
    as_int,
    as_obj,
    as_str,
    compact_json,
    error_from_body,
    function_spec,
    tool_call_from_string,
)
from .openai_responses import finish_of, usage_from

__all__ = ["OpenAIRealtime"]

Item = dict[str, Any]

#: Server events whose base64 ``delta`` is audio, and client events whose ``audio`` is.
_AUDIO_DELTAS = frozenset({"response.output_audio.delta", "response.audio.delta"})
_AUDIO_INPUTS = frozenset({"input_audio_buffer.append"})


def _scrub(msg: Any) -> Any:
    if not isinstance(msg, dict):
        return None
    kind = msg.get("type")
    if kind in _AUDIO_DELTAS and isinstance(msg.get("delta"), str):
        return {**msg, "delta": audio_ref(msg["delta"])}
    if kind in _AUDIO_INPUTS and isinstance(msg.get("audio"), str):
        return {**msg, "audio": audio_ref(msg["audio"])}
    return None


def _response_id(msg: Any) -> str | None:
    resp = msg.get("response") if isinstance(msg, dict) else None
    return as_str(resp.get("id")) if isinstance(resp, dict) else None


_TURNS = WsTurns(
    opens=lambda m: isinstance(m, dict) and m.get("type") == "response.create",
    closes=lambda m: isinstance(m, dict) and m.get("type") == "response.done",
    gathers=lambda m: True,  # every other client message belongs to the next answer's request
    response_id=_response_id,
    scrub=_scrub,
)


def _content_parts(content: Any) -> list[Part]:
    parts: list[Part] = []
    for c in content if isinstance(content, list) else []:
        if not isinstance(c, dict):
            continue
        kind = c.get("type")
        text = c.get("text") if isinstance(c.get("text"), str) else c.get("transcript")
        if isinstance(text, str) and text:
            parts.append(Part(kind="text", text=text))
        elif kind in ("input_audio", "output_audio", "audio"):
            parts.append(
                Part(
                    kind="media",
                    media_type="audio",
                    provider_details={"audio": c.get("audio")} if c.get("audio") else None,
                )
            )
    return parts


def _item_message(item: Item) -> Message | None:
    kind = item.get("type")
    if kind == "message":
        return Message(
            role=as_str(item.get("role")) or "user", parts=_content_parts(item.get("content"))
        )
    if kind == "function_call_output":
        out = item.get("output")
        return Message(
            role="tool",
            parts=[
                Part(
                    kind="tool_result",
                    tool_result=ToolResult(
                        call_id=as_str(item.get("call_id")),
                        content=out if isinstance(out, str) else compact_json(out),
                    ),
                )
            ],
        )
    if kind == "function_call":
        call = tool_call_from_string(item.get("call_id"), item.get("name"), item.get("arguments"))
        return Message(role="assistant", parts=[Part(kind="tool_call", tool_call=call)])
    return None


def _tools(tools: Any) -> list[ToolSpec]:
    out = []
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, dict) and t.get("type", "function") == "function":
            out.append(function_spec(t))
        elif isinstance(t, dict):
            out.append(
                ToolSpec(
                    name=as_str(t.get("name") or t.get("server_label")) or str(t.get("type")),
                    kind=str(t.get("type")),
                )
            )
    return out


def _response(resp: Item, events: int | None, complete: bool) -> NormalisedResponse:
    parts: list[Part] = []
    for item in resp.get("output") or []:  # the answer's messages and calls, read as items are
        if isinstance(item, dict) and item.get("type") in ("message", "function_call"):
            parts.extend(m.parts if (m := _item_message(item)) is not None else [])
    details = as_obj(resp.get("status_details"))
    status, reason = as_str(resp.get("status")), as_str(details.get("reason"))
    # the Responses API's statuses and reasons (WIRE.md §G.1)
    raw, cls = finish_of(status, reason, any(p.kind == "tool_call" for p in parts))
    err = details.get("error")
    return NormalisedResponse(
        id=as_str(resp.get("id")),
        model=None,
        parts=parts,
        finish_reason_raw=raw,
        finish_reason=cls,
        usage=usage_from(resp.get("usage")),
        complete=complete,
        events=events,
        error=error_from_body({"error": err}, None, in_stream=True)
        if isinstance(err, dict)
        else None,
    )


class _SessionRequest(WsRequest):
    """A turn's gathered client events folded into one request: the session's settings
    (``session.update``), the items added (``conversation.item.create``) and the response's own
    instructions and tools (``response.create``), later ones winning."""

    def take(self, ev: Item) -> None:
        kind = ev.get("type")
        if kind == "session.update" and isinstance(ev.get("session"), dict):
            sess = ev["session"]
            self.settings(sess)
            self.model = as_str(sess.get("model")) or self.model
            self.params.update(
                {k: v for k, v in sess.items() if k not in ("instructions", "tools", "model")}
            )
        elif kind == "conversation.item.create" and isinstance(ev.get("item"), dict):
            msg = _item_message(ev["item"])
            if msg is not None:
                self.messages.append(msg)
        elif kind == "response.create" and isinstance(ev.get("response"), dict):
            self.settings(ev["response"])

    def settings(self, d: Item) -> None:
        """Instructions and tools, as a session or a response sets them."""
        if isinstance(d.get("instructions"), str):
            self.system = [Part(kind="text", text=d["instructions"])]
        if "tools" in d:
            self.tools = _tools(d.get("tools"))


class OpenAIRealtime(WsProvider):
    family = "openai_realtime"
    profile = Profile(price_provider="openai", otel_provider="openai")

    turns = _TURNS
    gathered = _SessionRequest

    def at(self, url: SplitResult) -> bool:
        return url.path.rstrip("/").rsplit("/", 1)[-1] == "realtime"

    def model_from_url(self, url: SplitResult) -> str | None:
        return parse_qs(url.query).get("model", [None])[-1]

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: Item = as_obj(body)
        if b.get("type") == "error" or ("error" in b and "response" not in b):
            return self.error_answer(b)
        inner = b.get("response")
        return _response(inner if isinstance(inner, dict) else b, None, True)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _RealtimeTurn(self.parse_error).read(framed)


#: Events that carry a piece of the answer's text (or of its audio's transcript).
_TEXT_DELTAS = (
    "response.output_text.delta",
    "response.text.delta",
    "response.output_audio_transcript.delta",
    "response.audio_transcript.delta",
)


class _RealtimeTurn(StreamParts):
    """A Realtime turn's server events → ``response.done``'s response; a turn cut before it is
    read from its deltas (texts keyed by item and content index, calls by call id)."""

    def __init__(self, parse_error: Callable[[Any, int | None], ApiError]) -> None:
        super().__init__()
        self.parse_error = parse_error
        self.created: Item = {}
        self.final: Item | None = None

    payloads = StreamParts.dict_events

    def on(self, name: str | None, obj: Any) -> None:
        kind = obj.get("type")
        if kind == "response.created" and isinstance(obj.get("response"), dict):
            self.created = obj["response"]
        elif kind in _TEXT_DELTAS:
            delta = obj.get("delta")
            self.text(
                (str(obj.get("item_id")), as_int(obj.get("content_index")) or 0),
                delta if isinstance(delta, str) else "",
            )
        elif kind == "response.function_call_arguments.done":
            self.slots[str(obj.get("call_id"))] = Slot("tool_call", block=obj)
        elif kind == "response.done" and isinstance(obj.get("response"), dict):
            self.final = obj["response"]
        elif kind == "error":
            self.error = self.parse_error(obj, None)
            self.error.in_stream = True

    def close(self) -> NormalisedResponse:
        if self.final is not None:
            out = _response(self.final, self.events, True)
        else:  # cut before response.done: what the deltas said
            parts = [
                p
                for p in self.parts(
                    rank=lambda key, st: st.kind == "tool_call", convert=_delta_part
                )
                if p.kind != "text" or p.text
            ]
            out = NormalisedResponse(
                id=as_str(self.created.get("id")), parts=parts, complete=False, events=self.events
            )
        if self.error is not None:
            out.error = self.error
        return out


def _delta_part(st: Slot) -> Part:
    if st.kind != "tool_call":
        return Part(kind="text", text=st.text)
    c = st.block
    return Part(
        kind="tool_call",
        tool_call=tool_call_from_string(c.get("call_id"), c.get("name"), c.get("arguments")),
    )
