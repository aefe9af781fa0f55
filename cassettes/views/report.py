"""The data of ``looptap export --html``: a run as one JSON object the page renders.

The page (``cassettes/views/htmlpage.py`` and its assets) only lays out what this computes, as
the inspector does for the terminal: the conversations, each turn's row (E/A/C badges, finish,
tokens; a replay miss named as one), its layers, the messages its request carried, the findings root
cause first (a consequence right after its cause, with ``caused_by``: the analysis' own order,
which every view keeps) and the token-cost growth bars.

**Size.** A conversation re-sends its history on every turn, so the messages are stored once: a
table of distinct messages (``messages``), and for each turn the list of their indices, written
as a delta against the turn it follows (``[base_seq, keep, [new indices]]``: the first ``keep``
of the base turn's list, then these). A part longer than :data:`PART_LIMIT` characters is cut,
saying how much was left out (``looptap show --json`` has it whole).

**Untrusted text.** Every string is passed through :func:`cassettes.untrusted.clean` (controls,
bidi overrides and invisible characters shown visibly, as in the terminal); the page escapes the
JSON for its ``<script type="application/json">`` element and writes text with ``textContent``.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..analysis import Finding, Turn, kind_text
from ..analysis.dispatch import replay_miss
from ..hints import count
from ..models import Message, Part
from ..untrusted import clean
from ._growth import growth_bars, split_json
from ._layers import layer_findings
from ._money import money
from ._roundtrip_view import link_text

__all__ = ["report_data"]

SCHEMA = "looptap.report/1"
#: Longest part kept in full (characters); the rest is counted.
PART_LIMIT = 8000
#: Deepest JSON value walked when cleaning (tool-call arguments are wire JSON).
_DEPTH = 64


def _cut(text: str | None) -> str | None:
    if text is None:
        return None
    if len(text) <= PART_LIMIT:
        return text
    return (
        text[:PART_LIMIT]
        + f" … ({count(len(text) - PART_LIMIT, 'more character')}: looptap show --json has them)"
    )


def _part(p: Part) -> dict[str, Any]:
    d: dict[str, Any] = {"k": p.kind}
    if p.text is not None:
        d["t"] = _cut(p.text)
    if p.tool_call is not None:
        c = p.tool_call
        d["call"] = {"id": c.id, "name": c.name, "args": _cut(c.arguments_raw)}
    if p.tool_result is not None:
        r = p.tool_result
        d["result"] = {
            "id": r.call_id,
            "name": r.name,
            "content": _cut(r.content),
            "error": r.is_error,
        }
    if p.media_type is not None:
        d["media"] = p.media_type
    return d


def _message(m: Message) -> dict[str, Any]:
    return {"role": m.role, "parts": [_part(p) for p in m.parts]}


def _money(v: Decimal | None) -> str | None:
    return None if v is None else str(v)


def _finding(f: Finding) -> dict[str, Any]:
    d = f.details or {}
    out: dict[str, Any] = {
        "code": f.code,
        "layer": f.layer,
        "severity": f.severity.value,
        "message": f.message,
        "seq": f.seq,
        "conversation": f.conversation,
        "turn": f.turn,
        "path": f.path,
    }
    if isinstance(d.get("caused_by"), str) and d["caused_by"]:
        out["caused_by"] = d["caused_by"]
        if isinstance(d.get("caused_by_seq"), int):
            out["caused_by_seq"] = d["caused_by_seq"]
    return out


def _badges(findings: Iterable[Finding]) -> dict[str, list[Any]]:
    """Per layer: the worst severity (``None`` when the layer raised nothing) and the count."""
    return {
        layer: [None if sev is None else sev.value, n]
        for layer, (sev, n) in layer_findings(findings).items()
    }


def _layers(t: Turn) -> dict[str, Any]:
    e, a, c, k = t.e, t.a, t.c, t.tokens
    return {
        "E": {
            "text": _cut(e.text),
            "reasoning": _cut(e.reasoning),
            "refusal": _cut(e.refusal),
            "empty": e.empty,
            "calls": [
                {
                    "id": tc.id,
                    "name": tc.name,
                    "args": _cut(tc.arguments_raw),
                    "parse_error": tc.parse_error,
                    "schema_errors": tc.schema_errors,
                    "offered": tc.offered,
                }
                for tc in e.tool_calls
            ],
        },
        "A": {
            "status": a.status,
            "finish_raw": a.finish_reason_raw,
            "finish": a.finish_reason.value if a.finish_reason else None,
            "model_requested": a.model_requested,
            "model_served": a.model_served,
            "request_id": a.request_id,
            "ttfb": a.ttfb,
            "ttft": a.ttft,
            "duration": a.duration,
            "stream": a.stream,
            "complete": a.complete,
            "rate_limit": a.rate_limit,
            "error": a.error.model_dump(mode="json", exclude={"raw"}) if a.error else None,
            "tokens": {
                "input": k.input,
                "cache_read": k.cache_read,
                "cache_write": k.cache_write,
                "output": k.output,
                "reasoning": k.reasoning,
                "source": k.source,
                "cost": _money(k.cost),
                "cumulative_cost": _money(k.cumulative_cost),
                "price_estimated": k.price_estimated,
                "cumulative_estimated": k.cumulative_estimated,
                # The page writes what these say (cassettes.views._money, as every view).
                "cost_text": money(k.cost, k.price_estimated),
                "cumulative_cost_text": money(k.cumulative_cost, k.cumulative_estimated),
                "split": split_json(growth_bars([t])[0]),
            },
        },
        "C": {
            "link": c.link,
            "link_text": link_text(c.link, t.previous_seq),
            "kept": c.kept,
            "rewritten": c.rewritten,
            "appended_from": c.appended_from,
            "echoed_assistant": c.echoed_assistant,
            "pairings": [p.model_dump(mode="json") for p in c.pairings],
            "tools_offered": c.tools_offered,
            "tool_choice": c.tool_choice,
        },
    }


def _cleaned(v: Any, depth: int = 0) -> Any:
    """Every string of ``v`` through :func:`clean` (a value nested deeper than :data:`_DEPTH` is
    replaced by a note: wire JSON can nest without end)."""
    if isinstance(v, str):
        return clean(v)
    if depth > _DEPTH:
        return "(nested too deep to show)"
    if isinstance(v, dict):
        return {clean(str(k)): _cleaned(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_cleaned(x, depth + 1) for x in v]
    return v


class _Messages:
    """The table of distinct messages and, per turn, its history as a delta on the turn before."""

    def __init__(self) -> None:
        self.table: list[dict[str, Any]] = []
        self._index: dict[bytes, int] = {}
        self.ids: dict[int, list[int]] = {}

    def add(self, m: dict[str, Any]) -> int:
        key = orjson.dumps(m)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.table)
            self.table.append(m)
        return i

    def history(self, seq: int, ids: list[int], base: int | None) -> list[Any]:
        self.ids[seq] = ids
        prev = self.ids.get(base) if base is not None else None
        keep = 0
        if prev is not None:
            n = min(len(prev), len(ids))
            while keep < n and prev[keep] == ids[keep]:
                keep += 1
        return [base if keep else None, keep, ids[keep:]]


def _history(msgs: _Messages, rt: Any, t: Turn) -> tuple[list[Any], bool]:
    """The turn's history as a delta on its previous turn's (``[base, kept, new ids]``), and
    whether the system prompt was pinned first."""
    req = rt.request
    if req is None:
        return [None, 0, []], False
    ids = []
    # The system prompt pinned first only when it travels apart from the history (a
    # history's own system message is shown in place, once), as the inspector does.
    pinned = bool(req.system) and not any(m.role in ("system", "developer") for m in req.messages)
    if pinned:
        ids.append(msgs.add({"role": "system", "parts": [_part(p) for p in req.system]}))
    ids.extend(msgs.add(_message(m)) for m in req.messages)
    return msgs.history(t.seq, ids, t.previous_seq), pinned


def _miss(t: Turn) -> dict[str, Any] | None:
    """What the replay said of a request its cassette has not (``C.diverged_from_recording``):
    the JSON path of the first difference, the closest recorded turn, the verdicts and the
    differences as the pytest failure prints them; ``None`` for any other turn."""
    f = replay_miss(t.findings)
    if f is None:
        return None
    d = f.details or {}
    return {
        "path": f.path,
        "closest": d.get("closest"),
        "reason": d.get("reason"),
        "verdicts": _lines(d.get("verdicts")),
        "changes": _lines(d.get("changes")),
    }


def _lines(v: Any) -> list[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def _row(t: Turn) -> dict[str, Any]:
    """The turn's row in the page's turn list (a replay miss says so: looptap answered, not the
    API)."""
    k = t.tokens
    miss = _miss(t)
    return {
        "seq": t.seq,
        "conv": t.conversation,
        "turn": t.index,
        "prev": t.previous_seq,
        "badges": _badges(t.findings),
        "finish": t.a.finish_reason_raw or (t.a.finish_reason.value if t.a.finish_reason else None),
        "status": t.a.status,
        "error": t.a.error is not None and miss is None,
        "miss": None if miss is None else {"path": miss["path"]},
        "calls": len(t.e.tool_calls),
        "in": k.input,
        "out": k.output,
        "model": t.a.model_served or t.a.model_requested,
    }


def _detail(rt: Any, t: Turn, history: list[Any], pinned: bool) -> dict[str, Any]:
    """What the page shows of the selected turn."""
    return {
        "layers": _layers(t),
        "findings": [_finding(f) for f in t.findings],
        "miss": _miss(t),
        "history": history,
        "parsed": rt.request is not None,
        "appended_from": t.c.appended_from + (1 if pinned else 0),
        "method": rt.method,
        "path": urlsplit(rt.url).path,
        "family": rt.family,
        "read": rt.read,
        "unread": rt.unread[:16],
    }


def _bar(t: Turn) -> list[Any]:
    """The turn's bar of its conversation's growth chart, as the page reads it."""
    (b,) = growth_bars([t])  # (a bar is the turn's own: growth_bars reads no other turn)
    return [b.seq, b.turn, b.system, b.tools, b.history, b.tool_results, b.new, b.output,
            None if b.cumulative_cost is None else float(b.cumulative_cost), b.source,
            money(b.cumulative_cost, b.cumulative_estimated)]  # fmt: skip


def _conversations(
    analysis: Any, bars: dict[int, list[Any]]
) -> tuple[list[dict[str, Any]], dict[str, list[list[Any]]]]:
    """Each conversation, and its growth chart's bars (``bars``: each turn's, by seq, made when the
    pass over the round trips had the turn; a turn is restored again only when missing there)."""
    turns_by_seq = analysis.turns
    conversations = []
    growth: dict[str, list[list[Any]]] = {}
    for conv in analysis.conversations:
        seqs = [s for s in conv.turns if s in turns_by_seq]
        conversations.append(
            {
                "id": conv.id,
                "title": conv.label or conv.title,
                "family": conv.family,
                "turns": seqs,
                "parent_seq": conv.parent_seq,
                "branch": conv.branch,
                "kind": conv.kind,
                "kind_text": kind_text(conv.kind, conv.parent_seq),
            }
        )
        growth[conv.id] = [bars[s] if s in bars else _bar(turns_by_seq[s]) for s in seqs]
    return conversations, growth


def _mark_answered(
    rows: list[dict[str, Any]], detail: dict[str, Any], answered: dict[tuple[str, str], int]
) -> None:
    """Each tool call with the turn whose request carried its result (the inspector's "result")."""
    for row in rows:
        d = detail[str(row["seq"])]
        for call in d["layers"]["E"]["calls"]:
            call["answered_by"] = answered.get((row["conv"], call["id"])) if call["id"] else None


def _mark_served(detail: dict[str, Any], analysis: Any) -> None:
    """Each tool call with the tools' HTTP calls that served it (the first 10: method, host, path,
    status, time, the clipped bodies)."""
    for c in analysis.mcp_calls.values():
        d = detail.get(str(c.model_seq)) if c.via == "http" and c.call_id else None
        if d is None or c.http is None:
            continue
        for call in d["layers"]["E"]["calls"]:
            if call["id"] == c.call_id and len(call.setdefault("http", [])) < 10:
                call["http"].append(
                    {"seq": c.seq, "by": c.linked_by} | c.http.model_dump(mode="json")
                )


def _mark_shell(detail: dict[str, Any], shell: Any) -> None:
    """Each shell call with the process ``looptap run``'s tracer linked to it: the command, its
    exit or signal, its output's start, the files it touched (:func:`shell_call_json`)."""
    from ._shell import shell_by_call, shell_call_json

    by = shell_by_call(shell)
    for (seq, key), sc in by.items() if by else ():
        d = detail.get(str(seq))
        for k, call in enumerate(d["layers"]["E"]["calls"] if d is not None else []):
            if (call["id"] or f"#{seq}.{k}") == key:
                call["shell"] = shell_call_json(sc)


def _total_cost(turns: list[Turn]) -> tuple[Decimal | None, bool, bool]:
    """The cost of ``turns`` (``None`` when none is priced), whether an estimate is in it, and
    whether every turn was priced."""
    cost: Decimal | None = None
    estimated = False
    complete = True
    for t in turns:
        if t.tokens.cost is not None:
            cost = (cost or Decimal(0)) + t.tokens.cost
            estimated = estimated or t.tokens.price_estimated
        else:
            complete = False
    return cost, estimated, complete


def report_data(run: Any) -> dict[str, Any]:
    """The page's data for ``run`` (a :class:`cassettes.reading.Run`), every string cleaned.
    One pass over the round trips (read from disk one at a time for a streamed cassette)."""
    from .._version import __version__  # its metadata read, when a report is made

    analysis = run.analysis
    turns_by_seq = analysis.turns
    msgs = _Messages()
    rows: list[dict[str, Any]] = []
    detail: dict[str, Any] = {}
    answered: dict[tuple[str, str], int] = {}
    bars: dict[int, list[Any]] = {}
    shown: list[Turn] = []
    # the turn the page opens at: the first replay miss (a failed test's), else the first that
    # failed (an API error, an error finding)
    opened: int | None = None
    failed: int | None = None
    for rt in run.roundtrips:
        seq = rt.seq
        if seq is None or seq not in turns_by_seq:
            continue
        t: Turn = turns_by_seq[seq]
        history, pinned = _history(msgs, rt, t)
        for p in t.c.pairings:
            if p.call_id:
                answered.setdefault((t.conversation, p.call_id), seq)
        shown.append(t)
        rows.append(_row(t))
        if opened is None and rows[-1]["miss"] is not None:
            opened = seq
        if failed is None and (
            rows[-1]["error"] or any(f.severity.value == "error" for f in t.findings)
        ):
            failed = seq
        detail[str(seq)] = _detail(rt, t, history, pinned)
        bars[seq] = _bar(t)
    _mark_answered(rows, detail, answered)
    _mark_served(detail, analysis)
    _mark_shell(detail, run.shell)
    cost, estimated, cost_complete = _total_cost(shown)
    conversations, growth = _conversations(analysis, bars)
    findings = [_finding(f) for f in analysis.findings]
    counts = {
        sev: sum(1 for f in analysis.findings if f.severity.value == sev)
        for sev in ("error", "warning", "info")
    }

    data = {
        "schema": SCHEMA,
        "looptap": __version__,
        "name": str(run.name),
        "round_trips": len(run),
        "totals": {
            "turns": len(rows),
            "conversations": len(conversations),
            "input": sum(r["in"] or 0 for r in rows),
            "output": sum(r["out"] or 0 for r in rows),
            "cost": _money(cost),
            "cost_estimated": estimated,
            "cost_text": money(cost, estimated),
            "cost_complete": cost_complete,
            "findings": counts,
        },
        "problems": [str(p) for p in run.problems],
        "analysis_errors": list(analysis.errors),
        "conversations": conversations,
        "turns": rows,
        "open": opened if opened is not None else failed,
        "detail": detail,
        "messages": msgs.table,
        "findings": findings,
        "growth": growth,
    }
    cleaned: dict[str, Any] = _cleaned(data)
    return cleaned
