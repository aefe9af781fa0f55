"""The text models' own InvokeModel bodies and stream chunks (Titan, Llama, Mistral, Cohere
Command, AI21 Jurassic-2, Mistral / Jamba chat, an imported model's OpenAI Completions), each read
as (text, finish, input tokens, output tokens) by the shape that tells it; their finish reasons;
and the usage their counts or InvokeModel's invocation metrics give. The adapter is
:mod:`cassettes.providers.bedrock._invoke`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...hints import count
from ...models import FinishReason, NormalisedResponse, Part, Usage
from .._values import as_int, as_obj, as_str, filled_usage, finish_lookup, latest_count
from ..openai_chat import OpenAIChat

TEXT_FINISH = {
    # Titan
    "FINISH": FinishReason.COMPLETE,
    "LENGTH": FinishReason.TRUNCATED_LENGTH,
    "CONTENT_FILTERED": FinishReason.FILTERED,
    "STOP_CRITERIA_MET": FinishReason.COMPLETE,
    "RAG_QUERY_WHEN_RAG_DISABLED": FinishReason.OTHER,
    # Llama, Mistral
    "stop": FinishReason.COMPLETE,
    "length": FinishReason.TRUNCATED_LENGTH,
    "tool_calls": FinishReason.TOOL_CALL,
    "model_length": FinishReason.TRUNCATED_CONTEXT,
    # Cohere Command
    "COMPLETE": FinishReason.COMPLETE,
    "MAX_TOKENS": FinishReason.TRUNCATED_LENGTH,
    "ERROR_TOXIC": FinishReason.FILTERED,
    "ERROR": FinishReason.ERROR,
    # AI21 Jurassic-2
    "endoftext": FinishReason.COMPLETE,
    "stop_sequence": FinishReason.COMPLETE,
    "max_tokens": FinishReason.TRUNCATED_LENGTH,
}


TextChunk = tuple[str, str | None, int | None, int | None]


def _text_chunk(d: dict[str, Any]) -> TextChunk:
    """(text piece, finish, input tokens, output tokens) of a text-model body or stream chunk."""
    for key, read in _TEXT_SHAPES:
        if key in d:
            return read(d)
    if "is_finished" in d:  # Cohere Command stream chunk; the last has no text, only the finish
        return as_str(d.get("text")) or "", as_str(d.get("finish_reason")), None, None
    return "", None, None, None


def _first(d: dict[str, Any], key: str) -> dict[str, Any]:
    return as_obj((d.get(key) or [{}])[0])


def _titan(d: dict[str, Any]) -> TextChunk:
    r = _first(d, "results")
    return (
        as_str(r.get("outputText")) or "",
        as_str(r.get("completionReason")),
        as_int(d.get("inputTextTokenCount")),
        as_int(r.get("tokenCount")),
    )


def _jurassic(d: dict[str, Any]) -> TextChunk:
    c = _first(d, "completions")
    prompt_tokens = as_obj(d.get("prompt")).get("tokens")
    out_tokens = as_obj(c.get("data")).get("tokens")
    return (
        as_str(as_obj(c.get("data")).get("text")) or "",
        as_str(as_obj(c.get("finishReason")).get("reason")),
        len(prompt_tokens) if isinstance(prompt_tokens, list) else None,
        len(out_tokens) if isinstance(out_tokens, list) else None,
    )


def _chat_choice(d: dict[str, Any]) -> TextChunk:
    """Mistral / Jamba chat (a message, or a chunk with a delta) and the OpenAI Completions body of
    a custom-imported or OpenAI-compatible model (``choices[0].text``, ``usage``)."""
    ch = _first(d, "choices")
    text = as_obj(ch.get("message") or ch.get("delta")).get("content")
    if not isinstance(text, str):
        text = ch.get("text")
    usage = as_obj(d.get("usage"))
    return (
        text if isinstance(text, str) else "",
        as_str(ch.get("finish_reason") or ch.get("stop_reason")),
        as_int(usage.get("prompt_tokens")),
        as_int(usage.get("completion_tokens")),
    )


#: The text models' shapes, by the key that tells them (first present wins).
_TEXT_SHAPES: tuple[tuple[str, Callable[[dict[str, Any]], TextChunk]], ...] = (
    ("results", _titan),
    (
        "outputText",
        lambda d: (  # Titan stream chunk
            as_str(d.get("outputText")) or "",
            as_str(d.get("completionReason")),
            as_int(d.get("inputTextTokenCount")),
            as_int(d.get("totalOutputTextTokenCount")),
        ),
    ),
    (
        "generation",
        lambda d: (  # Llama
            as_str(d.get("generation")) or "",
            as_str(d.get("stop_reason")),
            as_int(d.get("prompt_token_count")),
            as_int(d.get("generation_token_count")),
        ),
    ),
    # Mistral text
    (
        "outputs",
        lambda d: (
            as_str(_first(d, "outputs").get("text")) or "",
            as_str(_first(d, "outputs").get("stop_reason")),
            None,
            None,
        ),
    ),
    # Cohere Command
    (
        "generations",
        lambda d: (
            as_str(_first(d, "generations").get("text")) or "",
            as_str(_first(d, "generations").get("finish_reason")),
            None,
            None,
        ),
    ),
    ("completions", _jurassic),  # AI21 Jurassic-2
    ("choices", _chat_choice),
)


def metrics_usage(usage: Usage | None, metrics: Any) -> Usage | None:
    m = as_obj(metrics)
    inp, out = as_int(m.get("inputTokenCount")), as_int(m.get("outputTokenCount"))
    u = filled_usage(usage, inp, out)
    if u is not None and (inp is not None or out is not None):
        u.raw = {**(u.raw or {}), "invocationMetrics": m}
    return u


def chat_body(b: dict[str, Any]) -> NormalisedResponse:
    """Mistral / Jamba chat: OpenAI's shape, Mistral's finish in the choice's ``stop_reason``."""

    resp = OpenAIChat().parse_response(b)
    if resp.finish_reason_raw is None:
        raw = _text_chunk(b)[1]
        resp.finish_reason_raw = raw
        resp.finish_reason = finish_lookup(TEXT_FINISH, raw, bool(resp.tool_calls))
    return resp


