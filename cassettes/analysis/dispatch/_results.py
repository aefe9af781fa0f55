"""C checks on tool results: dropped, orphaned, split, sent as text, rejected by the API for
pairing, errors; calls left pending at the end."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ... import providers
from ...lazy import pattern
from ...models import FinishReason, ToolCall, ToolResult
from .. import codes as codes
from .._context import ConversationState, TurnContext, cut_call, short
from .._model import Finding, Pairing
from ._layer import call_as_output, calls_as_text, previous_calls
from ._shared import (
    _continues,
    _item,
    _prev_ok,
    _result_part,
    attempts,
)


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
    appended = ctx.turn.c.appended
    answer = ctx.keys.answer(prev.rt.response)
    if answer is not None and appended and call_as_output(answer, appended[0]):
        yield _output_call_as_text(ctx, prev.index, prev.rt.response.tool_calls)
        return
    if answer is not None and appended and calls_as_text(answer, appended[0]):
        yield ctx.finding(
            codes.TOOL_CALLS_AS_TEXT,
            f"The client echoed the tool calls of turn {prev.index} as text, not as calls, and "
            "sends their results as text too (a transcript, as smolagents and text-protocol "
            "agents keep it): the API sees no pending call, and the model reads its calls and "
            "their results as plain messages.",
            path=f"{ctx.history_key}[{ctx.turn.c.appended_from}]",
            related_turn=prev.index,
        )
        return
    cc = ctx.turn.c.context
    # The client's context management dropped the answer with its calls (a summary in their
    # place, the results read into it): the API sees no pending call; what is missing follows
    # from the management, said by C.history_trimmed.
    folded = cc is not None and cc.kind != "cleared" and not ctx.turn.c.echoed_assistant
    # Calls whose results went to the compaction whose summary this request uses were run and
    # summarised: answered, not dropped.
    summarised = set(cc.summarised_calls) if cc is not None else set()
    for c in _unanswered_calls(ctx, prev.index, prev.rt.response.tool_calls):
        if c.id and c.id in summarised:
            continue
        for f in _dropped(ctx, prev.index, c):
            yield (
                f.model_copy(
                    update={
                        "details": {
                            **f.details,
                            "caused_by": codes.HISTORY_TRIMMED,
                            "caused_by_seq": ctx.seq,
                        }
                    }
                )
                if folded
                else f
            )


def _output_call_as_text(ctx: TurnContext, prev_turn: int, calls: list[ToolCall]) -> Finding:
    """C.output_tool_as_text (info) — the answer's one call came back as the output it stood for
    (:func:`~._layer.call_as_output`): the allowance :func:`final_pending_calls` makes for a run
    that ends on an output tool, when the conversation is resumed."""
    c = next(c for c in calls if c.kind in ("function", "custom"))
    return ctx.finding(
        codes.OUTPUT_TOOL_AS_TEXT,
        f"The client sent turn {prev_turn}'s call to {c.name} back as assistant text, its "
        "arguments as the answer, with no result for it: a framework whose output tool ends the "
        f"run writes the structured output back this way when it resumes. Fine when {c.name} is "
        "the agent's output tool (e.g. a final_result tool), a bug otherwise.",
        path=f"{ctx.history_key}[{ctx.turn.c.appended_from}]",
        tool_call_id=c.id,
        related_turn=prev_turn,
        tool=c.name,
    )


def _unanswered_calls(
    ctx: TurnContext, prev_turn: int, calls: list[ToolCall]
) -> Iterator[ToolCall]:
    """The client-side calls of the previous turn this request answers neither by id (the
    model's, or the one the client echoed it under) nor, for calls without ids, by tool name (one
    result of that tool per call)."""
    by_id, used = _answered_by_id(ctx, calls)
    answered_names: dict[str, int] = {}
    for p in ctx.turn.c.pairings:
        if p.call_turn == prev_turn and p.name and p.call_id not in used:
            answered_names[p.name] = answered_names.get(p.name, 0) + 1
    for i, c in enumerate(calls):
        if c.kind not in ("function", "custom") or i in by_id:
            continue
        if not c.id and c.name and answered_names.get(c.name, 0) > 0:
            answered_names[c.name] -= 1
            continue
        yield c


def _answered_by_id(ctx: TurnContext, calls: list[ToolCall]) -> tuple[set[int], set[str]]:
    """The indexes of ``calls`` this request answers by id (the model's, or the one the client
    echoed it under), and the ids those results use up."""
    answered_ids = {p.call_id for p in ctx.turn.c.pairings if p.call_id}
    echo_ids = ctx.echo_ids
    by_id = {
        i
        for i, c in enumerate(calls)
        if (c.id and c.id in answered_ids) or echo_ids.get(i) in answered_ids
    }
    # A result already answering a call by id (the model's, or the one the client echoed it under:
    # Gemini CLI invents ids for calls that have none) answers no other call by name.
    used = {c.id for i, c in enumerate(calls) if i in by_id and c.id} | {
        echo_ids[i] for i in by_id if i in echo_ids
    }
    return by_id, used


def _dropped(ctx: TurnContext, prev_turn: int, c: ToolCall) -> Iterator[Finding]:
    """The unanswered call ``c``: dropped, and (first) its result sent as text when it was. A
    call the token cap cut (its answer ended at the cap) never ran: the client asking again
    without it follows from the cut (folded under ``A.truncated_length``)."""
    prev = ctx.prev
    if prev is not None and cut_call(prev.rt):
        yield ctx.finding(
            codes.DROPPED_TOOL_RESULT,
            f"The model's call {c.name}({short(c.arguments_raw)}) on turn {prev_turn} was cut by "
            "the token cap and never ran; this request asks again without it.",
            path=f"{ctx.history_key}[{ctx.turn.c.appended_from}:]",
            tool_call_id=c.id,
            related_turn=prev_turn,
            tool=c.name,
            caused_by=codes.TRUNCATED_LENGTH,
            caused_by_seq=prev.seq,
        )
        return
    as_text = _result_as_text(ctx, c)
    if as_text is not None:
        yield ctx.finding(
            codes.TOOL_RESULT_AS_TEXT,
            f"The result of {c.name} (call {c.id or 'without id'}, turn {prev_turn}) was sent as "
            f"plain {ctx.messages[as_text].role} text in message [{as_text}], not as a tool "
            "result: the API does not pair it with the call, which stays unanswered.",
            path=_item(ctx, as_text),
            tool_call_id=c.id,
            related_turn=prev_turn,
            tool=c.name,
        )
    yield ctx.finding(  # under C.tool_result_as_text when its result went as text (its row's under)
        codes.DROPPED_TOOL_RESULT,
        f"The model called {c.name}({short(c.arguments_raw)}) on turn {prev_turn} "
        f"(id {c.id or 'none'}), but this request carries no result for it"
        + (
            " (its result went as text: see C.tool_result_as_text)." if as_text is not None else "."
        ),
        path=f"{ctx.history_key}[{ctx.turn.c.appended_from}:]",
        tool_call_id=c.id,
        related_turn=prev_turn,
        tool=c.name,
    )


def _result_as_text(ctx: TurnContext, call: ToolCall) -> int | None:
    """The index of an appended user message whose text carries this call's result: it names the
    call's id, or its tool (a name of 4 characters or more) while the message holds no tool
    result."""
    c = ctx.turn.c
    for offset, m in enumerate(c.appended):
        if m.role != "user" or any(p.kind == "tool_result" for p in m.parts):
            continue
        text = " ".join(p.text or "" for p in m.parts if p.kind == "text")
        if not text:
            continue
        if (call.id and call.id in text) or (
            call.name and len(call.name) >= 4 and re.search(rf"\b{re.escape(call.name)}\b", text)
        ):
            return c.appended_from + offset
    return None


def check_results_split(ctx: TurnContext) -> Iterator[Finding]:
    """C.tool_results_split — an API that wants one turn's results together got them spread."""
    adapter = providers.by_family(ctx.rt.family)
    prev = ctx.prev
    if adapter is None or not adapter.profile.results_in_one_message or prev is None:
        return
    where = sorted(
        {
            p.message_index
            for p in ctx.turn.c.pairings
            if p.call_turn == prev.index and p.message_index is not None
        }
    )
    if len(where) < 2:
        return
    listing = ", ".join(f"[{i}]" for i in where)
    yield ctx.finding(
        codes.TOOL_RESULTS_SPLIT,
        f"The results of turn {prev.index}'s calls are spread over messages {listing}; this API "
        "wants all of them in the one user message right after the calls, and answers anything "
        "else with a 400.",
        path=_item(ctx, where[1]),
        related_turn=prev.index,
        messages=where,
    )


