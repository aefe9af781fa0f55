"""Ollama's native API: ``/api/chat`` and ``/api/generate`` (WIRE.md §E).

Ollama's ``/v1/chat/completions`` is family ``openai_chat``. The other native routes
(``/api/embed``, ``/api/tags``, ``/api/pull`` …) are claimed with their own operation names and not
parsed further.

Decisions worth knowing:

* ``stream`` defaults to *true*: a body without ``"stream": false`` streams NDJSON.
* ``complete`` is ``done: true`` having been seen, for non-streamed bodies too: a genuine
  non-streamed answer always carries it, and a one-line stream cut after its first line is framed
  as plain JSON, which this still reports as incomplete.
* ``done_reason`` ``stop`` becomes ``tool_call`` when the turn carries ``tool_calls`` (native Ollama
  has no tool-call reason); ``load``/``unload`` are ``no_generation``; an absent reason on the final
  line is ``unknown``.
* Counts are ``omitempty`` on the wire: a missing ``prompt_eval_count`` (prompt served from the KV
  cache) is ``None``, not 0. Durations are nanoseconds and are kept in ``usage.raw``.
* ``/api/generate`` has a ``prompt`` (one user message) and a ``system`` field instead of
  ``messages``; its history travels as the opaque ``context`` token array, so ``history_key`` is
  ``None`` there.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import SplitResult

import orjson

from ..models import (
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
from ..wire import Framed
from ._base import Provider
from ._parts import StreamParts, has_calls
from ._profile import Profile
from ._replay import (
    Rendered,
    ReplayShapes,
    answer_calls,
    answer_text,
    arguments_not_json,
    call_arguments_object,
    pieces,
)
from ._values import (
    as_int,
    as_obj,
    as_str,
    error_from_body,
    error_from_text,
    finish_lookup,
    function_spec,
    media_part,
    other_spec,
    text_of,
    tool_call_from_object,
)

__all__ = ["OllamaChat"]

JSON = dict[str, Any]

_GENERATE_ROUTES = {"chat", "generate"}
#: The other native routes (operation = the route name).
_OTHER_ROUTES = {
    "embed",
    "embeddings",
    "tags",
    "show",
    "ps",
    "pull",
    "push",
    "create",
    "copy",
    "delete",
    "version",
    "blobs",
}

_FINISH = {
    "stop": FinishReason.COMPLETE,
    "length": FinishReason.TRUNCATED_LENGTH,
    "load": FinishReason.NO_GENERATION,
    "unload": FinishReason.NO_GENERATION,
}

_STRUCTURAL = {"model", "messages", "tools", "stream", "options", "prompt", "system", "images"}
_USAGE_KEYS = (
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)


def _route(url: SplitResult) -> str | None:
    """``chat`` for ``…/api/chat``, ``tags`` for ``…/api/tags`` …; ``None`` when not Ollama's."""
    segs = [s for s in url.path.split("/") if s]
    if len(segs) >= 2 and segs[-2] == "api" and segs[-1] in _GENERATE_ROUTES | _OTHER_ROUTES:
        return segs[-1]
    if len(segs) >= 3 and segs[-3] == "api" and segs[-2] == "blobs":  # /api/blobs/sha256:…
        return "blobs"
    return None


def render_native(answer: NormalisedResponse, stream: bool, route: str) -> Rendered | None:
    """An answer as ``/api/chat`` or ``/api/generate`` sends it: one JSON object, or NDJSON lines
    ending with the ``done: true`` line that carries ``done_reason`` and the counts."""
    if answer.finish_reason not in (
        None,
        FinishReason.COMPLETE,
        FinishReason.TOOL_CALL,
        FinishReason.TRUNCATED_LENGTH,
    ):
        return None  # Ollama has no filter or refusal to say it with
    done_reason = "length" if answer.finish_reason is FinishReason.TRUNCATED_LENGTH else "stop"
    text, calls = answer_text(answer), answer_calls(answer)
    if arguments_not_json(calls):
        return None  # ``arguments`` is an object
    u = answer.usage
    counts: dict[str, Any] = {}
    if u is not None:
        counts = {k: v for k, v in (u.raw or {}).items() if k in _USAGE_KEYS} or {
            "prompt_eval_count": u.input_tokens or 0,
            "eval_count": u.output_tokens or 0,
        }
    head = {"model": answer.model or "", "created_at": "2026-01-01T00:00:00Z"}
    wire_calls = [
        {"function": {"name": c.name or "", "arguments": call_arguments_object(c)}} for c in calls
    ]

    def line(piece: str, with_calls: bool, done: bool) -> dict[str, Any]:
        if route == "chat":
            msg: dict[str, Any] = {"role": "assistant", "content": piece}
            if with_calls and wire_calls:
                msg["tool_calls"] = wire_calls
            out = {**head, "message": msg, "done": done}
        else:
            out = {**head, "response": piece, "done": done}
        if done:
            out.update(done_reason=done_reason, **counts)
        return out

    if not stream:
        return Rendered("application/json", [orjson.dumps(line(text, True, True))])
    lines = [line(piece, False, False) for piece in pieces(text)]
    if wire_calls:
        lines.append(line("", True, False))
    lines.append(line("", False, True))
    return Rendered("application/x-ndjson", [orjson.dumps(obj) + b"\n" for obj in lines])


