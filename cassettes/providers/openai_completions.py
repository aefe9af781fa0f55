"""OpenAI's legacy text completions, ``POST …/completions`` (not ``/chat/completions``), as served
by OpenAI, Azure OpenAI (``/openai/deployments/{name}/completions``), vLLM, Together and the other
OpenAI-compatible servers.

Schema: the ``openai`` SDK's ``Completion`` / ``CompletionChoice`` / ``CompletionUsage`` types
(``tests/cassettes/providers/test_text_completions.py`` validates the fixtures against them).

* The request's ``prompt`` (a string, a list of strings, or token arrays) becomes one user message
  per prompt; ``suffix`` is kept in ``params``. There is no history, so ``history_key`` is ``None``.
* The response's ``choices[0].text`` is the text; other choices are counted in
  ``provider_details``. ``finish_reason`` is ``stop``/``length``/``content_filter`` (OpenAI);
  vLLM adds ``stop_reason`` (the matched stop string or token id, kept), Together sends ``eos``
  (a stop) and reports ``null`` with the usage on a last chunk.
* Streams are SSE chunks of the same object ending in ``data: [DONE]``; usage comes on the last
  chunk when ``stream_options.include_usage`` is set (OpenAI), or on every chunk (vLLM: last wins).
* Text completions have no tool calls.
* Writer's completion stream (:mod:`cassettes.providers.writer`), which this path also serves: every
  event a ``{"value": str}`` chunk, no ``[DONE]`` and no terminal event; read here for both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import SplitResult

from cassettes.models import FinishReason, Message, NormalisedRequest, NormalisedResponse, Part
from cassettes.providers._base import (
    Profile,
    Provider,
    as_obj,
    as_str,
    azure_deployment,
    error_from_body,
    finish_lookup,
    json_events,
    text_parts,
)
from cassettes.providers._parts import TextStream
from cassettes.providers.openai_chat import usage_from
from cassettes.wire import Framed

__all__ = [
    "OpenAICompletions",
    "is_value_stream",
    "prompt_messages",
    "value_stream",
]

_FINISH = {
    "stop": FinishReason.COMPLETE,
    "eos": FinishReason.COMPLETE,  # Together
    "eos_token": FinishReason.COMPLETE,
    "stop_sequence": FinishReason.COMPLETE,
    "length": FinishReason.TRUNCATED_LENGTH,
    "content_filter": FinishReason.FILTERED,
    "abort": FinishReason.CANCELLED,  # vLLM
    "error": FinishReason.ERROR,
}

_STRUCTURAL = {"model", "prompt", "stream"}


def prompt_messages(prompt: Any) -> list[Message]:
    """A completion prompt (string, list of strings, token ids, list of token-id lists) as user
    messages, one per prompt; token ids are described, not decoded."""
    if prompt is None:
        return []
    items = (
        prompt
        if isinstance(prompt, list) and not all(isinstance(t, int) for t in prompt)
        else [prompt]
    )
    out: list[Message] = []
    for item in items:
        if isinstance(item, str):
            out.append(Message(role="user", parts=[Part(kind="text", text=item)]))
        elif isinstance(item, list):
            out.append(
                Message(
                    role="user",
                    parts=[
                        Part(
                            kind="other",
                            text=f"[{len(item)} prompt token ids]",
                            provider_details={"tokens": len(item)},
                        )
                    ],
                )
            )
        else:
            out.append(
                Message(role="user", parts=[Part(kind="other", provider_details={"block": item})])
            )
    return out


class _Completion(TextStream):
    """Choice 0's text and finish, folded over stream chunks or read from one body."""

    finishes = _FINISH

    def choices(self, chunk: dict[str, Any]) -> None:
        for ch in chunk.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            if ch.get("index", 0) != 0:
                self.details["choices"] = max(
                    self.details.get("choices", 1), int(ch.get("index") or 0) + 1
                )
                continue
            if isinstance(ch.get("text"), str):
                self.text("text", ch["text"])
            if ch.get("finish_reason") is not None:
                self.finish_raw = as_str(ch["finish_reason"])
            if ch.get("stop_reason") is not None:  # vLLM: the stop string or token that matched
                self.details["stop_reason"] = ch["stop_reason"]
            if ch.get("logprobs") is not None:
                self.details["logprobs"] = True
        for key in ("system_fingerprint", "object"):
            if chunk.get(key) is not None:
                self.details[key] = chunk[key]

    def payloads(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        for name, chunk in json_events(framed):
            if name == "[DONE]":  # the sentinel, or an event named so
                self.done = True
                continue
            self.count()
            yield name, chunk

    def on(self, name: str | None, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            self.unparsed()
            return
        if chunk.get("error"):
            self.error = error_from_body(chunk, None, in_stream=True)
            return
        self.first("id", chunk.get("id"))
        self.first("model", chunk.get("model"))
        if chunk.get("usage"):
            self.add_usage(usage_from(chunk["usage"]))
        self.choices(chunk)


class OpenAICompletions(Provider):
    family = "openai_completions"
    history_keys = ()
    profile = Profile(
        model_vendor="openai",
        otel_provider="openai",
        otel_operation="text_completion",
        api_key_env=("OPENAI_API_KEY",),
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        path = url.path.rstrip("/")
        if (
            method.upper() != "POST"
            or not path.endswith("/completions")
            or path.endswith("/chat/completions")
        ):
            return 0
        # Other "…/completions" routes (fill-in-the-middle under /fim/, Anthropic's /complete is
        # elsewhere) have their own shapes: only a body with a prompt is claimed firmly.
        if "/fim/" in path:
            return 0
        if isinstance(body, dict) and "prompt" in body:
            return 3
        return 1 if isinstance(body, dict) and "model" in body else 0

    def model_from_url(self, url: SplitResult) -> str | None:
        return azure_deployment(url)

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or self.model_from_url(url),
            stream=b.get("stream") is True,
            messages=prompt_messages(b.get("prompt")),
            params={k: v for k, v in b.items() if k not in _STRUCTURAL},
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if "error" in b and not b.get("choices"):
            return self.error_answer(b)
        ch = _Completion(in_stream=False)
        ch.choices(b)
        return NormalisedResponse(
            id=as_str(b.get("id")),
            model=as_str(b.get("model")),
            parts=text_parts(ch.joined("text")),
            finish_reason_raw=ch.finish_raw,
            finish_reason=finish_lookup(_FINISH, ch.finish_raw)
            if ch.finish_raw is not None
            else (FinishReason.UNKNOWN if b.get("choices") else None),
            usage=usage_from(b.get("usage")),
            complete=True,
            provider_details=ch.details or None,
        )

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if is_value_stream(framed):  # Writer's completions behind another host: no [DONE] to expect
            return value_stream(framed)
        return _Completion().read(framed)


# -- Writer's completion stream ----------------------------------------------------------------


def is_value_stream(framed: Framed) -> bool:
    """Every JSON event of the stream is Writer's ``{"value": str}`` completion chunk."""
    seen = False
    for name, ev in json_events(framed):
        if name == "[DONE]":
            return False
        if not (isinstance(ev, dict) and isinstance(ev.get("value"), str) and "choices" not in ev):
            return False
        seen = True
    return seen


class _ValueStream(TextStream):
    payloads = TextStream.every_event

    def on(self, name: str | None, ev: Any) -> None:
        if isinstance(ev, dict) and isinstance(ev.get("value"), str):
            self.text("text", ev["value"])
        elif isinstance(ev, dict) and ev.get("error") is not None:
            self.error = error_from_body(ev, None, in_stream=True)
        else:
            self.unparsed()

    def close(self) -> NormalisedResponse:
        resp = super().close()
        if resp.error is None:
            resp.complete = None  # the API sends no terminal event: a whole stream cannot be told
            resp.notes.append(
                "Writer completion stream: the API sends no finish reason and no end event, so "
                "completeness cannot be told"
            )
        return resp


def value_stream(framed: Framed) -> NormalisedResponse:
    """A stream of Writer ``{"value"}`` completion chunks → the answer."""
    return _ValueStream().read(framed)
