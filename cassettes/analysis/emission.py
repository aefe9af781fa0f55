"""E — what the model emitted: the per-turn layer and the checks on it.

The layer (:func:`build`) lists the text, reasoning, refusal and tool calls of a turn's response.
Each tool call is checked against the tool the request offered under that name: are the arguments
JSON, do they satisfy the tool's JSON Schema (:mod:`cassettes.analysis.tool_schema`).

Findings (layer E — caused by what the model produced):

===========================  ==========  ================================================================
code                         severity    fires when
===========================  ==========  ================================================================
``E.arguments_not_json``     error       a tool call's arguments are not valid JSON. On a turn cut by
                                         the token cap or a broken stream the cut is the cause: then
                                         *info*, linked (``details.caused_by``) to ``A.truncated_length``
                                         / ``A.stream_truncated``, which carry the error.
``E.arguments_schema``       warning     parsed arguments violate the offered tool's schema (missing
                                         required property, wrong type, value outside ``enum``,
                                         unexpected property …); each violation with its JSON path.
``E.tool_not_offered``       error       a client-executed call (``function``/``custom``) names a tool
                                         that is not among the request's tools, or no tools were sent.
``E.repeated_call``          info /      the same call (tool + canonical arguments) was emitted on an
                             warning     earlier turn of the same task (a user message after a final
                                         answer starts a new one): *info* the 2nd time (a retry or a
                                         poll is often legitimate), *warning* from the 3rd (a loop);
                                         folded under ``C.dropped_tool_result`` when the client never
                                         ran the earlier calls (the model retrying them is right).
``E.empty_response``         warning     a complete 2xx turn that ended normally carries no text, no
                                         tool call and no refusal (reasoning alone does not count).
``E.refusal``                warning     the model refused: a refusal part, or a ``refused`` finish.
``E.tool_call_error``        error       the API says the model's tool call was malformed or unexpected
                                         (finish class ``tool_call_error``: Gemini
                                         ``MALFORMED_FUNCTION_CALL``/``UNEXPECTED_TOOL_CALL``, Bedrock
                                         ``malformed_tool_use`` …) — reported by A, emitted by E.
``E.tool_choice_violated``   warning     ``tool_choice`` required a call (or a named tool) and the model
                                         ended the turn without one / called another tool; or it was
                                         ``none`` and the model called a tool anyway.
===========================  ==========  ================================================================

Calls executed by the provider itself (``server``, ``mcp``, hosted tool kinds) are not checked for
being offered nor counted as loops: the client never dispatched them.
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from cassettes.analysis.context import Check, FinalCheck, TurnContext, clipped, provider_detail
from cassettes.analysis.message_keys import _canon, squashed, stable
from cassettes.analysis.model import CallCheck, Emission, Finding, Severity
from cassettes.analysis.tool_schema import schema_errors
from cassettes.models import FinishReason, NormalisedResponse, ToolCall, ToolSpec, emitted_calls

__all__ = ["CHECKS", "FINAL_CHECKS", "build", "canonical_call"]

#: Call kinds the client executes (and so must have offered).
_CLIENT_KINDS = ("function", "custom")
#: Finish classes whose own (A or E) finding already explains a turn without content.
_EXPLAINED_EMPTY = {
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
#: Repeats: the n-th identical call from which a repeat is a loop (warning); earlier repeats are
#: info.
_LOOP_AT = 3


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


def _label(c: CallCheck) -> str:
    return f"`{c.name}`" + (f" (call {c.id})" if c.id else "")


def _detail(resp: NormalisedResponse | None, key: str) -> str | None:
    v = provider_detail(resp, key)
    return v if isinstance(v, str) else None


def canonical_call(name: str | None, arguments: Any, raw: str | None) -> str:
    """A call's identity for repeat detection: tool name + arguments as a canonical JSON value."""
    args = _canon(arguments, squash=True) if arguments is not None else squashed(raw)
    return (
        f"{name}\x00"
        f"{orjson.dumps(args, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()}"
    )


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
    cut_by_cap = r.finish_reason is FinishReason.TRUNCATED_LENGTH
    cut_by_stream = r.complete is False or bool(ctx.rt.transport_error)
    for i, c in enumerate(ctx.turn.e.tool_calls):
        if c.parse_error is None:
            continue
        raw = c.arguments_raw or ""
        tail = raw[-40:] if len(raw) > 40 else raw
        if cut_by_cap or cut_by_stream:
            if cut_by_cap:
                cause, why = "A.truncated_length", "the output hit the token cap"
            elif ctx.rt.cut_by_client:
                cause, why = "C.abandoned_answer", "the client hung up on the stream"
            else:
                cause, why = "A.stream_truncated", "the stream ended early"
            yield ctx.finding(
                "E.arguments_not_json",
                Severity.INFO,
                f"The arguments of {_label(c)} are not valid JSON because {why} mid-call "
                f"(they end with {tail!r}); see {cause} on this turn.",
                path=f"tool_calls[{i}].arguments",
                tool_call_id=c.id,
                caused_by=cause,
                tool=c.name,
                error=c.parse_error,
            )
            continue
        yield ctx.finding(
            "E.arguments_not_json",
            Severity.ERROR,
            f"The model called {_label(c)} with arguments that are not valid JSON "
            f"({c.parse_error.removeprefix('arguments are not valid JSON: ')}); they end with "
            f"{tail!r}. The client cannot run this call as emitted.",
            path=f"tool_calls[{i}].arguments",
            tool_call_id=c.id,
            tool=c.name,
            error=c.parse_error,
            arguments_raw=raw[:2000],
        )


