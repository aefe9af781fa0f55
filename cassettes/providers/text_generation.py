"""Generation endpoints that are neither OpenAI's nor a chat vendor's own: Hugging Face Text
Generation Inference (TGI, also the HF Inference API), Amazon SageMaker endpoints and IBM
watsonx.ai, which share their prompt and chat bodies.

**TGI** (``POST /generate``, ``/generate_stream``, ``/`` and the HF Inference API's
``/models/{id}``; schema: TGI's OpenAPI document): ``{"inputs", "parameters"}`` →
``{"generated_text", "details": {"finish_reason", "generated_tokens", "prefill", …}}`` (a list of
them from ``/`` and the Inference API); the stream sends ``{"token": {"text"}, "generated_text":
null, "details": null}`` per token, the last with the whole ``generated_text`` and ``details``.
Output tokens are ``details.generated_tokens``; input tokens come from ``details.prefill`` (only
when ``decoder_input_details`` was asked), the stream's ``details.input_length`` or the
``x-prompt-tokens`` response header; the served model from ``x-model-id``.

**SageMaker** (``…/endpoints/{name}/invocations`` and ``/invocations-response-stream``; the body
is whatever the container takes): a TGI / LMI body (``inputs``), an OpenAI Chat body
(``messages``, the TGI Messages API and LMI) or a JumpStart body (``text_inputs`` →
``generated_texts``). The model is the endpoint name. Streams are AWS event-stream
``PayloadPart`` frames whose bytes, joined, are the container's own stream (TGI SSE or OpenAI
chunks). SageMaker bills instance time, not tokens: the cost is unknown.

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
from urllib.parse import SplitResult, unquote

from ..models import (
    ApiError,
    FinishReason,
    NormalisedRequest,
    NormalisedResponse,
)
from ..wire import Event, Framed, frame
from ._base import Provider
from ._parts import StreamParts
from ._profile import Profile
from ._values import (
    as_int,
    as_obj,
    as_str,
    aws_payload_bytes,
    error_from_body,
    finish_lookup,
    json_events,
    summed_usage,
    text_parts,
)
from .completions import Answers, Completions, prompt_messages
from .openai_chat import OpenAIChat

__all__ = ["SageMaker", "TextGenerationInference", "Watsonx", "chat_stream_without_done"]

JSON = dict[str, Any]

_CHAT = OpenAIChat()

#: The response headers TGI sends its input and output counts in.
_COUNT_HEADERS = ("x-prompt-tokens", "x-generated-tokens")
_TGI_FINISH = {
    "eos_token": FinishReason.COMPLETE,
    "stop_sequence": FinishReason.COMPLETE,
    "length": FinishReason.TRUNCATED_LENGTH,
}


def prompt_request(
    b: JSON, family: str, model: str | None, key: str, stream: bool
) -> NormalisedRequest:
    params = as_obj(b.get("parameters"))
    return NormalisedRequest(
        family=family,
        model=as_str(b.get("model_id") or b.get("model")) or model,
        stream=stream,
        messages=prompt_messages(b.get(key)),
        params={
            **params,
            **{
                k: v
                for k, v in b.items()
                if k not in (key, "parameters", "model_id", "model", "stream")
            },
        },
    )


def chat_request(b: JSON, family: str, model: str | None, url: SplitResult) -> NormalisedRequest:
    req = _CHAT.parse_request(b, url)
    req.family = family
    req.model = req.model or as_str(b.get("model_id")) or model
    req.params.pop("model_id", None)
    return req


def chat_stream_without_done(framed: Framed) -> NormalisedResponse:
    """OpenAI chunks from a server that may not send ``[DONE]``: complete when a finish was seen."""
    resp = _CHAT.reassemble(framed)
    if not resp.complete and resp.finish_reason_raw is not None and resp.error is None:
        resp.complete = True
        resp.notes.append(
            "stream has no [DONE] sentinel; complete because a finish_reason was seen"
        )
    return resp


# -- TGI ---------------------------------------------------------------------------------------


def tgi_response(body: Any) -> NormalisedResponse:
    """``{"generated_text", "details"}`` or a list of them (first is the answer)."""
    items = body if isinstance(body, list) else [body]
    b = as_obj(items[0]) if items else {}
    details = as_obj(b.get("details"))
    raw = as_str(details.get("finish_reason"))
    prefill = details.get("prefill")
    out = as_int(details.get("generated_tokens"))
    inp = (
        len(prefill)
        if isinstance(prefill, list) and prefill
        else as_int(details.get("input_length"))
    )
    extra: JSON = {"results": len(items)} if len(items) > 1 else {}
    if details.get("seed") is not None:
        extra["seed"] = details["seed"]
    return NormalisedResponse(
        parts=text_parts(b.get("generated_text")),
        finish_reason_raw=raw,
        finish_reason=finish_lookup(_TGI_FINISH, raw),
        usage=summed_usage(
            inp, out, {k: details[k] for k in ("generated_tokens", "input_length") if k in details}
        ),
        complete=True,
        provider_details=extra or None,
    )


class _TgiStream(StreamParts):
    """Token events; the last carries ``generated_text`` and ``details``; ``{"error"}`` events."""

    def __init__(self) -> None:
        super().__init__()
        self.final: NormalisedResponse | None = None

    payloads = StreamParts.every_event

    def on(self, name: str | None, ev: Any) -> None:
        if not isinstance(ev, dict):
            return
        if ev.get("error") is not None and "token" not in ev:
            self.error = ApiError(
                type=as_str(ev.get("error_type")),
                message=as_str(ev.get("error")),
                in_stream=True,
                raw=ev,
            )
            return
        token = as_obj(ev.get("token"))
        if isinstance(token.get("text"), str) and not token.get("special"):
            self.text("text", token["text"])
        if isinstance(ev.get("generated_text"), str) or ev.get("details") is not None:
            self.final = tgi_response(ev)

    def close(self) -> NormalisedResponse:
        if self.final is None:
            return self.finish(parts=text_parts(self.joined("text")))
        if not self.final.parts:
            self.final.parts = text_parts(self.joined("text"))
        self.final.events = self.events
        self.final.error = self.error  # the final event's own finish stands
        return self.final


class TextGenerationInference(Provider):
    family = "tgi"
    history_keys = ()
    profile = Profile(
        stream_end="the final event: generated_text with details.finish_reason",
        finishes=_TGI_FINISH,
        usage_headers=_COUNT_HEADERS,
        model_header="x-model-id",
        otel_provider="huggingface",
        otel_operation="text_completion",
        api_key_env=("HF_TOKEN",),
    )

    def _route(self, url: SplitResult) -> str | None:
        path = url.path.rstrip("/")
        if path.endswith("/generate_stream"):
            return "generate_stream"
        # Ollama's is /api/generate
        if path.endswith("/generate") and not path.endswith("/api/generate"):
            return "generate"
        if "/models/" in path:
            return "models"
        return "root" if path == "" else None

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = self._route(url)
        if (
            method.upper() != "POST"
            or route is None
            or not isinstance(body, dict)
            or "inputs" not in body
        ):
            return 0
        if route == "root":
            return 1 if "parameters" in body else 0
        return 3 if route != "models" else 2

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        return self._route(url) == "generate_stream" or (
            isinstance(body, dict) and body.get("stream") is True
        )

    def model_from_url(self, url: SplitResult) -> str | None:
        path = url.path.rstrip("/")
        i = path.find("/models/")
        return unquote(path[i + len("/models/") :]) if i >= 0 else None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        return prompt_request(
            as_obj(body), self.family, self.model_from_url(url), "inputs", self.is_stream(url, body)
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        if isinstance(body, dict) and "error" in body and "generated_text" not in body:
            return self.error_answer(body)
        return tgi_response(body)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if framed.kind == "json_array":  # a non-streamed list answer, framed as an array
            resp = tgi_response(framed.value)
            resp.events = len(framed.events)
            return resp
        return _TgiStream().read(framed)


# -- SageMaker ---------------------------------------------------------------------------------


def _endpoint(url: SplitResult) -> tuple[str, str] | None:
    segs = [s for s in url.path.split("/") if s]
    if (
        len(segs) >= 3
        and segs[-3] == "endpoints"
        and segs[-1] in ("invocations", "invocations-response-stream")
    ):
        return unquote(segs[-2]), segs[-1]
    return None


class SageMaker(Provider):
    family = "sagemaker"
    history_keys = ("messages",)  # a chat body's (OpenAI Chat's); a prompt has none
    profile = Profile(
        stream_end="the final event: generated_text with details.finish_reason",
        finishes=_TGI_FINISH,
        usage_headers=_COUNT_HEADERS,
        otel_provider="aws.sagemaker",
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST" or _endpoint(url) is None:
            return 0
        return 3 if "sagemaker" in url.netloc else 2

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        found = _endpoint(url)
        return found is not None and found[1] == "invocations-response-stream"

    def model_from_url(self, url: SplitResult) -> str | None:
        found = _endpoint(url)
        return found[0] if found else None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        model = self.model_from_url(url)
        if "messages" in b:
            return chat_request(b, self.family, model, url)
        key = next((k for k in ("inputs", "text_inputs", "prompt", "input") if k in b), "inputs")
        return prompt_request(b, self.family, model, key, self.is_stream(url, b))

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if "choices" in b:
            return _CHAT.parse_response(b)
        if "generated_texts" in b:  # JumpStart
            texts = b["generated_texts"]
            first = texts[0] if isinstance(texts, list) and texts else None
            return NormalisedResponse(parts=text_parts(first), complete=True)
        if ("error" in b or "message" in b) and "generated_text" not in b:
            return self.error_answer(b)
        return tgi_response(body)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if framed.kind == "json_array":
            return tgi_response(framed.value)
        inner, errors = _unwrap(framed)
        if errors:
            resp = _TgiStream().read(inner) if inner.events else NormalisedResponse(complete=False)
            h = errors[-1].headers or {}
            resp.error = ApiError(
                type=as_str(h.get(":exception-type") or h.get(":error-code")),
                message=errors[-1].data or None,
                in_stream=True,
            )
            resp.complete = False
            return resp
        if any(isinstance(ev, dict) and "choices" in ev for _, ev in json_events(inner)):
            return chat_stream_without_done(inner)
        if inner.kind == "json":  # a container that streams one JSON body
            return self.parse_response(inner.value)
        return _TgiStream().read(inner)


def _unwrap(framed: Framed) -> tuple[Framed, list[Event]]:
    """The stream a SageMaker response stream carries (its ``PayloadPart`` frames joined and framed
    again), and its exception frames."""
    if framed.kind != "aws_eventstream":
        return framed, []
    joined = b"".join(aws_payload_bytes(ev) or b"" for ev in framed.events)
    errors = [
        ev
        for ev in framed.events
        if (ev.headers or {}).get(":message-type") in ("exception", "error")
    ]
    return frame([(None, joined)]), errors


# -- watsonx.ai -------------------------------------------------------------------------------


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
    parsed_operations = frozenset({"generate", "embed"})
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
