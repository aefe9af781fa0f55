"""E — what the model emitted: the per-turn layer and the checks on it.

The layer (:func:`build`) lists the text, reasoning, refusal and tool calls of a turn's response.
Each tool call is checked against the tool the request offered under that name: are the arguments
JSON, do they satisfy the tool's JSON Schema (:mod:`cassettes.analysis._tool_schema`).

Its findings are rows of layer E in :mod:`cassettes.analysis.codes` (docs/findings.md).

Calls executed by the provider itself (``server``, ``mcp``, hosted tool kinds) are not checked for
being offered nor counted as loops: the client never dispatched them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..models import FinishReason, NormalisedResponse, ToolCall, ToolSpec, emitted_calls
from . import codes as codes
from ._context import (
    CLIENT_KINDS,
    Check,
    TurnContext,
    call_label,
    provider_detail,
)
from ._model import CallCheck, Emission, Finding
from ._repeats import check_repeated_call
from ._tool_schema import schema_errors

__all__ = ["CHECKS", "build"]

#: Finish classes whose own (A or E) finding already explains a turn without content (``None``:
#: a non-terminal snapshot in background mode, or no response at all: A.malformed_response).
_EXPLAINED_EMPTY = {
    None,
    FinishReason.TOOL_CALL,
    FinishReason.TRUNCATED_LENGTH,
    FinishReason.TRUNCATED_CONTEXT,
    FinishReason.FILTERED,
    FinishReason.REFUSED,
    FinishReason.PAUSED,
    FinishReason.TOOL_CALL_ERROR,
    FinishReason.TOOL_LOOP_LIMIT,
    FinishReason.PROMPT_BLOCKED,
    FinishReason.ERROR,
    FinishReason.CANCELLED,
    FinishReason.NO_GENERATION,
}
#: How jsonschema words an ``additionalProperties: false`` violation.
_EXTRA = "Additional properties are not allowed"


# --- the layer --------------------------------------------------------------------------------


def _spec(tools: list[ToolSpec], name: str | None) -> ToolSpec | None:
    return next((t for t in tools if t.name == name), None) if name else None


def _loaded_tools(ctx: TurnContext) -> list[ToolSpec]:
    """Tools delivered inside the conversation rather than in the request's tools list: items that
    carry a ``tools`` array (tool-search outputs, ``additional_tools`` items, MCP tool listings), in
    the history this turn appended or in the response. Accumulated per conversation (each message
    is seen once), so a later turn chained by ``previous_response_id`` that sends only its new
    items still has them. A group of tools (a ``namespace``: Codex's ``functions``,
    ``collaboration`` …) offers the tools inside it, not its own name."""
    known: dict[str, ToolSpec] = ctx.conv.state.setdefault("E.loaded_tools", {})
    parts = [p for m in ctx.turn.c.appended for p in m.parts]
    if ctx.response is not None:
        parts.extend(ctx.response.parts)
    for p in parts:
        block = (p.provider_details or {}).get("block") if p.kind == "other" else None
        tools = block.get("tools") if isinstance(block, dict) else None
        _offered_in(tools, known, 0)
    return list(known.values())


#: How deep tool groups may nest (a namespace inside a tool-search output inside an item).
_MAX_TOOL_NESTING = 4


def _offered_in(tools: Any, known: dict[str, ToolSpec], depth: int) -> None:
    """Each tool of a delivered ``tools`` array into ``known``; a group (an entry that holds a
    ``tools`` array of its own, e.g. ``{"type": "namespace", "name": "functions", "tools": […]}``)
    contributes its members (bounded nesting)."""
    if depth > _MAX_TOOL_NESTING or not isinstance(tools, list):
        return
    for t in tools:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("tools"), list):
            _offered_in(t["tools"], known, depth + 1)
            continue
        if isinstance(t.get("name"), str):
            params = t.get("parameters", t.get("input_schema"))
            kind = str(t["type"]) if isinstance(t.get("type"), str) else "function"
            known[t["name"]] = ToolSpec(
                name=t["name"], parameters=params if isinstance(params, dict) else None, kind=kind
            )


def _placeholder(c: ToolCall) -> bool:
    """A zero-valued call some servers serialise (no name, no id, no arguments): not an emission."""
    return not c.name and not c.id and not (c.arguments_raw or "").strip() and not c.arguments


def build(ctx: TurnContext) -> Emission:
    r = ctx.response
    if r is None:
        return Emission()
    text = "".join(p.text for p in r.parts if p.kind == "text" and p.text)
    reasoning = [p.text for p in r.parts if p.kind == "reasoning" and p.text]
    refusal = _refusal(r)
    calls = _call_checks(ctx, r)
    return Emission(
        text=text or None,
        reasoning="\n\n".join(reasoning) or None,
        refusal=refusal,
        tool_calls=calls,
        empty=r.error is None and not text.strip() and not calls and refusal is None,
    )


def _refusal(r: NormalisedResponse) -> str | None:
    """The refusal text ("" for a refusal without one), or ``None`` when the model did not
    refuse."""
    # Zero-valued ``"refusal": ""`` fields (some compat servers send them on every chunk) are no
    # refusal.
    refusals = [p for p in r.parts if p.kind == "refusal" and (p.text or "").strip()]
    if refusals or r.finish_reason is FinishReason.REFUSED:
        return "".join(p.text or "" for p in refusals)
    return None


def _call_checks(ctx: TurnContext, r: NormalisedResponse) -> list[CallCheck]:
    """Each tool call the model emitted, with its argument checks against the tool offered."""
    sent_tools = [*ctx.tools, *_loaded_tools(ctx)]
    calls: list[CallCheck] = []
    for c in emitted_calls(r):
        if _placeholder(c):
            continue
        spec = _spec(sent_tools, c.name)
        errs: list[str] = []
        if (
            spec is not None
            and c.arguments_error is None
            and c.kind == "function"
            and spec.parameters
        ):
            errs = schema_errors(c.arguments, spec.parameters)
        calls.append(
            CallCheck(
                id=c.id,
                name=c.name,
                arguments=c.arguments,
                arguments_raw=c.arguments_raw,
                parse_error=c.arguments_error,
                schema_errors=errs,
                offered=(spec is not None) if sent_tools else None,
                kind=c.kind,
            )
        )
    return calls


# --- helpers for the checks ---------------------------------------------------------------------


def _ok_2xx(ctx: TurnContext) -> NormalisedResponse | None:
    """The response of a 2xx turn that arrived whole and without an error, else ``None``."""
    r = ctx.response
    if r is None or ctx.rt.transport_error or not (200 <= (ctx.rt.status or 0) < 300):
        return None
    if r.error is not None or r.complete is False:
        return None
    return r


def _detail(resp: NormalisedResponse | None, key: str) -> str | None:
    v = provider_detail(resp, key)
    return v if isinstance(v, str) else None


def cut_calls(ctx: TurnContext) -> list[int]:
    """Indexes of the tool calls the token cap cut: those whose arguments are not JSON, and, when
    the response ends inside a call, that last call if its arguments came out empty or off-schema
    (a non-streamed Anthropic ``tool_use`` cut by ``max_tokens`` arrives with its input parsed as
    far as it got: valid JSON, just incomplete)."""
    r = ctx.response
    if r is None or r.finish_reason is not FinishReason.TRUNCATED_LENGTH:
        return []
    calls = ctx.turn.e.tool_calls
    out = [i for i, c in enumerate(calls) if c.parse_error is not None]
    last_is_call = bool(r.parts) and r.parts[-1].kind == "tool_call"
    if calls and last_is_call and (len(calls) - 1) not in out:
        c = calls[-1]
        if c.schema_errors or not c.arguments:
            out.append(len(calls) - 1)
    return out


# --- checks ---------------------------------------------------------------------------------------


def check_arguments_not_json(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if r is None:
        return
    cut = _cut_by(ctx, r)
    for i, c in enumerate(ctx.turn.e.tool_calls):
        if c.parse_error is None:
            continue
        raw = c.arguments_raw or ""
        tail = raw[-40:]
        if cut is not None:
            cause, why = cut
            yield ctx.finding(
                codes.ARGUMENTS_NOT_JSON,
                f"The arguments of {call_label(c)} are not valid JSON because {why} mid-call "
                f"(they end with {tail!r}); see {cause} on this turn.",
                grade="cut",
                path=f"tool_calls[{i}].arguments",
                tool_call_id=c.id,
                caused_by=cause,
                tool=c.name,
                error=c.parse_error,
            )
            continue
        yield ctx.finding(
            codes.ARGUMENTS_NOT_JSON,
            f"The model called {call_label(c)} with arguments that are not valid JSON "
            f"({c.parse_error.removeprefix('arguments are not valid JSON: ')}); they end with "
            f"{tail!r}. The client cannot run this call as emitted.",
            path=f"tool_calls[{i}].arguments",
            tool_call_id=c.id,
            tool=c.name,
            error=c.parse_error,
            arguments_raw=raw[:2000],
        )


def _cut_by(ctx: TurnContext, r: NormalisedResponse) -> tuple[str, str] | None:
    """What cut the answer (``None``: nothing did): the code of the finding that says so, and
    how, in words."""
    if r.finish_reason is FinishReason.TRUNCATED_LENGTH:
        return codes.TRUNCATED_LENGTH, "the output hit the token cap"
    if r.complete is not False and not ctx.rt.transport_error:
        return None
    if ctx.rt.cut_by_client:
        return codes.ABANDONED_ANSWER, "the client hung up on the stream"
    return codes.STREAM_TRUNCATED, "the stream ended early"


def check_arguments_schema(ctx: TurnContext) -> Iterator[Finding]:
    cut = cut_calls(ctx)
    for i, c in enumerate(ctx.turn.e.tool_calls):
        if not c.schema_errors or c.parse_error is not None:
            continue
        if i in cut:
            yield ctx.finding(
                codes.ARGUMENTS_SCHEMA,
                f"The arguments of {call_label(c)} are incomplete because the output hit the "
                f"token cap mid-call ({'; '.join(c.schema_errors[:2])}"
                "); see A.truncated_length on this turn.",
                grade="cut",
                path=f"tool_calls[{i}].arguments",
                tool_call_id=c.id,
                caused_by=codes.TRUNCATED_LENGTH,
                tool=c.name,
                errors=c.schema_errors,
            )
            continue
        first = c.schema_errors[0].split(":", 1)[0]
        listing = "; ".join(c.schema_errors[:4]) + ("; …" if len(c.schema_errors) > 4 else "")
        # Only unexpected extra properties: most tools ignore them; missing or mistyped ones break
        # the call.
        extra_only = all(_EXTRA in e for e in c.schema_errors)
        yield ctx.finding(
            codes.ARGUMENTS_SCHEMA,
            f"The arguments of {call_label(c)} do not match the tool's schema: {listing}"
            + (" (extra arguments only; a tool usually ignores them)." if extra_only else "."),
            grade="extra only" if extra_only else None,
            path=f"tool_calls[{i}].arguments{first[1:]}",
            tool_call_id=c.id,
            tool=c.name,
            errors=c.schema_errors,
            arguments=c.arguments,
        )


def check_tool_not_offered(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if r is None or r.finish_reason is FinishReason.TOOL_CALL_ERROR:  # E.tool_call_error says it
        return
    sent = [t.name for t in ctx.tools]
    known = set(sent)
    offered = sent + [n for n in ctx.conv.state.get("E.loaded_tools", {}) if n not in known]
    listed = ", ".join(f"`{n}`" for n in offered[:12]) + (" …" if len(offered) > 12 else "")
    for i, c in enumerate(ctx.turn.e.tool_calls):
        if c.kind not in CLIENT_KINDS:
            continue
        if c.offered is False:
            said, names = (
                f"which is not among the tools offered in this request ({listed})",
                offered,
            )
        elif c.offered is None and _offered_none(ctx):
            said, names = "but the request offered no tools at all", []
        else:
            continue
        yield ctx.finding(
            codes.TOOL_NOT_OFFERED,
            f"The model called {call_label(c)}, {said}.",
            path=f"tool_calls[{i}].name",
            tool_call_id=c.id,
            tool=c.name,
            offered=names,
        )


def _offered_none(ctx: TurnContext) -> bool:
    """The request surely offered no tool: none in its tools, none earlier in a chain of
    ``previous_response_id``, and no key of its raw body the adapter may not have read as tools."""
    req = ctx.request
    return req is not None and req.previous_response_id is None and not _raw_mentions_tools(ctx)


def _raw_mentions_tools(ctx: TurnContext) -> bool:
    """The raw request has a non-empty tool-ish key the adapter did not turn into tools (a shape it
    does not know): then "no tools offered" cannot be asserted."""
    body = ctx.ex.request_json()
    return isinstance(body, dict) and any("tool" in k.lower() and v for k, v in body.items())


def check_empty_response(ctx: TurnContext) -> Iterator[Finding]:
    r = _ok_2xx(ctx)
    if r is None or not ctx.turn.e.empty or r.finish_reason in _EXPLAINED_EMPTY:
        return
    if any(p.kind in ("tool_call", "media", "other") for p in r.parts):
        return  # provider-executed calls, images, hosted-tool items: not empty
    reasoning = " (it produced reasoning only)" if ctx.turn.e.reasoning else ""
    out = r.usage.output_tokens if r.usage is not None else None
    yield ctx.finding(
        codes.EMPTY_RESPONSE,
        f"The model ended the turn normally (finish reason {r.finish_reason_raw!r}) with no text "
        f"and no tool call{reasoning}"
        + (f"; {out} output tokens were reported." if out is not None else "."),
        finish_reason=r.finish_reason_raw,
        output_tokens=out,
    )


def check_refusal(ctx: TurnContext) -> Iterator[Finding]:
    e = ctx.turn.e
    if e.refusal is None:
        return
    r = ctx.response
    said = f": “{e.refusal[:200]}”" if e.refusal else ""
    raw = r.finish_reason_raw if r is not None else None
    yield ctx.finding(
        codes.REFUSAL,
        f"The model refused to answer{said}" + (f" (finish reason {raw!r})." if raw else "."),
        refusal=e.refusal,
        finish_reason=raw,
    )


def check_tool_call_error(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if r is None or r.finish_reason is not FinishReason.TOOL_CALL_ERROR:
        return
    why = _detail(r, "finishMessage") or _detail(r, "finish_message")
    names = ", ".join(call_label(c) for c in ctx.turn.e.tool_calls)
    offered = [t.name for t in ctx.tools]
    yield ctx.finding(
        codes.TOOL_CALL_ERROR,
        f"The API stopped the turn because the model's tool call was malformed or unexpected "
        f"(finish reason {r.finish_reason_raw!r})"
        + (f": {why}" if why else "")
        + (f". Calls emitted: {names}" if names else "")
        + (f". Tools offered: {', '.join(offered)}." if offered else ". No tools were offered."),
        finish_reason=r.finish_reason_raw,
        finish_message=why,
        calls=[c.name for c in ctx.turn.e.tool_calls],
    )


def check_tool_choice_violated(ctx: TurnContext) -> Iterator[Finding]:
    r = _ok_2xx(ctx)
    req = ctx.request
    if r is None or req is None or not ctx.tools:
        return
    mode = req.tool_choice_mode or ""
    calls = [c for c in ctx.turn.e.tool_calls if c.kind in CLIENT_KINDS]
    hosted = _ran_hosted(r, len(ctx.turn.e.tool_calls) > len(calls))
    if r.finish_reason not in (FinishReason.COMPLETE, FinishReason.TOOL_CALL):
        return  # truncated, filtered … : their own findings
    broken = _choice_broken(mode, calls, hosted=hosted)
    if broken is not None:
        yield ctx.finding(codes.TOOL_CHOICE_VIOLATED, broken, tool_choice=mode)


def _ran_hosted(r: NormalisedResponse, by_server: bool) -> bool:
    """The provider ran a tool of its own: a call of a hosted kind (``by_server``), or an item
    of its own (``web_search_call`` …)."""
    return by_server or any(
        p.kind == "other"
        and str(((p.provider_details or {}).get("block") or {}).get("type", "")).endswith("_call")
        for p in r.parts
    )


def _choice_broken(mode: str, calls: list[CallCheck], *, hosted: bool) -> str | None:
    """How the client's ``calls`` (``hosted``: the provider ran a tool of its own) break the
    request's tool choice ``mode``; ``None``: they keep it."""
    got = ", ".join(call_label(c) for c in calls)
    if mode == "required":
        if calls or hosted:
            return None
        return (
            "The request required a tool call (tool_choice `required`) "
            "but the model answered without one."
        )
    if mode.startswith("tool:"):
        want = mode[5:]
        if hosted and not calls:
            return None  # a forced hosted tool (``tool:web_search``) ran on the provider's side
        if not calls:
            return (
                f"The request forced a call to `{want}` but the model answered without a tool call."
            )
        if all(c.name != want for c in calls):
            return f"The request forced a call to `{want}` but the model called {got}."
        return None
    if mode == "none" and calls:
        return f"The request forbade tool calls (tool_choice `none`) but the model called {got}."
    return None


CHECKS: tuple[Check, ...] = (
    check_arguments_not_json,
    check_arguments_schema,
    check_tool_not_offered,
    check_tool_call_error,
    check_repeated_call,
    check_empty_response,
    check_refusal,
    check_tool_choice_violated,
)
