"""A — what the API reported: the per-turn layer and the checks on it.

The layer (:func:`build`) gathers status, finish reason (raw and normalised), usage, latency, the
model asked for and the model that served, the request id and the rate-limit headers. Header
rules are generic, never per provider: the request id is the first response header whose name
ends in ``request-id``/``requestid``/``correlation-id`` or is ``x-generation-id``; rate-limit
headers are those whose name contains ``ratelimit``, ``rate-limit``, ``retry-after`` or
``x-should-retry``.

Its findings are the rows of layer A in :mod:`cassettes.analysis.codes` (docs/findings.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from .. import providers
from ..hints import count
from ..models import FinishReason, NormalisedResponse
from . import codes as codes
from ._api_errors import check_error_in_200, check_http_error, rate_headers
from ._context import Check, TurnContext, call_label, provider_detail
from ._emission import cut_calls
from ._model import ApiReport, Finding
from ._model_mismatch import check_model_mismatch

__all__ = ["CHECKS", "build"]

_REQUEST_ID_SUFFIX = ("request-id", "requestid", "correlation-id")
_REQUEST_ID_NAMES = ("x-generation-id",)


# --- the layer --------------------------------------------------------------------------------


def _request_id(headers: list[tuple[str, str]]) -> str | None:
    found: dict[str, str] = {}
    for k, v in headers:
        kl = k.lower()
        if kl.endswith(_REQUEST_ID_SUFFIX) or kl in _REQUEST_ID_NAMES:
            found.setdefault(kl, v)
    if not found:
        return None
    # Prefer the most specific: ``x-request-id``/``request-id`` over correlation ids.
    for k, v in found.items():
        if k.endswith(("request-id", "requestid")):
            return v
    return next(iter(found.values()))


def build(ctx: TurnContext) -> ApiReport:
    rt = ctx.rt
    r = rt.response
    rate = rate_headers(ctx.ex.response_headers)
    return ApiReport(
        status=rt.status,
        finish_reason_raw=r.finish_reason_raw if r else None,
        finish_reason=r.finish_reason if r else None,
        usage=r.usage if r else None,
        ttfb=rt.ttfb,
        ttft=rt.ttft,
        duration=rt.duration,
        model_requested=rt.request.model if rt.request else None,
        model_served=(r.model or None) if r else None,
        request_id=_request_id(ctx.ex.response_headers),
        rate_limit=rate,
        error=r.error if r else None,
        complete=rt.complete,
        stream=rt.stream,
        read=rt.read,
        unread=rt.unread[:16],
    )


# --- helpers ----------------------------------------------------------------------------------


def _cap(params: dict[str, Any]) -> tuple[str, int] | None:
    """The output-token cap the request set (``providers.REQUEST_FIELDS``)."""
    found = providers.request_field(params, "max_tokens")
    return found if found and isinstance(found[1], int) and not isinstance(found[1], bool) else None


def _output(r: NormalisedResponse) -> str:
    u = r.usage
    return (
        f"{u.output_tokens} output tokens"
        if u is not None and u.output_tokens is not None
        else "output"
    )


# --- checks ---------------------------------------------------------------------------------------


def check_truncated(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if r is None:
        return
    if r.finish_reason is FinishReason.TRUNCATED_LENGTH:
        yield _truncated_length(ctx, r)
    elif r.finish_reason is FinishReason.TRUNCATED_CONTEXT:
        yield ctx.finding(
            codes.TRUNCATED_CONTEXT,
            "Generation stopped because the context window is full (finish reason "
            f"{r.finish_reason_raw!r}) after {_output(r)}; the answer is incomplete. Trim or "
            "summarise the history.",
            finish_reason=r.finish_reason_raw,
        )


def _truncated_length(ctx: TurnContext, r: NormalisedResponse) -> Finding:
    """The output hit the token cap: an error when it cut tool calls' arguments, else a warning
    that says what was left."""
    cap = _cap(ctx.request.params) if ctx.request else None
    cap_s = f" ({cap[0]}={cap[1]})" if cap else ""
    e = ctx.turn.e
    cut = [e.tool_calls[i] for i in cut_calls(ctx)]
    if cut:
        names = ", ".join(call_label(c) for c in cut)
        how = (
            "they are cut and not valid JSON"
            if all(c.parse_error is not None for c in cut)
            else "they are cut short"
        )
        return ctx.finding(
            codes.TRUNCATED_LENGTH,
            f"The output hit the token cap{cap_s} after {_output(r)} while the model was writing "
            f"the arguments of {names}: {how}. Raise the cap or ask for less.",
            grade="arguments cut",
            tool_call_id=cut[0].id,
            finish_reason=r.finish_reason_raw,
            cap=cap[1] if cap else None,
            cut_calls=[c.id or c.name for c in cut],
            effect=codes.ARGUMENTS_NOT_JSON,
        )
    if e.text or e.tool_calls:
        tail = " The answer is incomplete."
    elif e.reasoning is not None or (r.usage is not None and r.usage.reasoning_tokens):
        tail = " No visible output was produced: the budget went to reasoning."
    else:
        tail = " No visible output was produced."
    return ctx.finding(
        codes.TRUNCATED_LENGTH,
        f"The output was cut by the token cap{cap_s} after {_output(r)} "
        f"(finish reason {r.finish_reason_raw!r}).{tail}",
        finish_reason=r.finish_reason_raw,
        cap=cap[1] if cap else None,
    )


def check_stop_at_cap(ctx: TurnContext) -> Iterator[Finding]:
    """A.stop_at_cap — the output tokens reported equal the request's cap while the finish reason
    is a natural stop: the API cut the answer and did not say so (or said it wrongly). Judged only
    on the two numbers the wire carries, equal, never on the answer's words or length."""
    r = ctx.response
    if (
        r is None
        or r.finish_reason is not FinishReason.COMPLETE
        or r.complete is False
        or r.usage is None
        or ctx.request is None
        or not (200 <= (ctx.rt.status or 0) < 300)
    ):
        return
    cap = _cap(ctx.request.params)
    if cap is None or cap[1] <= 0 or r.usage.output_tokens != cap[1]:
        return
    yield ctx.finding(
        codes.STOP_AT_CAP,
        f"The API reported {r.usage.output_tokens} output tokens, exactly the request's cap "
        f"({cap[0]}={cap[1]}), yet the finish reason {r.finish_reason_raw!r} says the model "
        "stopped by itself: the answer was most likely cut, and a client that trusts the finish "
        "reason takes it as whole.",
        finish_reason=r.finish_reason_raw,
        cap=cap[1],
        output_tokens=r.usage.output_tokens,
    )


