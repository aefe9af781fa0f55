"""Writer's API (``api.writer.com``): ``POST /v1/chat`` and ``POST /v1/completions``.

Shapes from the official SDK (``writer-sdk-python``, ``writerai/types``), generated from Writer's
OpenAPI document:

* ``/v1/chat`` takes an OpenAI Chat Completions body (``model``, ``messages``, ``tools``,
  ``stream``) and answers ``ChatCompletion`` (``object: chat.completion``, ``choices[].message``,
  ``finish_reason`` ``stop``/``length``/``content_filter``/``tool_calls``, ``usage``); streamed,
  ``chat.completion.chunk`` events. Read by the OpenAI Chat adapter's code under this family.
* ``/v1/completions`` takes ``{"model", "prompt", "max_tokens", "stop", "stream", …}`` and answers
  ``Completion``: ``{"choices": [{"text", "log_probs"}], "model"}`` — **no finish reason and no
  usage**. Streamed, every event is a ``CompletionChunk`` ``{"value": "…"}`` and the stream ends
  when the connection closes: there is no ``[DONE]`` and no terminal event, so whether it was
  whole cannot be told from the stream (``complete`` is ``None``, never a truncation).

The path is OpenAI's legacy ``/completions`` too: on Writer's host, or for a body without
Writer's host whose stream is ``{"value"}`` events (``OpenAICompletions`` hands those here), the
Writer reading wins.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ..models import NormalisedRequest, NormalisedResponse, Part
from ..wire import Framed
from ._base import Provider
from ._profile import Profile
from ._values import as_obj, as_str
from .completions import OpenAICompletions, is_value_stream, value_stream
from .openai_chat import OpenAIChat
from .text_generation import chat_stream_without_done

__all__ = ["Writer"]


def _route(url: SplitResult) -> str | None:
    path = url.path.rstrip("/")
    if path.endswith("/v1/chat"):
        return "chat"
    if path.endswith("/v1/completions"):
        return "completions"
    return None


class Writer(Provider):
    family = "writer"
    history_keys = ("messages",)
    profile = Profile(price_provider=None, otel_provider="writer", api_key_env=("WRITER_API_KEY",))

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = _route(url)
        if method.upper() != "POST" or route is None:
            return 0
        host = (url.hostname or "").lower()
        if host == "writer.com" or host.endswith(".writer.com"):
            return 5  # over OpenAI's legacy completions, whose path this is too
        # Off Writer's host (a gateway, a base-URL override): /v1/chat with a messages body is
        # no one else's (Cohere's v1 chat sends ``message``, its v2 is /v2/chat).
        return 2 if route == "chat" and isinstance(body, dict) and "messages" in body else 0

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        adapter = OpenAIChat() if "messages" in as_obj(body) else OpenAICompletions()
        req = adapter.parse_request(body, url)
        req.family = self.family
        return req

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if any(isinstance(c, dict) and "message" in c for c in b.get("choices") or []):
            return OpenAIChat().parse_response(b)
        if "choices" not in b:
            return self.error_answer(b)
        first = next((c for c in b["choices"] if isinstance(c, dict)), {})
        text = first.get("text")
        return NormalisedResponse(
            model=as_str(b.get("model")),
            parts=[Part(kind="text", text=text)] if isinstance(text, str) and text else [],
            complete=True,
            provider_details={"choices": len(b["choices"])} if len(b["choices"]) > 1 else None,
        )

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if is_value_stream(framed):
            return value_stream(framed)

        return chat_stream_without_done(framed)
