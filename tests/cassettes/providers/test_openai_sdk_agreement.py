"""Our stream reassembly against the official OpenAI SDK's own accumulators, on every corpus stream.

Chat: each ``data:`` chunk becomes a ``ChatCompletionChunk`` (``construct``, as the SDK's stream
does not validate either) and goes through ``ChatCompletionStreamState`` with the SDK's own
filtering (stop at ``[DONE]``; skip chunks whose ``object`` is not ``chat.completion.chunk``; a
chunk with a top-level ``error`` raises ``APIError`` in the SDK, so feeding stops there).

Responses: each event is built with ``openai._models.construct_type`` (what ``openai.Stream`` does
with every SSE ``data``) and goes through ``ResponseStreamState``; the response of the terminal
event it returns is the SDK's answer.

Compared: text, tool calls (id, name, parsed arguments), raw finish reason / status, usage.
Streams the SDK itself cannot read (it raises) are counted and listed, not compared.
"""

from __future__ import annotations

import glob
import json
import warnings
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pytest
from real_corpus import CORPUS, corpus_exchanges, corpus_files, rel

from looptap.cassettes.models import NormalisedResponse
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.providers.openai_responses import OpenAIResponses
from looptap.cassettes.wire import Framed, frame

openai = pytest.importorskip("openai")

from openai import omit  # noqa: E402
from openai._models import construct_type  # noqa: E402
from openai.lib.streaming.chat import ChatCompletionStreamState  # noqa: E402
from openai.lib.streaming.responses import ResponseStreamState  # noqa: E402
from openai.types.chat import ChatCompletionChunk  # noqa: E402
from openai.types.responses import ResponseStreamEvent  # noqa: E402


@dataclass
class Stream:
    name: str
    framed: Framed
    ours: NormalisedResponse


@cache
def _streams(family: str, needle: bytes) -> tuple[Stream, ...]:
    out: list[Stream] = []
    for path in corpus_files():
        raw = path.read_bytes()
        if needle not in raw or b"data:" not in raw:  # streams only (gzipped ones are Anthropic's)
            continue
        for p, i, ex in corpus_exchanges(glob.escape(str(path.relative_to(CORPUS)))):
            rt = parse_exchange(ex)
            if rt.family != family or rt.framing != "sse" or (rt.status or 0) >= 400:
                continue
            framed = frame(ex.response_chunks, ex.response_header("content-type"))
            ours = rt.response
            # a non-generate stream (resumed background response): reassemble directly
            if ours is None:
                ours = OpenAIResponses().reassemble(framed)
            out.append(Stream(f"{rel(p)}#{i}", framed, ours))
    return tuple(out)


def _args(raw: str | None) -> Any:
    return json.loads(raw) if raw else {}


# --- Chat Completions -------------------------------------------------------------------------


@dataclass
class ChatOutcome:
    text: str = ""
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    finish: str | None = None
    usage: tuple[Any, ...] | None = None
    #: The SDK raised ``APIError`` on an in-stream error chunk.
    sdk_error: bool = False
    #: The last usage any chunk reported (what the SDK would keep if it did not overwrite it).
    last_reported_usage: tuple[Any, ...] | None = None
    #: Groq's final chunk reports usage in ``x_groq`` (groq-python's ``XGroq.usage``), which the
    #: openai SDK does not read.
    groq_usage: tuple[Any, ...] | None = None


