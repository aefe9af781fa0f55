"""Root causes first, one rule everywhere: a finding that follows from another is folded under it.

A consequence keeps its message and gets ``details.caused_by`` (the cause's code) and
``details.caused_by_seq`` (the round trip the cause is on); it keeps no severity of its own (info):
the cause carries it. The analysis keeps each turn's findings and the run's in the order of
:func:`ordered_findings` (root causes by severity, each followed by what it caused), and every view
shows them in that order (``show`` text and JSON, the inspector, the HTML page, ``looptap mcp``,
the pytest helpers): none sorts them again.

Which finding follows from which is each code's ``under`` (:mod:`cassettes.analysis.codes`);
wrong tool-call ids are also *named* here (``C.wrong_tool_call_id``, made from the orphan results
and dropped calls it explains)."""

from __future__ import annotations

from collections.abc import Iterable

from .. import codes as codes
from .._context import TurnContext
from .._model import Finding, Severity
from ..codes import ROWS

#: ``ConversationState.state`` key: the conversation's latest context managements, ``[turn index,
#: seq]`` each (the turns ``C.history_trimmed`` was said on), for the consequences of what they
#: dropped at later turns (scope ``dropped``).
MANAGED = "_managed"
#: Managements remembered per conversation (the latest).
MAX_MANAGED = 16
#: ``ConversationState.state`` key: the text each of the conversation's latest managements
#: dropped or cleared, ``[turn index, seq, text]`` each (casefolded), for the later findings whose
#: evidence is quoted from it (scope ``quoted``).
DROPPED = "_dropped_text"
#: Managements whose dropped text is remembered per conversation, and characters of each: a
#: quote past them is not matched (nothing folded: the finding stands as it is).
MAX_DROPPED, DROPPED_CHARS = 4, 32768


def fold_root_causes(ctx: TurnContext, findings: list[Finding]) -> list[Finding]:
    """This turn's findings with every consequence folded under its cause (see the module)."""
    findings = _name_wrong_ids(ctx, findings)
    before = ctx.prev.turn.findings if ctx.prev is not None else []
    for trim in (f for f in findings if f.code == codes.HISTORY_TRIMMED):
        managed = ctx.conv.state.setdefault(MANAGED, [])
        managed.append([ctx.index, ctx.seq])
        del managed[:-MAX_MANAGED]
        text = _dropped_text(ctx, trim)
        if text:
            kept = ctx.conv.state.setdefault(DROPPED, [])
            kept.append([ctx.index, ctx.seq, text])
            del kept[:-MAX_DROPPED]
    out: list[Finding] = []
    graver: dict[int, Severity] = {}  # a cause of this turn milder than what it caused
    for f in findings:
        if f.details.get("caused_by"):
            out.append(_demoted(f))
            continue
        cause = _cause_of(ctx, f, findings, before)
        out.append(_caused_by(f, cause) if cause is not None else f)
        if isinstance(cause, Finding) and f.severity.rank > cause.severity.rank:
            graver[id(cause)] = f.severity
    # the cause carries the severity: the gravest of its own and what it caused
    return [
        f.model_copy(update={"severity": graver[id(g)]}) if id(g) in graver else f
        for f, g in zip(out, findings, strict=True)
    ]


def _cause_of(
    ctx: TurnContext, f: Finding, here: list[Finding], before: list[Finding]
) -> Finding | tuple[str, int] | None:
    """The first finding of this turn, then (scopes ``call`` and ``unrun``) of the previous one,
    that is a cause of ``f`` by its code's ``under``; for scope ``dropped``, the context
    management (its code and round trip, on this turn or an earlier one) that dropped the calls
    ``f`` repeats."""
    for code, scope in ROWS[f.code].under:
        if scope in ("dropped", "quoted"):
            found = _dropped_by(ctx, f) if scope == "dropped" else _quoted_from(ctx, f)
            if found is not None and code == codes.HISTORY_TRIMMED:
                return code, found
            continue
        for c in here if scope == "turn" else here + before:
            if c is f or c.code != code or c.details.get("caused_by"):
                continue
            if scope == "turn" or (_same_call(f, c) if scope == "call" else _unrun_call(f, c)):
                return c
    return None