def check_arguments_schema(ctx: TurnContext) -> Iterator[Finding]:
    cut = cut_calls(ctx)
    for i, c in enumerate(ctx.turn.e.tool_calls):
        if not c.schema_errors or c.parse_error is not None:
            continue
        if i in cut:
            yield ctx.finding(
                "E.arguments_schema",
                Severity.INFO,
                f"The arguments of {_label(c)} are incomplete because the output hit the token cap "
                f"mid-call ({'; '.join(c.schema_errors[:2])}"
                "); see A.truncated_length on this turn.",
                path=f"tool_calls[{i}].arguments",
                tool_call_id=c.id,
                caused_by="A.truncated_length",
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
            "E.arguments_schema",
            Severity.INFO if extra_only else Severity.WARNING,
            f"The arguments of {_label(c)} do not match the tool's schema: {listing}"
            + (" (extra arguments only; a tool usually ignores them)." if extra_only else "."),
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
    req = ctx.request
    offered = [t.name for t in ctx.tools] + [
        n for n in ctx.conv.state.get("E.loaded_tools", {}) if n not in {t.name for t in ctx.tools}
    ]
    for i, c in enumerate(ctx.turn.e.tool_calls):
        if c.kind not in _CLIENT_KINDS:
            continue
        if c.offered is False:
            names = ", ".join(f"`{n}`" for n in offered[:12]) + (" …" if len(offered) > 12 else "")
            yield ctx.finding(
                "E.tool_not_offered",
                Severity.ERROR,
                f"The model called {_label(c)}, which is not among "
                f"the tools offered in this request ({names}).",
                path=f"tool_calls[{i}].name",
                tool_call_id=c.id,
                tool=c.name,
                offered=offered,
            )
        elif (
            c.offered is None
            and req is not None
            and req.previous_response_id is None
            and not _raw_mentions_tools(ctx)
        ):
            yield ctx.finding(
                "E.tool_not_offered",
                Severity.ERROR,
                f"The model called {_label(c)}, but the request offered no tools at all.",
                path=f"tool_calls[{i}].name",
                tool_call_id=c.id,
                tool=c.name,
                offered=[],
            )


def _record_results(ctx: TurnContext) -> tuple[dict[str, int], dict[str, set[int]]]:
    """Tool results seen so far in the conversation: by call id, and the distinct ones by tool name.

    Only whether results differ is ever asked, so each is kept as a hash of its normalised text,
    not the text (a long run sends back megabytes of tool results)."""
    by_id: dict[str, int] = ctx.conv.state.setdefault("E.results_by_id", {})
    by_name: dict[str, set[int]] = ctx.conv.state.setdefault("E.results_by_name", {})
    for m in ctx.turn.c.appended:
        for p in m.parts:
            tr = p.tool_result if p.kind == "tool_result" else None
            if tr is None:
                continue
            content = stable(squashed(tr.content).encode("utf-8", "surrogatepass"))
            if tr.call_id:
                by_id[tr.call_id] = content
            if tr.name:
                by_name.setdefault(tr.name, set()).add(content)
    return by_id, by_name


def _raw_mentions_tools(ctx: TurnContext) -> bool:
    """The raw request has a non-empty tool-ish key the adapter did not turn into tools (a shape it
    does not know): then "no tools offered" cannot be asserted."""
    body = ctx.ex.request_json()
    return isinstance(body, dict) and any("tool" in k.lower() and v for k, v in body.items())


def check_repeated_call(ctx: TurnContext) -> Iterator[Finding]:
    by_id, by_name = _record_results(ctx)
    r = ctx.response
    if r is None or r.complete is False or ctx.rt.transport_error:
        return
    # key → [(turn, call id)] of earlier identical calls (one per turn)
    seen: dict[str, list[tuple[int, str | None]]] = ctx.conv.state.setdefault("E.repeated_call", {})
    if _new_task(ctx):
        seen.clear()  # the same question in a new task is asked afresh, not a loop
    here: set[str] = set()
    for i, c in enumerate(ctx.turn.e.tool_calls):
        if c.parse_error is not None or c.kind not in _CLIENT_KINDS:
            continue
        key = canonical_call(c.name, c.arguments, c.arguments_raw)
        if key in here:
            continue  # parallel duplicates in one turn are not a loop across turns
        here.add(key)
        earlier = [(t, cid) for t, cid in seen.get(key, []) if t != ctx.index]
        seen.setdefault(key, []).append((ctx.index, c.id))
        if earlier:
            results = _earlier_results(c, earlier, by_id, by_name)
            never_run = [cid or "" for _, cid in earlier] if not results else None
            yield _repeated(ctx, i, c, [t for t, _ in earlier], results, never_run)


def _new_task(ctx: TurnContext) -> bool:
    """This request starts a new task: the previous answer ended the loop (it called no tool) and
    the client added a user message of its own (text, not tool results). The previous answer is
    read where this request echoes it (right after the previous request's messages), not from the
    previous turn's layers, which a released turn does not hold; a request that does not echo it
    (a chained one sends only its new items) never starts one."""
    prev = ctx.prev
    if prev is None or not ctx.turn.c.appended:
        return False
    k = prev.n_messages
    if (
        k >= len(ctx.messages)
        or ctx.messages[k].role != "assistant"
        or any(p.kind == "tool_call" for p in ctx.messages[k].parts)
    ):
        return False
    return any(
        m.role == "user"
        and any(p.kind == "text" and (p.text or "").strip() for p in m.parts)
        and not any(p.kind == "tool_result" for p in m.parts)
        for m in ctx.messages[k + 1 :]
    )


def _earlier_results(
    c: CallCheck,
    earlier: list[tuple[int, str | None]],
    by_id: dict[str, int],
    by_name: dict[str, set[int]],
) -> set[int]:
    """The distinct results (hashes) the earlier identical calls got: by their ids, else (calls
    without ids) every result of the tool. Did the identical calls get different answers? Then
    the tool is not a pure function of its arguments (a poll, a random draw): repeating it is no
    sign of a stuck agent."""
    results = {by_id[cid] for _, cid in earlier if cid and cid in by_id}
    if not any(cid for _, cid in earlier) and c.name:
        results = by_name.get(c.name, set())
    return results


def _repeated(
    ctx: TurnContext,
    i: int,
    c: CallCheck,
    turns: list[int],
    results: set[int],
    never_run: list[str] | None = None,
) -> Finding:
    """Call ``i`` repeats identical calls of ``turns``, whose results were ``results``: a warning
    from the :data:`_LOOP_AT`-th time when the results did not differ, else a note. ``never_run``:
    the earlier calls' ids (``""`` for none) when none of them got a result — the model retrying
    calls the client never ran is right, and folds under the client's ``C.dropped_tool_result``
    (``roots.CAUSES``)."""
    extra: dict[str, Any] = {"never_run": never_run} if never_run is not None else {}
    n = len(turns) + 1
    varying = len(results) > 1
    loop = n >= _LOOP_AT and not varying
    if varying:
        tail = "; its results differed, so this looks like polling or sampling, not a loop."
    elif loop:
        tail = ": the agent looks stuck in a loop" + (
            " (it got the same result each time)." if results else "."
        )
    else:
        tail = "; a second try can be legitimate (a retry or a poll)."
    return ctx.finding(
        "E.repeated_call",
        Severity.WARNING if loop else Severity.INFO,
        f"The model called {_label(c)} with the same arguments {clipped(c.arguments, 80)} for the "
        f"{_ordinal(n)} time (earlier on turn{'s' if len(turns) > 1 else ''} "
        f"{', '.join(map(str, turns))}){tail}",
        path=f"tool_calls[{i}]",
        tool_call_id=c.id,
        related_turn=turns[-1],
        tool=c.name,
        times=n,
        turns=[*turns, ctx.index],
        results_differ=varying,
        **extra,
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def check_empty_response(ctx: TurnContext) -> Iterator[Finding]:
    r = _ok_2xx(ctx)
    if r is None or not ctx.turn.e.empty:
        return
    if r.finish_reason in _EXPLAINED_EMPTY:
        return
    if r.finish_reason is None:
        # a non-terminal snapshot (background mode), or no response at all: A.malformed_response
        return
    if any(p.kind == "tool_call" for p in r.parts) or any(
        p.kind in ("media", "other") for p in r.parts
    ):
        return  # provider-executed calls, images, hosted-tool items: not empty
    reasoning = " (it produced reasoning only)" if ctx.turn.e.reasoning else ""
    out = r.usage.output_tokens if r.usage is not None else None
    yield ctx.finding(
        "E.empty_response",
        Severity.WARNING,
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
        "E.refusal",
        Severity.WARNING,
        f"The model refused to answer{said}" + (f" (finish reason {raw!r})." if raw else "."),
        refusal=e.refusal,
        finish_reason=raw,
    )


def check_tool_call_error(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if r is None or r.finish_reason is not FinishReason.TOOL_CALL_ERROR:
        return
    why = _detail(r, "finishMessage") or _detail(r, "finish_message")
    names = ", ".join(_label(c) for c in ctx.turn.e.tool_calls)
    offered = [t.name for t in ctx.tools]
    yield ctx.finding(
        "E.tool_call_error",
        Severity.ERROR,
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
    calls = [c for c in ctx.turn.e.tool_calls if c.kind in _CLIENT_KINDS]
    hosted = len(ctx.turn.e.tool_calls) > len(calls) or any(
        p.kind == "other"
        and str(((p.provider_details or {}).get("block") or {}).get("type", "")).endswith("_call")
        for p in r.parts
    )
    if r.finish_reason not in (FinishReason.COMPLETE, FinishReason.TOOL_CALL):
        return  # truncated, filtered … : their own findings
    broken = _choice_broken(mode, calls, hosted=hosted)
    if broken is not None:
        yield ctx.finding("E.tool_choice_violated", Severity.WARNING, broken, tool_choice=mode)


def _choice_broken(mode: str, calls: list[CallCheck], *, hosted: bool) -> str | None:
    """How the client's ``calls`` (``hosted``: the provider ran a tool of its own) break the
    request's tool choice ``mode``; ``None``: they keep it."""
    got = ", ".join(_label(c) for c in calls)
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
FINAL_CHECKS: tuple[FinalCheck, ...] = ()
