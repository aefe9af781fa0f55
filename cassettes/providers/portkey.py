"""Portkey's prompt completions (``POST …/v1/prompts/{promptId}/completions``): a prompt template
saved in Portkey, run with the ``variables`` the client sends (and any hyperparameters it overrides:
``max_tokens``, ``temperature``, ``stream`` …). Documented in Portkey's API reference ("Prompt
Completions"): the answer is "the chat completion or completion object in the unified format which
is OpenAI signature compliant" — ``chat.completion`` (``choices[].message``) for a chat template,
``text_completion`` (``choices[].text``) for a completion one; streamed, the matching chunks over
server-sent events ending with ``[DONE]``.

The request carries no messages: the template is rendered on Portkey's side, so what the model read
is not on the wire. The turn holds none (each call its own conversation); the prompt id and the
variables are kept as the request's parameters.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import SplitResult

from ..models import NormalisedRequest, NormalisedResponse
from ..wire import Framed
from ._base import Provider
from ._profile import Profile
from ._values import as_obj, as_str, json_events
from .completions import OpenAICompletions
from .openai_chat import OpenAIChat

__all__ = ["PortkeyPrompt"]

_PATH = re.compile(r"/prompts/([^/]+)/completions$")


def _prompt_id(url: SplitResult) -> str | None:
    m = _PATH.search(url.path.rstrip("/"))
    return m.group(1) if m else None


class PortkeyPrompt(Provider):
    family = "portkey_prompt"
    history_keys = ()
    profile = Profile(otel_provider="portkey", api_key_env=("PORTKEY_API_KEY",))

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST" or _prompt_id(url) is None:
            return 0
        host = (url.hostname or "").lower()
        if host == "portkey.ai" or host.endswith(".portkey.ai"):
            return 5  # over OpenAI's legacy completions, whose path ending this is too
        return 4 if isinstance(body, dict) and isinstance(body.get("variables"), dict) else 0

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        params: dict[str, Any] = {k: v for k, v in b.items() if k not in ("stream", "model")}
        params["prompt_id"] = _prompt_id(url)
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")),
            stream=b.get("stream") is True,
            params=params,
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if b.get("object") == "text_completion" or any(
            isinstance(c, dict) and "text" in c and "message" not in c
            for c in b.get("choices") or []
        ):
            return OpenAICompletions().parse_response(b)
        return OpenAIChat().parse_response(b)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        # the first JSON object tells a chat template's chunks from a completion one's
        first = next((d for _, d in json_events(framed) if isinstance(d, dict)), None)
        chat = (
            first is None
            or first.get("object") == "chat.completion.chunk"
            or any(isinstance(c, dict) and "delta" in c for c in first.get("choices") or [])
        )
        return (OpenAIChat() if chat else OpenAICompletions()).reassemble(framed)