def _dropped_by(ctx: TurnContext, f: Finding) -> int | None:
    """The round trip of the conversation's context management that dropped the earlier calls
    ``f`` repeats: none of them is in this request's history any more (``details.unseen``), and
    the conversation's history was managed after the latest of them (on a turn after it, up to
    this one). The model no longer sees the calls made: repeating them follows from what the
    management dropped."""
    turns = f.details.get("turns")
    if not f.details.get("unseen") or not isinstance(turns, list) or len(turns) < 2:
        return None
    last = turns[-2]
    for index, seq in reversed(ctx.conv.state.get(MANAGED, [])):
        if isinstance(last, int) and last < index <= ctx.index:
            return int(seq)
    return None


def _dropped_text(ctx: TurnContext, trim: Finding) -> str:
    """What the management ``trim`` (this turn's ``C.history_trimmed``) dropped or cleared of the
    previous request: those messages' texts, calls' arguments and tool results, casefolded, at
    most :data:`DROPPED_CHARS`; empty when the previous request's history was released."""
    prev = ctx.prev.messages if ctx.prev is not None else []
    at = [i for key in ("dropped", "cleared") for i in trim.details.get(key) or []]
    bits: list[str] = []
    size = 0
    for i in sorted({i for i in at if isinstance(i, int) and 0 <= i < len(prev)}):
        for p in prev[i].parts:
            for t in (
                p.text,
                p.tool_result.content if p.tool_result is not None else None,
                p.tool_call.arguments_raw if p.tool_call is not None else None,
            ):
                if t and size < DROPPED_CHARS:
                    bits.append(t[: DROPPED_CHARS - size])
                    size += len(bits[-1]) + 1
    return "\n".join(bits).casefold()


def _quoted_from(ctx: TurnContext, f: Finding) -> int | None:
    """The round trip of the conversation's context management (on this turn or an earlier one)
    whose dropped text holds every piece of ``f``'s evidence (its claims, ``details.spans``; the
    value it names, ``details.value``), word for word: the model says what the request no longer
    holds, so the finding follows from the drop. Never merely for coming after one: a claim or
    value the dropped text does not hold leaves ``f`` as it is."""
    spans = f.details.get("spans")
    evidence = spans if isinstance(spans, list) else [f.details.get("value")]
    quotes = [e.strip(" '\"").casefold() for e in evidence if isinstance(e, str)]
    if not quotes or len(quotes) != len(evidence) or not all(quotes):
        return None
    for index, seq, text in reversed(ctx.conv.state.get(DROPPED, [])):
        if index <= ctx.index and all(q in text for q in quotes):
            return int(seq)
    return None


def _unrun_call(f: Finding, c: Finding) -> bool:
    """``c`` is about one of the earlier calls ``f`` repeats that the client never ran: by id,
    where calls have none by tool name."""
    ids = f.details.get("never_run")
    if not isinstance(ids, list):
        return False
    if c.tool_call_id:
        return c.tool_call_id in ids
    tool = f.details.get("tool")
    return "" in ids and bool(tool) and tool == c.details.get("tool")


def _same_call(a: Finding, b: Finding) -> bool:
    """About the same tool call: by id; where calls have no ids (Gemini, Ollama), by tool name."""
    if a.tool_call_id or b.tool_call_id:
        return a.tool_call_id == b.tool_call_id
    tool = a.details.get("tool")
    return bool(tool) and tool == b.details.get("tool")


def _caused_by(f: Finding, cause: Finding | tuple[str, int] | str) -> Finding:
    """A consequence, folded under its root cause (a finding; the code and round trip of one on
    an earlier turn; a code): info, ``details.caused_by`` naming it."""
    details = dict(f.details)
    if isinstance(cause, Finding):
        details["caused_by"] = cause.code
        if cause.seq is not None:
            details["caused_by_seq"] = cause.seq
    elif isinstance(cause, tuple):
        details["caused_by"], details["caused_by_seq"] = cause
    else:
        details["caused_by"] = cause
    return f.model_copy(update={"severity": Severity.INFO, "details": details})


