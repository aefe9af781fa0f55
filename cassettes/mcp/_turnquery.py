"""The MCP answer about one turn: its layers (E/A/C) and its request, or one message of the
request whole (paged by ``chars``). A turn is named by its seq, or by its conversation and its
number there as ``run_summary`` gives them."""

from __future__ import annotations

from typing import Any

from ..analysis import McpCall, Turn
from ..hints import count
from ..models import Message
from ..reading import Run
from ..views import shell_by_call, shell_call_json
from ._answers import MAX_BYTES, QueryError, byte_budget, json_size, wrap
from ._parts import fit_turn, message_part, turn_body
from ._runs import Runs

__all__ = ["turn"]


def _turn(r: Run, seq: int | None, conversation: str | None, turn: int | None) -> Turn:
    a = r.analysis
    if seq is None:
        conv = next((c for c in a.conversations if c.id == conversation), None)
        head = a.turns.get(conv.turns[0]) if conv is not None and conv.turns else None
        # a fork's branch keeps its origin's numbers
        first = head.index if head is not None else 0
        if conv is None or turn is None or not first <= turn < first + len(conv.turns):
            raise QueryError(
                "name a turn by seq, or by conversation and turn (as run_summary numbers them: "
                "from 0, a branch from its origin's turn at the cursor)"
            )
        seq = conv.turns[turn - first]
    t = a.turns.get(seq)
    if t is None:
        if r.by_seq(seq) is None:
            seqs = [ex.seq for ex in r.exchanges if ex.seq is not None]
            span = f"#{min(seqs)} to #{max(seqs)}" if seqs else "none"
            raise QueryError(
                f"seq {seq} is out of range: this run has "
                f"{count(len(seqs), 'round trip')} ({span}); "
                "run_summary lists its turns"
            )
        raise QueryError(
            f"round trip #{seq} is not an LLM turn (the run recorded "
            "it, but it is not an LLM API's traffic)"
        )
    return t


def turn(
    runs: Runs,
    run: str,
    seq: int | None,
    conversation: str | None,
    turn: int | None,
    message: int | None,
    chars: int,
    max_bytes: int,
) -> dict[str, Any]:
    """One turn with E/A/C; ``message`` reads one message of its request whole (paged by
    ``chars``)."""
    _, r = runs.open(run)
    t = _turn(r, seq, conversation, turn)
    found = r.by_seq(t.seq)
    msgs = found[1].request.messages if found and found[1].request is not None else []
    if message is not None:
        return _message_whole(t, msgs, message, chars, max_bytes)
    chars = max(40, min(chars, MAX_BYTES // 2))
    after = _next_seq(r, t)
    next_turn = r.analysis.turns.get(after) if after is not None else None
    served: dict[str, list[McpCall]] = {}
    for c in r.analysis.mcp_calls.values():
        if c.via == "http" and c.call_id and c.model_seq == t.seq:
            served.setdefault(c.call_id, []).append(c)
    shell = {
        key: shell_call_json(sc) for (s, key), sc in shell_by_call(r.shell).items() if s == t.seq
    }
    body = turn_body(t, msgs, after, next_turn, chars, served, shell)
    return wrap(fit_turn(body, max_bytes))


def _message_whole(
    t: Turn, msgs: list[Message], message: int, chars: int, max_bytes: int
) -> dict[str, Any]:
    """Message ``message`` of turn ``t``'s request, whole up to ``chars`` characters a text; its
    texts shortened until it fits ``max_bytes``."""
    if not 0 <= message < len(msgs):
        raise QueryError(f"the request of #{t.seq} has {count(len(msgs), 'message')} (0-based)")
    budget = byte_budget(max_bytes)
    whole = max(1, min(chars, budget)) if chars else budget
    answer = wrap(
        {"seq": t.seq, "message": message, "recorded": message_part(msgs[message], whole)}
    )
    # texts shortened until the message fits
    while (size := json_size(answer)) > budget and whole > 40:
        whole = max(40, whole * budget // size * 9 // 10)
        answer["recorded"] = message_part(msgs[message], whole)
    return answer


def _next_seq(r: Run, t: Turn) -> int | None:
    """The seq of the turn after ``t`` in its conversation (``None``: the last)."""
    conv = next((c for c in r.analysis.conversations if c.id == t.conversation), None)
    if conv is None or t.seq not in conv.turns:
        return None
    i = conv.turns.index(t.seq)
    return conv.turns[i + 1] if i + 1 < len(conv.turns) else None