def check_unanswered_history_call(ctx: TurnContext) -> Iterator[Finding]:
    """C.dropped_tool_result — a call the client put in this request's history has no result after
    it.

    Covers calls that are not the previous answer's (frameworks insert call + result pairs of
    their own); the previous answer's calls are checked by :func:`check_dropped_tool_result`.
    """
    c = ctx.turn.c
    if c.link == "previous_response_id":
        return
    # the previous answer's calls, by their ids and the ids the client echoed them under
    prev_ids = {x.id for x in previous_calls(ctx) if x.id} | set(ctx.echo_ids.values())
    results = {p.call_id for p in c.pairings if p.call_id}
    for offset, m in enumerate(c.appended):
        for k, p in enumerate(m.parts):
            tc = p.tool_call
            if (
                tc is None
                or tc.kind not in ("function", "custom")
                or not tc.id
                or tc.id in prev_ids
            ):
                continue
            if tc.id not in results:
                yield ctx.finding(
                    codes.DROPPED_TOOL_RESULT,
                    f"This request's history holds a call to {tc.name} "
                    f"(id {tc.id}) with no result after it.",
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
                    codes.DUPLICATE_TOOL_RESULT,
                    f"Two tool results carry the same call id {p.call_id} ({p.name or 'tool'}): "
                    "the API cannot tell which call each one answers (a result sent twice, or an "
                    "id reused).",
                    path=_item(ctx, *_result_part(ctx, n)),
                    tool_call_id=p.call_id,
                )
        if p.in_history or ctx.index == ctx.conv.first:
            continue
        yield ctx.finding(
            codes.ORPHAN_TOOL_RESULT,
            f"A tool result for call {p.call_id or p.name} was sent, but no call with that "
            f"{'id' if p.call_id else 'name'} was made earlier in this conversation.",
            path=_item(ctx, *_result_part(ctx, n)),
            tool_call_id=p.call_id,
            tool=p.name,
        )


