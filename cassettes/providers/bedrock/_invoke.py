"""Amazon Bedrock InvokeModel with the model's own body: ``/model/{modelId}/invoke`` and
``/invoke-with-response-stream`` for every body but Anthropic Messages (the Anthropic adapter's).
The Converse API is :mod:`cassettes.providers.bedrock`; the helpers both share are in its
:mod:`~cassettes.providers.bedrock._body`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import SplitResult

import orjson

from cassettes import bounds
from cassettes.models import (
    ApiError,
    FinishReason,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    Usage,
)
from cassettes.providers._base import (
    Profile,
    Provider,
    as_int,
    as_obj,
    as_str,
    aws_payload_bytes,
    finish_lookup,
    latest_count,
)
from cassettes.providers._parts import StreamParts
from cassettes.providers.anthropic import AnthropicComplete, complete_request, complete_response
from cassettes.providers.bedrock._body import (
    guardrail_only_masked,
    model_action,
    priced_model,
    with_masks,
)
from cassettes.providers.bedrock._converse import BedrockConverse, BedrockReplay
from cassettes.providers.bedrock._stream import CONVERSE_EVENTS
from cassettes.providers.cohere import reassemble_v1, v1_request, v1_response
from cassettes.providers.embeddings import vectors_summary
from cassettes.providers.openai_chat import OpenAIChat
from cassettes.providers.openai_completions import prompt_messages
from cassettes.wire.framing import Event, Framed

__all__ = ["BedrockInvoke"]

# -- InvokeModel with the model's own body (everything but Anthropic Messages) ------------------
#
# ``/model/{id}/invoke`` and ``/invoke-with-response-stream`` carry each model vendor's native body
# (Bedrock's "inference parameters for foundation models" reference). Anthropic Messages bodies
# (``anthropic_version`` with ``messages``) belong to the Anthropic adapter; everything else is
# read here by its shape, and the model id in the URL tells the rest:
#
# * Amazon Nova — the Converse shapes (``schemaVersion: messages-v1``; ``output.message``,
#   ``stopReason``, ``usage``); the stream's chunks are Converse events keyed by name.
# * Amazon Titan Text — ``inputText`` → ``results[0].outputText`` / ``completionReason``
#   (``FINISH``, ``LENGTH``, ``CONTENT_FILTERED``), ``inputTextTokenCount``, ``tokenCount``.
# * Meta Llama — ``prompt`` → ``generation``, ``stop_reason``, ``prompt_token_count``,
#   ``generation_token_count``.
# * Mistral — text ``prompt`` → ``outputs[0].text`` / ``stop_reason``; chat ``messages`` (Mistral
#   Large) → OpenAI-like ``choices`` whose finish is ``stop_reason``.
# * Cohere — Command R ``message``/``chat_history`` (Cohere v1 chat, read by the Cohere adapter's
#   code); Command ``prompt`` → ``generations[0].text`` / ``finish_reason``; Embed ``texts``.
# * AI21 — Jamba ``messages`` → OpenAI-like ``choices`` and ``usage``; Jurassic-2 ``prompt`` →
#   ``completions[0].data.text`` / ``finishReason.reason``.
# * Anthropic's legacy ``prompt`` (Claude 2 / Instant) → read as the Text Completions API.
# * Embedding models (an ``embed`` model id): Titan ``inputText`` → ``embedding``,
#   ``inputTextTokenCount``; Cohere ``texts`` → ``embeddings``. Operation ``embed`` (not a turn).
#
# * A custom-imported model (Custom Model Import) → its container's OpenAI Completions body
#   (``choices[].text``, ``finish_reason``, ``usage``), streamed as the same chunks.
#
# With a guardrail applied, InvokeModel puts ``amazon-bedrock-guardrailAction`` (``INTERVENED`` /
# ``NONE``) and ``amazon-bedrock-trace`` beside the model's keys, in the body and in stream
# chunks; they are taken out before the model's format is read (a key beside a known event never
# hides it), and an intervention ends the answer as blocked (``prompt_blocked`` when the trace
# says the input was, else ``filtered``), whole — unless its trace says it only masked personal
# data (``ANONYMIZED``, no ``BLOCKED``): then the model's answer and finish stand.
#
# Usage the body lacks comes from the ``x-amzn-bedrock-input-token-count`` /
# ``-output-token-count`` response headers, and in streams from the last chunk's
# ``amazon-bedrock-invocationMetrics``.

_INVOKE_ACTIONS = ("invoke", "invoke-with-response-stream")

_TEXT_FINISH = {
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


def _invoke_target(url: SplitResult) -> tuple[str, str] | None:
    found = model_action(url)
    return found if found is not None and found[1] in _INVOKE_ACTIONS else None


def _is_embed_model(model: str | None) -> bool:
    return "embed" in (model or "").lower()


TextChunk = tuple[str, str | None, int | None, int | None]


def _text_chunk(d: dict[str, Any]) -> TextChunk:
    """(text piece, finish, input tokens, output tokens) of a text-model body or stream chunk."""
    for key, read in _TEXT_SHAPES:
        if key in d:
            return read(d)
    if "text" in d and "is_finished" in d:  # Cohere Command stream chunk
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


#: The keys InvokeModel adds beside a model's own body or stream chunk when a guardrail is
#: applied (InvokeModel API reference): the action (``INTERVENED`` / ``NONE``) and its trace.
_GUARDRAIL_ACTION = "amazon-bedrock-guardrailAction"
_GUARDRAIL_KEYS = (_GUARDRAIL_ACTION, "amazon-bedrock-trace")


def _pop_guardrail(d: dict[str, Any], into: dict[str, Any]) -> None:
    """Move the guardrail keys out of a body or chunk into ``into`` (an intervention is kept over
    a later ``NONE``)."""
    for key in _GUARDRAIL_KEYS:
        if key in d:
            value = d.pop(key)
            if key != _GUARDRAIL_ACTION or into.get(key) != "INTERVENED":
                into[key] = value


def _input_blocked(trace: Any) -> bool:
    """The guardrail trace says the *input* was blocked (``guardrail.input.{id}.…action:
    BLOCKED``)."""
    guard = as_obj(as_obj(trace).get("guardrail"))
    return "BLOCKED" in orjson.dumps(guard.get("input")).decode() if guard.get("input") else False


def _apply_guardrail(resp: NormalisedResponse, found: dict[str, Any]) -> NormalisedResponse:
    """A guardrail that intervened ended the answer: it is blocked (``prompt_blocked`` when the
    trace says the input was, else ``filtered``), whole, never truncated — unless its trace says it
    only masked personal data (``ANONYMIZED``), which Bedrock reports as an intervention too."""
    if not found:
        return resp
    resp.provider_details = with_masks(
        {
            **(resp.provider_details or {}),
            **{k.removeprefix("amazon-bedrock-"): v for k, v in found.items()},
        }
    )
    if found.get(_GUARDRAIL_ACTION) != "INTERVENED" or guardrail_only_masked(
        found.get("amazon-bedrock-trace")
    ):
        # a guardrail that only masked leaves the model's answer and finish as they were
        return resp
    if resp.finish_reason not in (FinishReason.FILTERED, FinishReason.PROMPT_BLOCKED):
        resp.finish_reason = (
            FinishReason.PROMPT_BLOCKED
            if _input_blocked(found.get("amazon-bedrock-trace"))
            else FinishReason.FILTERED
        )
        resp.finish_reason_raw = resp.finish_reason_raw or "guardrailAction: INTERVENED"
    resp.complete = True
    return resp


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


def _metrics_usage(usage: Usage | None, metrics: Any) -> Usage | None:
    m = as_obj(metrics)
    inp, out = as_int(m.get("inputTokenCount")), as_int(m.get("outputTokenCount"))
    if inp is None and out is None:
        return usage
    u = usage or Usage()
    u.input_tokens = u.input_tokens if u.input_tokens is not None else inp
    u.output_tokens = u.output_tokens if u.output_tokens is not None else out
    if u.input_tokens is not None and u.output_tokens is not None and u.total_tokens is None:
        u.total_tokens = u.input_tokens + u.output_tokens
    u.raw = {**(u.raw or {}), "invocationMetrics": m}
    return u


def _synthetic(kind: Any, items: Sequence[tuple[str | None, Any]]) -> Framed:
    return Framed(kind, [Event(data=orjson.dumps(v).decode(), event=name) for name, v in items])


class BedrockInvoke(Provider):
    family = "bedrock_invoke"
    history_keys = ("messages", "chat_history")
    profile = Profile(price_provider="aws", price_model=priced_model, otel_provider="aws.bedrock")
    replay = BedrockReplay()

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST" or _invoke_target(url) is None:
            return 0
        if isinstance(body, dict) and "anthropic_version" in body and "messages" in body:
            return 0  # Anthropic Messages on Bedrock: the Anthropic adapter's
        if (
            isinstance(body, dict)
            and "prompt" in body
            and "anthropic" in (self.model_from_url(url) or "")
        ):
            return 4  # Claude 2's legacy prompt, even with anthropic_version set
        return 2

    def operation(self, method: str, url: SplitResult) -> str:
        return "embed" if _is_embed_model(self.model_from_url(url)) else "generate"

    def parses(self, operation: str) -> bool:
        return operation in ("generate", "embed")

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        found = _invoke_target(url)
        return found is not None and found[1] == "invoke-with-response-stream"

    def model_from_url(self, url: SplitResult) -> str | None:
        found = model_action(url)
        return found[0] if found else None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: dict[str, Any] = as_obj(body)
        model = self.model_from_url(url)
        stream = self.is_stream(url, b)
        if "anthropic" in (model or "") and "prompt" in b:
            return complete_request(b, self.family, model, stream)
        if "message" in b or "chat_history" in b:
            return v1_request(b, self.family, model, stream)
        if "messages" in b and ("schemaVersion" in b or "nova" in (model or "")):
            req = BedrockConverse().parse_request(b, url)
            req.family = self.family
            return req
        if "messages" in b:
            req = OpenAIChat().parse_request(b, url)
            req.family, req.model, req.stream = self.family, model, stream
            return req
        key = next((k for k in ("inputText", "prompt", "texts") if k in b), None)
        params = {k: v for k, v in b.items() if k != key}
        if isinstance(b.get("textGenerationConfig"), dict):
            params.update(params.pop("textGenerationConfig"))
        return NormalisedRequest(
            family=self.family,
            model=model,
            stream=stream,
            messages=prompt_messages(b.get(key)) if key else [],
            params=params,
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
        guard: dict[str, Any] = {}
        _pop_guardrail(b, guard)
        return _apply_guardrail(self._parse_body(b), guard)

    def _parse_body(self, b: dict[str, Any]) -> NormalisedResponse:
        """The body read by the first of the known shapes it has (``_BODY_SHAPES``); the text
        models' shapes (``_TEXT_SHAPES``) otherwise."""
        if (
            ("message" in b or "Message" in b)
            and len(b) <= 2
            and not isinstance(b.get("message"), dict)
        ):
            return self.error_answer(b)
        read = next((read for test, read in _BODY_SHAPES if test(b)), _text_body)
        return read(b)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _InvokeStream().read(framed)

    def add_header_facts(
        self, response: NormalisedResponse, header: Callable[[str], str | None]
    ) -> None:
        response.usage = _metrics_usage(
            response.usage,
            {
                "inputTokenCount": header("x-amzn-bedrock-input-token-count"),
                "outputTokenCount": header("x-amzn-bedrock-output-token-count"),
            },
        )

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        return BedrockConverse().parse_error(body, status)


