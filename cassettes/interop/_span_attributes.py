"""A round trip's span attributes, following the GenAI semantic conventions (development status).

``gen_ai.provider.name`` (from the adapter's hook: the vendor of a known host, else the family's
format), ``gen_ai.operation.name``, ``gen_ai.request.*`` (model and sampling parameters),
``gen_ai.response.{id,model,finish_reasons}``, ``gen_ai.usage.*`` (input and output, cache read and
creation, reasoning; the inclusive convention the semconv asks for), ``gen_ai.conversation.id``,
and — unless ``content=False`` — the JSON strings ``gen_ai.system_instructions``,
``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.tool.definitions`` with parts
``text``, ``tool_call``, ``tool_call_response`` and ``reasoning``. looptap's own view rides along
as ``looptap.*`` attributes (the E/A/C views, token source, the input's split as ``show`` prints
it — ``looptap.tokens.split.*`` — and cost with its ``estimated`` flags).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import SplitResult, urlsplit

import orjson

from .. import bounds, providers
from ..analysis import Turn
from ..models import FinishReason, Message, NormalisedRequest, NormalisedResponse, Part
from ..parsing import RoundTrip
from ..views import SPLIT, growth_bars
from ..wire import Exchange
from . import _genai_names as genai

__all__ = ["AttrValue", "output_message", "semconv_message", "semconv_tools", "span_attributes"]

AttrValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]

#: Normalised finish classes → the semconv output-message ``finish_reason`` values.
_FINISH = {
    FinishReason.COMPLETE: "stop",
    FinishReason.TOOL_CALL: "tool_call",
    FinishReason.TRUNCATED_LENGTH: "length",
    FinishReason.TRUNCATED_CONTEXT: "length",
    FinishReason.FILTERED: "content_filter",
    FinishReason.PROMPT_BLOCKED: "content_filter",
    FinishReason.ERROR: "error",
}

#: Sampling parameters → their kind (what a request calls each: ``providers.REQUEST_FIELDS``).
_PARAMS = {
    "temperature": "double",
    "top_p": "double",
    "top_k": "double",
    "frequency_penalty": "double",
    "presence_penalty": "double",
    "max_tokens": "int",
    "seed": "int",
    "choice.count": "int",
    "stop_sequences": "strings",
}


def _json(v: Any) -> str:
    return orjson.dumps(v).decode()


# -- messages (semconv parts) --------------------------------------------------------------------


def _part(p: Part) -> dict[str, Any]:
    if p.kind in ("text", "reasoning", "refusal"):
        return {"type": p.kind, "content": p.text or ""}
    if p.kind == "tool_call" and p.tool_call is not None:
        tc = p.tool_call
        out: dict[str, Any] = {"type": "tool_call", "id": tc.id, "name": tc.name or ""}
        out["arguments"] = tc.arguments if tc.arguments is not None else tc.arguments_raw
        if tc.kind != "function":
            out["tool_kind"] = tc.kind
        return out
    if p.kind == "tool_result" and p.tool_result is not None:
        tr = p.tool_result
        res: dict[str, Any] = {
            "type": "tool_call_response",
            "id": tr.call_id,
            "response": tr.content,
        }
        if tr.is_error is not None:
            res["is_error"] = tr.is_error
        if (p.provider_details or {}).get("server") is True:  # the result of a provider's call
            res.update(tool_kind="server", name=tr.name or "")
        return res
    if p.kind == "media":
        return {"type": "media", "mime_type": p.media_type}
    # A block looptap has no kind for (a cache point, a server tool's result …): kept as sent.
    return (
        {"type": "other", "details": p.provider_details}
        if p.provider_details
        else {"type": "other"}
    )


def semconv_message(m: Message) -> dict[str, Any]:
    """A normalised message as a semconv message (``{"role", "parts"}``)."""
    return {"role": m.role, "parts": [_part(p) for p in m.parts]}


def semconv_tools(req: NormalisedRequest) -> list[dict[str, Any]]:
    """A normalised request's tools as the conventions' tool definitions."""
    return _tool_definitions(req, {})


def _system_instructions(req: NormalisedRequest) -> list[dict[str, Any]]:
    """System parts sent beside the history (instructions that are history messages are already
    among the input messages, as the semconv wants)."""
    # (by value: a request rebuilt from a history delta holds copies of its history's parts)
    in_history = [p for m in req.messages if m.role in ("system", "developer") for p in m.parts]
    return [_part(p) for p in req.system if p not in in_history]


def output_message(resp: NormalisedResponse) -> dict[str, Any]:
    """A normalised response as a semconv output message (its finish reason in the semconv's
    words)."""
    fr = resp.finish_reason
    finish = _FINISH.get(fr, fr.value) if fr is not None else (resp.finish_reason_raw or "unknown")
    return {"role": "assistant", "parts": [_part(p) for p in resp.parts], "finish_reason": finish}


def _output_messages(resp: NormalisedResponse) -> list[dict[str, Any]]:
    if resp.error is not None and not resp.parts:
        return []
    return [output_message(resp)]


def _tool_definitions(req: NormalisedRequest, strict: dict[str, bool]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in req.tools:
        d: dict[str, Any] = {"type": t.kind, "name": t.name}
        if t.description is not None:
            d["description"] = t.description
        if t.parameters is not None:
            d["parameters"] = t.parameters
        if t.name in strict:  # OpenAI's structured-output flag, as the request sent it
            d["strict"] = strict[t.name]
        out.append(d)
    return out


def _strict(ex: Exchange | None) -> dict[str, bool]:
    """Each tool's ``strict`` as the request sent it (OpenAI Chat's ``function.strict``,
    Responses' ``strict``): the normalised view keeps no such flag."""
    if ex is None or not ex.request_body.lstrip().startswith(b"{"):
        return {}
    try:
        body = bounds.loads(ex.request_body)
    except (ValueError, TypeError):
        return {}
    tools = body.get("tools") if isinstance(body, dict) else None
    out: dict[str, bool] = {}
    for t in tools if isinstance(tools, list) else []:
        fn = t.get("function") if isinstance(t, dict) else None
        d = fn if isinstance(fn, dict) else t
        if isinstance(d, dict) and isinstance(d.get("name"), str):
            if isinstance(d.get("strict"), bool):
                out[d["name"]] = d["strict"]
    return out


