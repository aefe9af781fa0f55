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

from ... import bounds
from ...models import (
    ApiError,
    FinishReason,
    NormalisedRequest,
    NormalisedResponse,
    Usage,
)
from ...wire import Event, Framed
from .._base import Provider
from .._parts import StreamParts
from .._profile import Profile
from .._values import as_int, as_obj, as_str, aws_payload_bytes
from ..anthropic import AnthropicComplete, complete_request, complete_response
from ..cohere import reassemble_v1, v1_request, v1_response
from ..completions import prompt_messages
from ..embeddings import vectors_summary
from ..openai_chat import OpenAIChat
from ._body import (
    guardrail_only_masked,
    model_action,
    priced_model,
    with_masks,
)
from ._converse import BedrockConverse, BedrockReplay
from ._stream import CONVERSE_EVENTS
from ._text_models import (
    TEXT_FINISH,
    chat_body,
    metrics_usage,
    text_body,
    text_stream,
)

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


def _invoke_target(url: SplitResult) -> tuple[str, str] | None:
    found = model_action(url)
    return found if found is not None and found[1] in _INVOKE_ACTIONS else None


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


def _synthetic(kind: Any, items: Sequence[tuple[str | None, Any]]) -> Framed:
    return Framed(kind, [Event(data=orjson.dumps(v).decode(), event=name) for name, v in items])


class BedrockInvoke(Provider):
    family = "bedrock_invoke"
    parsed_operations = frozenset({"generate", "embed"})
    history_keys = ("messages", "chat_history")
    profile = Profile(
        stream_end=(
            "each model family's own final chunk: Claude's message_stop or stop_reason, Titan's "
            "completionReason, Llama's and Mistral's stop_reason, Cohere Command's is_finished "
            "with finish_reason, Mistral / Jamba chat's finish_reason, Nova's messageStop"
        ),
        finishes=TEXT_FINISH,
        price_provider="aws",
        price_model=priced_model,
        otel_provider="aws.bedrock",
    )
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
        model = (self.model_from_url(url) or "").lower()
        if "rerank" in model:
            return "rerank"  # Cohere Rerank, Amazon Rerank: a ranking, not a turn
        return "embed" if "embed" in model else "generate"

    def body_operation(self, operation: str, body: Any) -> str:
        """A ranking call whatever the model id (a provisioned or imported ARN): ``query`` and
        ``documents``, no prompt nor messages."""
        b = as_obj(body)
        if operation == "generate" and "query" in b and "documents" in b and "messages" not in b:
            return "rerank"
        return operation

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
        models' shapes (:mod:`~cassettes.providers.bedrock._text_models`) otherwise."""
        if (
            ("message" in b or "Message" in b)
            and len(b) <= 2
            and not isinstance(b.get("message"), dict)
        ):
            return self.error_answer(b)
        read = next((read for test, read in _BODY_SHAPES if test(b)), text_body)
        return read(b)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _InvokeStream().read(framed)

    def add_header_facts(
        self, response: NormalisedResponse, header: Callable[[str], str | None]
    ) -> None:
        super().add_header_facts(response, header)  # (the error's type in its header)
        response.usage = metrics_usage(
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
    (lambda b: "completion" in b and "stop_reason" in b, complete_response),  # Claude 2
    (
        lambda b: (
            "response_id" in b
            or "generation_id" in b
            or ("text" in b and "finish_reason" in b and "is_finished" not in b)
        ),
        v1_response,
    ),
    (lambda b: "choices" in b and not _completion_choices(b), chat_body),
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
        resp.usage = metrics_usage(resp.usage, self.metrics)
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
    return text_stream(chunks)
