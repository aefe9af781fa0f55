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
  what it holds (below): a retry sends the same request and is refused the same way.
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
  flip a deterministic refusal).

Each intervention forks at ``conversation=C:turn=T``: the other conversations stay replayed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from cassettes import bounds
from cassettes.providers import from_parts
from cassettes.replay.live import apply_edits, carried, parse_edit
from cassettes.why._suspects import (
    answered_back,
    last_turns,
    later_turns,
    named_turns,
    serious_findings,
)

__all__ = ["Intervention", "interventions"]

#: A findings whose clean answer is the same request sent again (a retry).
_RETRY = (
    "A.http_error",
    "A.rate_limited",
    "A.overloaded",
    "A.transport_error",
    "A.malformed_response",
    "A.stream_truncated",
    "A.empty_response",
)
#: The lifted cap: this many times the recorded one, and at least this many tokens more.
_CAP_FACTOR, _CAP_MORE = 4, 4096
#: The most continuation requests a C repair of a truncated answer sends per sample
#: (``continue=N``).
CONTINUE_ROUNDS = 3
#: The statuses of an API refusing a request for what it holds (a bad request, an unknown model, a
#: request too large, an unprocessable one): the same request is refused again, whenever sent.
_REFUSING = (400, 404, 413, 422)
#: The error types that say the request is at fault (docs/WIRE.md A.6, C.6).
_REQUEST_ERRORS = ("invalid_request_error", "not_found_error", "INVALID_ARGUMENT", "NOT_FOUND")


@dataclass
class Intervention:
    layer: str
    conversation: str
    turn: int
    #: What is changed, in a few words.
    what: str
    #: ``e-resample``, ``e-model``, ``a-cap``, ``a-retry``, ``c-restore-result``,
    #: ``c-restore-answer``, ``c-continue``,
    #: ``c-await``; ``together`` (repairs combined: :mod:`cassettes.why._together`), ``confirm``
    #: (the user's fixed agent: :mod:`cassettes.why._confirm`).
    kind: str
    #: The finding it answers, if any.
    finding: str | None = None
    #: ``--edit`` specs the fork makes.
    edits: list[str] = field(default_factory=list)
    #: ``--model`` of the fork (``None``: the recorded model).
    model: str | None = None
    #: The recorded round trips the branch re-runs live, by seq (what the budget counts).
    seqs: list[int] = field(default_factory=list)
    #: Requests a sample may send beyond those (the continuations of a cut answer, at most).
    extra: int = 0
    #: Why it cannot run (``None``: it can).
    missing: str | None = None
    #: What tells it from another of its kind at the same turn (the call a result is put back for,
    #: the finding's code).
    tag: str = ""
    #: What shows it, beside the finding (a refused request: the API's own message).
    evidence: str | None = None
    #: How a fix would be tested when the repair needs what only the user knows (a refused
    #: request: the ``--edit`` or ``--model`` of a fork at its turn).
    fix: str | None = None
    #: Only this turn re-sampled: the later turns of its conversation held (served as recorded
    #: while their requests still match: the ``…:hold`` cursor), so E re-samples of one
    #: conversation are not nested in each other.
    hold: bool = False
    #: A combination of repairs (``together``): its members' keys.
    parts: list[str] = field(default_factory=list)

    @property
    def cursor(self) -> str:
        return f"conversation={self.conversation}:turn={self.turn}" + ":hold" * self.hold

    @property
    def live_requests(self) -> int:
        """The live requests one sample may send: the recorded ones it re-runs, and its extra."""
        return len(self.seqs) + self.extra

    @property
    def key(self) -> str:
        """A stable name (the branch files and the state file use it)."""
        extra = "".join(f"-{x}" for x in (self.tag, self.model) if x)
        return re.sub(
            r"[^A-Za-z0-9._-]",
            "_",
            f"{self.layer}-{self.conversation}-t{self.turn}-{self.kind}{extra}",
        )[:160]

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "layer": self.layer,
            "conversation": self.conversation,
            "turn": self.turn,
            "what": self.what,
            "kind": self.kind,
            "finding": self.finding,
            "cursor": self.cursor,
            "edits": list(self.edits),
            "model": self.model,
            "live_requests_per_sample": self.live_requests,
            "runnable": self.missing is None,
            "missing": self.missing,
            "evidence": self.evidence,
            "fix": self.fix,
            **({"together": list(self.parts)} if self.parts else {}),
        }


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
    for f in findings:
        where = (f.conversation, f.turn)
        seqs = later.get(where, [])
        if f.layer == "C" and f.code == "C.truncated_treated_as_complete":
            # the cut answer's turn: continued there
            cut = (f.conversation, f.related_turn if f.related_turn is not None else f.turn)
            out.append(
                _continue(run, cut, f.code, later.get(cut, seqs), _exchange(run, by_turn.get(cut)))
            )
        elif f.layer == "C":
            prev = by_turn.get((f.conversation, f.related_turn))
            out.append(_c(f, seqs, results, prev, _exchange(run, by_turn.get(where))))
            if out[-1].kind == "c-await":
                retried.add(where)  # the turn live again is its emission re-sampled too
        elif (refused := refusal(f, _exchange(run, by_turn.get(where)))) is not None:
            out.append(refused)
            retried.add(where)  # the refused turn has no emission to re-sample, nor a retry
        elif (
            f.layer == "A"
            and (f.code == "A.truncated_length" or f.code in _RETRY)
            and not any(i.layer == "A" and (i.conversation, i.turn) == where for i in out)
        ):
            ex = _exchange(run, by_turn.get(where))
            out.append(_a(f, seqs, ex))
            if out[-1].kind == "a-retry":
                retried.add(where)
            elif not any(x.code == "C.truncated_treated_as_complete" for x in a.findings):
                # the client took the cut answer as it was
                out.append(_continue(run, where, f.code, seqs, ex))
    return out, retried


