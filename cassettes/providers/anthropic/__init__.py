"""Anthropic Messages, direct and through Vertex, Bedrock and gateways (WIRE.md §C).

Endpoints recognised: ``POST …/v1/messages`` (also ``?beta=true`` and behind a gateway prefix such
as ``/anthropic/v1/messages``), ``…/v1/messages/count_tokens`` (operation ``count_tokens``), Vertex
``…/publishers/anthropic/models/{m}:rawPredict`` / ``:streamRawPredict`` (model in the URL, not the
body; ``count-tokens:rawPredict`` is token counting) and Bedrock ``…/model/{id}/invoke`` /
``invoke-with-response-stream`` when the body carries ``anthropic_version`` (Bedrock Converse is
another adapter's). Bedrock streams arrive as AWS event-stream frames whose payload is
``{"bytes": "<base64 of the Anthropic event JSON>"}``; they are unwrapped and reassembled like SSE.

Mapping choices:

* ``system`` holds the top-level ``system`` parts followed by the parts of any mid-conversation
  ``role: "system"`` message; those messages also stay in ``messages`` at their position (as the
  OpenAI Chat adapter does with its system messages).
* ``server_tool_use`` becomes a tool call of kind ``server`` and ``mcp_tool_use`` one of kind
  ``mcp``: they are model emissions with a name and an input. Their results
  (``web_search_tool_result``, ``bash_code_execution_tool_result``, ``mcp_tool_result`` …) are
  provider-executed, not sent by the client, so they are ``other`` parts with the block kept and
  ``tool_use_id`` / ``type`` lifted into ``provider_details``.
* Thinking blocks are ``reasoning`` parts with the ``signature`` in ``provider_details``;
  ``redacted_thinking`` is a ``reasoning`` part without text and with ``redacted`` / ``data``.
* ``stop_reason: "refusal"`` adds a ``refusal`` part (text = ``stop_details.explanation``) so the
  model-emission fact is visible next to the finish class.
* Server tools are ``ToolSpec`` with ``kind`` = their type without the version date
  (``web_search_20250305`` → ``web_search``).
* Usage is converted to the inclusive convention: ``input_tokens`` = ``input_tokens`` +
  ``cache_creation_input_tokens`` + ``cache_read_input_tokens``.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import SplitResult, unquote

from ...models import (
    ApiError,
    NormalisedRequest,
    NormalisedResponse,
    Usage,
)
from ...wire import Framed
from .._base import Provider
from .._profile import FREE_FORM_FIELDS, Profile, usage_keys
from .._rebuild_families import ANTHROPIC
from .._replay import Rendered, ReplayShapes, reset_at, retry_after_value
from .._result_groups import ResultGroups
from .._values import as_int, as_obj, as_str
from ._body import (
    BEDROCK_PATH,
    FINISH,
    STRUCTURAL,
    VERTEX_PATH,
    JSONObject,
    anthropic_error,
    call_names,
    finish_class,
    message_of,
    parts_of,
    response_of,
    tool_choice_of,
    tools_of,
    usage_from,
)
from ._complete import (
    AnthropicComplete,
    complete_request,
    complete_response,
)
from ._render import render_messages
from ._stream import MessagesStream

__all__ = [
    "AnthropicComplete",
    "AnthropicMessages",
    "complete_request",
    "complete_response",
    "finish_class",
    "usage_from",
]


def _price_usage(usage: Usage) -> dict[str, int]:
    """Adds the 5-minute / 1-hour split of cache writes (``usage.cache_creation``), priced apart."""
    out = usage_keys(usage)
    split = (usage.raw or {}).get("cache_creation")
    if "cache_write_tokens" in out and isinstance(split, dict):
        for wire, key in (
            ("ephemeral_5m_input_tokens", "cache_write_5m_tokens"),
            ("ephemeral_1h_input_tokens", "cache_write_1h_tokens"),
        ):
            n = as_int(split.get(wire))
            if n:
                out[key] = n
    return out


class MessagesReplay(ReplayShapes):
    """How replay answers as the Messages API: its error and fault shapes (WIRE.md §C.6), and its
    answers rendered (not on Bedrock, which frames the events in its binary event stream)."""

    def render_answer(
        self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any
    ) -> Rendered | None:
        if BEDROCK_PATH.search(url.path.rstrip("/")):
            return None  # Bedrock frames the events in its binary event stream
        return render_messages(answer, stream)

    def continuation_body(self, request: Any, partial: str, prompt: str) -> tuple[Any, str] | None:
        """The cut answer as the final assistant message (a prefill: the output continues it); the
        API refuses a prefill ending in whitespace, so it goes without its trailing whitespace."""
        if (
            not isinstance(request, dict)
            or not isinstance(request.get("messages"), list)
            or not partial.strip()
        ):
            return None
        prefill = partial.rstrip()
        return {
            **request,
            "messages": [*request["messages"], {"role": "assistant", "content": prefill}],
        }, prefill

    fault_bodies: ClassVar[dict[str, tuple[int, Any]]] = {
        "rate_limit": (
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "This request would exceed the rate limit for your organization of "
                    "50 requests per minute. For details, refer to: "
                    "https://docs.claude.com/en/api/rate-limits. You can see the response headers "
                    "for current usage.",
                },
                "request_id": "req_looptap_fault",
            },
        ),
        "overloaded": (
            529,
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
                "request_id": "req_looptap_fault",
            },
        ),
        "server_error": (
            500,
            {
                "type": "error",
                "error": {"type": "api_error", "message": "Internal server error"},
                "request_id": "req_looptap_fault",
            },
        ),
        "context_length": (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
                "request_id": "req_looptap_fault",
            },
        ),
    }

    def fault_headers(self, kind: str, retry_after: float) -> list[tuple[str, str]]:
        out = [("request-id", "req_looptap_fault")]
        if kind == "rate_limit":
            out += [
                ("retry-after", retry_after_value(retry_after)),
                ("anthropic-ratelimit-requests-limit", "50"),
                ("anthropic-ratelimit-requests-remaining", "0"),
                ("anthropic-ratelimit-requests-reset", reset_at(retry_after)),
            ]
        elif kind in ("overloaded", "server_error"):
            out.append(("retry-after", retry_after_value(retry_after)))
        return out

    def fault_event(self, kind: str) -> bytes:
        return (
            b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
            b'"message":"Overloaded"}}\n\n'
        )

    def error(self, status: int, message: str, code: str) -> Any:
        kind = "invalid_request_error" if status < 500 else "api_error"
        return {
            "type": "error",
            "error": {"type": kind, "message": message, "code": code},
            "request_id": None,
        }


def _result_of(block: Any) -> str | None:
    """A ``tool_result`` block of a user message answers the ``tool_use`` its ``tool_use_id``
    names (WIRE.md §C.5)."""
    return (block.get("tool_use_id") or "") if block.get("type") == "tool_result" else None


def _calls_of(block: Any) -> list[Any]:
    return [block.get("id")] if block.get("type") == "tool_use" else []


class AnthropicMessages(Provider):
    family = "anthropic"
    profile = Profile(
        # a thinking block's signature, a redacted_thinking block's data
        continuity=frozenset({"signature", "data"}),
        stream_end="message_stop (a message_delta's stop_reason before it)",
        rebuild=ANTHROPIC,
        finishes=FINISH,
        overflow_errors=(
            r"prompt is too long",
            r"(?i)input length exceeds context window",
        ),
        pairing_errors=(
            r"`tool_use` ids were found without `tool_result` blocks immediately after",
            r"unexpected `tool_use_id` found in `tool_result` blocks",
            r"Did not find \d+ `tool_result` block\(s\) at the beginning of this message",
            r"If an assistant message contains any thinking "
            r"blocks, the first block must be thinking",
            r"Expected thinking or redacted_thinking, but found",
        ),
        results_in_one_message=True,
        result_groups=ResultGroups(_result_of, _calls_of, parts="content"),
        tool_error_flag=True,
        price_provider="anthropic",
        model_vendor="anthropic",
        price_usage=_price_usage,
        otel_provider="anthropic",
        replay_headers=("anthropic-version", "anthropic-beta"),
        # ``metadata.user_id`` names the client's device and session (Claude Code puts a new
        # session id there every run); it changes nothing the model does.
        volatile_top_fields=frozenset({"metadata"}),
        attribution_system=("x-anthropic-billing-header:",),
        # a tool_use block's ``input`` is the call's arguments as the model gave them
        free_form_fields=frozenset({*FREE_FORM_FIELDS, "input"}),
        field_defaults=(("stream", False),),
        api_key_env=("ANTHROPIC_API_KEY",),
    )
    replay = MessagesReplay()

    def context_edits(
        self, params: dict[str, Any], details: dict[str, Any] | None
    ) -> tuple[list[str], list[str] | None]:
        """``context_management.edits`` (``clear_tool_uses_20250919``, ``clear_thinking_20251015``
        …) and the response's ``context_management.applied_edits``."""
        cm = params.get("context_management")
        edits = cm.get("edits") if isinstance(cm, dict) else None
        asked = [
            str(e.get("type"))[:60]
            for e in (edits if isinstance(edits, list) else [])[:16]
            if isinstance(e, dict) and e.get("type")
        ]
        got = (details or {}).get("context_management")
        applied_raw = got.get("applied_edits") if isinstance(got, dict) else None
        applied = []
        for e in (applied_raw if isinstance(applied_raw, list) else [])[:16]:
            if not isinstance(e, dict) or not e.get("type"):
                continue
            counts = ", ".join(
                f"{k} {v}" for k, v in list(e.items())[:8] if k != "type" and isinstance(v, int)
            )
            applied.append(str(e["type"])[:60] + (f" ({counts})" if counts else ""))
        return asked, applied

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST":
            return 0
        path = url.path.rstrip("/")
        b = as_obj(body)
        if path.endswith("/messages/count_tokens"):
            return 3
        if path.endswith("/v1/messages"):
            return 3 if "messages" in b else 2
        if VERTEX_PATH.search(path) or path.endswith(
            "/publishers/anthropic/models/count-tokens:rawPredict"
        ):
            return 3
        if BEDROCK_PATH.search(path):
            return 3 if "anthropic_version" in b else 0
        if (
            path.endswith("/messages")
            and "/threads/" not in path
            and "messages" in b
            and "max_tokens" in b
        ):
            return 2  # a gateway that dropped the version segment
        return 0

    def operation(self, method: str, url: SplitResult) -> str:
        path = url.path.rstrip("/")
        if path.endswith("/count_tokens") or path.endswith("/count-tokens:rawPredict"):
            return "count_tokens"
        return "generate"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        path = url.path.rstrip("/")
        if path.endswith(":streamRawPredict") or path.endswith("/invoke-with-response-stream"):
            return True
        return isinstance(body, dict) and body.get("stream") is True

    def model_from_url(self, url: SplitResult) -> str | None:
        path = url.path.rstrip("/")
        m = VERTEX_PATH.search(path) or BEDROCK_PATH.search(path)
        model = unquote(m.group("model")) if m else None
        return None if model == "count-tokens" else model  # Vertex's token-counting pseudo-model

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: JSONObject = as_obj(body)
        msgs = b.get("messages")
        raw_messages: list[Any] = msgs if isinstance(msgs, list) else []
        names = call_names(raw_messages)
        messages = [message_of(m, names) for m in raw_messages]
        system = parts_of(b.get("system"), names)
        system += [p for m in messages if m.role == "system" for p in m.parts]
        tc = b.get("tool_choice")
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or self.model_from_url(url),
            stream=self.is_stream(url, b),
            system=system,
            messages=messages,
            tools=tools_of(b),
            tool_choice=tc,
            tool_choice_mode=tool_choice_of(tc),
            params={k: v for k, v in b.items() if k not in STRUCTURAL},
            history_key="messages",
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: JSONObject = as_obj(body)
        if b.get("type") == "error" or ("error" in b and "content" not in b):
            return self.error_answer(b)
        return response_of(b)

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        return anthropic_error(body, status)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        """``accumulate_event`` of the SDK (WIRE.md §C.4), lenient about order and unknown
        events."""
        return MessagesStream(bedrock=framed.kind == "aws_eventstream").read(framed)


#: The block a delta implies when its ``content_block_start`` is missing.
