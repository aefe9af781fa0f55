"""Anthropic's legacy Text Completions API, ``POST …/v1/complete`` (and the same body on Bedrock
InvokeModel for ``anthropic.claude-v2*`` / ``claude-instant``, routed here by the Bedrock adapter).

Schema: the ``anthropic`` SDK's ``Completion`` type and ``CompletionCreateParams``
(``tests/cassettes/providers/test_anthropic_complete.py`` validates the fixtures against them).

* The request's ``prompt`` is one string of ``\\n\\nHuman: … \\n\\nAssistant:`` turns; it is split
  back into user/assistant messages at those markers (text before the first marker is a system
  prompt). ``max_tokens_to_sample`` and the rest stay in ``params``.
* The response is ``{"type": "completion", "completion", "stop_reason", "model", "stop"}``;
  ``stop_reason`` is ``stop_sequence`` or ``max_tokens``. The API reports **no token usage**:
  usage is ``None`` and so is the cost (unknown, not zero).
* Streams are SSE ``completion`` events, each with a piece of ``completion``; the last carries
  the ``stop_reason``. ``ping`` events are skipped; an ``error`` event is an in-stream error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import SplitResult

from ...models import FinishReason, Message, NormalisedRequest, NormalisedResponse, Part
from ...wire import Framed
from .._base import Provider
from .._parts import TextStream
from .._profile import Profile
from .._values import as_obj, as_str, error_from_body, finish_lookup, json_events

__all__ = ["AnthropicComplete", "complete_request", "complete_response"]

_FINISH = {
    "stop_sequence": FinishReason.COMPLETE,
    "max_tokens": FinishReason.TRUNCATED_LENGTH,
}

_TURN = re.compile(r"\n\n(Human|Assistant):")


def prompt_turns(prompt: str) -> tuple[list[Part], list[Message]]:
    """(system parts, messages) of a ``Human:``/``Assistant:`` prompt; a trailing empty
    ``Assistant:`` (the cue for the model) makes no message."""
    pieces = _TURN.split(prompt)
    head = pieces[0].strip()
    system = [Part(kind="text", text=head)] if head else []
    messages: list[Message] = []
    for i in range(1, len(pieces) - 1, 2):
        role = "user" if pieces[i] == "Human" else "assistant"
        text = pieces[i + 1].strip()
        if text:
            messages.append(Message(role=role, parts=[Part(kind="text", text=text)]))
    return system, messages


def complete_request(
    b: dict[str, Any], family: str, model: str | None, stream: bool
) -> NormalisedRequest:
    prompt = b.get("prompt")
    system, messages = prompt_turns(prompt) if isinstance(prompt, str) else ([], [])
    return NormalisedRequest(
        family=family,
        model=as_str(b.get("model")) or model,
        stream=stream,
        system=system,
        messages=messages,
        params={k: v for k, v in b.items() if k not in ("model", "prompt", "stream")},
    )


def complete_response(b: dict[str, Any]) -> NormalisedResponse:
    text = b.get("completion")
    raw = as_str(b.get("stop_reason"))
    details = {k: b[k] for k in ("stop", "log_id") if b.get(k) is not None}
    return NormalisedResponse(
        id=as_str(b.get("id")),
        model=as_str(b.get("model")),
        parts=[Part(kind="text", text=text)] if isinstance(text, str) and text else [],
        finish_reason_raw=raw,
        finish_reason=finish_lookup(_FINISH, raw),
        complete=True,
        provider_details=details or None,
    )


class AnthropicComplete(Provider):
    family = "anthropic_complete"
    history_keys = ()
    profile = Profile(
        stream_end="a completion event's stop_reason",
        finishes=_FINISH,
        price_provider="anthropic",
        otel_provider="anthropic",
        otel_operation="text_completion",
        replay_headers=("anthropic-version",),
        api_key_env=("ANTHROPIC_API_KEY",),
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST" or not url.path.rstrip("/").endswith("/v1/complete"):
            return 0
        return 3 if isinstance(body, dict) and "prompt" in body else 2

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        return complete_request(b, self.family, None, b.get("stream") is True)

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if b.get("type") == "error" or ("error" in b and "completion" not in b):
            return self.error_answer(b)
        return complete_response(b)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _CompletionStream().read(framed)


class _CompletionStream(TextStream):
    """Text Completions events: ``completion`` pieces, the ``stop_reason`` on the last."""

    finishes = _FINISH

    def payloads(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        for name, ev in json_events(framed):
            if name != "ping" and not (isinstance(ev, dict) and ev.get("type") == "ping"):
                self.count()
                yield name, ev

    def on(self, name: str | None, ev: Any) -> None:
        if not isinstance(ev, dict):
            return
        if name == "error" or ev.get("type") == "error":
            self.error = error_from_body(ev, None, in_stream=True)
            return
        self.first("id", ev.get("id"))
        self.first("model", ev.get("model"))
        if isinstance(ev.get("completion"), str):
            self.text("text", ev["completion"])
        if ev.get("stop_reason") is not None:
            self.finish_raw = as_str(ev["stop_reason"])

    def complete(self) -> bool:
        return self.finish_raw is not None and self.error is None
