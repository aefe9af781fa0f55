"""OpenAI Chat Completions and the OpenAI-compatible servers (WIRE.md §A and §F).

Compatible servers deviate; each deviation handled here is named where it is handled: vLLM and
OpenRouter ``reasoning``/``reasoning_content``, OpenRouter ``native_finish_reason`` and comment
keep-alives, Azure's choice-less filter chunks, llama.cpp usage on the finish chunk, Gemini-compat
tool calls without ``index`` or ``id``, ``delta``/``choices`` of ``null``, errors inside 200
streams.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

import orjson

from ...models import (
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolResult,
    ToolSpec,
    Usage,
)
from ...wire import Framed
from .._base import Provider
from .._parts import StreamParts
from .._profile import Profile
from .._rebuild_families import CHAT
from .._replay import Rendered, ReplayShapes
from .._result_groups import ResultGroups
from .._values import (
    as_int,
    as_obj,
    as_str,
    azure_deployment,
    error_from_body,
    finish_lookup,
    function_spec,
    media_part,
    other_spec,
    text_of,
    tool_call_from_string,
    tool_choice_mode,
)
from ._render import render_chat

__all__ = ["OpenAIChat"]

_FINISH = {
    "stop": FinishReason.COMPLETE,
    "length": FinishReason.TRUNCATED_LENGTH,
    "tool_calls": FinishReason.TOOL_CALL,
    "function_call": FinishReason.TOOL_CALL,
    "content_filter": FinishReason.FILTERED,
    "error": FinishReason.ERROR,
    # the legacy ``finish_details: {"type": …}`` of gpt-4-vision-preview
    "max_tokens": FinishReason.TRUNCATED_LENGTH,
    # TGI's chat stream: its stop-sequence finish (router/src/lib.rs FinishReason::format)
    "stop_sequence": FinishReason.COMPLETE,
    # Together: the end-of-sequence token (together-python types/common.py FinishReason.EOS)
    "eos": FinishReason.COMPLETE,
}

_STRUCTURAL = {"model", "messages", "tools", "tool_choice", "functions", "function_call", "stream"}

#: An answer's message (or stream delta) keys the reader reads, those that carry no content of
#: their own (the name, citations of the text read, Groq's harmony ``channel``, TGI's
#: ``token_id``, Gemini's signatures, vendors' copies of the reasoning read from ``reasoning``)
#: and Groq's ``executed_tools`` (its hosted tools' calls, kept as sent as Responses' hosted
#: items are); any other key with a value is content looptap does not read (issue 102).
_MESSAGE_KNOWN = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "refusal", "function_call", "reasoning",
     "reasoning_content", "name", "annotations", "channel", "token_id", "extra_content",
     "thought_signature", "reasoning_details", "thinking_blocks", "provider_specific_fields",
     "executed_tools"}
)  # fmt: skip


def _unread_fields(m: dict[str, Any], whole: bool = True) -> list[str]:
    """The keys of an answer's message (or delta) that hold content its reader does not read: a
    key it does not know with a value; in a whole message, an ``audio`` answer without its
    transcript (a stream's audio deltas carry the transcript and the data apart)."""
    out = [k for k, v in m.items() if k not in _MESSAGE_KNOWN and k != "audio" and v not in _EMPTY]
    audio = m.get("audio")
    if whole and audio not in _EMPTY and not (isinstance(audio, dict) and "transcript" in audio):
        out.append("audio")
    return out


_EMPTY: tuple[Any, ...] = (None, "", [], {})


def _said_fields(resp: NormalisedResponse, names: list[str]) -> None:
    """Each field of ``names`` said in ``resp.unread`` (named, at most 8)."""
    for k in sorted({str(k)[:40] for k in names})[:8]:
        resp.unread.append(f"a message field {k!r}, not read")


def usage_from(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    pd = u.get("prompt_tokens_details") or {}
    cd = u.get("completion_tokens_details") or {}
    cache_read = as_int(pd.get("cached_tokens")) if isinstance(pd, dict) else None
    if cache_read is None and "prompt_cache_hit_tokens" in u:  # DeepSeek
        cache_read = as_int(u.get("prompt_cache_hit_tokens"))
    return Usage(
        input_tokens=as_int(u.get("prompt_tokens")),
        output_tokens=as_int(u.get("completion_tokens")),
        cache_read_tokens=cache_read,
        cache_write_tokens=as_int(pd.get("cache_write_tokens")) if isinstance(pd, dict) else None,
        reasoning_tokens=as_int(cd.get("reasoning_tokens")) if isinstance(cd, dict) else None,
        total_tokens=as_int(u.get("total_tokens")),
        raw=u,
    )


def _content_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(kind="text", text=content)] if content != "" else []
    if isinstance(content, dict) and "type" not in content:
        # structured output given as the JSON object itself (Cloudflare Workers AI), not as its
        # text: read as that text, said so
        return [
            Part(
                kind="text",
                text=orjson.dumps(content).decode(),
                provider_details={"content_as": "json_object"},
            )
        ]
    parts: list[Part] = []
    for block in content if isinstance(content, list) else [content]:
        if not isinstance(block, dict):
            parts.append(Part(kind="text", text=str(block)))
            continue
        t = block.get("type")
        if t in ("text", "input_text", "output_text"):
            parts.append(Part(kind="text", text=as_str(block.get("text")) or ""))
        elif t == "refusal":
            parts.append(Part(kind="refusal", text=as_str(block.get("refusal"))))
        elif t == "image_url":
            url = as_obj(block.get("image_url")).get("url")
            media = (
                url.split(";")[0][5:]
                if isinstance(url, str) and url.startswith("data:")
                else "image"
            )
            parts.append(media_part(block, media))
        elif t in ("input_audio", "file", "audio", "document_url", "video_url"):
            parts.append(media_part(block, t))  # (Mistral's documents, OpenRouter's videos)
        elif t == "thinking" and isinstance(block.get("thinking"), list):
            # Mistral's reasoning: a list of text chunks
            said = "".join(
                str(c.get("text") or "") for c in block["thinking"][:256] if isinstance(c, dict)
            )
            parts.append(Part(kind="reasoning", text=said, provider_details={"field": "thinking"}))
        else:
            parts.append(Part(kind="other", provider_details={"block": block}))
    return parts


def _message(m: Any) -> Message:
    if not isinstance(m, dict):
        return Message(role="unknown", parts=[Part(kind="other", provider_details={"block": m})])
    role = as_str(m.get("role")) or "unknown"
    parts: list[Part] = []
    for key in ("reasoning_content", "reasoning"):
        if isinstance(m.get(key), str) and m[key]:
            parts.append(Part(kind="reasoning", text=m[key], provider_details={"field": key}))
    if role in ("tool", "function"):
        parts.append(
            Part(
                kind="tool_result",
                tool_result=ToolResult(
                    call_id=as_str(m.get("tool_call_id")),
                    name=as_str(m.get("name")),
                    content=text_of(m.get("content")),
                ),
            )
        )
    else:
        parts.extend(_content_parts(m.get("content")))
    audio = m.get("audio")
    if isinstance(audio, dict) and isinstance(audio.get("transcript"), str) and audio["transcript"]:
        # an audio answer (``content: null``): what it says is its transcript
        parts.append(
            Part(
                kind="text",
                text=audio["transcript"],
                provider_details={"content_as": "audio.transcript", "audio_id": audio.get("id")},
            )
        )
    if isinstance(m.get("refusal"), str) and m["refusal"]:
        parts.append(Part(kind="refusal", text=m["refusal"]))
    for tc in m.get("tool_calls") or []:
        if isinstance(tc, dict):
            parts.append(Part(kind="tool_call", tool_call=_tool_call(tc)))
    fc = m.get("function_call")
    if isinstance(fc, dict) and fc.get("name"):
        parts.append(
            Part(
                kind="tool_call",
                tool_call=tool_call_from_string(None, fc.get("name"), fc.get("arguments")),
            )
        )
    extra = {
        k: v
        for k, v in m.items()
        if k
        not in (
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "refusal",
            "function_call",
            "reasoning",
            "reasoning_content",
        )
    }
    return Message(role=role, parts=parts, provider_details=extra or None)


def _tool_call(tc: dict[str, Any]) -> Any:
    fn_named = isinstance(tc.get("function"), dict) and bool(tc["function"].get("name"))
    custom = tc.get("custom")
    # Servers written in Go send every union member zero-valued (Snowflake): go by `type`, then
    # by which member carries a name.
    if tc.get("type") == "custom" or (
        tc.get("type") is None and isinstance(custom, dict) and custom.get("name") and not fn_named
    ):
        c = tc.get("custom") or {}
        call = tool_call_from_string(tc.get("id"), c.get("name"), None, kind="custom")
        call.arguments = c.get("input")
        call.arguments_raw = as_str(c.get("input"))
        return call
    fn = tc.get("function") or {}
    return tool_call_from_string(tc.get("id"), fn.get("name"), fn.get("arguments", ""))


def _tools(body: dict[str, Any]) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("function"), dict):
            out.append(function_spec(t["function"]))
        elif isinstance(t.get("custom"), dict):
            out.append(
                ToolSpec(
                    name=as_str(t["custom"].get("name")) or "",
                    description=as_str(t["custom"].get("description")),
                    kind="custom",
                )
            )
        else:
            out.append(other_spec(t))
    out.extend(function_spec(f) for f in body.get("functions") or [] if isinstance(f, dict))
    return out