def _demoted(f: Finding) -> Finding:
    """A finding its check already linked to its cause: no severity of its own either."""
    return f if f.severity is Severity.INFO else f.model_copy(update={"severity": Severity.INFO})


def _name_wrong_ids(ctx: TurnContext, findings: list[Finding]) -> list[Finding]:
    """A client that sent results under ids the model never gave gets one error,
    ``C.wrong_tool_call_id``, pairing each wrong id with the call it answers (by tool name, else
    by position); the orphan result and the dropped call it explains fold under it."""
    prev = ctx.prev
    if prev is None:
        return findings
    orphans = [
        f
        for f in findings
        if f.code == codes.ORPHAN_TOOL_RESULT and f.tool_call_id and f.severity is Severity.ERROR
    ]
    dropped = [
        f
        for f in findings
        if f.code == codes.DROPPED_TOOL_RESULT
        and f.related_turn == prev.index
        and f.severity is Severity.ERROR
    ]
    pairs = _wrong_id_pairs(orphans, dropped)
    if not pairs:
        return findings
    root = _wrong_ids(ctx, prev.index, orphans[0].path, pairs)
    folded = {id(f) for pair in pairs for f in pair}
    out: list[Finding] = []
    for f in findings:
        if id(f) not in folded:
            out.append(f)
            continue
        if not any(x is root for x in out):
            out.append(root)
        out.append(_caused_by(f, root))
    return out


def _wrong_ids(
    ctx: TurnContext, prev_turn: int, path: str | None, pairs: list[tuple[Finding, Finding]]
) -> Finding:
    """``C.wrong_tool_call_id``: each (orphan result, dropped call) pair is one result sent under
    an id the model never gave."""
    listing = "; ".join(
        f"`{o.tool_call_id}` for {d.details.get('tool') or 'a call'} (the model's id: "
        f"{d.tool_call_id or 'none'})"
        for o, d in pairs
    )
    return ctx.finding(
        codes.WRONG_TOOL_CALL_ID,
        f"The client sent tool results under ids the model never gave: {listing}. The calls of "
        f"turn {prev_turn} therefore look unanswered and the results orphaned; the API pairs "
        "results by id.",
        path=path,
        tool_call_id=pairs[0][1].tool_call_id,
        related_turn=prev_turn,
        pairs=[
            {"sent": o.tool_call_id, "model": d.tool_call_id, "tool": d.details.get("tool")}
            for o, d in pairs
        ],
    )


def _wrong_id_pairs(
    orphans: list[Finding], dropped: list[Finding]
) -> list[tuple[Finding, Finding]]:
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


def is_consequence(f: Finding) -> bool:
    return bool((f.details or {}).get("caused_by"))


def ordered_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Root causes first (by severity, then recording order), each followed by the findings it
    caused (same code and conversation, ``caused_by_conversation`` when the cause is in another
    one, on the round trip ``caused_by_seq`` names when it is known); consequences whose cause
    is not among ``findings`` come at the end. In n log n: the analysis orders every run's list,
    a million findings included."""
    fs = list(findings)
    roots = sorted(
        (f for f in fs if not is_consequence(f)),
        key=lambda f: (-f.severity.rank, f.seq or 0),
    )
    # each consequence (by its place in ``fs``) under the cause it names: (code, conversation,
    # seq), the seq None when it names none (then any root of that code and conversation)
    under: dict[tuple[object, str | None, int | None], list[int]] = {}
    for i, f in enumerate(fs):
        if is_consequence(f):
            d = f.details
            conv = d.get("caused_by_conversation", f.conversation)  # a cause in another one
            under.setdefault((d["caused_by"], conv, d.get("caused_by_seq")), []).append(i)
    out: list[Finding] = []
    for r in roots:
        out.append(r)
        mine = under.pop((r.code, r.conversation, r.seq), [])
        if r.seq is not None:
            mine += under.pop((r.code, r.conversation, None), [])
        out.extend(fs[i] for i in sorted(mine))
    out.extend(fs[i] for i in sorted(i for left in under.values() for i in left))
    return out