def check_filtered(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if r is None:
        return
    if r.finish_reason is FinishReason.FILTERED:
        why = provider_detail(r, "finishMessage")
        ratings = provider_detail(r, "safetyRatings")
        blocked = [
            str(x.get("category"))
            for x in (ratings if isinstance(ratings, list) else [])
            if isinstance(x, dict) and x.get("blocked") is True
        ]
        yield ctx.finding(
            codes.FILTERED,
            f"A content filter stopped the output (finish reason {r.finish_reason_raw!r})"
            + (f": {why.rstrip('.')}." if isinstance(why, str) else ".")
            + (f" Blocked categories: {', '.join(blocked)}." if blocked else "")
            + (
                " Nothing was returned."
                if not ctx.turn.e.text and not ctx.turn.e.tool_calls
                else " The output is partial."
            ),
            finish_reason=r.finish_reason_raw,
            categories=blocked,
        )
    elif r.finish_reason is FinishReason.PROMPT_BLOCKED:
        why = provider_detail(r, "blockReasonMessage")
        yield ctx.finding(
            codes.PROMPT_BLOCKED,
            f"The prompt was blocked before generation (reason {r.finish_reason_raw!r})"
            + (f": {why}" if isinstance(why, str) else ".")
            + " Nothing was generated.",
            finish_reason=r.finish_reason_raw,
        )


def check_guardrail_masked(ctx: TurnContext) -> Iterator[Finding]:
    """A.guardrail_masked — a guardrail masked personal data and did nothing else: the answer is
    whole, some values replaced by tags (Bedrock's ``{EMAIL}``). What and where, never the values
    (the trace's ``match``)."""
    masks = provider_detail(ctx.response, "guardrail_masked")
    if not isinstance(masks, dict) or not masks:
        return
    where = [
        f"in the {place}: "
        + ", ".join(
            f"{k} ×{n}" if n > 1 else k
            for k, n in sorted(Counter(str(x) for x in kinds[:256]).items())
        )
        for place, kinds in sorted(masks.items(), reverse=True)
        if isinstance(kinds, list) and kinds
    ]
    if where:
        yield ctx.finding(
            codes.GUARDRAIL_MASKED,
            "A guardrail masked personal data and blocked nothing ("
            + "; ".join(where)
            + "): the answer is whole, the masked values replaced by tags such as {EMAIL}.",
            masked={k: v for k, v in masks.items() if isinstance(v, list)},
        )


def check_stream_truncated(ctx: TurnContext) -> Iterator[Finding]:
    rt = ctx.rt
    r = rt.response
    if r is None or r.complete is not False or r.error is not None or rt.cut_by_client:
        # an error event ends a stream early on purpose (A.error_in_200); a client that hung up cut
        # it itself (C.abandoned_answer)
        return
    why = f" The transport error explains it: {rt.transport_error}." if rt.transport_error else ""
    e = ctx.turn.e
    got = []
    if e.text:
        got.append(f"{count(len(e.text), 'character')} of text")
    if e.tool_calls:
        got.append(f"{len(e.tool_calls)} tool call(s)")
    yield ctx.finding(
        codes.STREAM_TRUNCATED,
        f"The stream ended without its terminal event after {r.events or 0} events"
        + (f" ({', '.join(got)} received)" if got else "")
        + f"; the answer is incomplete.{why}",
        events=r.events,
        transport_error=rt.transport_error,
    )


def check_transport_error(ctx: TurnContext) -> Iterator[Finding]:
    rt = ctx.rt
    if not rt.transport_error or rt.cut_by_client:  # the client's doing: C.abandoned_answer
        return
    partial = "no response" if rt.status is None else f"HTTP {rt.status}, a partial body"
    yield ctx.finding(
        codes.TRANSPORT_ERROR,
        f"The connection failed ({rt.transport_error}); the "
        f"round trip is partial ({partial} was recorded).",
        transport_error=rt.transport_error,
    )


def check_tool_calls_without_calls(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if (
        r is None
        or r.finish_reason is not FinishReason.TOOL_CALL
        or r.tool_calls
        or r.complete is False
    ):
        return
    yield ctx.finding(
        codes.TOOL_CALLS_WITHOUT_CALLS,
        f"The finish reason {r.finish_reason_raw!r} says the model called tools, but the response "
        "carries no tool call. A client that trusts the finish reason will look for calls that "
        "are not there.",
        finish_reason=r.finish_reason_raw,
    )


def check_usage_missing(ctx: TurnContext) -> Iterator[Finding]:
    rt = ctx.rt
    r = rt.response
    u = r.usage if r is not None else None
    has_usage = u is not None and (u.input_tokens is not None or u.output_tokens is not None)
    if r is None or has_usage or r.error is not None or r.complete is not True:
        return
    if not (200 <= (rt.status or 0) < 300) or r.finish_reason in (
        None,
        FinishReason.PROMPT_BLOCKED,
    ):
        # a non-terminal snapshot (usage comes with the final one), no response, a blocked prompt
        return
    if ctx.conv.state.get(codes.USAGE_MISSING):
        return
    ctx.conv.state[codes.USAGE_MISSING] = True
    hint = ""
    if rt.stream:
        opts = ctx.request.params.get("stream_options") if ctx.request else None
        asked = isinstance(opts, dict) and opts.get("include_usage") is True
        hint = (
            " Some APIs report usage in a stream only when asked: on OpenAI-compatible Chat "
            "Completions "
            'send `"stream_options": {"include_usage": true}`.'
            if not asked
            else " The request asked for usage in the stream, but none came."
        )
    yield ctx.finding(
        codes.USAGE_MISSING,
        f"The API reported no token usage for this {'streamed ' if rt.stream else ''}call; tokens "
        "and cost are estimated for it (later turns of this conversation are not flagged "
        f"again).{hint}",
        stream=rt.stream,
    )


def check_finish_other(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if r is None or (ctx.rt.status or 0) >= 400:
        return
    f = r.finish_reason
    if (
        f is None
        and r.finish_reason_raw is None
        and not r.parts
        and r.error is None
        and r.complete is True
    ):
        yield ctx.finding(
            codes.MALFORMED_RESPONSE,
            f"The API answered HTTP {ctx.rt.status} with a body that holds no response: no output, "
            "no finish reason, no error. The client has nothing to act on.",
        )
        return
    if f is FinishReason.PAUSED:
        yield ctx.finding(
            codes.PAUSED,
            f"The API paused this long-running turn (finish reason {r.finish_reason_raw!r}); the "
            "client must send the conversation back, with this response appended, to let it "
            "continue.",
            finish_reason=r.finish_reason_raw,
        )
    elif f is FinishReason.TOOL_LOOP_LIMIT:
        yield ctx.finding(
            codes.TOOL_LOOP_LIMIT,
            f"The API ended the turn because the model made too many tool calls (finish reason "
            f"{r.finish_reason_raw!r}).",
            finish_reason=r.finish_reason_raw,
        )
    elif f in (
        FinishReason.OTHER,
        FinishReason.UNKNOWN,
        FinishReason.CANCELLED,
        FinishReason.NO_GENERATION,
    ):
        meaning = {
            FinishReason.CANCELLED: "the response was cancelled",
            FinishReason.NO_GENERATION: "no text was generated (e.g. a model load or unload)",
        }.get(f, "looptap does not know this value")
        yield ctx.finding(
            codes.UNUSUAL_FINISH,
            f"The finish reason is {r.finish_reason_raw!r}: {meaning}.",
            finish_reason=r.finish_reason_raw,
            finish_class=f.value,
        )


def check_context_edited(ctx: TurnContext) -> Iterator[Finding]:
    """A.context_edited — the API edited the context server-side on the client's request
    (Anthropic ``context_management`` edits, OpenAI Responses ``truncation: "auto"``): the model
    read the history as the API changed it. Said where the response reports edits applied (a
    request that merely asks, as Claude Code asks on every request to keep all thinking, says
    nothing); where the API never reports them (Responses), once per conversation the edits
    asked for change. Never a C finding: the client sent its history whole."""
    req, adapter = ctx.request, providers.by_family(ctx.rt.family)
    if req is None or adapter is None or ctx.response is None:
        return
    asked, applied = adapter.context_edits(req.params, ctx.response.provider_details)
    if applied is not None:
        if not applied:
            return
        said = "The API edited the context server-side on the client's request" + (
            f" ({', '.join(asked)})" if asked else ""
        )
        yield ctx.finding(
            codes.CONTEXT_EDITED,
            f"{said}: it applied {', '.join(applied)}. The model read the history as the API "
            "edited it, not as the client sent it.",
            asked=asked,
            applied=applied,
        )
        return
    before = ctx.conv.state.get(codes.CONTEXT_EDITED)
    ctx.conv.state[codes.CONTEXT_EDITED] = asked
    if not asked or asked == before:
        return
    yield ctx.finding(
        codes.CONTEXT_EDITED,
        f"The client asked the API to edit the context server-side ({', '.join(asked)}): the "
        "API may drop or clear what the client sent, and its response does not say whether it "
        "did. The model may not have read the whole history.",
        asked=asked,
        applied=None,
    )


CHECKS: tuple[Check, ...] = (
    check_http_error,
    check_error_in_200,
    check_transport_error,
    check_stream_truncated,
    check_truncated,
    check_stop_at_cap,
    check_filtered,
    check_guardrail_masked,
    check_tool_calls_without_calls,
    check_finish_other,
    check_model_mismatch,
    check_usage_missing,
    check_context_edited,
)
