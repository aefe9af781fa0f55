"""The roles a provider adapter plays besides parsing, each a small base class with its defaults.

:class:`~cassettes.providers._base.Provider` is parsing (recognise, parse, reassemble) plus these;
an adapter overrides what its API does differently, in one class:

* :class:`ClientRules` — what the API demands of a client's tool loop (pairing errors, results
  in one message, a tool-result error flag): read by the C-layer checks;
* :class:`Pricing` — how a call is looked up in genai-prices (cost columns);
* :class:`Telemetry` — OpenTelemetry GenAI names (``looptap export --otel``);
* :class:`ReplayShape` — what replay needs: which request fields vary run to run, the API's own
  error and fault shapes, how to render an answer as this API sends it, the SDKs' key variables.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar
from urllib.parse import SplitResult

from cassettes.models import NormalisedResponse, Usage

__all__ = ["ClientRules", "Pricing", "Rendered", "ReplayShape", "Telemetry", "reset_at", "retry_after_value"]


def retry_after_value(value: float) -> str:
    """A ``retry-after`` value: whole seconds when whole, else with decimals (the SDKs parse both)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def reset_at(retry_after: float, now: float | None = None) -> str:
    """When a rate limit resets, as the APIs that send a time send it (RFC 3339, UTC, seconds):
    ``retry_after`` seconds from now, rounded up, so it is never in the past when it arrives."""
    import math
    import time
    from datetime import UTC, datetime

    at = (time.time() if now is None else now) + max(float(retry_after), 0.0)
    return datetime.fromtimestamp(math.ceil(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Rendered(tuple[str, list[bytes]]):
    """(content type, body pieces): one piece for a JSON answer, one per event for a stream (what
    the replay facet renders; here, not in ``_base``, so the two modules do not import each other)."""

    __slots__ = ()

    def __new__(cls, content_type: str, chunks: list[bytes]) -> Rendered:
        return super().__new__(cls, (content_type, chunks))

    @property
    def content_type(self) -> str:
        return self[0]

    @property
    def chunks(self) -> list[bytes]:
        return self[1]

class ClientRules:
    """What the API demands of the client's dispatch (WIRE.md §G)."""

    #: Regexes matching the API's error texts for mis-paired tool calls and results (WIRE.md
    #: §G.2). Such a 400 is reported by the API (A) but caused by the client's dispatch (C).
    pairing_errors: ClassVar[tuple[str, ...]] = ()
    #: The API wants every result of one turn's calls in the single message right after it
    #: (Anthropic's rule: results spread over several user messages get a 400).
    results_in_one_message: ClassVar[bool] = False
    #: Whether a tool result carries an error flag (``is_error``, a status) a client sets for a
    #: failed or declined call; without one such a call can only be said in the result's text.
    tool_error_flag: ClassVar[bool] = False

    def is_pairing_error(self, message: str | None) -> bool:
        return bool(message) and any(re.search(p, message or "") for p in self.pairing_errors)


class Pricing:
    """How a call of this family is priced with genai-prices."""

    #: genai-prices' provider id for this family's own API, used to price a call whose host
    #: genai-prices does not recognise (a gateway or local proxy in front of the vendor's API).
    #: ``None`` when the wire format does not name the vendor (many hosts speak OpenAI's formats).
    price_provider: ClassVar[str | None] = None
    #: genai-prices' provider id of the vendor whose own API this wire format is (its models are
    #: this family's; a fork's ``--model`` of another such vendor is another API family and is
    #: refused). ``None``: the format names no vendor's models.
    model_vendor: ClassVar[str | None] = None

    def price_usage(self, usage: Usage) -> dict[str, int]:
        """``usage`` as genai-prices usage keys. Both use the inclusive convention: genai-prices'
        ``input_tokens`` counts cache reads and writes, its ``output_tokens`` counts reasoning."""
        pairs = (
            ("input_tokens", usage.input_tokens),
            ("output_tokens", usage.output_tokens),
            ("cache_read_tokens", usage.cache_read_tokens),
            ("cache_write_tokens", usage.cache_write_tokens),
            ("output_reasoning_tokens", usage.reasoning_tokens),
        )
        return {key: v for key, v in pairs if v is not None and v >= 0}

    def price_model(self, model: str) -> str:
        """A model name as genai-prices knows it (the wire may decorate it with a resource path)."""
        return model

    def price_context(self, response: NormalisedResponse | None) -> dict[str, str]:
        """What selects a price variant in genai-prices (the service tier the response reports)."""
        details = (response.provider_details or {}) if response is not None else {}
        tier = details.get("service_tier")
        return {"service_tier": tier} if isinstance(tier, str) and tier else {}


class Telemetry:
    """OpenTelemetry GenAI names for this family."""

    #: OpenTelemetry GenAI ``gen_ai.provider.name`` for this family's own API, used when the host
    #: is not a known vendor's (a local server, a gateway): the wire format names the flavour.
    otel_provider: ClassVar[str] = "unknown"
    #: OpenTelemetry GenAI ``gen_ai.operation.name`` of a generate call.
    otel_operation: ClassVar[str] = "chat"

    def otel_provider_name(self, host: str) -> str:
        """``gen_ai.provider.name`` of a call to ``host`` in this family's format: the vendor the
        host belongs to when it is a known one (OTEL_PROVIDER_HOSTS), else the family's own."""
        from fnmatch import fnmatch

        from cassettes.providers import OTEL_PROVIDER_HOSTS

        h = host.lower().rstrip(".")
        return next((name for pat, name in OTEL_PROVIDER_HOSTS if fnmatch(h, pat)), self.otel_provider)


class ReplayShape:
    """What the replay server, the matcher and the run diff need to know about this API."""

    def replay_headers(self) -> tuple[str, ...]:
        """Request headers that change what the API does (versions, beta flags): compared when
        replay is strict. Every other header (SDK telemetry, user agent, auth) is ignored."""
        return ()

    #: Request fields replay does not compare, wherever they occur in the body: client telemetry
    #: that differs every run and does not change what the API does.
    volatile_fields: ClassVar[frozenset[str]] = frozenset()
    #: The same, only at the top level of the body (the name may mean something deeper down,
    #: e.g. a tool parameter).
    volatile_top_fields: ClassVar[frozenset[str]] = frozenset()
    #: Fields whose value is the caller's own data, not the API's fields (tool schemas, a tool
    #: call's input, a function's response, metadata): inside them ``null`` is a value, kept by
    #: replay matching. Everywhere else ``null`` and an absent field are the same request.
    free_form_fields: ClassVar[frozenset[str]] = frozenset(
        {"parameters", "input_schema", "schema", "json_schema", "arguments", "args", "response", "metadata"}
    )
    #: Top-level fields at their documented default, the same request as without them.
    field_defaults: ClassVar[tuple[tuple[str, Any], ...]] = ()

    def replay_chunks(self, chunks: list[tuple[float | None, bytes]], content_type: str, recorded: Any, live: bytes) -> list[tuple[float | None, bytes]]:
        """The recorded answer's body pieces as replay sends them to ``live`` (the request's
        bytes; ``recorded``: the recorded request's JSON): as recorded, unless the answer must
        echo something of the request that matching ignored."""
        return chunks

    def replay_error(self, status: int, message: str, code: str) -> Any:
        """An error body in this API's own shape, which its SDKs parse and surface (message and
        code intact); the replay server answers with it when it cannot serve a request."""
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def api_key_env(self) -> tuple[str, ...]:
        """Environment variables this API's SDKs read their key from (the first is set to a
        placeholder when replaying with none set, so a keyless CI run can start the client)."""
        return ()

    def replay_error_headers(self, retry: bool) -> list[tuple[str, str]]:
        """Headers that tell this API's SDKs whether to retry an error response."""
        return [("x-should-retry", "true" if retry else "false")]

    #: Injected faults (``looptap replay --fault``): kind → (HTTP status, error body) as this API
    #: sends them (WIRE.md §x.6). The base is OpenAI's shape (A.6), which the compatible servers share.
    fault_bodies: ClassVar[dict[str, tuple[int, Any]]] = {
        "rate_limit": (429, {"error": {
            "message": "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. "
                       "Please try again in 1s. Visit https://platform.openai.com/account/rate-limits to learn more.",
            "type": "requests", "param": None, "code": "rate_limit_exceeded"}}),
        "overloaded": (503, {"error": {"message": "The engine is currently overloaded, please try again later",
                                       "type": "server_error", "param": None, "code": None}}),
        "server_error": (500, {"error": {"message": "The server had an error while processing your request. Sorry about that!",
                                         "type": "server_error", "param": None, "code": None}}),
        "context_length": (400, {"error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                       "131072 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
    }

    def fault_headers(self, kind: str, retry_after: float) -> list[tuple[str, str]]:
        """The headers that come with an injected fault: retry hints and the API's rate-limit
        headers on a rate limit."""
        out = [("x-request-id", "req_looptap_fault")]
        if kind == "rate_limit":
            out += [("retry-after", retry_after_value(retry_after)), ("x-ratelimit-limit-requests", "500"),
                    ("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", f"{retry_after_value(retry_after)}s")]
        elif kind in ("overloaded", "server_error"):
            out.append(("retry-after", retry_after_value(retry_after)))
        return out

    def fault_event(self, kind: str) -> bytes:
        """An error inside a 200 stream, framed as this API frames it (its overloaded error)."""
        return b'data: {"error": {"message": "The server had an error while processing your request. Sorry about that!", "type": "server_error"}}\n\n'

    def render_answer(self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any) -> Rendered | None:
        """The bytes this API sends for ``answer`` (its parts, finish reason and usage), streamed
        when ``stream`` as the API streams, in the form the request at ``url`` asked for; parsing
        them gives ``answer`` back. ``None``: this API (or this endpoint) has no such form here."""
        return None

    def continuation_body(self, request: Any, partial: str, prompt: str) -> tuple[Any, str] | None:
        """``request`` (a JSON body) asking the model to go on with ``partial``, the text of its
        answer cut at the token cap, in the form this API documents (docs/WIRE.md): what a client
        that does not take a cut answer as complete sends (``looptap run --from --edit continue``).
        ``prompt``: the words asking for the rest, where the API needs them. With the text the
        answer so far is taken to be (the new answer continues it); ``None``: no such form here.
        ``request`` is left as it is."""
        return None