class ChatReplay(ReplayShapes):
    """How replay answers as Chat Completions: OpenAI's error and fault shapes, and its answers
    rendered as JSON or SSE chunks."""

    def render_answer(
        self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any
    ) -> Rendered | None:
        return render_chat(answer, stream, request)

    def continuation_body(self, request: Any, partial: str, prompt: str) -> tuple[Any, str] | None:
        """The cut answer as an assistant message, then a user message asking for the rest."""
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return None
        more = [{"role": "assistant", "content": partial}, {"role": "user", "content": prompt}]
        return {**request, "messages": [*request["messages"], *more]}, partial


def _result_of(m: Any) -> str | None:
    """A ``role: tool`` message answers the call its ``tool_call_id`` names (WIRE.md §A.5)."""
    return (m.get("tool_call_id") or "") if m.get("role") == "tool" else None


def _calls_of(m: Any) -> list[Any]:
    return [tc.get("id") for tc in m.get("tool_calls") or ()] if m.get("role") != "tool" else []


class OpenAIChat(Provider):
    family = "openai_chat"
    profile = Profile(
        rebuild=CHAT,
        finishes=_FINISH,
        overflow_errors=(
            r"context_length_exceeded",
            r"(?i)maximum context length is",
            r"(?i)exceeds the context window",
        ),
        pairing_errors=(
            r"assistant message with 'tool_calls' must be followed by tool messages",
            r"(?i)messages with role 'tool' must be a response to a prece",
            r"'tool_call_id' of '[^']*' not found in 'tool_calls'",
            r"(?i)tool_call_id.{0,40}(not found|did not have response|must be a response)",
        ),
        model_vendor="openai",
        otel_provider="openai",
        stream_end="data: [DONE]; or choice 0's finish_reason with no error event and every "
        "event read (servers that send no terminator); an error event (a chunk with `error`, "
        "llama.cpp's `error:` line, Groq's `x_groq.error`) ends it failed",
        field_defaults=(("stream", False), ("n", 1)),
        result_groups=ResultGroups(_result_of, _calls_of),
        api_key_env=("OPENAI_API_KEY",),
    )
    replay = ChatReplay()

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST" or not url.path.rstrip("/").endswith("/chat/completions"):
            return 0
        return 3 if isinstance(body, dict) and "messages" in body else 2

    def model_from_url(self, url: SplitResult) -> str | None:
        return azure_deployment(url)

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        messages = [_message(m) for m in b.get("messages") or []]
        system = [p for m in messages if m.role in ("system", "developer") for p in m.parts]
        tc = b.get("tool_choice", b.get("function_call"))
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or self.model_from_url(url),
            stream=b.get("stream") is True,
            system=system,
            messages=messages,
            tools=_tools(b),
            tool_choice=tc,
            tool_choice_mode=tool_choice_mode(tc),
            params={k: v for k, v in b.items() if k not in _STRUCTURAL},
            history_key="messages",
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if "error" in b and not b.get("choices"):
            return self.error_answer(b)
        choices = [c for c in (b.get("choices") or []) if isinstance(c, dict)]
        choice = next((c for c in choices if c.get("index", 0) == 0), choices[0] if choices else {})
        msg = _message(choice.get("message") or {})
        raw_finish = as_str(choice.get("finish_reason"))
        if raw_finish is None and isinstance(choice.get("finish_details"), dict):
            raw_finish = as_str(choice["finish_details"].get("type"))  # gpt-4-vision-preview
        has_calls = any(p.kind == "tool_call" for p in msg.parts)
        details: dict[str, Any] = {
            k: b[k] for k in ("system_fingerprint", "service_tier", "provider", "object") if k in b
        }
        if "native_finish_reason" in choice:
            details["native_finish_reason"] = choice["native_finish_reason"]
        if len(choices) > 1:
            details["choices"] = len(choices)
        resp = NormalisedResponse(
            id=as_str(b.get("id")),
            model=as_str(b.get("model")),
            parts=msg.parts,
            finish_reason_raw=raw_finish,
            finish_reason=finish_lookup(_FINISH, raw_finish, has_calls)
            if raw_finish is not None
            else (FinishReason.UNKNOWN if choices else None),
            usage=usage_from(b.get("usage")),
            complete=True,
            provider_details=details or None,
        )
        _said_fields(resp, _unread_fields(as_obj(choice.get("message"))))
        return resp

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        """The SDK's chat-completion stream accumulation (WIRE.md §A.4), lenient for compat
        servers."""
        return _ChatStream().read(framed)