def _invocation(req: NormalisedRequest) -> dict[str, Any]:
    """The request's own parameters as sent: everything but the model, the history and the tools
    (``tool_choice`` among them)."""
    out = dict(req.params)
    if req.tool_choice is not None:
        out["tool_choice"] = req.tool_choice
    return out


def _params(req: NormalisedRequest) -> dict[str, AttrValue | None]:
    out: dict[str, AttrValue | None] = {}
    for name, kind in _PARAMS.items():
        attr = genai.REQUEST_PARAMETER.format(name)
        found = providers.request_field(req.params, name)
        v = found[1] if found else None
        if v is None or isinstance(v, bool):
            continue
        if kind == "double" and isinstance(v, (int, float)):
            out[attr] = float(v)
        elif kind == "int" and isinstance(v, int):
            if attr != "gen_ai.request.choice.count" or v != 1:
                out[attr] = v
        elif kind == "strings":
            vals = [v] if isinstance(v, str) else v
            if isinstance(vals, list) and vals and all(isinstance(s, str) for s in vals):
                out[attr] = vals
    return out


# -- a round trip's attributes -------------------------------------------------------------------


def span_attributes(
    rt: RoundTrip,
    turn: Turn | None,
    conversation_id: str | None,
    content: bool = True,
    ex: Exchange | None = None,
) -> dict[str, AttrValue | None]:
    """The attributes of one round trip's span (``None`` values are left out): the GenAI
    semantic conventions, the content when asked (with the request's own parameters, read from
    ``ex``'s body where the normalised view keeps them not), the HTTP client's, then looptap's
    own."""
    url = urlsplit(rt.url)
    attrs = _gen_ai_attributes(rt, url, conversation_id)
    if content:
        attrs.update(_content_attributes(rt, ex))
    attrs.update(_http_attributes(rt, url))
    attrs.update(_looptap_attributes(rt, turn))
    return attrs


def _gen_ai_attributes(
    rt: RoundTrip, url: SplitResult, conversation_id: str | None
) -> dict[str, AttrValue | None]:
    adapter = providers.by_family(rt.family)
    req, resp = rt.request, rt.response
    # OpenInference (Phoenix) reads the kind from here; without it a span shows as UNKNOWN.
    attrs: dict[str, AttrValue | None] = {
        "openinference.span.kind": "LLM" if rt.family != "none" else None
    }
    if adapter is not None:
        # a model call (a chat turn, an embedding, an image …) by its GenAI name; anything else
        # (count tokens, a stored response's retrieval) by looptap's
        op = rt.operation
        attrs[genai.OPERATION] = (genai.OPERATIONS.get(op) if op else None) or (
            adapter.profile.otel_operation if op and adapter.parses(op) else op
        )
        attrs[genai.OPERATION_OWN] = rt.operation
        attrs[genai.PROVIDER] = adapter.profile.otel_provider_name(url.hostname or "")
    if req is not None:
        attrs[genai.REQUEST_MODEL] = req.model
        attrs[genai.STREAM] = rt.stream
        attrs.update(_params(req))
    if resp is not None:
        attrs[genai.RESPONSE_ID] = resp.id
        attrs[genai.RESPONSE_MODEL] = resp.model
        if resp.finish_reason_raw is not None:
            attrs[genai.FINISH_REASONS] = [resp.finish_reason_raw]
        u = resp.usage
        for _key, field, names in genai.USAGE_FIELDS if u is not None else ():
            attrs[names[0]] = getattr(u, field)
    attrs["gen_ai.conversation.id"] = conversation_id
    return attrs


