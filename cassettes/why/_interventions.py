"""Suspects → interventions: from a run's findings and turns, what to change at which turn, per
layer (docs/why.md "Interventions").

* **E** — the model's emission at turn t re-sampled: the run forked at t, the same request sent
  live to the same model (and, with ``--model``, to that model too): at every turn a finding
  names, the last turns of the conversation that gave the final answer, and the last turn of each
  of its sub-agents (the answer that went back to it as a tool's result). Only turn t: the later
  turns of its conversation are held (the ``…:hold`` cursor: served as recorded while their
  requests still match, live from the first that differs), so two E suspects of one conversation
  are told apart, not nested.
* **A** — the API's answer at turn t replaced by a clean one: the same request sent live; for a
  truncation (``A.truncated_length``) with the cap lifted (the ``max_tokens`` edit); for an error
  or a cut stream, the retry the client did not make — never for a request the API refused for
  what it holds (below): a retry sends the same request and is refused the same way; never for
  a failure the client retried itself and got an answer for (an SDK's retry of a 503,
  looptap's ``C.retry``): that is context (``a-retried``), listed, not run.
* **C** — the client's dispatch at turn t repaired as its finding says it should have been, an
  edit applied to every request sent live from t on: ``C.dropped_tool_result`` → the result put
  back (``restore_result[CALL_ID]``, its text given with ``--result CALL_ID=@FILE``: the recording
  never had it); ``C.assistant_not_echoed`` of an answer whose results were sent without it → the
  recorded answer put back before them (``restore_answer[CALL_ID]``, in the API's own shape); a
  truncated answer taken as complete (``C.truncated_treated_as_complete``, or an
  ``A.truncated_length`` the client carried on from) → the cut answer continued, as a correct
  client does (``continue=N``: the fork asks the model for the rest in the API's own form, at most
  N more requests, and hands the client one answer; the budget counts those N). A C finding
  without a repair a fork can make is listed, not run, saying why. A request the API refused for
  what it holds (a 4xx naming a tool's schema, a parameter, the model: :func:`refusal`) is the
  client's request: a C suspect with the API's message as evidence and the ``--edit`` (or
  ``--model``) a fork would test a fix with, listed, not run (no re-run of the same request can
  flip a deterministic refusal). A refusal the client recovered from (a later turn re-sent the
  history with the request changed and was answered: looptap's ``C.retry``) is context, not a
  suspect (``c-recovered``): the run's failure does not follow from it. A history the client
  trimmed, summarised or compacted (``C.history_trimmed``, ``C.user_instruction_dropped``) → what
  it dropped put back (``restore_history[TURN]``: the history the conversation sent before the
  trim, taken from its recorded requests, every item the request lacks put back where it stood,
  what the client appended since kept).

Each intervention forks at ``conversation=C:turn=T``: the other conversations stay replayed.
"""

from __future__ import annotations

from typing import Any

import orjson

from .. import bounds
from ..analysis import codes
from ..hints import count
from ..providers import from_parts
from ..replay.live.edits import parse_edit
from ..replay.live.rewrite import apply_edits, carried, history_items, restored_history
from ._cap import at_cap, cap_lifted
from ._intervention import Intervention
from ._recorded import Sent, call_made, results_sent
from ._refusal import refusal_or_context
from ._refused_fork import refused_forks
from ._shell_truth import shell_truth
from ._suspects import (
    TRIMS,
    answered_back,
    heard,
    last_turns,
    later_turns,
    live_turns,
    named_turns,
    newest_texts,
    said_again,
    serious_findings,
)
from ._tool_answer import tool_answer

__all__ = ["interventions"]

#: A findings whose clean answer is the same request sent again (a retry).
_RETRY = (
    codes.HTTP_ERROR,
    codes.RATE_LIMITED,
    codes.OVERLOADED,
    codes.TRANSPORT_ERROR,
    codes.MALFORMED_RESPONSE,
    codes.STREAM_TRUNCATED,
)
#: The most continuation requests a C repair of a truncated answer sends per sample
#: (``continue=N``).
CONTINUE_ROUNDS = 3


