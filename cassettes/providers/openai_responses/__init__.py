"""OpenAI Responses (WIRE.md §B) and the servers that speak it (Azure, OpenRouter, DeepSeek,
Bedrock Mantle, gateways).

Deviations handled here, each named where it is handled: OpenRouter streams without ``event:``
lines and with a trailing ``data: [DONE]``; reasoning items carrying ``content`` parts
(``reasoning_text``: gpt-oss via OpenRouter, DeepSeek) besides ``summary``; terminal events whose
``response.output`` is ``null`` (the SDK then rebuilds the output from ``output_item.done``);
hand-edited or future ``status`` values (kept raw, classed ``other``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult, parse_qs

from ...models import (
    ApiError,
    FinishReason,
    NormalisedRequest,
    NormalisedResponse,
    ToolSpec,
    Usage,
)
from ...wire import Framed
from .._base import Chaining, Provider, WsTurns, inline_history
from .._profile import Profile
from .._rebuild_families import RESPONSES
from .._replay import Rendered, ReplayShapes
from .._result_groups import ResultGroups
from .._values import as_int, as_obj, as_str
from ._items import (
    CLIENT_CALLS,
    additional_tools,
    item_role_parts,
    messages_of,
    output_parts,
    roles_join,
    system_of,
    tool_choice_of,
    tools_of,
)
from ._render import render_responses
from ._stream import ResponsesStream

__all__ = ["OpenAIResponses", "render_responses"]

Item = dict[str, Any]

_STRUCTURAL = {
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "stream",
    "previous_response_id",
}

#: Path segments under ``/responses`` that are other operations on the same resource.
_SUB_OPERATIONS = {"input_tokens": "count_tokens", "compact": "compact"}


def _responses_index(url: SplitResult) -> tuple[list[str], int] | None:
    """Path segments and the position of the last ``responses`` segment (at most 2 from the end)."""
    segs = [s for s in url.path.split("/") if s]
    for back in range(min(3, len(segs))):
        i = len(segs) - 1 - back
        if segs[i] == "responses":
            return segs, i
    return None


# --- usage and finish -------------------------------------------------------------------------


def usage_from(u: Any) -> Usage | None:
    """Responses usage is already inclusive: ``input_tokens`` counts cached tokens. Realtime's
    ``response.usage`` is the same but for ``input_token_details``."""
    if not isinstance(u, dict):
        return None
    ind = as_obj(u.get("input_tokens_details", u.get("input_token_details")))
    outd = as_obj(u.get("output_tokens_details"))
    return Usage(
        input_tokens=as_int(u.get("input_tokens")),
        output_tokens=as_int(u.get("output_tokens")),
        cache_read_tokens=as_int(ind.get("cached_tokens")),
        cache_write_tokens=as_int(ind.get("cache_write_tokens")),
        reasoning_tokens=as_int(outd.get("reasoning_tokens")),
        total_tokens=as_int(u.get("total_tokens")),
        raw=u,
    )


def finish_of(
    status: str | None, reason: str | None, has_client_calls: bool
) -> tuple[str | None, FinishReason | None]:
    """The raw finish (``status`` or ``status:reason``) and its class (WIRE.md §G.1)."""
    if status is None:
        return None, None
    raw = f"{status}:{reason}" if reason else status
    if status == "completed":
        return raw, FinishReason.TOOL_CALL if has_client_calls else FinishReason.COMPLETE
    if status == "incomplete":
        if reason == "max_output_tokens":
            return raw, FinishReason.TRUNCATED_LENGTH
        if reason == "content_filter":
            return raw, FinishReason.FILTERED
        return raw, FinishReason.OTHER
    if status == "failed":
        return raw, FinishReason.ERROR
    if status == "cancelled":
        return raw, FinishReason.CANCELLED
    if status in ("queued", "in_progress"):
        return raw, None  # non-terminal snapshot (background mode)
    return raw, FinishReason.UNKNOWN if status == "" else FinishReason.OTHER


# --- the adapter ------------------------------------------------------------------------------


_WS_TERMINAL = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "response.cancelled", "error"}
)


def _ws_thread(request: Any, closing: Any) -> tuple[str | None, str | None, list[Any]]:
    """(previous_response_id, the answer's id, the turn's input items then its output items).
    ``closing``: the answer's closing event (a stream's or a WebSocket session's ``response.*``
    event carrying the response) or the response object itself (an answer sent whole)."""
    req = as_obj(request)
    prev = req.get("previous_response_id")
    given = req.get("input")
    items: list[Any] = (
        list(given)
        if isinstance(given, list)
        else [{"type": "message", "role": "user", "content": given}]
        if isinstance(given, str)
        else []
    )
    resp = (
        (closing.get("response") if closing.get("object") != "response" else closing)
        if isinstance(closing, dict)
        else None
    )
    rid = None
    if isinstance(resp, dict):
        rid = resp.get("id") if isinstance(resp.get("id"), str) else None
        output = resp.get("output")
        items += output if isinstance(output, list) else []
    return (prev if isinstance(prev, str) else None), rid, items


#: The ``response.create`` without ``previous_response_id``, its input the whole history: what
#: the API itself would have taken the earlier response to mean (its input and output, then this
#: turn's input).
_ws_standalone = inline_history(_ws_thread, "previous_response_id")


class ResponsesReplay(ReplayShapes):
    """How replay answers as the Responses API: OpenAI's error and fault shapes with the API's own
    ``error`` stream event, and its answers rendered as JSON or its event stream."""

    def fault_event(self, kind: str) -> bytes:
        return (
            b'event: error\ndata: {"type":"error","code":"server_error","message":"The server had '
            b"an error while processing your request. Sorry about "
            b'that!","param":null,"sequence_number":0}\n\n'
        )

    def render_answer(
        self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any
    ) -> Rendered | None:
        return (
            render_responses(answer, stream, request)
            if OpenAIResponses().operation("POST", url) == "generate"
            else None
        )

    def continuation_body(self, request: Any, partial: str, prompt: str) -> tuple[Any, str] | None:
        """The input, then the cut answer as the output message item it was (its text), then a
        user message asking for the rest."""
        if not isinstance(request, dict):
            return None
        given = request.get("input")
        items = (
            [{"role": "user", "content": given}]
            if isinstance(given, str)
            else list(given)
            if isinstance(given, list)
            else None
        )
        if items is None:
            return None
        said = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": partial}],
        }
        return {**request, "input": [*items, said, {"role": "user", "content": prompt}]}, partial


def _result_of(item: Any) -> str | None:
    """A ``*_call_output`` item (``function_call_output``, ``custom_tool_call_output`` …) answers
    the call its ``call_id`` names (WIRE.md §B.5)."""
    return (item.get("call_id") or "") if str(item.get("type")).endswith("_call_output") else None


def _calls_of(item: Any) -> list[Any]:
    """A ``*_call`` item (``function_call``, ``custom_tool_call`` …) makes the call ``call_id``."""
    return [item.get("call_id")] if str(item.get("type")).endswith("_call") else []


class OpenAIResponses(Provider):
    family = "openai_responses"
    # A background response (``background: true``) is fetched by ``GET /responses/{id}``: the
    # retrieve that returns its function calls is where the client gets them.
    poll_operations = frozenset({"retrieve"})
    # ``POST /responses/compact`` runs the model over an input as generate does and answers the
    # input's user messages and one opaque ``compaction`` item standing for the rest: read like a
    # model call (analysis threads it as a compaction side call, docs/threading.md).
    parsed_operations = frozenset({"generate", "compact"})
    profile = Profile(
        # output items' ids (rs_…, msg_…, fc_…), sent again or referred to by an
        # item_reference, and reasoning items' encrypted_content
        continuity=frozenset({"id", "item_reference", "encrypted_content"}),
        stream_end="response.completed, response.incomplete or response.failed",
        rebuild=RESPONSES,
        overflow_errors=(
            r"context_length_exceeded",
            r"(?i)maximum context length is",
            r"(?i)exceeds the context window",
        ),
        pairing_errors=(
            r"No tool output found for (function|custom tool|computer|shell) call",
            r"No tool call found for (function|custom tool)? ?call output with call_id",
            r"Duplicate item found with id",
            r"of type 'reasoning' was provided without its required following item",
        ),
        model_vendor="openai",
        otel_provider="openai",
        # Codex's per-session telemetry: thread, window and session ids and a start time in ms
        # (``client_metadata``), a turn id and creation time on every input item.
        volatile_fields=frozenset(
            {"client_metadata", "internal_chat_message_metadata_passthrough"}
        ),
        field_defaults=(("stream", False),),
        result_groups=ResultGroups(_result_of, _calls_of),
        api_key_env=("OPENAI_API_KEY",),
    )
    replay = ResponsesReplay()

    def context_edits(
        self, params: dict[str, Any], details: dict[str, Any] | None
    ) -> tuple[list[str], list[str] | None]:
        """``truncation: "auto"``: the API drops items from the conversation's start when it
        exceeds the context window (the response does not say whether it did)."""
        return (['truncation: "auto"'] if params.get("truncation") == "auto" else []), None

    def history_tools(self, items: list[Any]) -> list[ToolSpec]:
        return additional_tools(items)

    def body_operation(self, operation: str, body: Any) -> str:
        # Over a WebSocket, ``generate: false`` warms the connection up (tools, instructions)
        # and generates nothing: not a model call.
        if operation == "generate" and isinstance(body, dict) and body.get("generate") is False:
            return "prewarm"
        return operation

    def ws_turns(self) -> WsTurns:
        """Responses over a WebSocket: each ``response.create`` message is a turn, answered by the
        HTTP stream's events one per message up to the terminal one (or an ``error`` message)."""
        return WsTurns(
            opens=lambda m: isinstance(m, dict) and m.get("type") == "response.create",
            closes=lambda m: isinstance(m, dict) and m.get("type") in _WS_TERMINAL,
            chaining=self.chaining(),
        )

    def chaining(self) -> Chaining:
        """``previous_response_id`` names an answer the server stored; the same request made
        self-contained carries that answer's history in its ``input`` (over HTTP as over a
        WebSocket)."""
        return Chaining(_ws_thread, _ws_standalone)

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        found = _responses_index(url)
        if found is None:
            return 0
        segs, i = found
        if i == len(segs) - 1:
            if method.upper() != "POST":
                return 0
            return (
                3
                if isinstance(body, dict)
                and ("input" in body or "instructions" in body or "previous_response_id" in body)
                else 2
            )
        return 2  # /responses/{id}, /responses/{id}/cancel, /responses/input_tokens …

    def operation(self, method: str, url: SplitResult) -> str:
        found = _responses_index(url)
        if found is None:
            return "unknown"
        segs, i = found
        rest = segs[i + 1 :]
        if not rest:
            return "generate"
        if len(rest) == 1 and rest[0] in _SUB_OPERATIONS:
            return _SUB_OPERATIONS[rest[0]]
        if len(rest) == 2:
            return {"cancel": "cancel", "input_items": "input_items"}.get(rest[1], rest[1])
        return "delete" if method.upper() == "DELETE" else "retrieve"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        if isinstance(body, dict) and body.get("stream") is True:
            return True
        # GET /responses/{id}?stream=true resumes a background stream.
        return parse_qs(url.query).get("stream", [""])[-1].lower() == "true"

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: Item = as_obj(body)
        inp = b.get("input")
        messages = messages_of(inp)
        tc = b.get("tool_choice")
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")),
            stream=b.get("stream") is True,
            system=system_of(b, messages),
            messages=messages,
            tools=tools_of(b.get("tools")) + additional_tools(b.get("input")),
            tool_choice=tc,
            tool_choice_mode=tool_choice_of(tc),
            params={k: v for k, v in b.items() if k not in _STRUCTURAL},
            previous_response_id=as_str(b.get("previous_response_id")),
            history_key="input" if isinstance(inp, list) else None,
        )

    def joins(self, prev: Any, item: Any) -> bool:
        return roles_join(item_role_parts(prev)[0], item_role_parts(item)[0])

    def item_path(self, body: Any, message_index: int, part_index: int | None = None) -> str | None:
        """Consecutive model-side items (reasoning, calls, text) are one normalised message."""
        return self.merged_item_path(body, message_index, part_index, item_role_parts)

    def volatile_ids(self, body: Any, url: SplitResult) -> list[str]:
        # Besides call ids: the ids of echoed output items (fc_…, rs_…, msg_…) and the chained
        # response id are made up by the API per run.
        out = super().volatile_ids(body, url)
        b: Item = as_obj(body)
        inp = b.get("input")
        for item in inp if isinstance(inp, list) else []:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                out.append(item["id"])
        if isinstance(b.get("previous_response_id"), str):
            out.append(b["previous_response_id"])
        if isinstance(b.get("prompt_cache_key"), str):  # Codex: its session id, new every run
            out.append(b["prompt_cache_key"])
        return out

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: Item = as_obj(body)
        if isinstance(b.get("error"), dict) and "output" not in b and "status" not in b:
            return self.error_answer(b)
        return self._response(b, in_stream=False)

    def _response(self, r: Item, *, in_stream: bool) -> NormalisedResponse:
        parts = output_parts(r.get("output"))
        has_calls = any(
            isinstance(it, dict) and it.get("type") in CLIENT_CALLS for it in r.get("output") or []
        )
        inc = r.get("incomplete_details")
        reason = as_str(inc.get("reason")) if isinstance(inc, dict) else None
        status = as_str(r.get("status"))
        raw, cls = finish_of(status, reason, has_calls)
        error: ApiError | None = None
        err = r.get("error")
        if isinstance(err, dict):
            error = ApiError(
                type=as_str(err.get("type")),
                code=as_str(err.get("code")),
                message=as_str(err.get("message")),
                in_stream=in_stream,
                raw=err,
            )
            if cls is None:
                cls = FinishReason.ERROR
        details = {
            k: r[k]
            for k in (
                "service_tier",
                "background",
                "conversation",
                "previous_response_id",
                "incomplete_details",
            )
            if r.get(k) is not None
        }
        if r.get("object") not in (None, "response"):
            details["object"] = r["object"]
        notes: list[str] = []
        if status is not None and cls is FinishReason.OTHER and status not in ("incomplete",):
            details["unknown_status"] = status  # e.g. the hand-edited ``complete`` in the corpus
            notes.append(
                f"status {status!r} is not a value the Responses "
                "API sends; kept raw (hand-edited recording?)"
            )
        return NormalisedResponse(
            id=as_str(r.get("id")),
            model=as_str(r.get("model")),
            parts=parts,
            finish_reason_raw=raw,
            finish_reason=cls,
            usage=usage_from(r.get("usage")),
            error=error,
            complete=True,
            provider_details=details or None,
            notes=notes,
        )

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        """The SDK's ``ResponseStreamState`` accumulation (WIRE.md §B.4), lenient for other
        servers."""
        return ResponsesStream(self._response).read(framed)
