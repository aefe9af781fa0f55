"""C checks on the history sent back: the answer's echo, rewrites, going on after a final,
truncated or refused answer, a broken cache prefix."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson

from ... import providers
from ...hints import count
from ...lazy import pattern
from ...models import FinishReason, Message
from .. import codes as codes
from .._context import TurnContext, cut_call
from .._message_keys import message_key, stable
from .._model import ContextChange, Finding
from .._trajectory import fields_of, follows, step_of
from ._managed import is_compaction
from ._shared import _continues, _item, _prev_ok, speaker

#: A text-protocol step: the model asks the client's own loop to act (ReAct's "Action: tool" /
#: "Action Input: …", smolagents' "Action:" JSON blob or "Code:" block, DSPy's
#: ``[[ ## next_tool_name ## ]]`` field), so the answer is not final.
TEXT_ACTION = pattern(
    r"^[ \t]*(Action|Action Input|Code)[ \t]*:|^\[\[ ## next_tool_name ## \]\]", re.M
)


def check_assistant_echo(ctx: TurnContext) -> Iterator[Finding]:
    """C.assistant_not_echoed — the previous answer is not in the history the client sent back."""
    c = ctx.turn.c
    if c.echoed_assistant is not False or not _continues(ctx) or not _prev_ok(ctx):
        return
    prev = ctx.prev
    assert prev is not None
    # An answer whose call the token cap cut cannot be sent back (its arguments are cut): the
    # client asking again without it follows from the cut.
    cut: dict[str, Any] = (
        {"caused_by": codes.TRUNCATED_LENGTH, "caused_by_seq": prev.seq}
        if cut_call(prev.rt)
        else {}
    )
    yield ctx.finding(
        codes.ASSISTANT_NOT_ECHOED,
        f"The assistant message of turn {prev.index} is not appended verbatim after the history: "
        "the client changed or dropped what the model said before sending the next request.",
        path=f"{ctx.history_key}[{c.kept}]",
        related_turn=prev.index,
        **cut,
    )


def _changed_part(ctx: TurnContext, at: int) -> int | None:
    """The first part of history message ``at`` that differs from the same message of the
    previous request (``None``: the message as a whole, or no earlier history to compare with).
    Where the wire spreads one normalised message over several items (Responses: reasoning,
    calls and text are separate ``input`` items), the part says which item changed."""
    before = ctx.prev.messages if ctx.prev is not None else []
    if at >= len(before) or at >= len(ctx.messages):
        return None
    old, new = before[at].parts, ctx.messages[at].parts
    for k, part in enumerate(new):
        if k >= len(old) or message_key(Message(role="x", parts=[part])) != message_key(
            Message(role="x", parts=[old[k]])
        ):
            return k
    return None


def check_history_rewritten(ctx: TurnContext) -> Iterator[Finding]:
    """C.history_trimmed (info) / C.history_mutated (warning) — the history was not only
    extended."""
    c = ctx.turn.c
    if c.rewritten <= 0 or ctx.prev is None or c.link == "previous_response_id":
        return
    if c.context is not None:
        if c.context.kind == "trimmed":
            _remember_line(ctx, trim=True)  # a trim the next request undoes was none
        yield managed_finding(ctx, c.context)
        return
    prev_len = ctx.prev.n_messages
    dropped = _dropped_before_answer(ctx)
    # A provider item standing for earlier history (a compaction summary) marks a deliberate
    # rewrite.
    compacted = any(is_compaction(m) for m in ctx.messages[: c.kept + 1])
    # A shorter history is trimming only where the management was not judged: on a rewritten
    # link :mod:`._managed` read the evidence and found none (a mutation, said below).
    shorter = len(ctx.messages) < prev_len and c.link != "rewritten"
    if dropped or shorter or compacted:
        asked = " (the user's question among them)" if dropped and dropped[1] else ""
        # the previous request's messages dropped, by index (as a managed trim's are)
        cut: dict[str, Any] = (
            {"dropped": list(range(c.kept, c.kept + dropped[0]))} if dropped else {}
        )
        yield ctx.finding(
            codes.HISTORY_TRIMMED,
            f"The history starts with turn {ctx.prev.index}'s answer: the {dropped[0]} message(s) "
            f"of its request before it were dropped{asked}, so the model no longer sees what it "
            "was asked."
            if dropped
            else f"The history was shortened or compacted: {prev_len} messages last turn, "
            f"{len(ctx.messages)} now (kept the first {c.kept}). Intentional trimming or "
            "summarising looks like this.",
            path=_item(ctx, c.kept),
            related_turn=ctx.prev.index,
            kept=c.kept,
            **cut,
        )
    elif c.kept < len(ctx.messages) and all(
        m.role in ("system", "developer") for m in ctx.messages[: c.kept + 1]
    ):
        return  # the opening system prompt was changed: reported by C.cache_prefix_broken
    else:
        both = ctx.trim_beside
        if both is not None:  # the rewritten message, not one the trim moved; the trim said
            yield _trim_beside(ctx, both[1])
        at = both[0][0] if both is not None else c.kept
        path = _item(ctx, at, _changed_part(ctx, at) if both is None else None)
        steps = _rewritten_steps(ctx)
        extra: dict[str, Any] = {"fields": steps} if steps else {}
        what = (
            f" (its trajectory's {', '.join(steps[:5])} rendered "
            f"otherwise than on turn {ctx.prev.index})"
            if steps
            else ""
        )
        restored, trim = _restores(ctx) or (None, False)
        if trim:
            # nothing was mutated on the turn whose drop this undoes: the warning is this one's
            what += (
                f" (it puts back what turn {ctx.prev.index}'s request dropped, as turn "
                f"{ctx.prev.index - 1} sent it, and the answers since: that drop was no context "
                "management)"
            )
            extra |= {"undoes_trim_seq": restored}
        elif restored is not None:
            what += (
                f" (it restores what turn {ctx.prev.index - 1} sent before turn "
                f"{ctx.prev.index}'s change, and the answers since)"
            )
            extra |= {"caused_by": codes.HISTORY_MUTATED, "caused_by_seq": restored}
        else:
            _remember_line(ctx)
        yield ctx.finding(
            codes.HISTORY_MUTATED,
            f"History item {path} differs from what was sent on turn {ctx.prev.index}{what}: "
            "the client rewrote earlier history instead of appending to it.",
            path=path,
            related_turn=ctx.prev.index,
            changed=c.rewritten,
            **extra,
        )


#: ``ConversationState.state`` key: the conversation's latest mutation that is no consequence,
#: or its latest trim, ``[turn index, seq, keys, trim]``: the keys of the line it changed (the
#: previous request's messages, then its answer), for the next turn that restores that line
#: (:func:`_restores`).
MUTATED = "_mutated_line"


def _line(ctx: TurnContext) -> list[int] | None:
    """The keys of the previous request's messages, then of its answer (what this request
    should have sent, then extended); ``None`` when its history was released or it has no
    answer."""
    prev = ctx.prev
    if prev is None or not prev.messages or len(prev.messages) != prev.n_messages:
        return None
    echo = ctx.keys.answer(prev.rt.response)
    if echo is None:
        return None
    return [*(ctx.keys.key(m) for m in prev.messages), ctx.keys.key(echo)]


def _remember_line(ctx: TurnContext, trim: bool = False) -> None:
    """This turn changed its previous request's history in place (or ``trim``: dropped some of
    it): keep the line it changed (the latest one only)."""
    line = _line(ctx)
    if line is not None:
        ctx.conv.state[MUTATED] = [ctx.index, ctx.seq, line, trim]
    else:
        ctx.conv.state.pop(MUTATED, None)


def _restores(ctx: TurnContext) -> tuple[int, bool] | None:
    """The seq of the previous turn's mutation (or trim: then ``True`` beside it), when this
    request undoes it: it is the line that turn changed, word for word (the request before it,
    then that request's answer), then what the mutated request appended after it and that
    request's answer (the answers since), and more. A client that re-sends its real history
    after one request of it was changed on its way out (a gateway's, a middleware's edit of the
    copy it sent) says the mutation again, as its consequence; any other change stands as its
    own. A trim undone so was none: the warning is this request's."""
    found = ctx.conv.state.get(MUTATED)
    prev = ctx.prev
    if not isinstance(found, list) or len(found) not in (3, 4) or prev is None:
        return None
    index, seq, line = found[:3]
    if index != ctx.index - 1 or not isinstance(line, list) or not prev.messages:
        return None
    keys = [ctx.keys.key(m) for m in ctx.messages]
    echo = ctx.keys.answer(prev.rt.response)
    n = len(line)
    if echo is None or keys[:n] != line or len(prev.messages) != prev.n_messages:
        return None
    # what the mutated request appended after its (changed) copy of the line, then its answer
    answer = ctx.keys.key(echo)
    at = next((i for i in range(n, len(keys)) if keys[i] == answer), None)
    if at is None:
        return None
    appended = keys[n:at]
    if len(appended) > len(prev.messages):
        return None
    before = [ctx.keys.key(m) for m in prev.messages[len(prev.messages) - len(appended) :]]
    trim = len(found) == 4 and found[3] is True
    return (int(seq), trim) if before == appended or not appended else None


def managed_finding(ctx: TurnContext, cc: ContextChange) -> Finding:
    """C.history_trimmed for what the client's context management did (:mod:`._managed`): what
    it dropped (by role, the user's messages quoted) or cleared, and what it put in their
    place."""
    prev = ctx.prev
    assert prev is not None
    c = ctx.turn.c
    roles = ", ".join(
        f"{n} {_ROLE_WORDS.get(role, role)}{'s' if n > 1 else ''}"
        for role, n in sorted(cc.dropped_roles.items())
    )
    if cc.kind == "cleared":
        what = (
            f"cleared {count(len(cc.cleared), 'earlier message')} in place (their tool results' "
            "content"
            " replaced, or their reasoning removed), the calls and the rest kept"
        )
    else:
        what = (
            f"dropped {count(len(cc.dropped), 'message')} of turn {prev.index}'s request ({roles})"
        )
        if cc.cleared:
            what += f" and cleared {len(cc.cleared)} in place"
        where = f"history item {cc.summary[0]}" if cc.summary else "the system prompt"
        if cc.summary_by_side_call:
            what += f", replaced by the summary of side call #{cc.summary_by_seq} ({where})"
        elif cc.summary_by_seq is not None:
            what += f", replaced by the summary round trip #{cc.summary_by_seq} wrote ({where})"
        elif cc.summary:
            what += (
                f", and put {count(len(cc.summary), 'message')} in their place (a summary: {where})"
            )
        else:
            what += ", and put nothing in their place"
    asked = (
        " The user's messages dropped"
        + (" (the user's latest question among them)" if cc.question_dropped else "")
        + f": {'; '.join(repr(t) for t in cc.dropped_user[:3])}"
        + (f" and {len(cc.dropped_user) - 3} more" if len(cc.dropped_user) > 3 else "")
        + "."
        if cc.dropped_user
        else ""
    )
    restated = (
        " Not carried word for word by anything the request keeps (the summary may restate "
        f"them): {'; '.join(repr(t) for t in cc.restated[:3])}"
        + (f" and {len(cc.restated) - 3} more" if len(cc.restated) > 3 else "")
        + "."
        if cc.restated
        else ""
    )
    after = (
        f" after round trip #{cc.after_overflow} was refused as longer than the model's context "
        "window (an overflow)"
        if cc.after_overflow is not None
        else ""
    )
    return ctx.finding(
        codes.HISTORY_TRIMMED,
        f"The client managed its context{after}: it {what}; "
        f"{count(prev.n_messages, 'message')} last turn, {len(ctx.messages)} now.{asked}"
        f"{restated} Intentional trimming or summarising looks like this.",
        path=_item(ctx, cc.restore_at if cc.restore_at < len(ctx.messages) else c.kept),
        related_turn=prev.index,
        kept=c.kept,
        **cc.model_dump(mode="json", exclude={"lost", "task_lost"}),
    )


#: How a role is said in a count of dropped messages.
_ROLE_WORDS = {
    "user": "user message",
    "assistant": "answer",
    "tool": "tool result",
    "system": "system message",
}


def _trim_beside(ctx: TurnContext, dropped: list[int]) -> Finding:
    """``C.history_trimmed`` for the messages a request that also rewrote its history dropped
    (indexes in the previous request)."""
    assert ctx.prev is not None
    shown = ", ".join(str(i) for i in dropped[:8]) + (", …" if len(dropped) > 8 else "")
    return ctx.finding(
        codes.HISTORY_TRIMMED,
        f"The history was also trimmed: {len(dropped)} message(s) of turn {ctx.prev.index}'s "
        f"request were dropped (its messages {shown}).",
        path=_item(ctx, ctx.turn.c.kept),
        related_turn=ctx.prev.index,
        kept=ctx.turn.c.kept,
        dropped=dropped,
    )


def _rewritten_steps(ctx: TurnContext) -> list[str]:
    """The step fields (``observation_0`` …) a re-rendered trajectory renders otherwise than the
    previous request sent them (:mod:`cassettes.analysis._trajectory`); empty for other
    histories."""

    prev = ctx.prev
    if prev is None or prev.rt.request is None or not ctx.messages or not prev.rt.request.messages:
        return []

    def text(m: Message) -> str:
        return "\n".join(p.text for p in m.parts if p.kind == "text" and p.text)

    before, now = fields_of(text(prev.rt.request.messages[-1])), fields_of(text(ctx.messages[-1]))
    if before is None or now is None:
        return []
    answer = ctx.keys.answer(prev.rt.response)
    found = follows(before, now, step_of(text(answer)) if answer is not None else None)
    return found[1] if found is not None else []


def _dropped_before_answer(ctx: TurnContext) -> tuple[int, bool] | None:
    """(messages dropped, a user message among them) when the history, after the messages it
    kept, goes on with the previous answer itself: the previous request's messages after those
    were dropped (a Responses continuation sending the answer back by id without the question)."""
    c, prev = ctx.turn.c, ctx.prev
    if (
        prev is None
        or c.link != "rewritten"
        or not c.echoed_assistant
        or c.kept >= prev.n_messages
        or c.kept >= len(ctx.messages)
    ):
        return None
    answer = ctx.keys.answer(prev.rt.response)
    if answer is None or ctx.keys.key(ctx.messages[c.kept]) != ctx.keys.key(answer):
        return None
    before = (
        prev.rt.request.messages[c.kept : prev.n_messages] if prev.rt.request is not None else []
    )
    return prev.n_messages - c.kept, any(m.role == "user" for m in before)


def reprompted(ctx: TurnContext) -> bool:
    """This request calls the model again, with no new input, after a final answer: text and
    nothing else (no call, no provider item, no text-protocol action such as ``Action:``)."""
    prev = ctx.prev
    if prev is None or not _continues(ctx) or not _prev_ok(ctx):
        return False
    r = prev.rt.response
    assert r is not None
    return (
        r.finish_reason is FinishReason.COMPLETE
        and bool(r.text.strip())
        and not any(p.kind in ("tool_call", "other") for p in r.parts)
        and not TEXT_ACTION.search(r.text[:20000])
        and not any(m.role not in ("assistant", "model") for m in ctx.turn.c.appended)
    )


#: ``ConversationState.state`` key: the threader linked the conversation into a group chat (it
#: received another agent's answer as input, or another agent received one of its answers).
GROUP_CHAT = "group_chat"


def multi_agent(ctx: TurnContext) -> bool:
    """The history speaks with several agents' voices: its user-side messages come from two
    speakers or more (a group chat's other agents carry their ``name``, as AutoGen and its kin
    send them, beside the task's unnamed or named user), or the threader linked the conversation
    into a group chat (:data:`GROUP_CHAT`). One agent's own ``name`` on its answers, or the
    user's on the user's messages, is no group chat."""
    if ctx.conv.state.get(GROUP_CHAT):
        return True
    speakers: set[str] = set()
    for m in ctx.messages:
        if m.role == "user" and not any(p.tool_result is not None for p in m.parts):
            speakers.add(speaker(m) or "")
            if len(speakers) > 1:
                return True
    return False


#: How a system prompt names its agent: "You are Writer." / "You are the Researcher,".
_YOU_ARE = pattern(r"\bYou are (?:the |an? )?([A-Z][\w-]{1,40})\b")


def agent_name(ctx: TurnContext) -> str | None:
    """The agent this conversation is: the ``name`` its own answers carry in the history, else
    the name its system prompt gives it ("You are Writer"); ``None`` when neither says."""
    for m in reversed(ctx.messages):
        name = speaker(m) if m.role in ("assistant", "model") else None
        if name:
            return name
    req = ctx.request
    system = " ".join(p.text or "" for p in (req.system if req is not None else []))[:2000]
    said = _YOU_ARE.search(system)
    return said.group(1) if said else None


def check_continued_after_final(ctx: TurnContext) -> Iterator[Finding]:
    """C.continued_after_final_answer — another request without new input after a final answer.
    In a group chat (:func:`multi_agent`) re-prompting a speaker is the chat's manager at work:
    said at info, once for a run of re-prompts of the same agent, naming the agent."""
    if not reprompted(ctx):
        return
    prev = ctx.prev
    assert prev is not None
    if multi_agent(ctx):
        said = ctx.conv.state.get(codes.CONTINUED_AFTER_FINAL_ANSWER)
        ctx.conv.state[codes.CONTINUED_AFTER_FINAL_ANSWER] = ctx.index
        if said != prev.index:
            name = agent_name(ctx)
            yield ctx.finding(
                codes.CONTINUED_AFTER_FINAL_ANSWER,
                f"Turn {prev.index} ended with a final answer, and the group chat gave "
                + (f"agent {name!r}" if name else "this agent")
                + " the floor again with nothing new to answer.",
                grade="group chat",
                related_turn=prev.index,
                **({"agent": name} if name else {}),
            )
        return
    yield ctx.finding(
        codes.CONTINUED_AFTER_FINAL_ANSWER,
        f"Turn {prev.index} ended with a final answer, yet the client called the model again "
        "without adding any new input.",
        related_turn=prev.index,
    )


def continued_by_fork(ex: Any) -> bool:
    """Whether this request is a fork's continuation of a cut answer (its ``continue`` edit
    mark, :mod:`cassettes.replay.live.continuation`): the cut answer echoed in it is looptap asking
    for the rest, not the client carrying on."""
    return any(m.get("edit") == "continue" for m in (getattr(ex, "edits", None) or []))


def check_truncated_treated_as_complete(ctx: TurnContext) -> Iterator[Finding]:
    """C.truncated_treated_as_complete — a cut-off answer was carried on as if it were whole."""
    prev = ctx.prev
    if prev is None or not _continues(ctx) or prev.rt.response is None or continued_by_fork(ctx.ex):
        return
    r = prev.rt.response
    cut = (
        r.finish_reason in (FinishReason.TRUNCATED_LENGTH, FinishReason.TRUNCATED_CONTEXT)
        or r.complete is False
    )
    if not cut:
        return
    used_calls = any(p.call_turn == prev.index for p in ctx.turn.c.pairings)
    if not used_calls and not ctx.turn.c.echoed_assistant:
        return
    what = (
        "ran its truncated tool calls"
        if used_calls
        else "appended the cut-off answer to the history"
    )
    yield ctx.finding(
        codes.TRUNCATED_TREATED_AS_COMPLETE,
        f"Turn {prev.index} was truncated ({r.finish_reason_raw or 'stream cut'}), but the client "
        f"{what} and carried on as if it were complete.",
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
    what = (
        "the model refused"
        if refused
        else f"the API's content filter withheld the answer ({r.finish_reason_raw or 'filtered'})"
    )
    yield ctx.finding(
        codes.REFUSAL_TREATED_AS_ANSWER,
        f"On turn {prev.index} {what}, but the client appended that answer to the history and "
        "called the model again with no new input, as if it were a step of the work.",
        related_turn=prev.index,
    )


def _prefix_fingerprint(ctx: TurnContext) -> tuple[int, int]:
    """Hashes of the system prompt and the tool definitions; the latest turn's are kept in the
    conversation's state, so each request is fingerprinted once (as this turn, then as the
    previous one)."""
    req = ctx.rt.request
    assert req is not None
    kept = ctx.conv.state.get("C.prefix")
    # the turn, not its request: state must not hold a history
    if kept is not None and kept[0] == (ctx.seq, ctx.index):
        return kept[1]  # type: ignore[no-any-return]
    system = _system_key(ctx)
    # Every field of each ToolSpec, as plain values (model_dump was a tenth of a turn's checks).
    tools = orjson.dumps(
        [(t.name, t.description, t.parameters, t.kind) for t in req.tools],
        option=orjson.OPT_SORT_KEYS,
    )
    fingerprint = system, stable(tools)
    ctx.conv.state["C.prefix"] = ((ctx.seq, ctx.index), fingerprint)
    return fingerprint


def _system_key(ctx: TurnContext, leave_out: frozenset[str] = frozenset()) -> int:
    """The key of the request's system prompt as the prompt cache reads it: an attribution
    block (Claude Code's billing header: the API keeps it out of the cached prefix) left out,
    and the texts ``leave_out``."""
    req = ctx.rt.request
    assert req is not None
    adapter = providers.by_family(ctx.rt.family)
    return stable(
        orjson.dumps(
            [
                (p.kind, p.text)
                for p in req.system
                if p.kind != "text"
                or not (
                    (p.text or "") in leave_out
                    or (adapter is not None and adapter.profile.is_attribution(p.text))
                )
            ]
        )
    )


def _swapped(ctx: TurnContext, summary: frozenset[str]) -> bool:
    """The system prompt's texts are the previous request's but for the summary's: as many of
    them replaced as the summary has (a summary in place of the previous summary)."""
    assert ctx.prev is not None and ctx.prev.rt.request is not None and ctx.rt.request is not None
    gone = [p.text or "" for p in ctx.prev.rt.request.system[:64] if p.kind == "text"]
    for p in ctx.rt.request.system[:64]:
        if p.kind != "text" or (p.text or "") in summary:
            continue
        if (p.text or "") not in gone:
            return False
        gone.remove(p.text or "")
    return len(gone) <= len(summary)


def check_cache_prefix(ctx: TurnContext) -> Iterator[Finding]:
    """C.cache_prefix_broken — the system prompt or tools changed mid-conversation."""
    if ctx.prev is None or ctx.prev.rt.request is None or ctx.turn.c.link == "previous_response_id":
        return
    before, now = _prefix_fingerprint(ctx.prev), _prefix_fingerprint(ctx)
    changed = [
        name
        for name, a, b in (
            ("system prompt", now[0], before[0]),
            ("tool definitions", now[1], before[1]),
        )
        if a != b
    ]
    if not changed and not (ctx.turn.c.rewritten and ctx.turn.c.kept <= 2):
        return
    what = " and ".join(changed) if changed else f"message {ctx.turn.c.kept} of the history"
    prev_usage = ctx.prev.rt.response.usage if ctx.prev.rt.response else None
    usage = ctx.rt.response.usage if ctx.rt.response else None
    lost = bool(
        prev_usage
        and prev_usage.cache_read_tokens
        and (usage is None or (usage.cache_read_tokens or 0) < prev_usage.cache_read_tokens)
    )
    # A prefix broken by the client's context management alone follows from it: the history's
    # head changed, or the system prompt by the summary it put there (langmem's running summary
    # is a system message).
    cc = ctx.turn.c.context
    summary = (
        frozenset(
            p.text or ""
            for j in cc.summary
            if j < len(ctx.messages)
            for p in ctx.messages[j].parts
            if p.kind == "text"
        )
        if cc is not None and changed == ["system prompt"]
        else frozenset()
    )
    # Or the system prompt's change is the summary alone: a summary system message in place of
    # the previous one (LlamaIndex's summary buffer), the system prompt itself carrying it
    # (Agno's session summary), on a wire that sends it apart from the messages too.
    in_system = (
        cc is not None
        and changed == ["system prompt"]
        and cc.summary_by_seq is not None
        and (_swapped(ctx, summary) if cc.summary else True)
    )
    folded: dict[str, Any] = (
        {"caused_by": codes.HISTORY_TRIMMED, "caused_by_seq": ctx.seq}
        if cc is not None
        and (not changed or in_system or (summary and _system_key(ctx, summary) == before[0]))
        else {}
    )
    yield ctx.finding(
        codes.CACHE_PREFIX_BROKEN,
        f"The {what} changed since turn {ctx.prev.index}; everything after the change is no longer "
        "a cached prefix" + (", and cache reads dropped this turn." if lost else "."),
        grade="cache reads dropped" if lost else None,
        related_turn=ctx.prev.index,
        changed=changed,
        **folded,
    )