def interventions(
    run: Any, results: dict[str, str] | None = None, model: str | None = None, hold: bool = True
) -> list[Intervention]:
    """The interventions for ``run`` (an opened run with its analysis), C first, then A, then E,
    each in turn order. ``results``: the text to put back per call id (``--result``: a file spec
    ``@PATH`` or the text); ``model``: also re-sample each E turn on that model; ``hold``: an E
    re-sample holds the later turns of its conversation (an outcome judged on what the command
    did: the turns served after the change are part of it)."""
    a = run.analysis
    by_turn = {(t.conversation, t.index): t for t in a.turns.values()}
    later = later_turns(a)
    findings = serious_findings(a)
    out, retried = _for_findings(run, findings, by_turn, later, results or {})
    out += at_cap(run, findings, later, out, _exchange)  # at its cap, whatever its stop reason
    # one finding per call and turn is enough
    out = [i for n, i in enumerate(out) if all(j.key != i.key for j in out[:n])]
    for where in sorted(named_turns(findings) | last_turns(a) | answered_back(a)):
        t = by_turn.get(where)
        if t is None or where in retried or t.a.status is None or t.a.status >= 400:
            continue  # a failed call has no emission to re-sample: its A retry is that intervention
        seqs = later.get(where, [])
        # a turn with later ones in its conversation: those held while they match
        held_here = hold and any(c == where[0] and j > where[1] for c, j in by_turn)
        held = "; its later turns held while their requests match" if held_here else ""
        out.append(
            Intervention(
                "E",
                where[0],
                where[1],
                f"the model's emission re-sampled (same request, same model){held}",
                "e-resample",
                seqs=seqs,
                hold=held_here,
            )
        )
        if model is not None:
            out.append(
                Intervention(
                    "E",
                    where[0],
                    where[1],
                    f"the model's emission re-sampled on {model}{held}",
                    "e-model",
                    model=model,
                    seqs=seqs,
                    hold=held_here,
                )
            )
    refused_forks(run, out)  # a repair its fork would refuse is not run, nor estimated: said
    newest = newest_texts(run)
    for i in out:  # what the fork puts live, as far as the recording tells; the rest at most
        i.reach = heard(a, i.seqs, newest)
        where = (i.conversation, i.turn)
        own = live_turns(a, where, held=i.hold, repair=i.layer != "E") or i.seqs
        # a changed answer (a repair's; a re-sample's, in other words than the recording's)
        # changes the requests of the conversations that hear it: they go live as well
        i.seqs = heard(a, own, newest)
        if i.layer == "E" and len(i.seqs) > len(own):
            i.recorded = own  # a re-sample that says the recorded words again: they are served
            # on another model the words are not expected again (the chance is the same model's)
            i.repeat = said_again(a, own) if i.kind == "e-resample" else 0.0
    return out


def _for_findings(
    run: Any,
    findings: list[Any],
    by_turn: dict[tuple[str, int], Any],
    later: dict[tuple[str, int], list[int]],
    results: dict[str, str],
) -> tuple[list[Intervention], set[tuple[str, int]]]:
    """The C and A interventions ``findings`` (in layer then turn order) call for; and the turns
    an A retry stands for (not re-sampled)."""
    a = run.analysis
    out: list[Intervention] = []
    retried: set[tuple[str, int]] = set()
    dropped = {str(f.tool_call_id) for f in findings
               if f.code == codes.DROPPED_TOOL_RESULT and f.tool_call_id}  # fmt: skip
    sent = results_sent(run, dropped - set(results))
    for f in findings:
        where = (f.conversation, f.turn)
        seqs = later.get(where, [])
        if f.code == codes.TRUNCATED_TREATED_AS_COMPLETE:
            # the cut answer's turn: continued there
            cut = (f.conversation, f.related_turn if f.related_turn is not None else f.turn)
            out.append(
                _continue(run, cut, f.code, later.get(cut, seqs), _exchange(run, by_turn.get(cut)))
            )
        elif f.code == codes.TOOL_HTTP_ERROR_HIDDEN:  # the tool's answer changed (its own module)
            out.append(tool_answer(run, f, seqs))
        elif f.code == codes.SHELL_FAILURE_HIDDEN:  # the command's real end told (its own module)
            out.append(shell_truth(run, f, seqs))
        elif f.code in TRIMS:
            if not any(i.kind == "c-restore-history" and (i.conversation, i.turn) == where
                       for i in out):  # fmt: skip
                out.append(_history_back(run, f, seqs, findings))
        elif f.layer == "C":
            prev = by_turn.get((f.conversation, f.related_turn))
            out.append(_c(f, seqs, results, prev, _exchange(run, by_turn.get(where)), a, sent))
            if out[-1].kind == "c-await":
                retried.add(where)  # the turn live again is its emission re-sampled too
        elif refused := refusal_or_context(f, _exchange(run, by_turn.get(where)), a, by_turn, run):
            out.append(refused)
            retried.add(where)  # the refused turn has no emission to re-sample, nor a retry
        elif f.code in _RETRY and (made := client_retried(a, by_turn, where)) is not None:
            out.append(_retry_made(f, seqs, made))  # no retry the client did not make: context
            retried.add(where)
        elif (f.code == codes.TRUNCATED_LENGTH or f.code in _RETRY) and not any(
            i.layer == "A" and (i.conversation, i.turn) == where for i in out
        ):
            ex = _exchange(run, by_turn.get(where))
            out.append(_a(f, seqs, ex))
            if out[-1].kind == "a-retry":
                retried.add(where)
            elif not any(x.code == codes.TRUNCATED_TREATED_AS_COMPLETE for x in a.findings):
                # the client took the cut answer as it was
                out.append(_continue(run, where, f.code, seqs, ex))
    return out, retried


