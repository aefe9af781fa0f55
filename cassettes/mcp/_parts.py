"""What :mod:`cassettes.mcp.query` answers with about recorded things: findings, messages, a
conversation's row, a turn's three layers and what a diff tolerated, every recorded string made
safe (:mod:`.answers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from ..analysis import Conversation, Finding, McpCall, RunAnalysis, Turn
from ..matching import report_lines
from ..models import Message
from ._answers import byte_budget, json_size, safe_json, shrink, text

__all__ = [
    "conversation_row",
    "finding_part",
    "fit_turn",
    "message_part",
    "tolerated_count",
    "tolerated_lines",
    "turn_body",
]

#: Tolerated differences listed in a ``diff`` or ``fork_diff`` answer (the others counted).
TOLERATED_SHOWN = 20


def tolerated_count(turns: Sequence[dict[str, Any]]) -> int:
    """How many differences were tolerated (:mod:`cassettes.matching` entries,
    every turn)."""
    return sum(len(t.get("tolerated") or []) for t in turns)


def tolerated_lines(turns: Sequence[dict[str, Any]]) -> list[str]:
    """The first :data:`TOLERATED_SHOWN` tolerated differences, one line each as ``looptap diff``
    prints them (``tolerated at c1/turn 0 (seq 0): messages[0].content: recorded …, live … (by
    date)``), clipped: recorded text."""
    return [text(line, 300) for line in report_lines(turns, "")[:TOLERATED_SHOWN]]


def finding_part(f: Finding, chars: int) -> dict[str, Any]:
    d: dict[str, Any] = {
        "code": f.code,
        "layer": f.layer,
        "severity": f.severity.value,
        "seq": f.seq,
        "conversation": f.conversation,
        "turn": f.turn,
    }
    caused_by = f.details.get("caused_by") if isinstance(f.details, dict) else None
    if caused_by:
        d["caused_by"] = text(caused_by, 100)
        if isinstance(f.details.get("caused_by_seq"), int):
            d["caused_by_seq"] = f.details["caused_by_seq"]
    rec: dict[str, Any] = {"message": text(f.message, chars)}
    if f.path:
        rec["path"] = text(f.path, 200)
    if f.tool_call_id:
        rec["tool_call_id"] = text(f.tool_call_id, 100)
    d["recorded"] = rec
    return d


def message_part(m: Message, chars: int) -> dict[str, Any]:
    parts: list[Any] = []
    for p in m.parts:
        if p.tool_call is not None:
            parts.append(
                {
                    "tool_call": {
                        "id": text(p.tool_call.id, 100),
                        "name": text(p.tool_call.name, 100),
                        "arguments": safe_json(p.tool_call.arguments, chars),
                    }
                }
            )
        elif p.tool_result is not None:
            tr = p.tool_result
            parts.append(
                {
                    "tool_result": {
                        "call_id": text(tr.call_id, 100),
                        "name": text(tr.name, 100),
                        "is_error": tr.is_error,
                        "content": text(tr.content, chars),
                    }
                }
            )
        elif p.text is not None:
            parts.append({p.kind: text(p.text, chars)})
        else:
            parts.append({p.kind: p.media_type or "(no text)"})
    return {"role": m.role, "parts": parts}


def conversation_row(
    c: Conversation, a: RunAnalysis, ends: list[tuple[bool, Decimal | None, bool]] | None = None
) -> dict[str, Any]:
    """One conversation of ``run_summary``: its size, cost so far and findings by code. Each turn
    is read once (a streamed run restores it from disk); ``ends``, when given, gets whether the
    conversation's last turn was found and its cumulative cost (the run's overview adds them up)."""
    last = None
    codes: dict[str, int] = {}
    for s in c.turns:  # (the last one read is the conversation's last turn)
        last = t = a.turns.get(s)
        for f in t.findings if t is not None else []:
            codes[f.code] = codes.get(f.code, 0) + 1
    if ends is not None:
        ends.append(
            (
                last is not None,
                last.tokens.cumulative_cost if last is not None else None,
                last is not None and last.tokens.cumulative_estimated,
            )
        )
    return {
        "conversation": c.id,
        "family": c.family,
        "turns": len(c.turns),
        "first_seq": c.turns[0] if c.turns else None,
        "parent_seq": c.parent_seq,
        "branch": text(c.branch, 40),
        "kind": c.kind,
        "cumulative_input_tokens": last.tokens.cumulative_input if last else None,
        "cost_usd": float(last.tokens.cumulative_cost)
        if last and last.tokens.cumulative_cost is not None
        else None,
        "cost_estimated": last.tokens.cumulative_estimated
        if last and last.tokens.cumulative_cost is not None
        else None,
        "finding_codes": codes,
        "recorded_title": text(c.label or c.title, 120),
    }


def turn_body(
    t: Turn,
    msgs: list[Message],
    after: int | None,
    next_turn: Turn | None,
    chars: int,
    served: Mapping[str, list[McpCall]] | None = None,
    shell: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A turn with E/A/C: what the client sent (``msgs``, the request's messages), what the model
    emitted, what the API said, and what the client sent next (``next_turn``, seq ``after``);
    ``served``: the tools' HTTP calls that served each of its calls, by call id; ``shell``: the
    shell command ``looptap run``'s tracer linked to each (cassettes.views ``shell_call_json``), by
    call id (``#SEQ.K`` for a call without one)."""
    return {
        "seq": t.seq,
        "conversation": t.conversation,
        "turn": t.index,
        "previous_seq": t.previous_seq,
        "next_seq": after,
        "family": t.family,
        "findings": [finding_part(f, chars) for f in t.findings],
        "recorded": {
            "C_sent": _sent(t, msgs, chars),
            "E_emitted": _emitted(t, chars, served or {}, shell or {}),
            "A_said": _said(t, chars),
            "C_next": None if next_turn is None else _next(next_turn, chars),
        },
    }