def _c(
    f: Any, seqs: list[int], results: dict[str, str], prev: Any = None, ex: Any = None
) -> Intervention:
    """The C repair of ``f``; ``prev``: the turn it relates to, ``ex``: its own round trip."""
    assert f.conversation is not None and f.turn is not None
    if f.code == "C.assistant_not_echoed":
        answer = _answer_back(f, prev, seqs, ex)
        if answer is not None:
            return answer
    if f.code == "C.dropped_tool_result" and f.tool_call_id:
        cid = str(f.tool_call_id)
        i = Intervention(
            "C",
            f.conversation,
            f.turn,
            f"the dropped result of call {cid} put back",
            "c-restore-result",
            f.code,
            seqs=seqs,
            tag=cid,
        )
        if cid in results:
            i.edits = [f"restore_result[{cid}]={results[cid]}"]
        else:
            i.missing = (
                "the text of the dropped result is not in the recording: give it with --result "
                f"{cid}=@FILE (what the tool returned) to run this repair"
            )
        return i
    if f.code == "C.abandoned_answer":
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


def _a(f: Any, seqs: list[int], ex: Any) -> Intervention:
    assert f.conversation is not None and f.turn is not None
    if f.code != "A.truncated_length":
        return Intervention(
            "A",
            f.conversation,
            f.turn,
            f"the request re-sent live: the retry the client did not make ({f.code})",
            "a-retry",
            f.code,
            seqs=seqs,
        )

    caps = [
        c
        for c in (
            carried(ex.method, ex.url, ex.request_body, parse_edit("max_tokens=1"))
            if ex is not None
            else []
        )
        if isinstance(c, int)
    ]
    i = Intervention(
        "A",
        f.conversation,
        f.turn,
        "the request re-sent live with the token cap lifted",
        "a-cap",
        f.code,
        seqs=seqs,
    )
    if not caps:
        i.missing = "the request sets no token cap to lift (the API's own limit cut the answer)"
        return i
    lifted = max(max(caps) * _CAP_FACTOR, max(caps) + _CAP_MORE)
    i.what = f"the request re-sent live with the token cap lifted ({max(caps)} → {lifted})"
    i.edits = [f"max_tokens={lifted}"]
    return i


