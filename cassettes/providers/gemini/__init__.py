"""Gemini ``generateContent`` / ``streamGenerateContent``, AI Studio and Vertex (WIRE.md §D).

The REST API is protobuf-JSON: it answers in lowerCamelCase but accepts snake_case too, and both
occur in recorded requests, so every key is looked up in both spellings (``_body.either_case``).
Protobuf-JSON also omits zero values, which matters for usage (see :func:`usage_from`).

Recognised by path only (``…/models/{m}:{method}``), whatever the host: AI Studio ``/v1beta/`` and
``/v1/``, Vertex regional, global, multi-region and express mode (``…/publishers/google/models/…``),
and gateways that put a prefix in front (``/google-vertex/v1beta1/…``). Vertex's other publishers
(``anthropic``, ``meta`` …) belong to their own families. Gemini's OpenAI-compatible endpoint
(``/v1beta/openai/chat/completions``) is family ``openai_chat``. The side APIs (``countTokens``,
``cachedContents``, ``fileSearchStores``, uploads …) are claimed with their own operation names so
they are not mistaken for unknown LLM traffic, and are not parsed further.

Decisions worth knowing:

* ``input_tokens`` = ``promptTokenCount`` + ``toolUsePromptTokenCount``: the results of server-side
  tools (search, code execution) are fed to the model as input and billed as input, and with this
  sum ``input + output == totalTokenCount``.
* ``output_tokens`` = ``candidatesTokenCount`` + ``thoughtsTokenCount`` (Gemini excludes thoughts
  from candidates; the inclusive convention puts them in output).
* Finish reasons newer than WIRE.md §G.1 (SDK ``FinishReason``): ``MODEL_ARMOR``, ``ESCALATION`` and
  ``PUP_LIMITED_DISABLED`` are filters, ``CONTINUATION`` is a per-request token limit,
  ``MALFORMED_RESPONSE`` is an error; anything else unknown is ``other``.
* ``UNEXPECTED_TOOL_CALL`` stays ``tool_call_error`` even though the candidate carries the call.
* A ``functionResponse.response`` of one string under ``output`` / ``result`` / ``content`` /
  ``return_value`` (pydantic-ai's key) becomes that string; any other object its compact JSON
  (so ``{"error": …}`` stays visibly an error); multimodal ``parts`` are described
  (``[image/png]``).
* ``ApiError.code`` is the ``google.rpc.ErrorInfo`` reason when the body has one, else the numeric
  code; ``type`` is the rpc status name (``RESOURCE_EXHAUSTED`` …).
* Server-side tool invocations (``toolCall`` / ``toolResponse`` parts, Gemini 3 with
  ``includeServerSideToolInvocations``) become a ``tool_call`` of kind ``server`` and a
  ``tool_result``; ``executableCode`` / ``codeExecutionResult`` stay ``other`` parts.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import SplitResult

from ...models import (
    ApiError,
    NormalisedRequest,
    NormalisedResponse,
)
from ...wire import Framed
from .._base import Provider
from .._profile import FREE_FORM_FIELDS, Profile
from .._rebuild_families import GEMINI
from .._replay import Rendered, ReplayShapes
from .._result_groups import ResultGroups
from .._values import as_obj, as_str, error_from_text
from ._body import (
    FINISH,
    METHODS,
    STRUCTURAL,
    camel,
    either_case,
    message_of,
    model_method,
    parts_of,
    side_api,
    tool_choice_of,
    tools_of,
    usage_from,
)
from ._interactions import GeminiInteractions
from ._live import GeminiLive
from ._render import render_generate
from ._stream import GenerateStream

__all__ = [
    "Gemini",
    "GeminiInteractions",
    "GeminiLive",
    "usage_from",
]


# ---------------------------------------------------------------------------------------------
# Adapter


def _price_model(model: str) -> str:
    """``modelVersion`` can come back as a resource name (``models/gemini-2.5-pro``)."""
    return model.rsplit("models/", 1)[-1]


class GenerateReplay(ReplayShapes):
    """How replay answers as ``generateContent``: google.rpc error bodies (WIRE.md §D.6), and its
    answers rendered, as JSON, a JSON array or SSE (``alt=sse``)."""

    def render_answer(
        self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any
    ) -> Rendered | None:
        hit = model_method(url)
        if hit is None or hit[1] not in ("generateContent", "streamGenerateContent"):
            return None
        return render_generate(answer, stream, "alt=sse" in url.query.lower())

    fault_bodies: ClassVar[dict[str, tuple[int, Any]]] = {
        "rate_limit": (
            429,
            {
                "error": {
                    "code": 429,
                    "message": "You exceeded your current quota, please check your plan and "
                    "billing details. For more information on this error, head to: "
                    "https://ai.google.dev/gemini-api/docs/rate-limits.",
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
                    ],
                }
            },
        ),
        "overloaded": (
            503,
            {
                "error": {
                    "code": 503,
                    "message": "The model is overloaded. Please try again later.",
                    "status": "UNAVAILABLE",
                }
            },
        ),
        "server_error": (
            500,
            {
                "error": {
                    "code": 500,
                    "message": "An internal error has occurred. Please retry or report in "
                    "https://developers.generativeai.google/guide/troubleshooting",
                    "status": "INTERNAL",
                }
            },
        ),
        "context_length": (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1048577) exceeds the maximum number of "
                    "tokens allowed (1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            },
        ),
    }

    def fault_headers(self, kind: str, retry_after: float) -> list[tuple[str, str]]:
        # no rate-limit headers: the wait is RetryInfo.retryDelay in the body (WIRE.md §D.6)
        return []

    def fault_event(self, kind: str) -> bytes:
        return (
            b'data: {"error": {"code": 503, "message": "The model is overloaded. Please try again '
            b'later.", "status": "UNAVAILABLE"}}\r\n\r\n'
        )

    def error(self, status: int, message: str, code: str) -> Any:
        # google-genai's APIError reads error.code / message / status (WIRE.md §D); it does not
        # retry unless the caller configured retry options, so the retry header is harmless.
        st = "FAILED_PRECONDITION" if status < 500 else "INTERNAL"
        return {
            "error": {
                "code": status,
                "message": message,
                "status": st,
                "details": [{"reason": code}],
            }
        }


def _result_of(part: Any) -> str | None:
    """A ``functionResponse`` part answers the ``functionCall`` its ``id`` names, or without an
    id the call of its ``name`` (WIRE.md §D.5)."""
    fr = part.get("functionResponse") or part.get("function_response")
    return None if not isinstance(fr, dict) else (fr.get("id") or fr.get("name") or "")


def _calls_of(part: Any) -> list[Any]:
    fc = part.get("functionCall") or part.get("function_call")
    return [fc.get("id") or fc.get("name")] if isinstance(fc, dict) else []


class Gemini(Provider):
    family = "gemini"
    profile = Profile(
        continuity=frozenset({"thought_signature"}),
        stream_end="a candidate's finishReason (or a promptFeedback blockReason); no terminator",
        rebuild=GEMINI,
        finishes=FINISH,
        overflow_errors=(r"(?i)input token count \(\d+\) exceeds the maximum number of tokens",),
        pairing_errors=(
            r"number of function response parts is equal to the number of function call parts",
            r"function call turn comes immediately after a "
            r"user turn or after a function response turn",
            r"function response turn comes immediately after a function call turn",
            r"missing a `?thought_signature`?",
        ),
        price_provider="google",
        model_vendor="google",
        price_model=_price_model,
        result_groups=ResultGroups(_result_of, _calls_of, parts="parts"),
        otel_provider="gcp.gemini",
        otel_operation="generate_content",
        free_form_fields=frozenset(
            {
                *FREE_FORM_FIELDS,
                "responseSchema",
                "responseJsonSchema",
                "parametersJsonSchema",
                "response_schema",
                "response_json_schema",
                "parameters_json_schema",
            }
        ),
        api_key_env=("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    )
    replay = GenerateReplay()

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        hit = model_method(url)
        if hit is not None:
            op = METHODS.get(hit[1])
            if op is None:
                return 0
            if op == "generate":
                return 3 if isinstance(body, dict) and "contents" in body else 2
            return 1
        return 1 if side_api(url) is not None else 0

    def operation(self, method: str, url: SplitResult) -> str:
        hit = model_method(url)
        if hit is not None:
            return METHODS.get(hit[1], hit[1])
        return side_api(url) or "other"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        hit = model_method(url)
        return hit is not None and hit[1] == "streamGenerateContent"

    def model_from_url(self, url: SplitResult) -> str | None:
        hit = model_method(url)
        return hit[0] if hit is not None else None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        contents = either_case(b, "contents")
        if isinstance(contents, dict):  # a single Content is tolerated by some clients
            contents = [contents]
        messages = [message_of(c) for c in contents] if isinstance(contents, list) else []
        tool_config = either_case(b, "toolConfig")
        params: dict[str, Any] = {}
        gen = either_case(b, "generationConfig")
        if isinstance(gen, dict):
            params.update({camel(k): v for k, v in gen.items()})
        for k, v in b.items():
            if camel(k) not in STRUCTURAL:
                params[camel(k)] = v
        if isinstance(tool_config, dict):
            # includeServerSideToolInvocations and friends shape generation too.
            rest = {
                camel(k): v for k, v in tool_config.items() if camel(k) != "functionCallingConfig"
            }
            params.update(rest)
        return NormalisedRequest(
            family=self.family,
            model=self.model_from_url(url) or as_str(b.get("model")),
            stream=self.is_stream(url, body),
            system=parts_of(either_case(b, "systemInstruction")),
            messages=messages,
            tools=tools_of(either_case(b, "tools")),
            tool_choice=tool_config,
            tool_choice_mode=tool_choice_of(tool_config),
            params=params,
            history_key="contents",
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        if isinstance(body, list):  # a streamed method answered as one JSON value
            return GenerateStream(in_stream=False).fold(list(body))
        b = as_obj(body)
        if "error" in b and not b.get("candidates"):
            return self.error_answer(b)
        resp = GenerateStream(in_stream=False).fold([b])
        resp.complete = True
        return resp

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return GenerateStream().read(framed)

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        """``{"error":{code,message,status,details}}``, bare or wrapped in a list (WIRE.md §D.6).

        ``code`` is the ``google.rpc.ErrorInfo`` reason when one is given (``API_KEY_INVALID`` …),
        else the numeric code; ``type`` is the rpc status name. ``raw`` keeps everything,
        ``RetryInfo.retryDelay`` included.
        """
        err = error_from_text(body, status)
        e = either_case(err.raw, "error")  # the body (the first of a list) as read
        if isinstance(e, dict):
            for d in e.get("details") or []:
                if (
                    isinstance(d, dict)
                    and str(d.get("@type", "")).endswith("google.rpc.ErrorInfo")
                    and d.get("reason")
                ):
                    err.code = as_str(d["reason"])
        return err