def _content_attributes(rt: RoundTrip, ex: Exchange | None) -> dict[str, AttrValue | None]:
    """What was said: system instructions, input and output messages, tool definitions, and the
    request's own parameters."""
    req, resp = rt.request, rt.response
    attrs: dict[str, AttrValue | None] = {}
    if req is not None:
        system = _system_instructions(req)
        if system:
            attrs[genai.SYSTEM_INSTRUCTIONS] = _json(system)
        attrs[genai.INPUT_MESSAGES] = _json([semconv_message(m) for m in req.messages])
        if req.tools:
            attrs[genai.TOOL_DEFINITIONS] = _json(_tool_definitions(req, _strict(ex)))
        invoked = _invocation(req)
        if invoked:
            attrs[genai.INVOCATION_PARAMETERS] = _json(invoked)
    if resp is not None:
        out = _output_messages(resp)
        if out:
            attrs[genai.OUTPUT_MESSAGES] = _json(out)
    return attrs


def _http_attributes(rt: RoundTrip, url: SplitResult) -> dict[str, AttrValue | None]:
    attrs: dict[str, AttrValue | None] = {
        "http.request.method": rt.method,
        genai.URL: rt.url,
        genai.SERVER_ADDRESS: url.hostname,
    }
    try:
        attrs["server.port"] = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        pass
    attrs[genai.STATUS_CODE] = rt.status
    err = rt.response.error if rt.response is not None else None
    if rt.transport_error:
        attrs["error.type"] = "transport_error"
    elif (rt.status or 0) >= 400:
        attrs["error.type"] = str(rt.status)
    elif err is not None:
        attrs["error.type"] = err.type or "api_error"
    if err is not None:
        attrs[genai.ERROR_MESSAGE] = err.message
        attrs[genai.ERROR_CODE] = err.code
        attrs[genai.ERROR_TYPE] = err.type
        attrs["looptap.error.in_stream"] = err.in_stream or None
    return attrs


def _looptap_attributes(rt: RoundTrip, turn: Turn | None) -> dict[str, AttrValue | None]:
    resp = rt.response
    attrs: dict[str, AttrValue | None] = {
        "looptap.seq": rt.seq,
        genai.FAMILY: rt.family,
        "looptap.complete": rt.complete,
    }
    if resp is not None and resp.finish_reason is not None:
        attrs[genai.FINISH_CLASS] = resp.finish_reason.value
    if turn is not None:
        attrs.update(_turn_attributes(turn))
    if rt.analysis_errors:
        attrs["looptap.analysis_errors"] = list(rt.analysis_errors)
    if rt.notes:
        attrs["looptap.notes"] = list(rt.notes)
    return attrs


def _turn_attributes(turn: Turn) -> dict[str, AttrValue | None]:
    e, a, c, k = turn.e, turn.a, turn.c, turn.tokens
    flagged = sorted({f.layer for f in turn.findings if f.severity.value != "info"})
    cost = float(k.cost) if k.cost is not None else None
    cumulative = float(k.cumulative_cost) if k.cumulative_cost is not None else None
    return {
        "looptap.conversation": turn.conversation,
        "looptap.turn": turn.index,
        "looptap.previous_seq": turn.previous_seq,
        "looptap.e.tool_calls": len(e.tool_calls),
        "looptap.e.empty": e.empty,
        "looptap.a.status": a.status,
        "looptap.a.ttfb_s": a.ttfb,
        "looptap.a.ttft_s": a.ttft,
        "looptap.a.duration_s": a.duration,
        "looptap.a.request_id": a.request_id,
        "looptap.c.link": c.link,
        "looptap.c.kept": c.kept,
        "looptap.c.appended": len(c.appended),
        "looptap.c.rewritten": c.rewritten,
        "looptap.c.echoed_assistant": c.echoed_assistant,
        "looptap.c.tools_offered": list(c.tools_offered) or None,
        "looptap.tokens.source": k.source,
        **_split_attributes(turn),
        "looptap.cost.usd": cost,
        "looptap.cost.estimated": k.price_estimated if cost is not None else None,
        "looptap.cost.cumulative_usd": cumulative,
        "looptap.cost.cumulative_estimated": k.cumulative_estimated
        if cumulative is not None
        else None,
        "looptap.layers.flagged": flagged or None,
        "looptap.findings.count": len(turn.findings),
        "looptap.findings.codes": [f.code for f in turn.findings] or None,
    }


def _split_attributes(turn: Turn) -> dict[str, AttrValue | None]:
    """``looptap.tokens.split.{system,tools,history,tool_results,new}``: the turn's input split as
    every view shows it (:func:`cassettes.views.growth_bars`; the parts add up to the input,
    estimated from text size and scaled to it). None for a turn with nothing to split by."""

    (bar,) = growth_bars([turn])
    if bar.unsplit:
        return {}
    return {f"looptap.tokens.split.{name}": getattr(bar, name) for name, _ in SPLIT}