def refusal(f: Any, ex: Any) -> Intervention | None:
    """The C suspect of an ``A.http_error`` whose request the API refused for what it holds: a 4xx
    of :data:`_REFUSING` whose error says the request is at fault (its type, a ``param``, a path
    its message starts with); ``None`` for any other finding. What the error names (a tool's
    schema, the model, the token cap, another parameter) says the fix a fork can test."""
    status = f.details.get("status") if f.code == "A.http_error" else None
    if status not in _REFUSING or f.conversation is None or f.turn is None:
        return None
    message = str(f.details.get("error") or "")
    param = _param(ex)
    kind = str(f.details.get("type") or "")
    if not (param or kind in _REQUEST_ERRORS or re.match(r"[\w.\[\]]+: ", message)):
        return None
    named = param or message
    tool = _refused_tool(named, message, ex)
    if tool is not None:
        fix, what = f"--edit 'tool_schema[{tool}]=@SCHEMA.json'", f"the schema of tool {tool!r}"
    elif re.match(r"models?\b", named) or "model" in str(f.details.get("error_code") or ""):
        fix, what = "--model MODEL", "the model"
    elif re.search(r"max_(?:completion_|output_)?tokens", named):
        fix, what = "--edit max_tokens=N", "the token cap"
    else:
        fix, what = None, f"{param!r}" if param else "the request"
    test = (
        f"test a fix with a fork at it: {fix}"
        if fix
        else "no fork edit changes it: fix the client and record again"
    )
    return Intervention(
        "C",
        f.conversation,
        f.turn,
        f"the request the API refused (HTTP {status}, at {what})",
        "c-refused",
        f.code,
        missing=f"the API refuses this request whenever it is sent, so no re-run flips it; {test}",
        tag=str(status),
        # one line (Gemini's message has one per field it refused), never a quoted "\n"
        evidence=" ".join(message[:2000].split())[:500] or None,
        fix=fix,
    )


def _param(ex: Any) -> str:
    """The ``param`` an OpenAI-style error names (``tools[0].function.parameters``), else ``""``."""
    try:
        doc = bounds.loads(ex.response_body) if ex is not None else None
    except (orjson.JSONDecodeError, ValueError):
        return ""
    err = doc.get("error") if isinstance(doc, dict) else None
    param = err.get("param") if isinstance(err, dict) else None
    return param if isinstance(param, str) else ""


def _refused_tool(named: str, message: str, ex: Any) -> str | None:
    """The tool whose schema the error names: by name (``Invalid schema for function 'x'``), or
    by its index in the request's tools (``tools[2]…``, ``tools.2.custom.input_schema``,
    ``function_declarations[2]``)."""
    m = re.search(r"(?:function|tool) '([^']{1,128})'", message)
    if m:
        return m.group(1)
    m = re.search(r"(?:function_declarations|functionDeclarations)\[(\d{1,4})", named) or re.search(
        r"tools(?:\[|\.)(\d{1,4})", named
    )
    if m is None or ex is None:
        return None
    try:
        doc = bounds.loads(ex.request_body)
    except (orjson.JSONDecodeError, ValueError):
        return None
    tools = doc.get("tools") if isinstance(doc, dict) else None
    if not isinstance(tools, list):
        return None
    # Gemini: the declarations of every tools item, in order
    decls = [d for t in tools if isinstance(t, dict) for d in t.get("functionDeclarations") or []]
    pool = decls if "declarations" in m.group(0) else tools
    i = int(m.group(1))
    item = pool[i] if i < len(pool) and isinstance(pool[i], dict) else {}
    name = item.get("name") or (item.get("function") or {}).get("name")
    return str(name)[:128] if name else None


def _exchange(run: Any, turn: Any) -> Any:
    if turn is None:
        return None
    found = run.by_seq(turn.seq)
    return found[0] if found is not None else None