def _sent(t: Turn, msgs: list[Message], chars: int) -> dict[str, Any]:
    c = t.c
    return {
        "messages": len(msgs),
        "kept_from_previous_turn": c.kept,
        "rewritten": c.rewritten,
        "appended": [message_part(m, chars) for m in c.appended[-6:]],
        "appended_left_out": max(0, len(c.appended) - 6),
        "tools_offered": [text(n, 80) for n in c.tools_offered[:40]],
        "pairings": [safe_json(p.model_dump(mode="json"), 100) for p in c.pairings[:20]],
        "read_a_message_whole": "call turn with message=N (0-based index in the request)",
    }


def _tool_http(calls: list[McpCall], chars: int) -> list[dict[str, Any]]:
    """The tools' HTTP calls that served a tool call: what each sent and got (the first 10)."""
    out = []
    for c in calls[:10]:
        h = c.http
        if h is None:
            continue
        out.append({
            "seq": c.seq, "linked_by": c.linked_by, "method": text(h.method, 16),
            "host": text(h.host, 200), "path": text(h.path, 300), "status": h.status,
            "transport_error": text(h.transport_error, 200), "duration": h.duration,
            "sent": text(h.sent, chars), "got": text(h.got, chars),
        })  # fmt: skip
    return out


def _shell(view: dict[str, Any] | None, chars: int) -> dict[str, Any] | None:
    """The traced shell command of a call: its view with the ``line``s left out (the fields say
    it), each string bounded (made safe by the core)."""
    if view is None:
        return None
    keep = {k: v for k, v in view.items() if k not in ("line", "files_line")}
    out: dict[str, Any] = safe_json(keep, chars)
    return out


def _emitted(
    t: Turn,
    chars: int,
    served: Mapping[str, list[McpCall]],
    shell: Mapping[str, dict[str, Any]],
) -> dict[str, Any]:
    e = t.e
    return {
        "text": text(e.text, chars),
        "reasoning": text(e.reasoning, chars // 2),
        "refusal": text(e.refusal, chars),
        "tool_calls": [
            {
                "id": text(k.id, 100),
                "name": text(k.name, 100),
                "arguments": text(k.arguments_raw, chars),
                "parse_error": text(k.parse_error, 200),
                "schema_errors": [text(x, 200) for x in k.schema_errors[:5]],
                "offered": k.offered,
                "tool_http": _tool_http(served.get(k.id or "") or [], chars // 2),
                "shell": _shell(shell.get(k.id or f"#{t.seq}.{i}"), chars),
            }
            for i, k in enumerate(e.tool_calls[:20])
        ],
    }


def _said(t: Turn, chars: int) -> dict[str, Any]:
    api = t.a
    return {
        "status": api.status,
        "finish_reason": api.finish_reason.value if api.finish_reason is not None else None,
        "finish_reason_raw": text(api.finish_reason_raw, 80),
        "complete": api.complete,
        "stream": api.stream,
        "model_requested": text(api.model_requested, 100),
        "model_served": text(api.model_served, 100),
        "error": safe_json(api.error.model_dump(mode="json", exclude={"raw"}), chars)
        if api.error
        else None,
        "tokens": {
            "input": t.tokens.input,
            "cache_read": t.tokens.cache_read,
            "output": t.tokens.output,
            "cost_usd": float(t.tokens.cost) if t.tokens.cost is not None else None,
            "cost_estimated": t.tokens.price_estimated if t.tokens.cost is not None else None,
        },
    }


def _next(next_turn: Turn, chars: int) -> dict[str, Any]:
    return {
        "seq": next_turn.seq,
        "appended": [message_part(m, chars) for m in next_turn.c.appended[:6]],
        "link": safe_json(next_turn.c.link, 100),
    }


def fit_turn(body: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Shrink a turn's answer to the budget: fewer appended messages, then shorter texts."""
    budget = byte_budget(max_bytes)
    rec = body["recorded"]
    sent = rec["C_sent"]
    while json_size(body) > budget and sent["appended"]:
        sent["appended"].pop(0)
        sent["appended_left_out"] += 1
    nxt = rec.get("C_next")
    while json_size(body) > budget and nxt and nxt["appended"]:
        nxt["appended"].pop()
    if json_size(body) > budget:
        body["recorded"] = shrink(rec, 120)
        body["clipped"] = (
            "texts shortened to fit max_bytes; ask with a larger max_bytes or message=N"
        )
    if json_size(body) > budget:
        body["recorded"] = {
            "omitted": f"this turn does not fit in {max_bytes} bytes; "
            "ask with a larger max_bytes or message=N"
        }
    return body