def _embedding_body(b: dict[str, Any]) -> NormalisedResponse:
    """Titan ``embedding`` / Cohere ``embeddings``: usage only."""

    n = as_int(b.get("inputTextTokenCount"))
    return NormalisedResponse(
        id=as_str(b.get("id")),
        usage=Usage(input_tokens=n, total_tokens=n, raw={"inputTextTokenCount": n})
        if n is not None
        else None,
        complete=True,
        provider_details=vectors_summary(
            b.get("embeddings") if "embeddings" in b else [b.get("embedding")]
        )
        or None,
    )


def _complete_body(b: dict[str, Any]) -> NormalisedResponse:
    return complete_response(b)


def _cohere_body(b: dict[str, Any]) -> NormalisedResponse:
    return v1_response(b)


def _chat_body(b: dict[str, Any]) -> NormalisedResponse:
    """Mistral / Jamba chat: OpenAI's shape, Mistral's finish in the choice's ``stop_reason``."""

    resp = OpenAIChat().parse_response(b)
    if resp.finish_reason_raw is None:
        raw = _text_chunk(b)[1]
        resp.finish_reason_raw = raw
        resp.finish_reason = finish_lookup(_TEXT_FINISH, raw, bool(resp.tool_calls))
    return resp


def _text_body(b: dict[str, Any]) -> NormalisedResponse:
    """A text model's body (Titan, Llama, Mistral text, Cohere Command, AI21, an imported
    model's OpenAI Completions)."""
    text, raw, inp, out = _text_chunk(b)
    return NormalisedResponse(
        id=as_str(b.get("id")),
        parts=[Part(kind="text", text=text)] if text else [],
        finish_reason_raw=raw,
        finish_reason=finish_lookup(_TEXT_FINISH, raw),
        usage=_metrics_usage(None, {"inputTokenCount": inp, "outputTokenCount": out}),
        complete=True,
    )