#: The order of a chat answer's parts: reasoning, text, refusal, then the calls as they started.
_RANK = {"reasoning": 0, "text": 1, "refusal": 2, "tool_call": 3}
#: The key of the pre-tools call (``delta.function_call``: one call, no id), still sent by old
#: clients' servers and compat layers; it comes after the others.
_LEGACY = "function_call"


class _ChatStream(StreamParts):
    """Chat-completion chunks → the answer: choice 0's deltas, tool calls keyed by ``index``."""

    finishes = _FINISH

    def __init__(self) -> None:
        super().__init__()
        self.last_index = -1
        #: The delta keys that held content the reader does not read (:func:`_unread_fields`).
        self.unread_fields: set[str] = set()

    def on(self, name: str | None, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        groq = chunk["x_groq"] if isinstance(chunk.get("x_groq"), dict) else {}
        if chunk.get("error") or name == "error":
            # An error inside a 200 stream: alone (OpenAI, vLLM, TGI) or beside a choice whose
            # finish_reason is "error" (OpenRouter, WIRE.md §F); llama.cpp's server names its
            # event ``error:`` and sends the error object bare (docs/coverage.md).
            self.error = error_from_body(chunk, None, in_stream=True)
            if not chunk.get("choices"):
                return
        if groq.get("error"):  # Groq: "why a stream was stopped early" (groq-python XGroq)
            self.error = error_from_body({"error": groq["error"]}, None, in_stream=True)
        self.id = self.id or as_str(chunk.get("id")) or None
        self.model = self.model or as_str(chunk.get("model")) or None
        usage = chunk.get("usage") or groq.get("usage")
        if usage:
            # on every chunk (vLLM, watsonx chat): cumulative, and a 0 never replaces a count;
            # Groq's final chunk carries it in ``x_groq``
            self.add_usage(usage_from(usage))
        for key in ("system_fingerprint", "service_tier", "provider"):
            if chunk.get(key) is not None:
                self.details[key] = chunk[key]
        for choice in chunk.get("choices") or []:
            self._choice(choice)

    def _choice(self, choice: Any) -> None:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            if isinstance(choice, dict):
                self.details["choices"] = max(
                    self.details.get("choices", 1), int(choice.get("index", 0)) + 1
                )
            return
        if choice.get("finish_reason") not in (None, ""):  # Together's "" is its null
            self.finish_raw = as_str(choice["finish_reason"])
        if "native_finish_reason" in choice and choice["native_finish_reason"] is not None:
            self.details["native_finish_reason"] = choice["native_finish_reason"]
        if isinstance(choice.get("error"), dict):
            self.error = error_from_body(choice, None, in_stream=True)
        delta = choice.get("delta")
        if isinstance(delta, dict):  # Azure content_filter_offsets chunks have no delta
            self._delta(delta)

    def _delta(self, delta: dict[str, Any]) -> None:
        if len(self.unread_fields) < 8:
            self.unread_fields.update(_unread_fields(delta, whole=False))
        if isinstance(delta.get("content"), str):
            self.text("text", delta["content"])
        audio = delta.get("audio")
        if isinstance(audio, dict) and isinstance(audio.get("transcript"), str):
            self.text("text", audio["transcript"])  # an audio answer's transcript, piece by piece
        for key in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(key), str):
                self.text("reasoning", delta[key], "reasoning")
                self.details["reasoning_field"] = key
        if isinstance(delta.get("refusal"), str):
            self.text("refusal", delta["refusal"], "refusal")
        fc = delta.get("function_call")
        if isinstance(fc, dict):
            name = fc.get("name") if isinstance(fc.get("name"), str) and fc["name"] else None
            self.call(
                _LEGACY,
                name=name,
                args=fc["arguments"] if isinstance(fc.get("arguments"), str) else None,
            )
        for tc in delta.get("tool_calls") or []:
            if isinstance(tc, dict):
                self._tool_call(tc)

    def _tool_call(self, tc: dict[str, Any]) -> None:
        fn = tc.get("function") or {}
        idx = tc.get("index")
        if not isinstance(idx, int):
            # Gemini-compat: no index; a fragment with an id or a name starts a new call.
            idx = (
                self.last_index + 1
                if (tc.get("id") or fn.get("name") or self.last_index < 0)
                else self.last_index
            )
        self.last_index = max(self.last_index, idx)
        self.call(idx, id=tc.get("id"), name=fn.get("name"), args=fn.get("arguments"))

    def close(self) -> NormalisedResponse:
        legacy = self.slots.get(_LEGACY)
        if legacy is not None and not legacy.name:
            del self.slots[_LEGACY]
        resp = self.finish(
            parts=self.parts(rank=lambda key, st: 4 if key == _LEGACY else _RANK.get(st.kind, 3))
        )
        _said_fields(resp, list(self.unread_fields))
        if not self.done and resp.complete:
            resp.notes.append(
                "the stream ended without [DONE] after its finish reason: read whole by the finish "
                "reason (servers that send no terminator, docs/coverage.md)"
            )
        return resp

    def complete(self) -> bool:
        """Ended by evidence (the profile's ``stream_end``): ``[DONE]`` (after an error event too),
        or choice 0's finish reason with no error nor cut and every event read. A missing
        terminator alone is no truncation; an event that is not JSON leaves the finish reason no
        proof that nothing else was sent."""
        read_all = not self.details.get("unparsed_events")
        return self.done or (
            self.finish_raw is not None and self.error is None and not self.cut and read_all
        )
