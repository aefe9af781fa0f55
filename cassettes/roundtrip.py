"""One raw :class:`~cassettes.exchange.Exchange` → its derived view, a :class:`RoundTrip`.

This is the single entry point from raw bytes to meaning: pick the adapter, frame the body, parse
or reassemble, and record every problem as a labelled analysis error instead of raising. Whatever
goes wrong here, the caller still has the raw exchange and a view that says what is missing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, Field

from cassettes import providers
from cassettes.exchange import Exchange
from cassettes.framing import Framed, frame
from cassettes.models import FinishReason, NormalisedRequest, NormalisedResponse

__all__ = ["MAX_PARSE_BYTES", "RoundTrip", "parse_exchange"]

#: Bodies larger than this are kept but not parsed (a labelled partial result).
MAX_PARSE_BYTES = 50 * 1024 * 1024

#: Path fragments that make unknown traffic "LLM-looking": recorded raw and labelled ``unknown``.
_LLM_HINTS = ("/chat", "/completions", "/messages", "/responses", "/generate", "/predict", "/converse", "/invoke", "/embed")


class RoundTrip(BaseModel):
    """The derived view of one round trip (recomputable from the raw exchange at any time)."""

    seq: int | None = None
    #: An adapter's family, ``unknown`` for LLM-looking traffic no adapter claims, ``none`` for
    #: other HTTP traffic (file downloads, OAuth …).
    family: str
    operation: str | None = None
    method: str
    url: str
    status: int | None = None
    stream: bool = False
    framing: str | None = None
    request: NormalisedRequest | None = None
    response: NormalisedResponse | None = None
    ttfb: float | None = None
    #: Offset of the first stream event, when chunk times were recorded.
    ttft: float | None = None
    duration: float | None = None
    transport_error: str | None = None
    notes: list[str] = Field(default_factory=list)
    analysis_errors: list[str] = Field(default_factory=list)

    @property
    def complete(self) -> bool | None:
        if self.transport_error:
            return False
        return self.response.complete if self.response else None

    @property
    def is_llm(self) -> bool:
        return self.family != "none"


def _looks_llm(url: SplitResult, body: Any) -> bool:
    if isinstance(body, dict) and ("messages" in body or "contents" in body or ("input" in body and "model" in body) or "prompt" in body):
        return True
    return any(h in url.path for h in _LLM_HINTS) and isinstance(body, dict)


def parse_exchange(ex: Exchange) -> RoundTrip:
    """Parse one exchange. Never raises: every problem becomes an ``analysis_errors`` entry."""
    try:
        url = urlsplit(ex.url)
    except ValueError:
        url = urlsplit("")
    rt = RoundTrip(
        seq=ex.seq,
        family="none",
        method=ex.method,
        url=ex.url,
        status=ex.status,
        ttfb=ex.ttfb,
        duration=ex.duration,
        transport_error=ex.transport_error,
        notes=list(ex.notes),
    )
    try:
        _parse_into(rt, ex, url)
    except Exception as exc:  # a bug in an adapter must never lose the round trip
        rt.analysis_errors.append(f"internal error while parsing: {type(exc).__name__}: {exc}")
    return rt


def _parse_into(rt: RoundTrip, ex: Exchange, url: SplitResult) -> None:
    too_big_req = len(ex.request_body) > MAX_PARSE_BYTES
    body = None if too_big_req else ex.request_json()
    if too_big_req:
        rt.analysis_errors.append(
            f"request body is {len(ex.request_body)} bytes, over the {MAX_PARSE_BYTES} byte analysis limit; kept raw, not parsed"
        )
    adapter = providers.detect(ex.method, url, body)
    if adapter is None:
        if _looks_llm(url, body) or too_big_req:
            rt.family = "unknown"
        return
    rt.family = adapter.family
    rt.operation = adapter.operation(ex.method, url)
    if ex.request_body and body is None and not too_big_req and rt.operation == "generate":
        rt.analysis_errors.append("request body is not valid JSON; kept raw, not parsed")
    rt.stream = adapter.is_stream(url, body)
    if body is not None and rt.operation == "generate":
        try:
            rt.request = adapter.parse_request(body, url)
        except Exception as exc:
            rt.analysis_errors.append(f"request could not be parsed: {type(exc).__name__}: {exc}")
    if ex.status is None and not ex.response_chunks:
        if not ex.transport_error:
            rt.analysis_errors.append("no response recorded")
        return
    size = sum(len(c) for _, c in ex.response_chunks)
    if size > MAX_PARSE_BYTES:
        rt.analysis_errors.append(f"response body is {size} bytes, over the {MAX_PARSE_BYTES} byte analysis limit; kept raw, not parsed")
        return
    framed = frame(ex.response_chunks, ex.response_header("content-type"))
    rt.framing = framed.kind
    rt.notes.extend(framed.notes)
    if framed.events:
        first = next((e.offset for e in framed.events if e.offset is not None), None)
        rt.ttft = first
    status = ex.status or 0
    if status >= 400:
        rt.response = _error_response(adapter, framed, ex.status)
        return
    # A retrieve of a stored response (Responses API, also resumed background streams) returns the
    # same response object as generate does.
    if rt.operation not in ("generate", "retrieve"):
        return
    _parse_response(rt, adapter, framed)


def _error_response(adapter: providers.Provider, framed: Framed, status: int | None) -> NormalisedResponse:
    if framed.kind == "json":
        body: Any = framed.value
    elif framed.kind == "json_array" and framed.value is not None:
        body = framed.value
    elif framed.events:
        body = framed.events[0].data
    else:
        body = framed.tail or None
    err = adapter.parse_error(body, status)
    err.status = status
    return NormalisedResponse(error=err, finish_reason=FinishReason.ERROR, complete=True)


def _parse_response(rt: RoundTrip, adapter: providers.Provider, framed: Framed) -> None:
    try:
        if framed.kind == "json":
            rt.response = adapter.parse_response(framed.value)
            rt.stream = False
        elif framed.kind in ("sse", "ndjson", "json_array", "aws_eventstream"):
            rt.response = adapter.reassemble(framed)
            rt.stream = True
            if framed.tail.strip():
                rt.notes.append(f"stream ends with an incomplete piece ({len(framed.tail)} chars) kept in the raw body")
        elif framed.kind == "empty":
            rt.analysis_errors.append("empty response body")
        else:
            rt.analysis_errors.append(f"response body is not JSON or a known stream framing ({framed.kind})")
        if rt.response is not None:
            rt.notes.extend(rt.response.notes)
    except Exception as exc:
        rt.analysis_errors.append(f"response could not be parsed: {type(exc).__name__}: {exc}")