def _c(
    f: Any,
    seqs: list[int],
    results: dict[str, str],
    prev: Any,
    ex: Any,
    a: Any,
    sent: dict[str, Sent],
) -> Intervention:
    """The C repair of ``f``; ``prev``: the turn it relates to, ``ex``: its own round trip, ``a``:
    the run's analysis, ``sent``: the results the run sent per dropped call id."""
    assert f.conversation is not None and f.turn is not None
    if f.code == codes.ASSISTANT_NOT_ECHOED:
        answer = _answer_back(f, prev, seqs, ex)
        if answer is not None:
            return answer
    if f.code == codes.DROPPED_TOOL_RESULT and f.tool_call_id:
        return _result_back(f, seqs, results, prev, a, sent)
    if f.code == codes.ABANDONED_ANSWER:
        # the turn live again, its answer read to the end by the fork (as a retry is)
        return Intervention(
            "C",
            f.conversation,
            f.turn,
            "the request re-sent live and its answer awaited to the end (the client hung up)",
            "c-await",
            f.code,
            seqs=seqs,
        )
    return Intervention(
        "C",
        f.conversation,
        f.turn,
        f"the client's dispatch repaired ({f.code})",
        "c-none",
        f.code,
        seqs=seqs,
        missing=f"looptap has no repair for {f.code} yet",
        tag=f.code,
    )


#: Characters of a dropped user message quoted in a restore's line.
_QUOTED = 80


def _history_back(run: Any, f: Any, seqs: list[int], findings: list[Any]) -> Intervention:
    """The C repair of a history the client trimmed, summarised or compacted at ``f``'s turn:
    the history its conversation sent before (every recorded request of it before that turn,
    merged in order: :func:`cassettes.replay.live.rewrite.restored_history`) put back in every
    request sent live from the turn on (``restore_history[TURN]``), where it stood; what the client
    appended since stays. The user's dropped messages are quoted (the finding's ``lost``, else
    ``dropped_user``, as the analysis said them)."""
    earlier, now = _histories(run, f)
    code, quoted = _trim_said(f, findings)
    put = restored_history(now, earlier)[1] if now is not None else 0
    i = Intervention(
        "C",
        f.conversation,
        f.turn,
        f"the history the client trimmed at turn {f.turn} put back ({count(put, 'item')} of its "
        f"earlier requests{quoted})",
        "c-restore-history",
        code,
        seqs=seqs,
    )
    if now is None or not earlier:
        i.missing = "the conversation's earlier requests are not in the recording to put back"
    elif not put:
        i.missing = (
            "the request holds every item its conversation sent before, as sent (cleared or "
            "rewritten in place, not dropped): nothing to put back"
        )
    else:
        i.edits = [f"restore_history[{f.turn}]={orjson.dumps(earlier).decode()}"]
    return i


def _histories(run: Any, f: Any) -> tuple[list[Any], list[Any] | None]:
    """The history ``f``'s conversation sent before its turn (its earlier requests' items merged
    in order, the system prompt's leading items left where the client puts them), and the one
    the turn's own request sent (``None``: not readable)."""
    a = run.analysis
    turns = sorted(
        (t for t in a.turns.values() if t.conversation == f.conversation and t.index <= f.turn),
        key=lambda t: t.index,
    )
    earlier: list[Any] = []
    now: list[Any] | None = None
    for t in turns:
        ex = _exchange(run, t)
        found = (
            history_items(ex.method, ex.url, bounds.loads_or_none(ex.request_body)) if ex else None
        )
        if found is None or not isinstance(found[1], list):
            continue
        if t.index == f.turn:
            now = found[1]
        else:
            earlier = restored_history(_without_system(found[1]), earlier)[0]
    return earlier, now


