"""A turn's judgement: its E/A/C layers, token accounting and every check, root causes first
(:func:`judge`), then what is kept of it for the turns after (:func:`settle`, :func:`slim`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TypeVar

from ..wire import Exchange
from . import _api as api
from . import _claims as claims
from . import _emission as emission
from . import _provenance as provenance
from . import _text_calls as text_calls
from . import _tokens as tokens
from . import codes as codes
from . import dispatch as dispatch
from ._context import Check, ConversationState, FinalCheck, TurnContext, failed
from ._mcp import McpLinker
from ._model import (
    ApiReport,
    Dispatch,
    Emission,
    Finding,
    TokenCount,
    Turn,
)
from .threading import Link

__all__ = [
    "CHECKS",
    "EMPTY_A",
    "EMPTY_C",
    "EMPTY_E",
    "EMPTY_TOKENS",
    "FINAL_CHECKS",
    "NO_EXCHANGE",
    "RAISE_ENV",
    "contained",
    "failed",
    "judge",
    "run_check",
    "settle",
    "slim",
]

#: Every per-turn check, by layer. Order matters only for the order findings are listed in.
CHECKS: tuple[Check, ...] = (
    *emission.CHECKS,
    *text_calls.CHECKS,
    *api.CHECKS,
    *dispatch.CHECKS,
    *claims.CHECKS,
    *provenance.CHECKS,
)
#: Every end-of-run check (the client's alone: only what it left undone shows at the end).
FINAL_CHECKS: tuple[FinalCheck, ...] = dispatch.FINAL_CHECKS

#: Stands in for the exchange of a turn whose checks have run.
NO_EXCHANGE = Exchange(method="", url="")
EMPTY_E, EMPTY_A, EMPTY_C, EMPTY_TOKENS = Emission(), ApiReport(), Dispatch(), TokenCount()
_LINK_VIEWS: dict[str, Dispatch] = {}


def slim(turn: Turn) -> Turn:
    """What the analysis reads of an earlier turn's own :class:`Turn`: how it was linked, and its
    findings (the same list: the end-of-run checks add to it)."""
    c = _LINK_VIEWS.get(turn.c.link)
    if c is None:
        c = _LINK_VIEWS[turn.c.link] = Dispatch(link=turn.c.link)
    return Turn.model_construct(
        seq=turn.seq,
        conversation=turn.conversation,
        index=turn.index,
        previous_seq=turn.previous_seq,
        family=turn.family,
        e=EMPTY_E,
        a=EMPTY_A,
        c=c,
        tokens=EMPTY_TOKENS,
        findings=turn.findings,
    )


def retry_after(ex: Exchange) -> float | None:
    """The wait a response asked for, in seconds (``retry-after-ms``, else ``retry-after`` in
    seconds; an HTTP date is not read)."""
    try:
        ms = ex.response_header("retry-after-ms")
        if ms is not None:
            return float(ms) / 1000
        s = ex.response_header("retry-after")
        return float(s) if s is not None else None
    except ValueError:
        return None


#: Set (to anything but ``0``) by the test suite: a check or analysis step that raises on a
#: recording raises there, loudly, where users get the contained result (issue 100 item 5).
RAISE_ENV = "LOOPTAP_RAISE_CONTAINED"
#: Characters of a contained error's text kept in its line and note.
_ERROR_CHARS = 300
_T = TypeVar("_T")


def contained(
    step: str, where: str, run: Callable[[], _T], fallback: _T, errors: list[str]
) -> tuple[_T, str | None]:
    """``run()``, or — when it raises (a bug of looptap's, never the run's) — ``fallback`` and
    the line said of it, also added to the run's ``errors``: one step that fails on a recording
    must not stop the run from being read (docs/reliability.md, "Never a traceback from
    reading"). A ``MemoryError`` (the memory budget's among them) is never contained; under
    :data:`RAISE_ENV` nothing is."""
    try:
        return run(), None
    except MemoryError:
        raise
    except Exception as exc:
        return fallback, _failed(step, where, exc, errors)


def _failed(step: str, where: str, exc: Exception, errors: list[str]) -> str:
    """The line said of ``step``'s failure ``exc`` (added to ``errors``); ``exc`` raised again
    under :data:`RAISE_ENV` (:func:`contained`)."""
    if os.environ.get(RAISE_ENV, "0") not in ("", "0"):
        raise exc
    said = f"{step} failed on {where}: {type(exc).__name__}: {str(exc)[:_ERROR_CHARS]}"
    errors.append(said)
    return said


def run_check(
    check: Check | FinalCheck, arg: TurnContext | ConversationState, errors: list[str]
) -> list[Finding]:
    """The findings of one check; none when it raised (said in ``errors``: :func:`contained`)."""
    where = f"turn {arg.seq}" if isinstance(arg, TurnContext) else f"conversation {arg.id}"
    name = f"check {getattr(check, '__name__', check)}"
    none: list[Finding] = []
    return contained(name, where, lambda: list(check(arg)), none, errors)[0]  # type: ignore[arg-type]


#: The layer whose judgement a check's failure leaves missing (by the layer its findings are
#: mostly of; the agent's rules, whose ``E.rule_broken`` is the model's: E).
_LAYER_OF: dict[Check, str] = {
    **{c: "E" for c in (*emission.CHECKS, *claims.CHECKS, *provenance.CHECKS)},
    **{c: "A" for c in api.CHECKS},
    **{c: "C" for c in dispatch.CHECKS},
}


def judge(
    ctx: TurnContext, link: Link, mcp: McpLinker, errors: list[str], checks: Iterable[Check]
) -> None:
    """The turn's E/A/C layers and token accounting, then every check (:data:`CHECKS` and the
    agent's rules in force), root causes first. Each step is :func:`contained`: a step that
    raises leaves its part unjudged, and the turn carries a ``<layer>.not_judged`` note naming
    it (with a layer missing, no check runs: each reads the layers)."""
    turn = ctx.turn
    where = f"round trip #{ctx.seq}"
    notes: list[tuple[str, str]] = []  # (layer, what failed) of the steps that raised

    def step(layer: str, name: str, run: Callable[[], _T], fallback: Callable[[], _T]) -> _T:
        out, said = contained(name, where, run, None, errors)  # (the fallback made when taken)
        if said is None:
            return out  # type: ignore[return-value]  # (run's: None only where run gave it)
        notes.append((layer, said))
        return fallback()

    turn.c = step("C", "the C layer", lambda: dispatch.build(ctx, link), Dispatch)
    turn.e = step("E", "the E layer", lambda: emission.build(ctx), Emission)
    turn.a = step("A", "the A layer", lambda: api.build(ctx), ApiReport)
    turn.tokens = step("A", "the token count", lambda: tokens.build(ctx), TokenCount)
    skipped = bool(notes)
    for check in checks if not skipped else ():
        try:  # (contained as each step is, without a closure per check: 48 a turn)
            got = list(check(ctx))
        except MemoryError:
            raise
        except Exception as exc:
            name = f"check {getattr(check, '__name__', check)}"
            notes.append((_LAYER_OF.get(check, "E"), _failed(name, where, exc, errors)))
            continue
        turn.findings.extend(got)
    found = list(turn.findings)
    fold = lambda: dispatch.fold_root_causes(ctx, found)  # noqa: E731
    turn.findings[:] = step("C", "the root-cause fold", fold, lambda: found)
    codes.demote_inferred(turn.findings, ctx.ex.reconstructed)  # an import's (docs/interop.md)
    withhold_unread(ctx, turn.findings)
    step("C", "the MCP link", lambda: mcp.model_turn(turn, ctx.rt.response), lambda: None)
    if link.ambiguous > 1:
        turn.findings.append(
            ctx.finding(
                codes.THREAD_AMBIGUOUS,
                "This request's history is identical, tool-call ids included, to that of "
                f"{link.ambiguous} conversations waiting for their next turn; nothing on the "
                "wire tells which one it continues, so looptap took the most recent "
                f"({ctx.conv.id}). Give each agent unique tool-call ids, or an "
                "X-Looptap-Conversation header, to make the threading certain.",
                candidates=link.ambiguous,
            )
        )
    turn.findings.extend(_not_judged(ctx, layer, said, skipped) for layer, said in notes)
    # root causes first, each followed by what it caused: the one order every view shows
    turn.findings[:] = dispatch.ordered_findings(turn.findings)


def _not_judged(ctx: TurnContext, layer: str, said: str, skipped: bool) -> Finding:
    """The note a round trip carries for a step that failed on it (:func:`contained`)."""
    return ctx.finding(
        codes.NOT_JUDGED[layer],
        f"looptap could not judge all of this round trip: {said}. "
        + ("No check ran on it (each reads the layers). " if skipped else "")
        + "This is looptap's bug, not the run's; the rest of the run was read.",
        error=said,
        checks_skipped=skipped,
    )


#: What a finding rests on when it judges the answer's content (its row's ``rests_on``), and the
#: A codes that judge the answer's shape; with any part of the answer unread none is raised.
_ANSWER_FIELDS = frozenset({"output", "finish_reason"})
_ANSWER_CODES = frozenset({codes.MALFORMED_RESPONSE, codes.UNUSUAL_FINISH})
#: C codes that judge the timing and statuses of requests, not what they carry.
_NOT_CONTENT = frozenset(
    {
        codes.RETRY,
        codes.RETRY_OF_REJECTED_REQUEST,
        codes.RETRY_BEFORE_RETRY_AFTER,
        codes.RETRY_STORM,
        codes.GAVE_UP_ON_RETRYABLE_ERROR,
        codes.ABANDONED_ANSWER,
        codes.ANSWER_DISCARDED,
        *codes.NOT_JUDGED.values(),
    }
)


def _rests_on_unread(code: str, answer: bool, usage: bool, request: bool, stream: bool) -> bool:
    row = codes.ROWS[code]
    if answer and (row.layer == "E" or row.rests_on in _ANSWER_FIELDS or code in _ANSWER_CODES):
        return True
    if stream and row.rests_on == "framing":  # the events not read may have been its end
        return True
    if usage and row.rests_on == "usage":
        return True
    return request and ((row.layer == "C" and code not in _NOT_CONTENT) or row.rests_on == "tools")


def withhold_unread(ctx: TurnContext, findings: list[Finding]) -> None:
    """No finding rests on content looptap could not read (issue 92): with a part of the answer
    unread, none that judges the answer; with its usage unread, none about usage; with a part of
    the request unread, none that judges the history (C) or the tools offered; with a stream's
    events unread, none that judges its framing (the events not read may have been its end).
    What is withheld is said, once, in the round trip's notes."""
    rt = ctx.rt
    said = rt.response.unread if rt.response is not None else []
    usage = any(u.startswith("usage") for u in said)
    answer = any(not u.startswith("usage") for u in said)
    request = bool(rt.request is not None and rt.request.unread)
    stream = any(u.startswith("stream:") for u in said)
    if not (answer or usage or request):
        return
    kept = [f for f in findings if not _rests_on_unread(f.code, answer, usage, request, stream)]
    if len(kept) == len(findings):
        return
    gone = sorted({f.code for f in findings} - {f.code for f in kept})
    findings[:] = kept
    note = f"not raised, resting on what looptap could not read: {', '.join(gone)}"
    if note not in rt.notes:
        rt.notes.append(note)


def settle(ctx: TurnContext, keep_turns: bool) -> None:
    """Keep of a judged turn only what a later turn reads of it."""
    ex, rt = ctx.ex, ctx.rt
    if failed(rt):  # what the check of a retry reads of the failed attempt
        ctx.started = ex.started
        ctx.ended = ex.started + max(ex.duration or 0.0, 0.0) if ex.started is not None else None
        ctx.retry_after = retry_after(ex)
    # What a later turn reads of this one is its round trip, history length, index and seq
    # (checks read only the current turn's exchange and layers) ...
    ctx.ex = NO_EXCHANGE
    if not keep_turns:
        ctx.turn = slim(ctx.turn)
    # ... and, walking back through retries of a failed request (C.pairing_error blames the
    # turn the first attempt answered), its previous turn: only a failed turn can be retried.
    if not failed(rt):
        ctx.prev = None
