"""IBM watsonx.ai; the prompt and chat bodies it shares with TGI and SageMaker are read in
:mod:`cassettes.providers.text_generation`.

**watsonx.ai** (``…/ml/v1/text/{generation,generation_stream,chat,chat_stream,embeddings}``,
``…/ml/v1/deployments/{id}/text/…`` and the beta API's
``…/ml/v1-beta/generation/{text,text_stream}``; documented in the watsonx.ai REST API reference):
``generation`` takes ``{"input", "model_id", "parameters"}`` and answers ``{"model_id",
"results": [{"generated_text", "generated_token_count", "input_token_count", "stop_reason"}]}``;
``generation_stream`` sends the same object per SSE event (the output count cumulative, the input
count on the first event and 0 on the later ones, ``stop_reason`` ``not_finished`` until the
last). ``chat`` / ``chat_stream`` are OpenAI Chat Completions bodies with ``model_id`` for
``model`` (parsed by the OpenAI Chat adapter's code). ``embeddings``
(``{"inputs"}`` → ``{"results": [{"embedding"}], "input_token_count"}``) is a non-loop call.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ..models import ApiError, FinishReason, NormalisedRequest, NormalisedResponse
from ..wire import Framed
from ._profile import Profile
from ._values import as_int, as_obj, as_str, error_from_body, json_events, summed_usage
from .completions import Answers, Completions
from .openai_chat import OpenAIChat
from .text_generation import (
    chat_request,
    chat_stream_without_done,
    prompt_request,
)

__all__ = ["Watsonx"]

JSON = dict[str, Any]

_CHAT = OpenAIChat()


def _watsonx_route(url: SplitResult) -> str | None:
    """``generation``, ``generation_stream``, ``chat`` … from ``…/ml/v1/text/{op}`` (also under
    ``/ml/v1/deployments/{id}/``), or from IBM's own hosts without the ``ml`` segment (the IBM
    Generative AI service's ``/v2/text/generation_stream``, the same bodies)."""
    segs = [s for s in url.path.split("/") if s]
    host = (url.hostname or "").lower()
    if len(segs) >= 2 and segs[-2] == "text" and ("ml" in segs or host.endswith(".ibm.com")):
        return segs[-1]
    # The beta API's ``/ml/v1-beta/generation/text`` and ``/text_stream`` (older SDKs): the same
    # bodies.
    if len(segs) >= 3 and segs[-3:-1] == ["v1-beta", "generation"] and segs[-1] in _BETA_ROUTES:
        return _BETA_ROUTES[segs[-1]]
    return None


_BETA_ROUTES = {"text": "generation", "text_stream": "generation_stream"}


_WATSONX_OPS = {
    "generation": "generate",
    "generation_stream": "generate",
    "chat": "generate",
    "chat_stream": "generate",
    "embeddings": "embed",
}


class Watsonx(Completions):
    family = "watsonx"
    history_keys = ("messages",)  # a chat body's (OpenAI Chat's); a prompt has none
    profile = Profile(
        price_provider=None,
        otel_provider="ibm.watsonx.ai",
        api_key_env=("WATSONX_APIKEY",),
        finishes={
            "eos_token": FinishReason.COMPLETE,
            "stop_sequence": FinishReason.COMPLETE,
            "max_tokens": FinishReason.TRUNCATED_LENGTH,
            "token_limit": FinishReason.TRUNCATED_CONTEXT,
            "time_limit": FinishReason.TRUNCATED_LENGTH,
            "cancelled": FinishReason.CANCELLED,
            "error": FinishReason.ERROR,
        },
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = _watsonx_route(url)
        if method.upper() != "POST" or route is None:
            return 0
        return 3 if route in _WATSONX_OPS else 1

    def operation(self, method: str, url: SplitResult) -> str:
        route = _watsonx_route(url) or "other"
        return _WATSONX_OPS.get(route, route)

    def parses(self, operation: str) -> bool:
        return operation in ("generate", "embed")

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        return (_watsonx_route(url) or "").endswith("_stream")

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        route = _watsonx_route(url) or ""
        if route.startswith("chat"):
            return chat_request(b, self.family, None, url)
        return prompt_request(
            b,
            self.family,
            None,
            "inputs" if route == "embeddings" else "input",
            self.is_stream(url, b),
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if "errors" in b and "results" not in b and "choices" not in b:
            return self.error_answer(b)
        if "choices" in b:
            resp = _CHAT.parse_response(b)
            resp.model = resp.model or as_str(b.get("model_id"))
            return resp
        if "input_token_count" in b and "results" in b:  # embeddings
            n = as_int(b.get("input_token_count"))
            return NormalisedResponse(
                model=as_str(b.get("model_id")),
                usage=summed_usage(n, None, {"input_token_count": n}),
                complete=True,
            )
        return Answers(self, in_stream=False).body(b)

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        """``{"errors": [{"code", "message"}], "trace", "status_code"}``."""
        errors = body.get("errors") if isinstance(body, dict) else None
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            e = errors[0]
            return ApiError(
                status=status,
                code=as_str(e.get("code")),
                message=as_str(e.get("message")),
                raw=body,
            )
        return error_from_body(body, status)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if any(isinstance(ev, dict) and "choices" in ev for _, ev in json_events(framed)):
            return chat_stream_without_done(framed)
        return super().reassemble(framed)