def _completion_choices(b: dict[str, Any]) -> bool:
    """OpenAI Completions choices (``text``, no ``message``): a custom-imported model's body."""
    return any(
        isinstance(c, dict) and "text" in c and "message" not in c for c in b.get("choices") or []
    )


#: (test, reader) of the bodies that are not a text model's, first match wins.
_BODY_SHAPES: tuple[
    tuple[Callable[[dict[str, Any]], bool], Callable[[dict[str, Any]], NormalisedResponse]], ...
] = (
    # Nova: Converse's shape
    (lambda b: isinstance(b.get("output"), dict), lambda b: BedrockConverse().parse_response(b)),
    (lambda b: "embedding" in b or "embeddings" in b, _embedding_body),
    (lambda b: "completion" in b and "stop_reason" in b, _complete_body),  # Claude 2
    (
        lambda b: (
            "response_id" in b
            or "generation_id" in b
            or ("text" in b and "finish_reason" in b and "is_finished" not in b)
        ),
        _cohere_body,
    ),
    (lambda b: "choices" in b and not _completion_choices(b), _chat_body),
)


class _InvokeStream(StreamParts):
    """InvokeModel stream chunks (each the model's own stream event, base64 in a frame) → the
    answer, read by the reader of the model's own format (told by the chunks' shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[dict[str, Any]] = []
        self.metrics: Any = None
        #: The guardrail keys InvokeModel put beside the chunks (``_pop_guardrail``).
        self.guardrail: dict[str, Any] = {}

    def payloads(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        for ev in framed.events:
            self.count()
            headers = ev.headers or {}
            if headers.get(":message-type") in ("exception", "error"):
                self.error = BedrockConverse().parse_error(ev.data, None)
                self.error.type = self.error.type or as_str(
                    headers.get(":exception-type") or headers.get(":error-code")
                )
                self.error.in_stream = True
                continue
            raw = aws_payload_bytes(ev)
            try:
                d = bounds.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                d = None
            yield None, d

    def on(self, name: str | None, d: Any) -> None:
        if isinstance(d, dict):
            self.metrics = d.pop("amazon-bedrock-invocationMetrics", self.metrics)
            _pop_guardrail(d, self.guardrail)
            for v in d.values():  # a Converse-shaped chunk may carry the keys inside its event
                if isinstance(v, dict):
                    _pop_guardrail(v, self.guardrail)
            if d:
                self.chunks.append(d)

    def close(self) -> NormalisedResponse:
        resp = _apply_guardrail(_read_chunks(self.chunks), self.guardrail)
        resp.usage = _metrics_usage(resp.usage, self.metrics)
        self.done = resp.complete is True
        return self.finish(resp)


def _chunk_format(chunks: list[dict[str, Any]]) -> str:
    """Whose stream format an InvokeModel stream's chunks are in."""
    if any(
        k in c for c in chunks for k in ("messageStart", "contentBlockDelta", "contentBlockStart")
    ):
        return "nova"  # Converse's events, keyed by name
    if any("event_type" in c for c in chunks):
        return "cohere"  # Command R: Cohere v1 chat
    if any("completion" in c for c in chunks):
        return "anthropic"  # Claude 2's Text Completions
    if any("delta" in ch for c in chunks for ch in c.get("choices") or [] if isinstance(ch, dict)):
        return "chat"  # Mistral / Jamba chat: OpenAI's chunks
    return "text"