def _generations_note(others: dict[int, int]) -> list[str]:
    """What is said of generations beyond the first (Cohere Command's ``num_generations``): the
    answer is generation 0; the others are counted, never joined into it."""
    if not others:
        return []
    chars = ", ".join(
        f"generation {i}: {count(n, 'character')}" for i, n in sorted(others.items())[:8]
    )
    return [
        f"{len(others) + 1} generations (num_generations): generation 0 is read as the answer; "
        f"the others are not judged ({chars})"
    ]


def text_body(b: dict[str, Any]) -> NormalisedResponse:
    """A text model's body (Titan, Llama, Mistral text, Cohere Command, AI21, an imported
    model's OpenAI Completions)."""
    text, raw, inp, out = _text_chunk(b)
    gens = b.get("generations")
    gens = gens if isinstance(gens, list) else []
    others = {
        i: len(as_str(as_obj(g).get("text")) or "") for i, g in enumerate(gens[:256]) if i > 0
    }
    return NormalisedResponse(
        id=as_str(b.get("id")),
        parts=[Part(kind="text", text=text)] if text else [],
        finish_reason_raw=raw,
        finish_reason=finish_lookup(TEXT_FINISH, raw),
        usage=metrics_usage(None, {"inputTokenCount": inp, "outputTokenCount": out}),
        complete=True,
        notes=_generations_note(others),
    )


def text_stream(chunks: list[dict[str, Any]]) -> NormalisedResponse:
    """The chunks of a text model (Titan, Llama, Mistral, Cohere Command, AI21). Cohere Command's
    chunks of generations beyond the first (``index`` > 0) are counted, not joined."""
    text: list[str] = []
    others: dict[int, int] = {}
    finish: str | None = None
    inp = out = None
    for c in chunks:
        piece, f, i, o = _text_chunk(c)
        index = as_int(c.get("index")) or 0
        if index > 0:
            others[index] = others.get(index, 0) + len(piece)
        else:
            text.append(piece)
        finish = f or finish
        inp, out = latest_count(inp, i), latest_count(out, o)  # Llama: the input count comes once
    joined = "".join(text)
    return NormalisedResponse(
        parts=[Part(kind="text", text=joined)] if joined else [],
        finish_reason_raw=finish,
        finish_reason=finish_lookup(TEXT_FINISH, finish),
        usage=metrics_usage(None, {"inputTokenCount": inp, "outputTokenCount": out}),
        complete=finish is not None,
        notes=_generations_note(others),
    )