def usage_from(line: Any) -> Usage | None:
    """Counts of a final (``done: true``) line; ``None`` when it reports none."""
    if not isinstance(line, dict):
        return None
    raw = {k: line[k] for k in _USAGE_KEYS if k in line}
    if not raw:
        return None
    prompt = as_int(line.get("prompt_eval_count"))
    output = as_int(line.get("eval_count"))
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        total_tokens=prompt + output if prompt is not None and output is not None else None,
        raw=raw,
    )


def _image_parts(images: Any) -> list[Part]:
    out: list[Part] = []
    for img in images if isinstance(images, list) else []:
        # Base64 strings without a media type; the block keeps the data.
        out.append(media_part({"image": img}, "image"))
    return out


def _tool_call_parts(calls: Any) -> list[Part]:
    out: list[Part] = []
    for tc in calls if isinstance(calls, list) else []:
        if not isinstance(tc, dict):
            continue
        raw_fn = tc.get("function")
        fn: JSON = as_obj(raw_fn)
        call = tool_call_from_object(tc.get("id"), fn.get("name"), fn.get("arguments"))
        details = {k: v for k, v in fn.items() if k not in ("name", "arguments")}
        details.update({k: v for k, v in tc.items() if k not in ("id", "function")})
        out.append(Part(kind="tool_call", tool_call=call, provider_details=details or None))
    return out


def _message(m: Any) -> Message:
    if not isinstance(m, dict):
        return Message(role="unknown", parts=[Part(kind="other", provider_details={"block": m})])
    role = as_str(m.get("role")) or "unknown"
    parts: list[Part] = []
    if isinstance(m.get("thinking"), str) and m["thinking"]:
        parts.append(Part(kind="reasoning", text=m["thinking"]))
    if role == "tool":
        result = ToolResult(
            call_id=as_str(m.get("tool_call_id")),
            name=as_str(m.get("tool_name") or m.get("name")),
            content=text_of(m.get("content")),
        )
        parts.append(Part(kind="tool_result", tool_result=result))
    elif m.get("content") not in (None, ""):
        parts.append(Part(kind="text", text=text_of(m.get("content"))))
    parts.extend(_image_parts(m.get("images")))
    parts.extend(_tool_call_parts(m.get("tool_calls")))
    known = ("role", "content", "thinking", "images", "tool_calls", "tool_call_id", "tool_name")
    extra = {k: v for k, v in m.items() if k not in known}
    return Message(role=role, parts=parts, provider_details=extra or None)


def _tools(raw: Any) -> list[ToolSpec]:
    return [
        function_spec(t["function"]) if isinstance(t.get("function"), dict) else other_spec(t)
        for t in (raw if isinstance(raw, list) else [])
        if isinstance(t, dict)
    ]


class _Lines(StreamParts):
    """Response lines (deltas) → one message (WIRE.md §E.4): thinking, then text, then the calls."""

    def sentinel(self) -> None:
        self.count()  # not Ollama's: a line that is not JSON
        self.unparsed()

    def on(self, name: str | None, line: Any) -> None:
        if not isinstance(line, dict):
            self.unparsed()
            return
        if "error" in line and "message" not in line and "response" not in line:
            self.error = error_from_body(line, None, in_stream=self.in_stream)
            return
        self.first("model", line.get("model"))
        if line.get("created_at") is not None:
            self.details.setdefault("created_at", line["created_at"])
        self._deltas(line)
        if line.get("done") is True:
            self._final(line)
        if isinstance(line.get("logprobs"), list):
            self.details.setdefault("logprobs", []).extend(line["logprobs"])
        for key in ("remote_model", "remote_host"):  # cloud models proxied by a local server
            if line.get(key) is not None:
                self.details[key] = line[key]

    def _deltas(self, line: JSON) -> None:
        raw_msg = line.get("message")
        msg: JSON = as_obj(raw_msg)
        for src in (msg, line):  # /api/chat puts deltas in message, /api/generate at top level
            if isinstance(src.get("thinking"), str):
                self.text("reasoning", src["thinking"], "reasoning")
            for part in _tool_call_parts(src.get("tool_calls")):
                self.add(part)
        if isinstance(msg.get("content"), str):
            self.text("text", msg["content"])
        if isinstance(line.get("response"), str):
            self.text("text", line["response"])

    def _final(self, line: JSON) -> None:
        self.done = True
        self.finish_raw = as_str(line.get("done_reason"))
        self.usage = usage_from(line)
        if "context" in line:
            self.details["context_tokens"] = (
                len(line["context"]) if isinstance(line["context"], list) else None
            )

    def close(self) -> NormalisedResponse:
        parts = self.parts(rank=lambda key, st: _RANK.get(st.kind, 2))
        return self.finish(parts=[p for p in parts if p.kind == "tool_call" or p.text])

    def classify(self, parts: list[Part]) -> FinishReason | None:
        # WIRE.md §G.1: none before the final line; a final line without done_reason is unknown
        if not self.done:
            return None
        return finish_lookup(_FINISH, self.finish_raw or "", has_calls(parts))


