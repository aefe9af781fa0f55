"""What the recording holds of a call, wherever it holds it (docs/why.md "Interventions"): the
result the client sent for a call id in any request of the run (an earlier turn's, another
conversation's: a group chat whose next speaker's history drops it), and the call itself as the
model made it. Found by the call's id alone, never by words: a repair puts back what the wire
carried under that id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Sent", "results_sent"]


@dataclass
class Sent:
    """The results a call id was sent with in the run: each distinct text and the turns that sent
    it first (conversation, turn index)."""

    texts: dict[str, tuple[str, int]] = field(default_factory=dict)

    def said(self, text: str) -> str:
        """Where ``text`` was sent first: ``c1 turn 1's request``."""
        conversation, turn = self.texts[text]
        return f"{conversation} turn {turn}'s request"


def results_sent(run: Any, wanted: set[str]) -> dict[str, Sent]:
    """Per call id of ``wanted``, the results the run's requests sent for it (a result part that
    carries the id; its text as the reader flattens it). One pass over the run."""
    out: dict[str, Sent] = {}
    if not wanted:
        return out
    a = run.analysis
    for rt in run.roundtrips:
        t = a.turns.get(rt.seq) if rt.seq is not None else None
        if rt.request is None or t is None:
            continue
        for m in rt.request.messages:
            for p in m.parts:
                r = p.tool_result
                if r is None or r.call_id not in wanted:
                    continue
                got = out.setdefault(str(r.call_id), Sent())
                got.texts.setdefault(r.content, (t.conversation, t.index))
    return out


def call_made(a: Any, cid: str, prev: Any = None) -> Any:
    """The call ``cid`` as the model made it: in the answer of ``prev`` (the turn it relates to),
    else in any turn's answer; ``None`` when no answer in the run made it."""
    turns = [prev] if prev is not None else []
    turns += sorted(a.turns.values(), key=lambda t: t.seq)
    return next((c for t in turns for c in t.e.tool_calls if str(c.id) == cid), None)
