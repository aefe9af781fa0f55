"""Replay's shapes of an API: how replay answers as the API would, one object per family.

An adapter holds one (``Provider.replay``); :class:`ReplayShapes` is the shape OpenAI's APIs use
(the compatible servers share it) and a family whose API answers otherwise subclasses it in its
own module or package: its error body, the bodies and headers of an injected fault, an answer
rendered as the API sends it, a cut answer's continuation, a recorded body made to echo the live
request. What matching compares is data in the family's profile (``Provider.profile``).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple
from urllib.parse import SplitResult

import orjson

from ..models import NormalisedResponse, ToolCall
from ._values import compact_json

__all__ = [
    "Rendered",
    "ReplayShapes",
    "answer_calls",
    "answer_text",
    "arguments_not_json",
    "call_arguments_object",
    "call_arguments_text",
    "pieces",
    "reset_at",
    "retry_after_value",
    "sse",
]


def retry_after_value(value: float) -> str:
    """A ``retry-after`` value: whole seconds when whole, else with decimals (the SDKs parse
    both)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def reset_at(retry_after: float, now: float | None = None) -> str:
    """When a rate limit resets, as the APIs that send a time send it (RFC 3339, UTC, seconds):
    ``retry_after`` seconds from now, rounded up, so it is never in the past when it arrives."""
    import math
    import time
    from datetime import UTC, datetime

    at = (time.time() if now is None else now) + max(float(retry_after), 0.0)
    return datetime.fromtimestamp(math.ceil(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Rendered(NamedTuple):
    """(content type, body pieces): one piece for a JSON answer, one per event for a stream (what
    replay shapes render)."""

    content_type: str
    chunks: list[bytes]


class ReplayShapes:
    """How replay answers as this API: OpenAI's shapes (A.6), which the compatible servers share.
    A family whose API answers otherwise subclasses this and overrides what differs."""

    def chunks(
        self,
        chunks: list[tuple[float | None, bytes]],
        content_type: str,
        recorded: Any,
        live: bytes,
    ) -> list[tuple[float | None, bytes]]:
        """The recorded answer's body pieces as replay sends them to ``live`` (the request's
        bytes; ``recorded``: the recorded request's JSON): as recorded, unless the answer must
        echo something of the request that matching ignored."""
        return chunks

    def error(self, status: int, message: str, code: str) -> Any:
        """An error body in this API's own shape, which its SDKs parse and surface (message and
        code intact); the replay server answers with it when it cannot serve a request."""
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def error_headers(self, retry: bool) -> list[tuple[str, str]]:
        """Headers that tell this API's SDKs whether to retry an error response."""
        return [("x-should-retry", "true" if retry else "false")]

    #: Injected faults (``looptap replay --fault``): kind → (HTTP status, error body) as this API
    #: sends them (WIRE.md §x.6). The base is OpenAI's shape (A.6), which the compatible servers
    #: share.
    fault_bodies: ClassVar[dict[str, tuple[int, Any]]] = {
        "rate_limit": (
            429,
            {
                "error": {
                    "message": "Rate limit reached for requests per min (RPM): Limit 500, Used "
                    "500, Requested 1. Please try again in 1s. Visit "
                    "https://platform.openai.com/account/rate-limits to learn more.",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
        ),
        "overloaded": (
            503,
            {
                "error": {
                    "message": "The engine is currently overloaded, please try again later",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            },
        ),
        "server_error": (
            500,
            {
                "error": {
                    "message": "The server had an error while processing "
                    "your request. Sorry about that!",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            },
        ),
        "context_length": (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. However, "
                    "your messages resulted in 131072 tokens. Please reduce the length of the "
                    "messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        ),
    }

    def fault_headers(self, kind: str, retry_after: float) -> list[tuple[str, str]]:
        """The headers that come with an injected fault: retry hints and the API's rate-limit
        headers on a rate limit."""
        out = [("x-request-id", "req_looptap_fault")]
        if kind == "rate_limit":
            out += [
                ("retry-after", retry_after_value(retry_after)),
                ("x-ratelimit-limit-requests", "500"),
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", f"{retry_after_value(retry_after)}s"),
            ]
        elif kind in ("overloaded", "server_error"):
            out.append(("retry-after", retry_after_value(retry_after)))
        return out

    def fault_event(self, kind: str) -> bytes:
        """An error inside a 200 stream, framed as this API frames it (its overloaded error)."""
        return (
            b'data: {"error": {"message": "The server had an error while processing your request. '
            b'Sorry about that!", "type": "server_error"}}\n\n'
        )

    def render_answer(
        self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any
    ) -> Rendered | None:
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


def sse(obj: Any, event: str | None = None) -> bytes:
    """One server-sent event carrying ``obj`` as JSON (with an ``event:`` line when named)."""
    head = b"event: %s\n" % event.encode() if event else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def pieces(text: str, n: int = 3) -> list[str]:
    """``text`` in up to ``n`` consecutive pieces (a stream's deltas); none for an empty text."""
    if not text:
        return []
    step = max(1, -(-len(text) // n))
    return [text[i : i + step] for i in range(0, len(text), step)]


def answer_text(answer: NormalisedResponse, kind: str = "text") -> str:
    return "".join(p.text or "" for p in answer.parts if p.kind == kind)


def answer_calls(answer: NormalisedResponse) -> list[ToolCall]:
    """The answer's calls of the client's own functions (the server-side tools ran at the API and
    are not the client's to run: they are left out of a rendered answer)."""
    return [
        p.tool_call
        for p in answer.parts
        if p.kind == "tool_call" and p.tool_call is not None and p.tool_call.kind == "function"
    ]


def call_arguments_text(call: ToolCall) -> str:
    """A call's arguments as the string a string-carrying API sends (cut ones stay cut)."""
    if call.arguments_raw is not None:
        return call.arguments_raw
    return compact_json(call.arguments if call.arguments is not None else {})


def arguments_not_json(calls: list[ToolCall]) -> bool:
    """A call's arguments are text that is not JSON: an API that sends arguments as an object
    cannot carry them."""
    return any(c.arguments is None and c.arguments_raw is not None for c in calls)


def call_arguments_object(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the object an object-carrying API sends."""
    return call.arguments if isinstance(call.arguments, dict) else {}