def _usage_tuple(u: Any) -> tuple[Any, ...] | None:
    if u is None:
        return None
    if isinstance(u, dict):
        return (u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens"))
    return (u.prompt_tokens, u.completion_tokens, u.total_tokens)


def _sdk_chat(framed: Framed) -> ChatOutcome:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    out = ChatOutcome()
    fed = 0
    for ev in framed.events:
        if ev.data.startswith("[DONE]"):
            break
        data = json.loads(ev.data)
        if isinstance(data, dict) and data.get("usage"):
            out.last_reported_usage = _usage_tuple(data["usage"])
        elif isinstance(data, dict) and isinstance(data.get("x_groq"), dict):
            # Groq's usage, where the openai SDK reads none
            if data["x_groq"].get("usage"):
                out.groq_usage = _usage_tuple(data["x_groq"]["usage"])
        if isinstance(data, dict) and data.get("error"):
            out.sdk_error = True  # openai.Stream raises APIError here
            break
        chunk = ChatCompletionChunk.construct(**data)
        if chunk.object != "chat.completion.chunk":
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # compat servers put lists where the SDK types say str
            state.handle_chunk(chunk)
        fed += 1
    if not fed:
        return out
    snap = state.current_completion_snapshot
    choice = next((c for c in snap.choices if c.index == 0), None)
    if choice is not None:
        out.text = choice.message.content or ""
        out.calls = [
            (tc.id, tc.function.name, _args(tc.function.arguments))
            for tc in choice.message.tool_calls or []
        ]
        out.finish = choice.finish_reason
    out.usage = _usage_tuple(snap.usage)
    return out


@cache
def _chat_results() -> tuple[list[tuple[Stream, ChatOutcome]], list[tuple[str, str]]]:
    compared: list[tuple[Stream, ChatOutcome]] = []
    unreadable: list[tuple[str, str]] = []
    for s in _streams("openai_chat", b"/chat/completions"):
        try:
            sdk = _sdk_chat(s.framed)
        except Exception as exc:  # the SDK's own accumulator rejects the stream
            unreadable.append((s.name, f"{type(exc).__name__}: {exc}"[:200]))
            continue
        compared.append((s, sdk))
    return compared, unreadable


def test_chat_streams_agree_with_the_sdk() -> None:
    compared, unreadable = _chat_results()
    assert len(compared) >= 70, f"only {len(compared)} chat streams compared"
    # The SDK requires ``index`` on every list delta entry; OpenRouter's streamed annotations have
    # none.
    assert [n for n, _ in unreadable] == [
        "pydantic-ai/tests/models/cassettes/test_openrouter/"
        "test_openrouter_web_search_annotations_stream.yaml#0"
    ], unreadable
    diffs = []
    for s, sdk in compared:
        ours = s.ours
        if sdk.text != ours.text:
            diffs.append((s.name, "text", sdk.text[:80], ours.text[:80]))
        got = [(c.id, c.name, c.arguments) for c in ours.tool_calls]
        if sdk.calls != got:
            diffs.append((s.name, "tool_calls", sdk.calls, got))
        if sdk.finish != ours.finish_reason_raw:
            diffs.append((s.name, "finish_reason", sdk.finish, ours.finish_reason_raw))
        mine = (
            (ours.usage.input_tokens, ours.usage.output_tokens, ours.usage.total_tokens)
            if ours.usage
            else None
        )
        if sdk.groq_usage is not None and sdk.usage is None:
            if mine != sdk.groq_usage:
                diffs.append((s.name, "usage (x_groq)", sdk.groq_usage, mine))
        elif sdk.usage is not None and not sdk.sdk_error:
            if sdk.usage != mine:
                diffs.append((s.name, "usage", sdk.usage, mine))
        elif mine != sdk.last_reported_usage:
            # The SDK sets ``snapshot.usage = chunk.usage`` on every chunk, so a trailing chunk
            # without usage (OpenAI's moderation chunk) erases it; we keep the last reported one.
            diffs.append((s.name, "usage (last reported)", sdk.last_reported_usage, mine))
    assert diffs == []


def test_chat_sdk_usage_overwrite_quirk_is_real() -> None:
    """Where the SDK ends with no usage but a chunk reported one, ours is that chunk's usage."""
    compared, _ = _chat_results()
    quirks = [
        s.name
        for s, sdk in compared
        if sdk.usage is None
        and sdk.last_reported_usage is not None
        and sdk.groq_usage is None
        and not sdk.sdk_error
    ]
    assert quirks == [
        "pydantic-ai/tests/models/cassettes/test_openai/test_openai_moderation_stream.yaml#0"
    ]


def test_chat_in_stream_errors_are_reported_like_the_sdk() -> None:
    compared, _ = _chat_results()
    raised = [(s.name, s.ours.error) for s, sdk in compared if sdk.sdk_error]
    assert raised, "the corpus has in-stream errors the SDK raises on"
    assert [n for n, err in raised if err is None] == []


# --- Responses --------------------------------------------------------------------------------


def _sdk_response(framed: Framed) -> Any:
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    final = None
    for ev in framed.events:
        if ev.data.startswith("[DONE]"):
            break
        event = construct_type(type_=ResponseStreamEvent, value=json.loads(ev.data))
        for out in state.handle_event(event):
            if out.type in ("response.completed", "response.incomplete", "response.failed"):
                final = out.response
    return final


def test_responses_streams_agree_with_the_sdk() -> None:
    compared = 0
    unreadable: list[tuple[str, str]] = []
    diffs = []
    for s in _streams("openai_responses", b"/responses"):
        try:
            sdk = _sdk_response(s.framed)
        except Exception as exc:
            unreadable.append((s.name, f"{type(exc).__name__}: {exc}"[:200]))
            continue
        assert sdk is not None, s.name
        ours = s.ours
        compared += 1
        if sdk.output_text != ours.text:
            diffs.append((s.name, "text", sdk.output_text[:80], ours.text[:80]))
        calls = [
            (it.call_id, it.name, _args(it.arguments))
            for it in sdk.output
            if it.type == "function_call"
        ]
        got = [(c.id, c.name, c.arguments) for c in ours.tool_calls if c.kind == "function"]
        if calls != got:
            diffs.append((s.name, "tool_calls", calls, got))
        reason = sdk.incomplete_details.reason if sdk.incomplete_details else None
        raw = f"{sdk.status}:{reason}" if reason else sdk.status
        if raw != ours.finish_reason_raw:
            diffs.append((s.name, "status", raw, ours.finish_reason_raw))
        u, o = sdk.usage, ours.usage
        theirs = (
            (
                u.input_tokens,
                u.output_tokens,
                u.total_tokens,
                u.input_tokens_details.cached_tokens,
                u.output_tokens_details.reasoning_tokens,
            )
            if u
            else None
        )
        mine = (
            (
                o.input_tokens,
                o.output_tokens,
                o.total_tokens,
                o.cache_read_tokens,
                o.reasoning_tokens,
            )
            if o
            else None
        )
        if theirs != mine:
            diffs.append((s.name, "usage", theirs, mine))
    assert compared >= 38, f"only {compared} Responses streams compared"
    # A resumed background stream (GET …?starting_after=0) starts at ``response.queued``; the
    # SDK's state machine requires ``response.created`` first. Our adapter reads it.
    assert [n for n, _ in unreadable] == [
        "pydantic-ai/tests/models/cassettes/test_openai_responses/"
        "test_background_mode_streaming_starting_after_vcr.yaml#1"
    ], unreadable
    assert diffs == []