def _without_system(items: list[Any]) -> list[Any]:
    """``items`` without their leading system and developer items."""
    n = 0
    while n < len(items) and isinstance(items[n], dict):
        if items[n].get("role") not in ("system", "developer"):
            break
        n += 1
    return list(items[n:])


def _trim_said(f: Any, findings: list[Any]) -> tuple[str, str]:
    """The code a trim's repair answers (the warning, when it was said at the turn) and the
    user's dropped messages quoted (the findings' ``lost``, else ``dropped_user``)."""
    said = [x for x in findings if (x.conversation, x.turn) == (f.conversation, f.turn)]
    details = [dict(x.details or {}) for x in said if x.code in TRIMS] + [dict(f.details or {})]
    code = next((x.code for x in said if x.code == TRIMS[1]), f.code)  # the warning, if said
    lost = next((d.get("lost") or d.get("dropped_user") for d in details
                 if d.get("lost") or d.get("dropped_user")), None)  # fmt: skip
    if not isinstance(lost, list) or not lost:
        return code, ""
    more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
    return code, f": the user's {str(lost[0])[:_QUOTED]!r}{more}"


#: The longest arguments a repaired call's line shows whole.
_ARGUMENTS_SHOWN = 300


def _call_said(call: Any) -> str | None:
    """``call`` as the model made it, ``name(arguments)`` with its exact arguments (the result a
    repair puts back answers these arguments: a flip says the repair is enough for this call, not
    that the call was right); ``None`` when the run holds no answer that made it."""
    if call is None:
        return None
    raw = call.arguments_raw
    if raw is None:
        raw = orjson.dumps(call.arguments).decode() if call.arguments is not None else ""
    shown = (
        raw
        if len(raw) <= _ARGUMENTS_SHOWN
        else f"{raw[:_ARGUMENTS_SHOWN]}… ({count(len(raw), 'character')})"
    )
    return f"{call.name or '?'}({shown})"


def _result_back(
    f: Any, seqs: list[int], results: dict[str, str], prev: Any, a: Any, sent: dict[str, Sent]
) -> Intervention:
    """The C repair of a dropped result (``restore_result[CALL_ID]``): its text given with
    ``--result``, else the one the run's requests sent for that call id anywhere (an earlier
    turn's, another conversation's), as sent; not run when the run sent none, or several that
    differ (which to put back is the user's to say)."""
    cid = str(f.tool_call_id)
    call = _call_said(call_made(a, cid, prev))
    i = Intervention(
        "C",
        f.conversation,
        f.turn,
        f"the dropped result of call {cid} ({call}) put back"
        if call
        else f"the dropped result of call {cid} put back (the call's arguments are not in the "
        "recording: a flip says nothing of them)",
        "c-restore-result",
        f.code,
        seqs=seqs,
        tag=cid,
    )
    found = sent.get(cid)
    texts = list(found.texts) if found is not None else []
    if cid in results:
        i.edits = [f"restore_result[{cid}]={results[cid]}"]
    elif len(texts) == 1 and found is not None:
        i.what += f": its text as the client sent it in {found.said(texts[0])}"
        edit = f"restore_result[{cid}]={texts[0]}"
        i.edits, i.literal = [edit], [edit]
    elif texts and found is not None:
        where = ", ".join(found.said(t) for t in texts[:3])
        i.missing = (
            f"the recording sent {count(len(texts), 'different result')} for call {cid} ({where}): "
            f"give the one the tool returned with --result {cid}=@FILE to run this repair"
        )
    else:
        i.missing = (
            "the text of the dropped result is in no request of the recording: give it with "
            f"--result {cid}=@FILE (what the tool returned) to run this repair"
        )
    return i


#: The APIs whose answer looptap can put back in the history in their own shape
#: (:func:`cassettes.providers.from_parts`).
_ANSWER_SHAPES = ("openai_chat", "openai_responses", "anthropic", "gemini")


