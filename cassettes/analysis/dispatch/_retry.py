"""C checks on retries and giving up: the same request again after a failure, too soon, after a 4xx,
in a storm; given up; an answer the client hung up on."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ...hints import count
from ...models import NormalisedRequest
from ...wire import NEXT_TURN
from .. import codes as codes
from .._context import ConversationState, TurnContext, failed
from .._model import Finding
from ._shared import attempts


def _request_changes(
    before: NormalisedRequest | None, after: NormalisedRequest | None
) -> list[str]:
    """What differs between two requests beyond their history: model, streaming, tools, tool
    choice, system prompt, parameters (each named, the model with both values)."""
    if before is None or after is None:
        return []
    out: list[str] = []
    if (before.model or "") != (after.model or ""):
        out.append(f"the model ({before.model} → {after.model})")
    if before.stream != after.stream:
        out.append("streaming")
    if [(t.name, t.parameters) for t in before.tools] != [
        (t.name, t.parameters) for t in after.tools
    ]:
        out.append("the tools")
    if before.tool_choice_mode != after.tool_choice_mode:
        out.append("the tool choice")
    if [p.text for p in before.system] != [p.text for p in after.system]:
        out.append("the system prompt")
    changed = sorted(
        k
        for k in set(before.params) | set(after.params)
        if before.params.get(k) != after.params.get(k)
    )
    if changed:
        out.append("parameters " + ", ".join(changed[:5]) + (" …" if len(changed) > 5 else ""))
    return out


def check_retry(ctx: TurnContext) -> Iterator[Finding]:
    """C.retry — the same history was sent again after a failed attempt: the identical request
    (a retry), or one the client changed (model, tools, parameters …), which is no blind retry."""
    if ctx.turn.c.link != "retry" or ctx.prev is None:
        return
    p = ctx.prev.rt
    if not failed(p):  # answered whole: the threader links it again only when it was thrown away
        yield _answer_discarded(ctx)
        return
    status = p.status or 0
    if p.cut_by_client:
        why = "the client hung up"
    elif p.transport_error:
        why = "a transport error"
    elif status >= 400:
        why = f"HTTP {status}"
    else:
        why = "an incomplete response"
    changes = _request_changes(p.request, ctx.rt.request)
    if changes:
        yield ctx.finding(
            codes.RETRY,
            f"After turn {ctx.prev.index} failed ({why}) the client sent the same history again "
            f"with {', '.join(changes)} changed: a changed request, not a blind retry.",
            related_turn=ctx.prev.index,
            changed=changes,
        )
    elif 400 <= status < 500 and status not in (408, 409, 429):
        yield ctx.finding(
            codes.RETRY_OF_REJECTED_REQUEST,
            f"The client re-sent the identical request after turn {ctx.prev.index} was rejected "
            f"with {why}; an invalid request fails the same way again.",
            related_turn=ctx.prev.index,
        )
    else:
        storm = _storm(ctx)
        if storm is not None:
            n, span = storm
            yield ctx.finding(
                codes.RETRY_STORM,
                f"The client sent the same failed request {n} times within {span:.1f} s, each "
                f"retry less than {_STORM_GAP:g} s after the last failure ({why}): a retry storm, "
                "with no backoff. It makes a rate limit or an overloaded API worse; back off "
                "exponentially and cap the attempts.",
                related_turn=ctx.prev.index,
                attempts=n,
                seconds=round(span, 3),
            )
            return
        asked = ctx.prev.retry_after
        waited = _waited(ctx)
        if (
            asked is not None
            and waited is not None
            and asked <= _HONOURED_RETRY_AFTER
            and waited < asked * 0.9 - 0.05
        ):
            yield ctx.finding(
                codes.RETRY_BEFORE_RETRY_AFTER,
                f"The client re-sent the request {waited:.2f} s after turn {ctx.prev.index} failed "
                f"({why}), though the API asked it to wait {asked:g} s (retry-after): a retry "
                "that comes too soon is usually refused again.",
                related_turn=ctx.prev.index,
                waited=round(waited, 3),
                retry_after=asked,
            )
            return
        yield ctx.finding(
            codes.RETRY,
            f"The identical request was re-sent after turn {ctx.prev.index} failed ({why}).",
            related_turn=ctx.prev.index,
        )


def _answer_discarded(ctx: TurnContext) -> Finding:
    """C.answer_discarded — the request of a turn that was answered, sent again: the client threw
    the answer away (a parse or validation retry, a lost response) and paid for it twice."""
    assert ctx.prev is not None
    r = ctx.prev.rt.response
    what = (
        "calls to " + ", ".join(sorted({c.name or "?" for c in r.tool_calls})[:5])
        if r is not None and r.tool_calls
        else "its answer"
    )
    return ctx.finding(
        codes.ANSWER_DISCARDED,
        f"The client sent turn {ctx.prev.index}'s messages again (the same text, tool calls and "
        "results; reasoning is not compared), though the model had answered it "
        f"({what}): that answer was thrown away and paid for twice. A retry after a parse or "
        "validation failure does this; tell the model what was wrong instead, or keep the answer.",
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
    chain = list(itertools.islice(attempts(ctx), _STORM_ATTEMPTS + 1))
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


def final_gave_up(conv: ConversationState) -> Iterator[Finding]:
    """C.gave_up_on_retryable_error — the conversation ended on a failure that a later attempt
    usually gets past (a rate limit, an overloaded or failing server, a broken connection)."""
    if not conv.turns:
        return
    last = conv.turns[-1]
    rt = last.rt
    status = rt.status or 0
    if rt.cut_by_client:
        return  # the client's own end (C.abandoned_answer), not an error it gave up on
    if rt.transport_error:
        why = "a transport error"
    elif status in (408, 409, 429) or status >= 500:
        why = f"HTTP {status}"
    else:
        return
    n = sum(1 for _ in itertools.islice(attempts(last), 1000))
    yield last.finding(
        codes.GAVE_UP_ON_RETRYABLE_ERROR,
        f"The conversation ended on {why}, an error a later attempt usually gets past, after "
        f"{n} attempt{'s' if n > 1 else ''}: the client gave up (its retries were "
        "off or ran out), or the run was stopped.",
        attempts=n,
    )


def check_abandoned(ctx: TurnContext) -> Iterator[Finding]:
    """C.abandoned_answer — the client cut the answer before its end: it closed its connection (a
    client-side timeout, a cancelled stream, an agent that stopped reading) or, on a WebSocket, sent
    its next turn first (an interruption). The round trip is cut by the client, not by the API or
    the network. A warning when it closed on an answer that was coming (nothing yet, or a 2xx
    cut); info after an error status (all most clients read of an error) and for an interruption
    (a voice agent's barge-in is the protocol at work)."""
    rt = ctx.rt
    if not rt.cut_by_client:
        return
    r, e = rt.response, ctx.turn.e
    parts = [count(r.events, "event")] if r is not None and rt.stream and r.events else []
    if e.text:
        parts.append(f"{count(len(e.text), 'character')} of text")
    if e.tool_calls:
        parts.append(f"{len(e.tool_calls)} tool call(s)")
    if rt.status is None:
        got = "before the answer's head came"
    elif parts:
        got = f"after HTTP {rt.status} and {', '.join(parts)}"
    else:
        got = f"after the head of HTTP {rt.status}"
    when = f", {rt.duration:.1f} s after the request" if rt.duration is not None else ""
    interrupted = (rt.transport_error or "").startswith(NEXT_TURN)
    if interrupted:
        did, causes = "sent its next turn", "an interruption, such as a voice agent's barge-in"
    else:
        did = "closed its connection"
        causes = "a client-side timeout, a cancelled stream, or an agent that stopped reading"
    quiet = interrupted or (rt.status is not None and rt.status >= 400)
    yield ctx.finding(
        codes.ABANDONED_ANSWER,
        f"The client {did} {got}{when}, before the answer's end: the round trip is cut by the "
        f"client, not by the API or the network ({causes}).",
        grade="interrupted or failed" if quiet else None,
        status=rt.status,
    )