def check_result_name(ctx: TurnContext) -> Iterator[Finding]:
    """C.tool_result_wrong_name — a result answers a call by its id but names another function.

    Results pair by id, so the pairing holds; but the model reads the result under the name it
    is sent with (Gemini's ``functionResponse.name``), as the output of a function it did not
    call — the client mixed up its calls or re-labelled the result."""
    for n, p in enumerate(ctx.turn.c.pairings):
        if p.call_name is None:
            continue
        yield ctx.finding(
            codes.TOOL_RESULT_WRONG_NAME,
            f"The result for call {p.call_id} was sent under the name {p.name!r}, but that call "
            f"was to {p.call_name!r}: the model reads it as another function's output.",
            path=_item(ctx, *_result_part(ctx, n)),
            tool_call_id=p.call_id,
            tool=p.name,
            call_tool=p.call_name,
        )


def check_pairing_error(ctx: TurnContext) -> Iterator[Finding]:
    """C.pairing_error — the API rejected the request for mis-paired tool calls and results."""
    r = ctx.rt.response
    if r is None or r.error is None or (ctx.rt.status or 0) < 400 or ctx.replay_miss is not None:
        return  # (a replay miss quotes the request's differences, never the API's pairing text)
    adapter = providers.by_family(ctx.rt.family)
    if adapter is None or not adapter.profile.is_pairing_error(r.error.message):
        return
    *_, attempt = attempts(ctx)  # a re-sent copy of a rejected request: blame the turn it answers
    related = attempt.prev.index if attempt.prev is not None else None
    yield ctx.finding(
        codes.PAIRING_ERROR,
        f"The API rejected this request (HTTP {ctx.rt.status}) because tool calls and results are "
        f'mis-paired: "{short(r.error.message, 200)}". '
        "Reported by the API, caused by the client's "
        + (f"handling of the calls from turn {related}." if related is not None else "dispatch."),
        related_turn=related,
        api_message=r.error.message,
    )


_ERRORISH = ("error", "exception", "traceback", "failed", "failure")