def _answer_back(f: Any, prev: Any, seqs: list[int], ex: Any) -> Intervention | None:
    """The C repair of an answer with tool calls that the client dropped from the history while
    sending its results (the API's pairing 400 follows): the recorded answer put back before
    them (``restore_answer[CALL_ID]``), in the API's own shape. ``None`` where the recorded
    request has no result of its calls without the call (an answer changed, not dropped; an
    answer without calls of the client's tools): no repair yet."""
    calls = [c for c in prev.e.tool_calls if c.id and not c.by_server] if prev else []
    if not calls or ex is None:
        return None
    cid = str(calls[0].id)
    probe = parse_edit(f"restore_answer[{cid}]=[{{}}]")
    if not apply_edits(ex.method, ex.url, ex.request_body, [probe])[1]:
        return None  # the history carries the calls: the answer was changed, not dropped
    i = Intervention(
        "C",
        f.conversation,
        f.turn,
        f"the dropped answer of turn {prev.index} put back before its calls' results",
        "c-restore-answer",
        f.code,
        seqs=seqs,
        tag=cid,
    )
    if prev.family not in _ANSWER_SHAPES or prev.e.reasoning:
        i.missing = "looptap cannot rebuild this answer in the API's own shape" + (
            " (it holds reasoning the API wants back verbatim)" if prev.e.reasoning else ""
        )
        return i
    parts: list[dict[str, Any]] = [{"type": "text", "content": prev.e.text}] * bool(prev.e.text)
    parts += [
        {
            "type": "tool_call",
            "id": c.id,
            "name": c.name,
            "arguments": c.arguments_raw if c.arguments_raw is not None else c.arguments,
        }
        for c in calls
    ]
    _, items = from_parts(prev.family, [{"role": "assistant", "parts": parts}])
    i.edits = [f"restore_answer[{cid}]={orjson.dumps(items).decode()}"]
    return i


def _continue(
    run: Any, where: tuple[str, int], code: str, seqs: list[int], ex: Any
) -> Intervention:
    """The C repair of a truncated answer: the fork continues it where the cap cut it
    (``continue=N``)."""

    edit = f"continue={CONTINUE_ROUNDS}"
    i = Intervention(
        "C",
        where[0],
        where[1],
        "the truncated answer not treated as complete: the rest asked for (continued by looptap)",
        "c-continue",
        code,
        seqs=seqs,
    )
    if ex is None or not carried(ex.method, ex.url, ex.request_body, parse_edit(edit)):
        i.missing = "this API has no form looptap can ask for the rest of a cut answer in"
        return i
    i.edits, i.extra = [edit], CONTINUE_ROUNDS
    return i


#: The findings of a request the client sent again as it was, after it failed (its own retry).
_RETRIES = (codes.RETRY, codes.RETRY_STORM, codes.RETRY_BEFORE_RETRY_AFTER)


def client_retried(
    a: Any, by_turn: dict[tuple[str, int], Any], where: tuple[str, int]
) -> str | None:
    """How the client itself retried the failed turn ``where`` and was answered (a chain of its
    identical retries, looptap's ``C.retry``, ending in a turn the API answered), said; ``None``
    when it did not (no retry, a changed one, or every retry failed too)."""
    turn, tries = where, 0
    for _ in range(64):  # a chain of retries, bounded
        retry = next(
            (
                x
                for x in a.findings
                if x.code in _RETRIES
                and not (x.details or {}).get("changed")
                and (x.conversation, x.related_turn) == turn
                and x.turn is not None
            ),
            None,
        )
        if retry is None:
            return None
        turn, tries = (retry.conversation, retry.turn), tries + 1
        t = by_turn.get(turn)
        status = t.a.status if t is not None and t.a is not None else None
        if status is not None and status < 400:
            return (
                f"the client retried it itself ({count(tries, 'retry', 'retries')}, "
                f"{retry.code}): turn {retry.turn} sent the same request and was answered"
            )
    return None


def _retry_made(f: Any, seqs: list[int], made: str) -> Intervention:
    """A failed turn the client retried itself and got an answer for: listed as context, not run
    (a fork that re-sent it live would test the retry the client already made)."""
    return Intervention(
        "A",
        f.conversation,
        f.turn,
        f"the API's failure ({f.code}), retried by the client",
        "a-retried",
        f.code,
        seqs=seqs,
        missing=f"{made}: no retry it did not make, nothing to change here",
        tag=f.code,
    )


def _a(f: Any, seqs: list[int], ex: Any) -> Intervention:
    assert f.conversation is not None and f.turn is not None
    if f.code == codes.TRUNCATED_LENGTH:
        return cap_lifted((f.conversation, f.turn), f.code, seqs, ex)
    return Intervention(
        "A",
        f.conversation,
        f.turn,
        f"the request re-sent live: the retry the client did not make ({f.code})",
        "a-retry",
        f.code,
        seqs=seqs,
    )


def _exchange(run: Any, turn: Any) -> Any:
    if turn is None:
        return None
    found = run.by_seq(turn.seq)
    return found[0] if found is not None else None
