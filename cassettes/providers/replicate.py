"""Replicate predictions: ``POST /v1/predictions``, ``/v1/models/{owner}/{name}/predictions``,
``/v1/deployments/{owner}/{name}/predictions`` (create) and ``GET /v1/predictions/{id}`` (poll).

Shapes from the official client (``replicate-python``, ``prediction.py``, ``stream.py``) and the
recordings in its test suite: the request is ``{"input": {…}, "version"?, "stream"?}`` (``Prefer:
wait`` makes the create answer hold the output); the answer is a ``Prediction`` — ``{"id",
"model", "version", "input", "output", "logs", "error", "status", "metrics", "urls"}`` with
``status`` ``starting``/``processing`` (not finished: the output so far) or ``succeeded``/
``failed``/``canceled``. A language model's ``output`` is a list of text pieces to concatenate
(its schema's ``x-cog-array-display: concatenate``); an image model's is a list of URLs or data
URIs (kept as media, no text). ``metrics`` carries ``input_token_count`` / ``output_token_count``
on language models (``predict_time`` always). The create is the model call; a poll is a
``retrieve`` of the same prediction, and so is a read of its ``urls.stream``
(``…replicate.net/v1/streams/{id}``, ``stream.replicate.com/v1/files/{id}``): ``output`` /
``logs`` / ``error`` / ``done`` server-sent events, the text joined.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ..models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
)
from ..wire import Framed
from ._base import Provider
from ._profile import Profile
from ._values import as_int, as_obj, as_str, media_part, summed_usage, text_of

__all__ = ["Replicate"]

_STATUS = {
    "succeeded": FinishReason.COMPLETE,
    "failed": FinishReason.ERROR,
    "canceled": FinishReason.CANCELLED,
    "aborted": FinishReason.CANCELLED,
}


def _route(url: SplitResult) -> str | None:
    segs = [s for s in url.path.split("/") if s]
    if (
        len(segs) == 3
        and segs[0] == "v1"
        and segs[1] in ("streams", "files")
        and _replicate_host(url)
    ):
        return "stream"  # a prediction's ``urls.stream``: its output as server-sent events
    if not segs or segs[0] != "v1" or "predictions" not in segs:
        return None
    i = segs.index("predictions")
    if i == len(segs) - 1 and (i == 1 or (i == 4 and segs[1] in ("models", "deployments"))):
        return "create"
    if i == 1 and len(segs) == 3:
        return "get"
    if i == 1 and len(segs) == 4 and segs[3] == "cancel":
        return "cancel"
    return None


def _replicate_host(url: SplitResult) -> bool:
    host = (url.hostname or "").lower()
    return host.endswith(("replicate.com", "replicate.net"))


#: The ``done`` event's ``reason`` (its data is ``{}`` for a prediction that succeeded).
_DONE = {"": FinishReason.COMPLETE, "canceled": FinishReason.CANCELLED, "error": FinishReason.ERROR}


def _stream(framed: Framed) -> NormalisedResponse:
    """A prediction's stream (``GET`` its ``urls.stream``; replicate-python's ``stream.py``):
    ``output`` events carry the text (a multi-line piece as several ``data:`` lines), ``logs`` the
    model's logs, ``error`` the failure's message, ``done`` the end (``{"reason": "canceled"}`` /
    ``"error"`` when it did not succeed). Without ``done`` the stream was cut."""
    text: list[str] = []
    error: str | None = None
    reason: str | None = None
    for ev in framed.events:
        if ev.event == "output":
            text.append(ev.data)
        elif ev.event == "error":
            error = ev.data
        elif ev.event == "done":
            try:
                data = ev.json()
            except ValueError:
                data = {}
            reason = as_str(as_obj(data).get("reason")) or ""
    joined = "".join(text)
    resp = NormalisedResponse(
        parts=[Part(kind="text", text=joined)] if joined else [],
        finish_reason_raw=reason or ("done" if reason is not None else None),
        complete=reason is not None or bool(error),
    )
    if error:
        resp.error = ApiError(message=error, type="prediction_failed", raw={"error": error})
        resp.finish_reason = FinishReason.ERROR
    elif reason is not None:
        resp.finish_reason = _DONE.get(reason, FinishReason.OTHER)
    else:
        resp.notes.append("prediction stream without its done event: cut")
    return resp


def _is_media(s: str) -> bool:
    return s.startswith(("data:", "https://", "http://")) and " " not in s[:200]


def _output_parts(output: Any) -> list[Part]:
    if isinstance(output, str):
        return (
            [media_part({"output": output[:100]}, "url")]
            if _is_media(output)
            else ([Part(kind="text", text=output)] if output else [])
        )
    if isinstance(output, list) and all(isinstance(o, str) for o in output):
        if output and all(_is_media(o) for o in output if o):
            return [
                media_part(
                    {"output": o[:100]}, o.split(";", 1)[0][5:] if o.startswith("data:") else "url"
                )
                for o in output
                if o
            ]
        text = "".join(output)
        return [Part(kind="text", text=text)] if text else []
    if output is None:
        return []
    return [
        Part(
            kind="other",
            text=text_of(output)[:2000],
            provider_details={"output_type": type(output).__name__},
        )
    ]


class Replicate(Provider):
    family = "replicate"
    history_keys = ()
    profile = Profile(
        finishes=_STATUS,
        price_provider=None,
        otel_provider="replicate",
        api_key_env=("REPLICATE_API_TOKEN",),
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = _route(url)
        if route is None or not (
            _replicate_host(url) or (isinstance(body, dict) and isinstance(body.get("input"), dict))
        ):
            return 0
        if route == "stream":
            return 3 if method.upper() == "GET" else 0
        if route == "create":
            return 4 if method.upper() == "POST" else 0
        return 3 if method.upper() in ("GET", "POST") else 0

    def operation(self, method: str, url: SplitResult) -> str:
        route = _route(url)
        return {
            "create": "generate",
            "get": "retrieve",
            "stream": "retrieve",
            "cancel": "cancel",
        }.get(route or "", "unknown")

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        # ``stream: true`` asks for a stream URL; the create answer is JSON, the URL's is the stream
        return _route(url) == "stream"

    def model_from_url(self, url: SplitResult) -> str | None:
        segs = [s for s in url.path.split("/") if s]
        return (
            f"{segs[2]}/{segs[3]}"
            if len(segs) == 5 and segs[1] in ("models", "deployments")
            else None
        )

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        inp = as_obj(b.get("input"))
        system = (
            [Part(kind="text", text=inp["system_prompt"])]
            if isinstance(inp.get("system_prompt"), str) and inp["system_prompt"]
            else []
        )
        messages = (
            [Message(role="user", parts=[Part(kind="text", text=inp["prompt"])])]
            if isinstance(inp.get("prompt"), str)
            else []
        )
        return NormalisedRequest(
            family=self.family,
            model=self.model_from_url(url),  # a bare version hash names no model: kept in params
            stream=b.get("stream") is True,
            system=system,
            messages=messages,
            params={
                **{k: v for k, v in inp.items() if k not in ("prompt", "system_prompt")},
                **{k: v for k, v in b.items() if k != "input"},
            },
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if "status" not in b and ("detail" in b or "title" in b):
            return self.error_answer(b)
        status = as_str(b.get("status"))
        metrics = as_obj(b.get("metrics"))
        inp, out = (
            as_int(metrics.get("input_token_count")),
            as_int(metrics.get("output_token_count")),
        )
        usage = summed_usage(inp, out, metrics)
        finished = status in _STATUS
        resp = NormalisedResponse(
            id=as_str(b.get("id")),
            model=as_str(b.get("model")),
            parts=_output_parts(b.get("output")),
            finish_reason_raw=status,
            finish_reason=_STATUS.get(status or "") if finished else None,
            usage=usage,
            error=ApiError(
                message=as_str(b.get("error")),
                type="prediction_failed",
                raw={"error": b.get("error")},
            )
            if b.get("error")
            else None,
            complete=True if finished else None,
            provider_details={k: b[k] for k in ("version", "urls", "metrics") if b.get(k)} or None,
        )
        if not finished:
            resp.notes.append(
                f"prediction {status or 'without a status'}: the output so far; the final one "
                "comes with a later poll"
            )
        return resp

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if framed.kind == "sse":
            return _stream(framed)
        return self.parse_response(framed.value if framed.kind == "json" else None)

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        """Problem details: ``{"title", "detail", "status"}``."""
        b = as_obj(body)
        if "detail" in b or "title" in b:
            return ApiError(
                status=status, type=as_str(b.get("title")), message=as_str(b.get("detail")), raw=b
            )
        return super().parse_error(body, status)
