"""``E.repeated_call`` (:mod:`cassettes.analysis.codes`): the same tool call again
within a task — a retry, a poll, or a loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from . import codes as codes
from ._context import CLIENT_KINDS, TurnContext, call_label, clipped
from ._message_keys import _canon, squashed, stable
from ._model import CallCheck, Finding

__all__ = ["FIRST_REPEAT", "canonical_call", "check_repeated_call"]

#: The conversation's memory (``ConversationState.state``) of its task's first repeated call: the
#: round trip of its first ``E.repeated_call``.
FIRST_REPEAT = "E.repeated_call.first"
#: Repeats: the n-th identical call from which a repeat is a loop (warning); earlier repeats are
#: info.
_LOOP_AT = 3


def canonical_call(name: str | None, arguments: Any, raw: str | None) -> str:
    """A call's identity for repeat detection: tool name + arguments as a canonical JSON value."""
    args = _canon(arguments, squash=True) if arguments is not None else squashed(raw)
    return (
        f"{name}\x00"
        f"{orjson.dumps(args, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()}"
    )


def _record_results(ctx: TurnContext) -> tuple[dict[str, int], dict[str, set[int]]]:
    """Tool results seen so far in the conversation: by call id, and the distinct ones by tool name.

    Only whether results differ is ever asked, so each is kept as a hash of its normalised text,
    not the text (a long run sends back megabytes of tool results)."""
    by_id: dict[str, int] = ctx.conv.state.setdefault("E.results_by_id", {})
    by_name: dict[str, set[int]] = ctx.conv.state.setdefault("E.results_by_name", {})
    for m in ctx.turn.c.appended:
        results = [
            tr for p in m.parts if p.kind == "tool_result" and (tr := p.tool_result) is not None
        ]
        if not results:
            continue
        # each result's content squashed, as its key has it (a result part's key is
        # ``("r", squashed content, name)``, one per result part, in order: _message_keys)
        squash = [k[1] for k in ctx.keys.parts(m) if k[0] == "r"]
        for tr, text in zip(results, squash, strict=True):
            content = stable(text.encode("utf-8", "surrogatepass"))
            if tr.call_id:
                by_id[tr.call_id] = content
            if tr.name:
                by_name.setdefault(tr.name, set()).add(content)
    return by_id, by_name


def check_repeated_call(ctx: TurnContext) -> Iterator[Finding]:
    by_id, by_name = _record_results(ctx)
    r = ctx.response
    if r is None or r.complete is False or ctx.rt.transport_error:
        return
    # key → [(turn, call id)] of earlier identical calls (one per turn)
    seen: dict[str, list[tuple[int, str | None]]] = ctx.conv.state.setdefault(
        codes.REPEATED_CALL, {}
    )
    if _new_task(ctx):
        seen.clear()  # the same question in a new task is asked afresh, not a loop
        ctx.conv.state.pop(FIRST_REPEAT, None)
    here: set[str] = set()
    for i, c in enumerate(ctx.turn.e.tool_calls):
        if c.parse_error is not None or c.kind not in CLIENT_KINDS:
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
            # the task's first repeated action: what a report of the loop folds under
            ctx.conv.state.setdefault(FIRST_REPEAT, ctx.seq)
            if not ctx.repeats.first:
                ctx.repeats.first = [ctx.seq, ctx.conv.id]
            yield _repeated(
                ctx, i, c, [t for t, _ in earlier], results, never_run, not _in_history(ctx, key)
            )


#: Messages of a request searched for an earlier identical call (from its end).
MAX_SEARCHED = 4096


def _in_history(ctx: TurnContext, key: str) -> bool:
    """A call identical to ``key`` is in the request's history: the model sees it was made (one
    not there was dropped by the client's context management, or never echoed)."""
    for m in ctx.messages[-MAX_SEARCHED:]:
        for p in m.parts:
            tc = p.tool_call
            if tc is not None and canonical_call(tc.name, tc.arguments, tc.arguments_raw) == key:
                return True
    return False


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
    unseen: bool = False,
) -> Finding:
    """Call ``i`` repeats identical calls of ``turns``, whose results were ``results``: a warning
    from the :data:`_LOOP_AT`-th time when the results did not differ, else a note. ``never_run``:
    the earlier calls' ids (``""`` for none) when none of them got a result — the model retrying
    calls the client never ran is right, and folds under the client's ``C.dropped_tool_result``
    (its row's ``under``). ``unseen``: none of the earlier calls is in the request's history (a
    repeat the client's context management explains folds under it: scope ``dropped``)."""
    extra: dict[str, Any] = {"never_run": never_run} if never_run is not None else {}
    if unseen:
        extra["unseen"] = True
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
        codes.REPEATED_CALL,
        f"The model called {call_label(c)} with the same arguments {clipped(c.arguments, 80)} "
        f"for the {_ordinal(n)} time (earlier on turn{'s' if len(turns) > 1 else ''} "
        f"{', '.join(map(str, turns))}){tail}",
        grade="loop" if loop else None,
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
