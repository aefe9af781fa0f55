"""C — what the client dispatched: view and checks.

The view compares each request with the previous turn of its conversation: what was kept, what
was appended (the answer echoed back, tool results, new input), what was dropped or rewritten, and
how every tool result pairs with the call it answers — by id, by the id a framework gave the call
when it echoed it, or by name on wires without ids (Gemini, Ollama). Pairing is checked for every
provider, including Ollama, which never reports a pairing error itself.

Catalogue (code, severity, when it fires):

==================================  ========  =====================================================
``C.dropped_tool_result``           error     a call of the previous answer, or a call the client
                                              put in the history, has no result in this request
``C.orphan_tool_result``            error     a result whose call id matches no call of the
                                              conversation or of the history sent
``C.duplicate_tool_result``         warning   two results carry the same call id
``C.assistant_not_echoed``          warning   the previous answer is not in the history sent back
                                              (typographic normalisation and reasoning inlined as
                                              ``<think>`` text are tolerated)
``C.history_mutated``               warning   an earlier message was changed in place
``C.history_trimmed``               info      the history was shortened or compacted (intentional)
``C.pairing_error``                 error     the API rejected the request with a pairing text
                                              (WIRE.md §G.2): reported by A, caused by C, linked
                                              to the turn whose calls were mishandled
``C.continued_after_final_answer``  warning   a text-only final answer was followed by another
                                              request with no new input
``C.truncated_treated_as_complete`` warning   a cut-off answer (token cap, cut stream) was echoed
                                              or its calls executed as if whole
``C.refusal_treated_as_answer``     warning   a refused or filtered answer was echoed and the loop
                                              went on with no new input, as if the model had answered
``C.mcp_error_hidden``               warning   an MCP tool server answered the model's call with an
                                              error, and the result sent back to the model has no
                                              error flag and none of the error's text
``C.tool_result_altered``           info      the result sent back to the model is not what the MCP
                                              server returned (nor a cut of it)
``C.tool_call_not_executed``        warning   the model called a tool a recorded MCP server listed,
                                              no server ran it, and the client sent back a result
                                              not marked as an error (info where the API has no
                                              error flag for tool results)
``C.retry``                         info      the identical request again after a failed attempt
``C.retry_of_rejected_request``     warning   ... after a 4xx that will fail the same way
``C.retry_before_retry_after``      warning   ... sooner than the ``retry-after`` the API asked for
``C.retry_storm``                   warning   five attempts at one request, each within 0.5 s of the last failure
``C.gave_up_on_retryable_error``    info      the conversation ended on a 429, 5xx or transport error
``C.tool_result_as_text``           error     a call's result sent as user text, not as a tool result
``C.tool_results_split``            error     one turn's results spread over several messages where the
                                              API wants them in one (Anthropic)
``C.wrong_tool_call_id``            error     results sent under ids the model never gave (the root of
                                              the orphan results and dropped calls it explains, which
                                              stay as info with ``caused_by``)
``C.tool_result_error``             info      a tool result is an error (flag or error text)
``C.cache_prefix_broken``           info /    system prompt, tool definitions or an early message
                                    warning   changed mid-conversation (warning when cache reads
                                              dropped that turn)
``C.stopped_with_pending_calls``    info      the conversation ended right after the model called
                                              tools (fine for a final-output tool, a bug otherwise)
==================================  ========  =====================================================
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import orjson

from cassettes import providers
from cassettes.analysis.context import Check, ConversationState, FinalCheck, TurnContext
from cassettes.analysis.conversations import Link, response_message
from cassettes.analysis.model import DispatchView, Finding, Pairing, Severity
from cassettes.models import FinishReason, Message, NormalisedRequest, ToolCall, ToolResult

__all__ = ["CHECKS", "FINAL_CHECKS", "build"]


_THINK = re.compile(r"<think>.*?(</think>|$)", re.S)


#: Typographic variants that re-serialisation (and some recorders) normalise away.
_TYPO = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": "-", "\u2013": "-", "\u2026": "..."})


def _loose_text(m: Message) -> str:
    text = " ".join(p.text or "" for p in m.parts if p.kind in ("text", "refusal"))
    text = _THINK.sub(" ", text).translate(_TYPO).replace("--", "-")
    return " ".join(text.split())


def _client_calls(m: Message) -> list[tuple[str, str]]:
    return sorted(
        (p.tool_call.name or "", _canon_args(p.tool_call))
        for p in m.parts
        if p.tool_call is not None and p.tool_call.kind in ("function", "custom")
    )


def _same_calls_but_cut(expected: Message, sent: Message) -> bool:
    """The echo holds the answer's calls, except that a call the stream or the token cap cut
    (arguments not JSON, ``{"city": "Pa``) came back completed or emptied by the client's SDK."""
    def calls(m: Message) -> list[ToolCall]:
        return [p.tool_call for p in m.parts if p.tool_call is not None and p.tool_call.kind in ("function", "custom")]

    want, got = calls(expected), calls(sent)
    if len(want) != len(got) or not any(c.arguments_error for c in want):
        return False
    for w, g in zip(sorted(want, key=lambda c: c.name or ""), sorted(got, key=lambda c: c.name or ""), strict=True):
        if (w.name or "") != (g.name or ""):
            return False
        if not w.arguments_error:
            if _canon_args(w) != _canon_args(g):
                return False
            continue
        cut = "".join((w.arguments_raw or "").split())
        back = "".join((g.arguments_raw or "").split())
        if not (back.startswith(cut) or _canon_args(g) == "{}"):
            return False
    return True


def _more_calls_after(want: list[tuple[str, str]], got: list[tuple[str, str]]) -> bool:
    """Every call of the answer is in the echo, and the echo holds more: calls the client added
    after the answer, which a wire that merges consecutive items (Responses) folds into the same
    message. Those calls are checked on their own (C.dropped_tool_result)."""
    if len(got) <= len(want):
        return False
    rest = list(got)
    for c in want:
        if c not in rest:
            return False
        rest.remove(c)
    return True


def _loosely_echoed(expected: Message | None, sent: Message) -> bool | None:
    """The echo kept the answer's substance: same calls (ids aside) and the same text once
    reasoning the client inlined as ``<think>`` text is set aside."""
    if expected is None:
        return None
    if sent.role not in ("assistant", "model"):
        return False
    want, got = _client_calls(expected), _client_calls(sent)
    if want != got and not _same_calls_but_cut(expected, sent) and not _more_calls_after(want, got):
        return False
    a, b = _loose_text(expected), _loose_text(sent)
    return a == b or (bool(a) and bool(b) and (a in b or b in a))


def _calls_of(ctx: TurnContext) -> list[tuple[str | None, str | None]]:
    r = ctx.rt.response
    return [(c.id, c.name) for c in r.tool_calls] if r is not None else []


def _canon_args(c: ToolCall) -> str:
    if c.arguments in (None, "", {}) and not (c.arguments_raw or "").strip("{} "):
        return "{}"
    if c.arguments is not None:
        return orjson.dumps(c.arguments, option=orjson.OPT_SORT_KEYS).decode()
    return " ".join((c.arguments_raw or "").split())


def _history_calls(messages: list[Message]) -> dict[str, ToolCall]:
    return {
        p.tool_call.id: p.tool_call
        for m in messages
        for p in m.parts
        if p.kind == "tool_call" and p.tool_call is not None and p.tool_call.id
    }


def _echo_ids(ctx: TurnContext, appended: list[Message]) -> dict[int, str]:
    """For each call of the previous turn (by position), the id the client gave it when echoing it
    back. Frameworks rewrite ids, and invent them for wires that have none (Gemini-compat)."""
    out: dict[int, str] = {}
    if ctx.prev is None or ctx.prev.rt.response is None:
        return out
    echoed = [p.tool_call for m in appended for p in m.parts if p.kind == "tool_call" and p.tool_call is not None]
    for i, c in enumerate(ctx.prev.rt.response.tool_calls):
        for e in echoed:
            if e.id and ((c.id and e.id == c.id) or (e.name == c.name and _canon_args(e) == _canon_args(c))):
                out[i] = e.id
                echoed.remove(e)
                break
    return out


def build(ctx: TurnContext, link: Link) -> DispatchView:
    req = ctx.rt.request
    assert req is not None
    kept = link.kept if link.how != "previous_response_id" else 0
    appended = ctx.messages[kept:]
    echo_ids = _echo_ids(ctx, appended)
    _register_previous_calls(ctx, echo_ids)
    # Call ids present in the history the client has sent in this conversation, kept up to date
    # from what each turn appended (no re-scan of the whole history).
    in_history: set[str] = ctx.conv.state.setdefault("_history_call_ids", set())
    appended_calls = _history_calls(appended)
    in_history.update(appended_calls)
    names = _call_names(ctx, echo_ids, appended_calls)
    pairings = [
        _pairing(ctx, tr, in_history, names, kept + offset)
        for offset, m in enumerate(appended)
        for p in m.parts
        if p.kind == "tool_result" and (tr := p.tool_result) is not None
    ]
    echoed = link.echoed
    if echoed is False and ctx.prev is not None and kept < len(ctx.messages):
        echoed = _loosely_echoed(response_message(ctx.prev.rt.response), ctx.messages[kept])
    return DispatchView(
        kept=kept,
        rewritten=link.rewritten,
        appended=appended,
        appended_from=kept,
        echoed_assistant=echoed,
        pairings=pairings,
        tools_offered=[t.name for t in req.tools],
        tool_choice=req.tool_choice_mode,
        params=req.params,
        link=link.how,  # type: ignore[arg-type]
    )


def _register_previous_calls(ctx: TurnContext, echo_ids: dict[int, str]) -> None:
    """Calls emitted earlier in this conversation: by id (and by the id the client echoed them
    under), and by name for wires without ids, for the results that answer them."""
    if ctx.prev is None:
        return
    registry: dict[str, int] = ctx.conv.state.setdefault("_calls_by_id", {})
    unanswered_by_name: dict[str, list[int]] = ctx.conv.state.setdefault("_unanswered_by_name", {})
    for i, (cid, name) in enumerate(_calls_of(ctx.prev)):
        if i in echo_ids:
            registry[echo_ids[i]] = ctx.prev.index
        if cid:
            registry[cid] = ctx.prev.index
        elif name and i not in echo_ids:
            unanswered_by_name.setdefault(name, []).append(ctx.prev.index)


def _call_names(ctx: TurnContext, echo_ids: dict[int, str], appended_calls: dict[str, ToolCall]) -> dict[str, str]:
    """The name of each call by id, for wires whose results carry no name (OpenAI's): the calls
    of the turn the results answer and the calls this request appended (kept per turn, not per
    conversation: the threading's memory per turn stays flat)."""
    names: dict[str, str] = {}
    if ctx.prev is not None:
        for i, (cid, name) in enumerate(_calls_of(ctx.prev)):
            for key in (cid, echo_ids.get(i)):
                if key and name:
                    names[key] = name
    names.update({cid: c.name for cid, c in appended_calls.items() if c.name})
    return names


def _pairing(ctx: TurnContext, tr: ToolResult, in_history: set[str], names: dict[str, str], index: int) -> Pairing:
    """One result and the call it answers: by id, else by name (wires without call ids, Gemini
    and Ollama; clients may invent ids), else a call the client itself put in the history."""
    registry: dict[str, int] = ctx.conv.state.setdefault("_calls_by_id", {})
    call_turn: int | None = None
    found = False
    if tr.call_id and tr.call_id in registry:
        call_turn, found = registry[tr.call_id], True
    else:
        queue = ctx.conv.state.setdefault("_unanswered_by_name", {}).get(tr.name or "")
        if queue:
            call_turn, found = queue.pop(0), True
        elif tr.call_id and tr.call_id in in_history:
            found = True
    return Pairing(
        call_id=tr.call_id,
        name=tr.name or (names.get(tr.call_id) if tr.call_id else None),
        call_turn=call_turn,
        in_history=found,
        is_error=tr.is_error,
        message_index=index,
    )


# -- checks ---------------------------------------------------------------------------------


def _hk(ctx: TurnContext) -> str:
    return ctx.history_key


def _prev_ok(ctx: TurnContext) -> bool:
    p = ctx.prev
    return p is not None and p.rt.response is not None and p.rt.response.error is None and (p.rt.status or 0) < 400


def _continues(ctx: TurnContext) -> bool:
    """This request continues the previous turn's exchange with the model (not a retry/branch)."""
    return ctx.prev is not None and ctx.turn.c.link in ("extends", "rewritten", "header", "previous_response_id")


def check_dropped_tool_result(ctx: TurnContext) -> Iterator[Finding]:
    """C.dropped_tool_result — a call the model made last turn has no result in this request."""
    if not _continues(ctx) or not _prev_ok(ctx):
        return
    prev = ctx.prev
    assert prev is not None and prev.rt.response is not None
    if prev.rt.response.finish_reason is FinishReason.PAUSED:
        return
    if not any(c.kind in ("function", "custom") for c in prev.rt.response.tool_calls):
        return
    answered_ids = {p.call_id for p in ctx.turn.c.pairings if p.call_id}
    echo_ids = _echo_ids(ctx, ctx.turn.c.appended)
    answered_names: dict[str, int] = {}
    for p in ctx.turn.c.pairings:
        if p.call_turn == prev.index and p.name:
            answered_names[p.name] = answered_names.get(p.name, 0) + 1
    all_calls = prev.rt.response.tool_calls
    for i, c in enumerate(all_calls):
        if c.kind not in ("function", "custom"):
            continue
        if (c.id and c.id in answered_ids) or echo_ids.get(i) in answered_ids:
            continue
        if not c.id and c.name and answered_names.get(c.name, 0) > 0:
            answered_names[c.name] -= 1
            continue
        as_text = _result_as_text(ctx, c)
        if as_text is not None:
            yield ctx.finding(
                "C.tool_result_as_text",
                Severity.ERROR,
                f"The result of {c.name} (call {c.id or 'without id'}, turn {prev.index}) was sent as plain "
                f"{ctx.messages[as_text].role} text in message [{as_text}], not as a tool result: the API "
                "does not pair it with the call, which stays unanswered.",
                path=_item(ctx, as_text),
                tool_call_id=c.id,
                related_turn=prev.index,
                tool=c.name,
            )
        yield ctx.finding(
            "C.dropped_tool_result",
            Severity.INFO if as_text is not None else Severity.ERROR,
            f"The model called {c.name}({_short(c.arguments_raw)}) on turn {prev.index} "
            f"(id {c.id or 'none'}), but this request carries no result for it"
            + (" (its result went as text: see C.tool_result_as_text)." if as_text is not None else "."),
            path=f"{_hk(ctx)}[{ctx.turn.c.appended_from}:]",
            tool_call_id=c.id,
            related_turn=prev.index,
            tool=c.name,
            **({"caused_by": "C.tool_result_as_text"} if as_text is not None else {}),
        )


def _result_as_text(ctx: TurnContext, call: ToolCall) -> int | None:
    """The index of an appended user message whose text carries this call's result: it names the
    call's id, or its tool (a name of 4 characters or more) while the message holds no tool result."""
    c = ctx.turn.c
    for offset, m in enumerate(c.appended):
        if m.role != "user" or any(p.kind == "tool_result" for p in m.parts):
            continue
        text = " ".join(p.text or "" for p in m.parts if p.kind == "text")
        if not text:
            continue
        if (call.id and call.id in text) or (call.name and len(call.name) >= 4 and re.search(rf"\b{re.escape(call.name)}\b", text)):
            return c.appended_from + offset
    return None


def check_results_split(ctx: TurnContext) -> Iterator[Finding]:
    """C.tool_results_split — an API that wants one turn's results together got them spread."""
    adapter = providers.by_family(ctx.rt.family)
    prev = ctx.prev
    if adapter is None or not adapter.results_in_one_message or prev is None:
        return
    where = sorted({p.message_index for p in ctx.turn.c.pairings if p.call_turn == prev.index and p.message_index is not None})
    if len(where) < 2:
        return
    listing = ", ".join(f"[{i}]" for i in where)
    yield ctx.finding(
        "C.tool_results_split",
        Severity.ERROR,
        f"The results of turn {prev.index}'s calls are spread over messages {listing}; this API wants all of "
        "them in the one user message right after the calls, and answers anything else with a 400.",
        path=_item(ctx, where[1]),
        related_turn=prev.index,
        messages=where,
    )


def _item(ctx: TurnContext, message_index: int, part_index: int | None = None) -> str:
    """The path of a history message (and one of its parts) in the request as sent."""
    adapter = providers.by_family(ctx.rt.family)
    path = adapter.item_path(ctx.ex.request_json(), message_index, part_index) if adapter is not None else None
    return path or f"{_hk(ctx)}[{message_index}]"


def _result_part(ctx: TurnContext, pairing_number: int) -> tuple[int, int | None]:
    """(message index, part index) of the ``pairing_number``-th pairing's tool result."""
    pairings = ctx.turn.c.pairings
    mi = pairings[pairing_number].message_index
    if mi is None or mi >= len(ctx.messages):
        return (mi or 0), None
    ordinal = sum(1 for q in pairings[:pairing_number] if q.message_index == mi)
    result_parts = [k for k, part in enumerate(ctx.messages[mi].parts) if part.kind == "tool_result"]
    return mi, result_parts[ordinal] if ordinal < len(result_parts) else None


def check_unanswered_history_call(ctx: TurnContext) -> Iterator[Finding]:
    """C.dropped_tool_result — a call the client put in this request's history has no result after it.

    Covers calls that are not the previous answer's (frameworks insert call + result pairs of
    their own); the previous answer's calls are checked by :func:`check_dropped_tool_result`.
    """
    c = ctx.turn.c
    if c.link == "previous_response_id":
        return
    prev_ids: set[str] = set()
    if ctx.prev is not None and ctx.prev.rt.response is not None:
        prev_ids = {x.id for x in ctx.prev.rt.response.tool_calls if x.id}
        prev_ids |= set(_echo_ids(ctx, c.appended).values())
    results = {p.call_id for p in c.pairings if p.call_id}
    for offset, m in enumerate(c.appended):
        for k, p in enumerate(m.parts):
            tc = p.tool_call
            if tc is None or tc.kind not in ("function", "custom") or not tc.id or tc.id in prev_ids:
                continue
            if tc.id not in results:
                yield ctx.finding(
                    "C.dropped_tool_result",
                    Severity.ERROR,
                    f"This request's history holds a call to {tc.name} (id {tc.id}) with no result after it.",
                    path=_item(ctx, c.appended_from + offset, k),
                    tool_call_id=tc.id,
                    tool=tc.name,
                )


def check_orphan_tool_result(ctx: TurnContext) -> Iterator[Finding]:
    """C.orphan_tool_result — a tool result whose call id matches no call of this conversation."""
    if ctx.turn.c.link == "previous_response_id" and ctx.prev is None:
        return
    seen: dict[str, int] = {}
    for n, p in enumerate(ctx.turn.c.pairings):
        if p.call_id:
            seen[p.call_id] = seen.get(p.call_id, 0) + 1
            if seen[p.call_id] == 2:
                yield ctx.finding(
                    "C.duplicate_tool_result",
                    Severity.WARNING,
                    f"Two tool results carry the same call id {p.call_id} ({p.name or 'tool'}): the API "
                    "cannot tell which call each one answers (a result sent twice, or an id reused).",
                    path=_item(ctx, *_result_part(ctx, n)),
                    tool_call_id=p.call_id,
                )
        if p.in_history or ctx.index == 0:
            continue
        yield ctx.finding(
            "C.orphan_tool_result",
            Severity.ERROR,
            f"A tool result for call {p.call_id or p.name} was sent, but no call with that "
            f"{'id' if p.call_id else 'name'} was made earlier in this conversation.",
            path=_item(ctx, *_result_part(ctx, n)),
            tool_call_id=p.call_id,
            tool=p.name,
        )


def check_assistant_echo(ctx: TurnContext) -> Iterator[Finding]:
    """C.assistant_not_echoed — the previous answer is not in the history the client sent back."""
    c = ctx.turn.c
    if c.echoed_assistant is not False or not _continues(ctx) or not _prev_ok(ctx):
        return
    prev = ctx.prev
    assert prev is not None
    yield ctx.finding(
        "C.assistant_not_echoed",
        Severity.WARNING,
        f"The assistant message of turn {prev.index} is not appended verbatim after the history: "
        "the client changed or dropped what the model said before sending the next request.",
        path=f"{_hk(ctx)}[{c.kept}]",
        related_turn=prev.index,
    )


def _is_compaction(m: Message) -> bool:
    """A provider item that stands for summarised earlier history."""
    for p in m.parts:
        block = (p.provider_details or {}).get("block")
        if p.kind == "other" and isinstance(block, dict) and "compact" in str(block.get("type", "")):
            return True
    return False


def check_history_rewritten(ctx: TurnContext) -> Iterator[Finding]:
    """C.history_trimmed (info) / C.history_mutated (warning) — the history was not only extended."""
    c = ctx.turn.c
    if c.rewritten <= 0 or ctx.prev is None or c.link == "previous_response_id":
        return
    prev_len = ctx.prev.n_messages
    # A provider item standing for earlier history (a compaction summary) marks a deliberate rewrite.
    compacted = any(_is_compaction(m) for m in ctx.messages[: c.kept + 1])
    if len(ctx.messages) < prev_len or compacted:
        yield ctx.finding(
            "C.history_trimmed",
            Severity.INFO,
            f"The history was shortened or compacted: {prev_len} messages last turn, {len(ctx.messages)} "
            f"now (kept the first {c.kept}). Intentional trimming or summarising looks like this.",
            path=f"{_hk(ctx)}[{c.kept}]",
            related_turn=ctx.prev.index,
            kept=c.kept,
        )
    elif c.kept < len(ctx.messages) and all(m.role in ("system", "developer") for m in ctx.messages[: c.kept + 1]):
        return  # the opening system prompt was changed: reported by C.cache_prefix_broken
    else:
        yield ctx.finding(
            "C.history_mutated",
            Severity.WARNING,
            f"Message {c.kept} of the history differs from what was sent on turn {ctx.prev.index}: "
            "the client rewrote earlier history instead of appending to it.",
            path=f"{_hk(ctx)}[{c.kept}]",
            related_turn=ctx.prev.index,
            changed=c.rewritten,
        )


def check_pairing_error(ctx: TurnContext) -> Iterator[Finding]:
    """C.pairing_error — the API rejected the request for mis-paired tool calls and results."""
    r = ctx.rt.response
    if r is None or r.error is None or (ctx.rt.status or 0) < 400:
        return
    adapter = providers.by_family(ctx.rt.family)
    if adapter is None or not adapter.is_pairing_error(r.error.message):
        return
    attempt = ctx
    while attempt.turn.c.link == "retry" and attempt.prev is not None:
        attempt = attempt.prev  # a re-sent copy of a rejected request: blame the turn it answers
    related = attempt.prev.index if attempt.prev is not None else None
    yield ctx.finding(
        "C.pairing_error",
        Severity.ERROR,
        f"The API rejected this request (HTTP {ctx.rt.status}) because tool calls and results are "
        f"mis-paired: \"{_short(r.error.message, 200)}\". Reported by the API, caused by the client's "
        + (f"handling of the calls from turn {related}." if related is not None else "dispatch."),
        related_turn=related,
        api_message=r.error.message,
    )


def check_continued_after_final(ctx: TurnContext) -> Iterator[Finding]:
    """C.continued_after_final_answer — another request without new input after a final answer."""
    prev = ctx.prev
    if prev is None or not _continues(ctx) or not _prev_ok(ctx):
        return
    r = prev.rt.response
    assert r is not None
    # A final answer is text and nothing else: provider items (hosted tool calls a client may
    # have to execute, compaction …) mean the exchange is not over.
    if r.finish_reason is not FinishReason.COMPLETE or not r.text.strip() or any(p.kind in ("tool_call", "other") for p in r.parts):
        return
    new_input = [m for m in ctx.turn.c.appended if m.role not in ("assistant", "model")]
    if new_input:
        return
    yield ctx.finding(
        "C.continued_after_final_answer",
        Severity.WARNING,
        f"Turn {prev.index} ended with a final answer, yet the client called the model again "
        "without adding any new input.",
        related_turn=prev.index,
    )


def check_truncated_treated_as_complete(ctx: TurnContext) -> Iterator[Finding]:
    """C.truncated_treated_as_complete — a cut-off answer was carried on as if it were whole."""
    prev = ctx.prev
    if prev is None or not _continues(ctx) or prev.rt.response is None:
        return
    r = prev.rt.response
    cut = r.finish_reason in (FinishReason.TRUNCATED_LENGTH, FinishReason.TRUNCATED_CONTEXT) or r.complete is False
    if not cut:
        return
    used_calls = any(p.call_turn == prev.index for p in ctx.turn.c.pairings)
    if not used_calls and not ctx.turn.c.echoed_assistant:
        return
    what = "ran its truncated tool calls" if used_calls else "appended the cut-off answer to the history"
    yield ctx.finding(
        "C.truncated_treated_as_complete",
        Severity.WARNING,
        f"Turn {prev.index} was truncated ({r.finish_reason_raw or 'stream cut'}), but the client {what} "
        "and carried on as if it were complete.",
        related_turn=prev.index,
    )


def check_refusal_treated_as_answer(ctx: TurnContext) -> Iterator[Finding]:
    """C.refusal_treated_as_answer — the model refused, or the API's filter withheld the answer,
    and the client put that answer in the history and called again with no new input: its loop
    took the refusal for a step of the work instead of stopping or asking a person."""
    prev = ctx.prev
    if prev is None or not _continues(ctx) or prev.rt.response is None:
        return
    r = prev.rt.response
    refused = r.finish_reason is FinishReason.REFUSED or any(p.kind == "refusal" for p in r.parts)
    if not refused and r.finish_reason is not FinishReason.FILTERED:
        return
    appended = ctx.turn.c.appended
    # Something was appended (the answer, however echoed; results), and nothing from a person: the
    # same request again is a retry, new user text is a person taking over.
    if not appended or any(m.role not in ("assistant", "model", "tool") for m in appended):
        return
    what = "the model refused" if refused else f"the API's content filter withheld the answer ({r.finish_reason_raw or 'filtered'})"
    yield ctx.finding(
        "C.refusal_treated_as_answer",
        Severity.WARNING,
        f"On turn {prev.index} {what}, but the client appended that answer to the history and called "
        "the model again with no new input, as if it were a step of the work.",
        related_turn=prev.index,
    )


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def check_mcp_results(ctx: TurnContext) -> Iterator[Finding]:
    """C.mcp_error_hidden / C.tool_result_altered / C.tool_call_not_executed — the results this
    request sends back, against what the run's MCP tool servers listed and returned for the same
    call (linked by the tool-use id the client sent the server, or by tool and arguments)."""
    mcp = ctx.mcp
    if not mcp.listed and not mcp.results:
        return
    for m in ctx.turn.c.appended:
        for p in m.parts:
            tr = p.tool_result
            if tr is None or not tr.call_id:
                continue
            if tr.call_id in mcp.results:
                yield from _mcp_result(ctx, tr, *mcp.results[tr.call_id])
            else:
                yield from _mcp_not_run(ctx, tr)


def _mcp_result(ctx: TurnContext, tr: ToolResult, seq: int, side: dict[str, Any]) -> Iterator[Finding]:
    sent = _norm(tr.content or "")
    tool = side.get("tool") or "?"
    if side.get("error") or side.get("is_error"):
        said = side["error"].get("message") if side.get("error") else side.get("result")
        said_n = _norm(str(said or ""))[:60]
        if tr.is_error is not True and said_n and said_n not in sent:
            yield ctx.finding(
                "C.mcp_error_hidden",
                Severity.WARNING,
                f"The MCP server answered the model's call {tr.call_id} ({tool}, #{seq}) with an error "
                f"(“{_short(str(said), 120)}”), but the client sent it back to the model as a success: no error "
                "flag and none of the error's text.",
                tool_call_id=tr.call_id,
                mcp_seq=seq,
            )
        return
    got = _norm(str(side.get("result") or ""))
    if not side.get("answered") or not got:
        return
    cut = sent.rstrip(".… ").removesuffix("[truncated]").rstrip()
    if got in sent or (len(cut) >= 20 and got.startswith(cut[: len(cut) - 1])):
        return  # the same, wrapped, or a cut of it
    yield ctx.finding(
        "C.tool_result_altered",
        Severity.INFO,
        f"The result sent back to the model for {tr.call_id} ({tool}) is not what the MCP server returned "
        f"at #{seq}: the server said “{_short(str(side.get('result')), 100)}”, the model was sent "
        f"“{_short(tr.content, 100)}”.",
        tool_call_id=tr.call_id,
        mcp_seq=seq,
    )


def _mcp_not_run(ctx: TurnContext, tr: ToolResult) -> Iterator[Finding]:
    """A result for a call of a tool a recorded MCP server offers, though no tools/call of that
    tool was recorded between the model's answer and this request. Not when the client marked
    the result an error (a declined or failed call, said as such)."""
    mcp = ctx.mcp
    made = mcp.calls.get(tr.call_id or "")
    if made is None or tr.is_error is True:
        return
    model_seq, name, tool = made.seq, made.name, made.tool
    if mcp.ran_since(tool, model_seq):
        return
    adapter = providers.by_family(ctx.rt.family)
    flagged = adapter is not None and adapter.tool_error_flag
    yield ctx.finding(
        "C.tool_call_not_executed",
        Severity.WARNING if flagged else Severity.INFO,
        f"The model's call {tr.call_id} ({name}, #{model_seq}) was never run on the MCP server that offers {tool}: "
        f"no tools/call for it was recorded, yet the client sent the model a result "
        f"(“{_short(tr.content, 100)}”)"
        + (" without an error flag." if flagged else "; this API has no error flag, so a declined call may be said in that text."),
        tool_call_id=tr.call_id,
        tool=tool,
    )


def _request_changes(before: NormalisedRequest | None, after: NormalisedRequest | None) -> list[str]:
    """What differs between two requests beyond their history: model, streaming, tools, tool
    choice, system prompt, parameters (each named, the model with both values)."""
    if before is None or after is None:
        return []
    out: list[str] = []
    if (before.model or "") != (after.model or ""):
        out.append(f"the model ({before.model} → {after.model})")
    if before.stream != after.stream:
        out.append("streaming")
    if [(t.name, t.parameters) for t in before.tools] != [(t.name, t.parameters) for t in after.tools]:
        out.append("the tools")
    if before.tool_choice_mode != after.tool_choice_mode:
        out.append("the tool choice")
    if [p.text for p in before.system] != [p.text for p in after.system]:
        out.append("the system prompt")
    changed = sorted(k for k in set(before.params) | set(after.params) if before.params.get(k) != after.params.get(k))
    if changed:
        out.append("parameters " + ", ".join(changed[:5]) + (" …" if len(changed) > 5 else ""))
    return out


def check_retry(ctx: TurnContext) -> Iterator[Finding]:
    """C.retry — the same history was sent again after a failed attempt: the identical request
    (a retry), or one the client changed (model, tools, parameters …), which is no blind retry."""
    if ctx.turn.c.link != "retry" or ctx.prev is None:
        return
    p = ctx.prev.rt
    status = p.status or 0
    if p.transport_error:
        why = "a transport error"
    elif status >= 400:
        why = f"HTTP {status}"
    else:
        why = "an incomplete response"
    changes = _request_changes(p.request, ctx.rt.request)
    if changes:
        yield ctx.finding(
            "C.retry",
            Severity.INFO,
            f"After turn {ctx.prev.index} failed ({why}) the client sent the same history again with "
            f"{', '.join(changes)} changed: a changed request, not a blind retry.",
            related_turn=ctx.prev.index,
            changed=changes,
        )
    elif 400 <= status < 500 and status not in (408, 409, 429):
        yield ctx.finding(
            "C.retry_of_rejected_request",
            Severity.WARNING,
            f"The client re-sent the identical request after turn {ctx.prev.index} was rejected with "
            f"{why}; an invalid request fails the same way again.",
            related_turn=ctx.prev.index,
        )
    else:
        storm = _storm(ctx)
        if storm is not None:
            n, span = storm
            yield ctx.finding(
                "C.retry_storm",
                Severity.WARNING,
                f"The client sent the same failed request {n} times within {span:.1f} s, each retry less than "
                f"{_STORM_GAP:g} s after the last failure ({why}): a retry storm, with no backoff. It makes a rate "
                "limit or an overloaded API worse; back off exponentially and cap the attempts.",
                related_turn=ctx.prev.index,
                attempts=n,
                seconds=round(span, 3),
            )
            return
        asked = ctx.prev.retry_after
        waited = _waited(ctx)
        if asked is not None and waited is not None and asked <= _HONOURED_RETRY_AFTER and waited < asked * 0.9 - 0.05:
            yield ctx.finding(
                "C.retry_before_retry_after",
                Severity.WARNING,
                f"The client re-sent the request {waited:.2f} s after turn {ctx.prev.index} failed ({why}), though the API "
                f"asked it to wait {asked:g} s (retry-after): a retry that comes too soon is usually refused again.",
                related_turn=ctx.prev.index,
                waited=round(waited, 3),
                retry_after=asked,
            )
            return
        yield ctx.finding(
            "C.retry",
            Severity.INFO,
            f"The identical request was re-sent after turn {ctx.prev.index} failed ({why}).",
            related_turn=ctx.prev.index,
        )


#: The official SDKs honour a retry-after up to 60 s and fall back to their own backoff above it
#: (openai and anthropic ``_base_client``): a sooner retry after a longer ask is not a bug.
_HONOURED_RETRY_AFTER = 60.0


#: A retry storm: this many attempts at one request in a row, each less than _STORM_GAP seconds
#: after the previous one failed (an SDK's own backoff waits longer from the second retry on).
_STORM_ATTEMPTS = 5
_STORM_GAP = 0.5


def _storm(ctx: TurnContext) -> tuple[int, float] | None:
    """(attempts, seconds) when this attempt makes the chain of quick retries a storm (reported
    once, on the attempt that reaches :data:`_STORM_ATTEMPTS`)."""
    chain = [ctx]
    cur = ctx
    while cur.turn.c.link == "retry" and cur.prev is not None and len(chain) <= _STORM_ATTEMPTS:
        chain.append(cur.prev)
        cur = cur.prev
    if len(chain) != _STORM_ATTEMPTS:
        return None
    starts: list[float] = []
    for later, earlier in itertools.pairwise(chain):
        begin = later.ex.started if later is ctx else later.started
        if begin is None or earlier.ended is None or begin - earlier.ended >= _STORM_GAP:
            return None
        starts.append(begin)
    first = chain[-1].started
    return (_STORM_ATTEMPTS, max(starts) - first) if first is not None else None


def _waited(ctx: TurnContext) -> float | None:
    """Seconds from the end of the failed attempt to the start of this one."""
    ended = ctx.prev.ended if ctx.prev is not None else None
    if ended is None or ctx.ex.started is None:
        return None
    return ctx.ex.started - ended


_ERRORISH = ("error", "exception", "traceback", "failed", "failure")


def check_tool_result_error(ctx: TurnContext) -> Iterator[Finding]:
    """C.tool_result_error — a tool the client ran reported an error."""
    for p in ctx.turn.c.pairings:
        m = ctx.messages[p.message_index] if p.message_index is not None and p.message_index < len(ctx.messages) else None
        content = ""
        if m is not None:
            for part in m.parts:
                if part.tool_result is not None and part.tool_result.call_id == p.call_id:
                    content = part.tool_result.content
                    break
        flagged = p.is_error is True or content.lstrip().lower().startswith(_ERRORISH) or content.lstrip().startswith('{"error"')
        if flagged:
            yield ctx.finding(
                "C.tool_result_error",
                Severity.INFO,
                f"The result of {p.name or 'tool'} ({p.call_id or 'no id'}) is an error: {_short(content, 160)!r}",
                path=f"{_hk(ctx)}[{p.message_index}]",
                tool_call_id=p.call_id,
                tool=p.name,
            )


def _prefix_fingerprint(ctx: TurnContext) -> tuple[int, int]:
    req = ctx.rt.request
    assert req is not None
    system = orjson.dumps([(p.kind, p.text) for p in req.system])
    tools = orjson.dumps([t.model_dump() for t in req.tools], option=orjson.OPT_SORT_KEYS)
    return hash(system), hash(tools)


def check_cache_prefix(ctx: TurnContext) -> Iterator[Finding]:
    """C.cache_prefix_broken — the system prompt or tools changed mid-conversation."""
    if ctx.prev is None or ctx.prev.rt.request is None or ctx.turn.c.link == "previous_response_id":
        return
    now, before = _prefix_fingerprint(ctx), _prefix_fingerprint(ctx.prev)
    changed = [name for name, a, b in (("system prompt", now[0], before[0]), ("tool definitions", now[1], before[1])) if a != b]
    if not changed and not (ctx.turn.c.rewritten and ctx.turn.c.kept <= 2):
        return
    what = " and ".join(changed) if changed else f"message {ctx.turn.c.kept} of the history"
    prev_usage = ctx.prev.rt.response.usage if ctx.prev.rt.response else None
    usage = ctx.rt.response.usage if ctx.rt.response else None
    lost = bool(prev_usage and prev_usage.cache_read_tokens and (usage is None or (usage.cache_read_tokens or 0) < prev_usage.cache_read_tokens))
    yield ctx.finding(
        "C.cache_prefix_broken",
        Severity.WARNING if lost else Severity.INFO,
        f"The {what} changed since turn {ctx.prev.index}; everything after the change is no longer a "
        "cached prefix" + (", and cache reads dropped this turn." if lost else "."),
        related_turn=ctx.prev.index,
        changed=changed,
    )


def final_pending_calls(conv: ConversationState) -> Iterator[Finding]:
    """C.stopped_with_pending_calls — the conversation ended while the model waited for results."""
    if not conv.turns:
        return
    last = conv.turns[-1]
    r = last.rt.response
    if r is None or r.error is not None or r.finish_reason is not FinishReason.TOOL_CALL:
        return
    calls = [c for c in r.tool_calls if c.kind in ("function", "custom")]
    if not calls:
        return
    names = ", ".join(sorted({c.name or "?" for c in calls}))
    yield last.finding(
        "C.stopped_with_pending_calls",
        Severity.INFO,
        f"The run ended after the model called {names}; no request with the results followed. "
        "Fine when the call is the agent's final output (e.g. a final_result tool), a bug otherwise.",
        tool_call_id=calls[0].id,
    )


def final_gave_up(conv: ConversationState) -> Iterator[Finding]:
    """C.gave_up_on_retryable_error — the conversation ended on a failure that a later attempt
    usually gets past (a rate limit, an overloaded or failing server, a broken connection)."""
    if not conv.turns:
        return
    last = conv.turns[-1]
    rt = last.rt
    status = rt.status or 0
    if rt.transport_error:
        why = "a transport error"
    elif status in (408, 409, 429) or status >= 500:
        why = f"HTTP {status}"
    else:
        return
    attempts = 1
    cur = last
    while cur.turn.c.link == "retry" and cur.prev is not None and attempts < 1000:
        attempts += 1
        cur = cur.prev
    yield last.finding(
        "C.gave_up_on_retryable_error",
        Severity.INFO,
        f"The conversation ended on {why}, an error a later attempt usually gets past, after {attempts} "
        f"attempt{'s' if attempts > 1 else ''}: the client gave up (its retries were off or ran out), or the run was stopped.",
        attempts=attempts,
    )


def _short(text: str | None, n: int = 80) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= n else t[: n - 1] + "…"


CHECKS: tuple[Check, ...] = (
    check_dropped_tool_result,
    check_results_split,
    check_unanswered_history_call,
    check_orphan_tool_result,
    check_assistant_echo,
    check_history_rewritten,
    check_pairing_error,
    check_continued_after_final,
    check_truncated_treated_as_complete,
    check_refusal_treated_as_answer,
    check_mcp_results,
    check_retry,
    check_tool_result_error,
    check_cache_prefix,
)
FINAL_CHECKS: tuple[FinalCheck, ...] = (final_pending_calls, final_gave_up)


# --- root causes ------------------------------------------------------------------------------


def fold_root_causes(ctx: TurnContext, findings: list[Finding]) -> list[Finding]:
    """Lead with the root cause. A client that sent results under ids the model never gave gets
    one error, ``C.wrong_tool_call_id``, pairing each wrong id with the call it answers (by tool
    name, else by position); the orphan result and the dropped call it explains stay, as info
    with ``details.caused_by``, right under it."""
    prev = ctx.prev
    if prev is None:
        return findings
    if any(f.code == "C.tool_results_split" for f in findings):
        findings = [_caused_by(f, "C.tool_results_split") if f.code == "C.pairing_error" else f for f in findings]
    orphans = [f for f in findings if f.code == "C.orphan_tool_result" and f.tool_call_id and f.severity is Severity.ERROR]
    dropped = [f for f in findings if f.code == "C.dropped_tool_result" and f.related_turn == prev.index and f.severity is Severity.ERROR]
    pairs = _wrong_id_pairs(orphans, dropped)
    if not pairs:
        return findings
    listing = "; ".join(
        f"`{o.tool_call_id}` for {d.details.get('tool') or 'a call'} (the model's id: {d.tool_call_id or 'none'})" for o, d in pairs
    )
    root = ctx.finding(
        "C.wrong_tool_call_id",
        Severity.ERROR,
        f"The client sent tool results under ids the model never gave: {listing}. The calls of turn "
        f"{prev.index} therefore look unanswered and the results orphaned; the API pairs results by id.",
        path=orphans[0].path,
        tool_call_id=pairs[0][1].tool_call_id,
        related_turn=prev.index,
        pairs=[{"sent": o.tool_call_id, "model": d.tool_call_id, "tool": d.details.get("tool")} for o, d in pairs],
    )
    folded = {id(f) for pair in pairs for f in pair}
    out: list[Finding] = []
    for f in findings:
        if id(f) not in folded:
            out.append(f)
            continue
        if not any(x is root for x in out):
            out.append(root)
        out.append(_caused_by(f, "C.wrong_tool_call_id"))
    return out


def _caused_by(f: Finding, cause: str) -> Finding:
    """A consequence, folded under its root cause: info, ``details.caused_by`` naming it."""
    return f.model_copy(update={"severity": Severity.INFO, "details": {**f.details, "caused_by": cause}})


def _wrong_id_pairs(orphans: list[Finding], dropped: list[Finding]) -> list[tuple[Finding, Finding]]:
    """Each orphan result with the dropped call it answers: the one of the same tool, else (as
    many of each) the next by position."""
    pairs: list[tuple[Finding, Finding]] = []
    left = list(dropped)
    for o in orphans if dropped else []:
        name = o.details.get("tool")
        match = next((d for d in left if name and d.details.get("tool") == name), None)
        if match is None and len(orphans) == len(dropped):
            match = left[0] if left else None
        if match is not None:
            left.remove(match)
            pairs.append((o, match))
    return pairs
