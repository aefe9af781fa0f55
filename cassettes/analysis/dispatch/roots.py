"""Root causes first: wrong tool-call ids lead, the orphan results and dropped calls they explain
fold under them."""

from __future__ import annotations

from cassettes.analysis.context import TurnContext
from cassettes.analysis.model import Finding, Severity


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