#: The order of an answer's parts: thinking, text, then the calls as they came.
_RANK = {"reasoning": 0, "text": 1}


class OllamaReplay(ReplayShapes):
    """How replay answers as Ollama's native API: its bare-string errors and NDJSON answers."""

    def render_answer(
        self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any
    ) -> Rendered | None:
        route = _route(url)
        return render_native(answer, stream, route) if route in _GENERATE_ROUTES else None

    fault_bodies: ClassVar[dict[str, tuple[int, Any]]] = {
        "rate_limit": (429, {"error": "too many requests"}),
        "overloaded": (
            503,
            {"error": "server busy, please try again.  maximum pending requests exceeded"},
        ),
        "server_error": (500, {"error": "an error was encountered while running the model"}),
        "context_length": (400, {"error": "the input length exceeds the context length"}),
    }

    def fault_headers(self, kind: str, retry_after: float) -> list[tuple[str, str]]:
        return []

    def fault_event(self, kind: str) -> bytes:
        return b'{"error":"an error was encountered while running the model"}\n'

    def error(self, status: int, message: str, code: str) -> Any:
        return {"error": message}  # Ollama's native error body is a bare string


class OllamaChat(Provider):
    family = "ollama"
    # not a semconv well-known value; custom values are allowed
    profile = Profile(
        finishes=_FINISH,
        otel_provider="ollama",
        stream_end="the final line with done: true (and its done_reason); /v1 is OpenAI Chat's",
    )
    replay = OllamaReplay()

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = _route(url)
        if route is None:
            return 0
        if route in _GENERATE_ROUTES:
            if method.upper() != "POST":
                return 0
            if isinstance(body, dict) and (
                "messages" in body if route == "chat" else "prompt" in body or "model" in body
            ):
                return 3
            return 2
        return 1

    def operation(self, method: str, url: SplitResult) -> str:
        route = _route(url)
        if route in _GENERATE_ROUTES:
            return "generate"
        return route or "other"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        if _route(url) not in _GENERATE_ROUTES or not isinstance(body, dict):
            return False
        return body.get("stream", True) is not False

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        generate = _route(url) == "generate" or ("prompt" in b and "messages" not in b)
        system: list[Part] = []
        if generate:
            if isinstance(b.get("system"), str) and b["system"]:
                system.append(Part(kind="text", text=b["system"]))
            parts: list[Part] = []
            if isinstance(b.get("prompt"), str) and b["prompt"]:
                parts.append(Part(kind="text", text=b["prompt"]))
            parts.extend(_image_parts(b.get("images")))
            messages = [Message(role="user", parts=parts)] if parts else []
        else:
            messages = [_message(m) for m in b.get("messages") or []]
            system = [p for m in messages if m.role == "system" for p in m.parts]
        params: dict[str, Any] = {}
        if isinstance(b.get("options"), dict):
            params.update(b["options"])
        params.update({k: v for k, v in b.items() if k not in _STRUCTURAL})
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")),
            stream=self.is_stream(url, body),
            system=system,
            messages=messages,
            tools=_tools(b.get("tools")),
            params=params,
            history_key=None if generate else "messages",
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        if (
            isinstance(body, dict)
            and "error" in body
            and "message" not in body
            and "response" not in body
        ):
            return self.error_answer(body)
        return _Lines(in_stream=False).fold(body if isinstance(body, list) else [body])

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _Lines().read(framed)

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        """``{"error": "<text>"}`` (a string), or whatever a proxy in front put there."""
        return error_from_text(body, status)
