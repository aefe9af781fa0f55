"""Aleph Alpha completions: ``POST /complete`` (``api.aleph-alpha.com``) and ``/v1/complete``
(PhariaAI inference, ``*.inference.pharia.ai``).

Shapes from the official client (``aleph-alpha-client``, ``completion.py``) and the recordings in
its test suite: the request is ``{"model", "prompt", "maximum_tokens", "stream", …}`` where
``prompt`` is a string or a list of prompt items (``{"type": "text", "data": "…"}``, ``image``,
``token_ids``); the answer is ``{"model_version", "completions": [{"completion",
"finish_reason", "raw_completion", "log_probs"}], "num_tokens_prompt_total",
"num_tokens_generated"}``. Streamed (``stream: true``), SSE ``data:`` events of three types:
``stream_chunk`` (``index``, ``completion``), ``stream_summary`` (``index``, ``model_version``,
``finish_reason``: the end of that completion) and ``completion_summary`` (the token counts: the
end of the stream). Finish reasons: ``end_of_text``, ``maximum_tokens``, ``stop_sequence_reached``.

The path is Anthropic's legacy ``/v1/complete`` too: the body tells them apart (Aleph Alpha's
``maximum_tokens`` or prompt items; Anthropic's ``max_tokens_to_sample``), and Aleph Alpha's hosts.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from cassettes.models import (
    FinishReason,
    Message,
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
    error_from_body,
    finish_lookup,
    media_part,
    summed_usage,
)
from cassettes.providers._parts import TextStream
from cassettes.wire import Framed

__all__ = ["AlephAlpha"]

_FINISH = {
    "end_of_text": FinishReason.COMPLETE,
    "stop_sequence_reached": FinishReason.COMPLETE,
    "maximum_tokens": FinishReason.TRUNCATED_LENGTH,
}


def _prompt(prompt: Any) -> list[Message]:
    if isinstance(prompt, str):
        return [Message(role="user", parts=[Part(kind="text", text=prompt)])]
    parts: list[Part] = []
    for item in prompt if isinstance(prompt, list) else []:
        d = as_obj(item)
        if d.get("type") == "text" and isinstance(d.get("data"), str):
            parts.append(Part(kind="text", text=d["data"]))
        elif d.get("type") == "image":
            parts.append(media_part({"type": "image"}, "image"))  # base64 data not kept in the part
        else:
            parts.append(
                Part(
                    kind="other",
                    text=f"[{d.get('type') or 'prompt item'}]",
                    provider_details={"type": d.get("type")},
                )
            )
    return [Message(role="user", parts=parts)] if parts else []


def _usage(b: dict[str, Any]) -> Usage | None:
    inp, out = as_int(b.get("num_tokens_prompt_total")), as_int(b.get("num_tokens_generated"))
    return summed_usage(inp, out, {"num_tokens_prompt_total": inp, "num_tokens_generated": out})


class _CompleteStream(TextStream):
    """``stream_chunk`` pieces of completion 0, its ``stream_summary`` finish, and the
    ``completion_summary`` that ends the stream with the counts."""

    payloads = TextStream.every_event
    finishes = _FINISH

    def on(self, name: str | None, ev: Any) -> None:
        if not isinstance(ev, dict):
            self.unparsed()
            return
        kind = ev.get("type")
        if (
            kind == "stream_chunk"
            and ev.get("index", 0) == 0
            and isinstance(ev.get("completion"), str)
        ):
            self.text("text", ev["completion"])
        elif kind == "stream_summary" and ev.get("index", 0) == 0:
            self.finish_raw = as_str(ev.get("finish_reason"))
            if ev.get("model_version"):  # a version date, not a model name
                self.details["model_version"] = ev["model_version"]
        elif kind == "completion_summary":
            self.usage = _usage(ev)
            self.done = True
        elif ev.get("error") is not None or ev.get("code") is not None:
            self.error = error_from_body(ev, None, in_stream=True)
        elif kind not in ("stream_chunk", "stream_summary"):
            self.unknown(as_str(kind))


class AlephAlpha(Provider):
    family = "aleph_alpha"
    history_keys = ()
    profile = Profile(
        price_provider=None,
        otel_provider="aleph_alpha",
        otel_operation="text_completion",
        api_key_env=("AA_TOKEN",),
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        path = url.path.rstrip("/")
        if method.upper() != "POST" or not (
            path.endswith("/complete") and not path.endswith("/v1/messages")
        ):
            return 0
        host = (url.hostname or "").lower()
        if "aleph-alpha" in host or host.endswith("pharia.ai"):
            return 5
        b = as_obj(body)
        items = isinstance(b.get("prompt"), list) and any(
            isinstance(p, dict) and "type" in p for p in b["prompt"]
        )
        # Anthropic's legacy /v1/complete sends max_tokens_to_sample: Aleph Alpha's body has
        # neither.
        return 4 if ("maximum_tokens" in b or items) and "max_tokens_to_sample" not in b else 0

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")),
            stream=b.get("stream") is True,
            messages=_prompt(b.get("prompt")),
            params={k: v for k, v in b.items() if k not in ("model", "prompt", "stream")},
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        completions = [c for c in b.get("completions") or [] if isinstance(c, dict)]
        if not completions and ("error" in b or "message" in b or "code" in b):
            return self.error_answer(b)
        first = completions[0] if completions else {}
        text = first.get("completion")
        raw = as_str(first.get("finish_reason"))
        details: dict[str, Any] = (
            {"model_version": b["model_version"]} if b.get("model_version") else {}
        )
        if len(completions) > 1:
            details["completions"] = len(completions)
        return NormalisedResponse(
            parts=[Part(kind="text", text=text)] if isinstance(text, str) and text else [],
            finish_reason_raw=raw,
            finish_reason=finish_lookup(_FINISH, raw),
            usage=_usage(b),
            complete=True,
            provider_details=details or None,
        )

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _CompleteStream().read(framed)