#: The Converse stream's event names (Nova's InvokeModel chunks are keyed by them).
_NOVA_EVENTS = frozenset({*CONVERSE_EVENTS, "contentBlockStop"})


def _read_chunks(chunks: list[dict[str, Any]]) -> NormalisedResponse:
    fmt = _chunk_format(chunks)
    if fmt == "nova":
        # Each chunk is one Converse event keyed by its name; a key beside it that is no event
        # (one InvokeModel or a later model version adds) never hides the event.
        named = [(k, v) for c in chunks for k, v in c.items() if k in _NOVA_EVENTS]
        extra = {k: v for c in chunks for k, v in c.items() if k not in _NOVA_EVENTS}
        resp = BedrockConverse().reassemble(_synthetic("aws_eventstream", named))
        if extra:
            resp.provider_details = {**(resp.provider_details or {}), "chunk_keys": extra}
        if not resp.complete and resp.finish_reason_raw is not None:
            resp.complete = True  # Nova's invoke stream may end without Converse's metadata event
        return resp
    if fmt == "cohere":
        return reassemble_v1(_synthetic("ndjson", [(None, c) for c in chunks]))
    if fmt == "anthropic":
        return AnthropicComplete().reassemble(
            _synthetic("sse", [("completion", c) for c in chunks])
        )
    if fmt == "chat":
        resp = OpenAIChat().reassemble(_synthetic("sse", [(None, c) for c in chunks]))
        resp.complete = resp.finish_reason_raw is not None
        return resp
    return _text_stream(chunks)


def _text_stream(chunks: list[dict[str, Any]]) -> NormalisedResponse:
    """The chunks of a text model (Titan, Llama, Mistral, Cohere Command, AI21)."""
    text: list[str] = []
    finish: str | None = None
    inp = out = None
    for c in chunks:
        piece, f, i, o = _text_chunk(c)
        text.append(piece)
        finish = f or finish
        inp, out = latest_count(inp, i), latest_count(out, o)  # Llama: the input count comes once
    joined = "".join(text)
    return NormalisedResponse(
        parts=[Part(kind="text", text=joined)] if joined else [],
        finish_reason_raw=finish,
        finish_reason=finish_lookup(_TEXT_FINISH, finish),
        usage=_metrics_usage(None, {"inputTokenCount": inp, "outputTokenCount": out}),
        complete=finish is not None,
    )