#: The texts agent frameworks send as a tool's result when the tool failed, which do not open
#: with one of :data:`_ERRORISH`'s words (those that do, such as LangGraph's ``Error: …`` or
#: smolagents' ``Error executing tool '…'``, are read by the words already): how they open. Each
#: is taken from the framework's source at the version named; docs/reading.md lists them.
FRAMEWORK_ERROR_OPENINGS = pattern(
    # openai-agents' default_tool_error_function: 0.3.3 to 0.10.0 "An error occurred while running
    # the tool. Please try again. Error: {error}", 0.10.0 also "An error occurred while parsing
    # tool arguments. Please try again with valid JSON. Error: {error}", 0.24.0 "An error occurred
    # while running the tool. Please try again." (no detail); 0.24.0's default timeout text
    # "Tool '{name}' timed out after {seconds:g} seconds."
    r"An error occurred while (?:running the tool|parsing tool arguments)\. Please try again"
    r"|Tool '[^'\n]{1,256}' timed out after \d[\d.]* seconds\."
    # LangChain (langchain-core 1.7.2) _handle_tool_error / _handle_validation_error, with
    # handle_tool_error / handle_validation_error True and an exception with no message
    r"|Tool (?:execution|input validation) error\s*\Z"
    # CrewAI (1.15.30) translations/en.json: errors.tool_usage_error "I encountered an error:
    # {error}", errors.tool_usage_exception "I encountered an error while trying to use the tool.
    # This was the error: …", errors.wrong_tool_name "You tried to use the tool {tool}, but it
    # doesn't exist. …"
    r"|I encountered an error\b"
    r"|You tried to use the tool [^\n]{1,256}, but it doesn't exist\."
    # smolagents (1.26.0) ActionStep.to_messages, a failed step's observation: "Call id: {id}\n
    # Error:\n{error}\nNow let's retry: …"
    r"|Call id: [^\n]{0,256}\nError:"
)
#: How they end: pydantic-ai's (2.68.0) RetryPromptPart.model_response(), the result of a tool
#: that raised ModelRetry or was called with arguments its schema refused: "{message}\n\nFix the
#: errors and try again."
FRAMEWORK_ERROR_ENDINGS = pattern(r"\n\nFix the errors and try again\.\s*\Z")


def result_texts(ctx: TurnContext) -> Iterator[tuple[Pairing, str]]:
    """Each pairing of this request with its result's text (``""`` where it is not found)."""
    for p in ctx.turn.c.pairings:
        m = (
            ctx.messages[p.message_index]
            if p.message_index is not None and p.message_index < len(ctx.messages)
            else None
        )
        content = ""
        if m is not None:
            for part in m.parts:
                if part.tool_result is not None and part.tool_result.call_id == p.call_id:
                    content = part.tool_result.content
                    break
        yield p, content


def is_error_result(p: Pairing | ToolResult, content: str) -> bool:
    """A result that is an error: its flag, or a text that opens as one (a pairing's, or a
    result's as the history carries it: the agent's rules skip failed calls, docs/rules.md)."""
    head = content.lstrip()
    return (
        p.is_error is True
        or head.lower().startswith(_ERRORISH)
        or head.startswith('{"error"')
        or FRAMEWORK_ERROR_OPENINGS.match(head[:2000]) is not None
        or FRAMEWORK_ERROR_ENDINGS.search(head[-200:]) is not None
    )


def check_tool_result_error(ctx: TurnContext) -> Iterator[Finding]:
    """C.tool_result_error — a tool the client ran reported an error."""
    for p, content in result_texts(ctx):
        if is_error_result(p, content):
            yield ctx.finding(
                codes.TOOL_RESULT_ERROR,
                f"The result of {p.name or 'tool'} ({p.call_id or 'no id'}) is an error: "
                f"{short(content, 160)!r}",
                path=f"{ctx.history_key}[{p.message_index}]",
                tool_call_id=p.call_id,
                tool=p.name,
            )


def final_pending_calls(conv: ConversationState) -> Iterator[Finding]:
    """C.stopped_with_pending_calls — the conversation ended while the model waited for results
    (not judged of a request whose messages were not read: which request followed it in its
    conversation is not known)."""
    if not conv.turns:
        return
    last = conv.turns[-1]
    r, req = last.rt.response, last.rt.request
    if r is None or r.error is not None or r.finish_reason is not FinishReason.TOOL_CALL:
        return
    if req is not None and any(u.startswith("messages") for u in req.unread):
        return
    calls = [c for c in r.tool_calls if c.kind in ("function", "custom")]
    if not calls:
        return
    names = ", ".join(sorted({c.name or "?" for c in calls}))
    yield last.finding(
        codes.STOPPED_WITH_PENDING_CALLS,
        f"The run ended after the model called {names}; no request with the results followed. "
        "Fine when the call is the agent's final output "
        "(e.g. a final_result tool), a bug otherwise.",
        tool_call_id=calls[0].id,
    )
