"""What a diff of two runs finds (``looptap diff``): a divergence (its layer, where it is, what
changed, each run's ids as sent), where two compared turns are, the bounded list of divergences with
what was tolerated beside them, and the text report of them (``--json``: each one's ``as_json``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...matching import MAX_TURNS, Change, Tolerated, entries_of, report_lines

__all__ = ["MAX_DIVERGENCES", "Divergence", "Divergences", "Pair", "divergence_lines"]


@dataclass
class Divergence:
    layer: str
    message: str
    #: Conversation ids in run A and run B (``None`` where the run has no such conversation).
    conversation_a: str | None
    conversation_b: str | None
    #: Turn index in the conversation (``None`` for a whole missing conversation).
    turn: int | None = None
    seq_a: int | None = None
    seq_b: int | None = None
    path: str | None = None
    changes: list[Change] = field(default_factory=list)
    #: ``<id:N>`` placeholders of the compared requests → the ids each run really sent.
    ids_a: dict[str, str] = field(default_factory=dict)
    ids_b: dict[str, str] = field(default_factory=dict)
    #: What the analysis of run B's turn says that run A's does not (code: message), warnings and
    #: worse: the divergence's likely meaning in looptap's own words (e.g. an orphan tool result).
    findings_b: list[str] = field(default_factory=list)
    #: The items a fork's what-if edit rewrote in B's request (``tool_result[ID] at messages[3]``).
    edited_b: list[str] = field(default_factory=list)
    #: Later differences of the conversation that follow from this one (a fork's change, or what
    #: the model emitted differently), folded under it rather than listed as the client's own.
    folded: list[Divergence] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "message": self.message,
            "conversation_a": self.conversation_a,
            "conversation_b": self.conversation_b,
            "turn": self.turn,
            "seq_a": self.seq_a,
            "seq_b": self.seq_b,
            "path": self.path,
            "changes": [
                {"path": c.where, "kind": c.kind, "a": c.expected, "b": c.actual}
                for c in self._real_changes(self.changes)
            ],
            "findings_b": self.findings_b,
            "edited_b": self.edited_b,
            **({"folded": [d.as_json() for d in self.folded]} if self.folded else {}),
        }

    @property
    def where(self) -> str:
        """Where it is, as the text report says it."""
        if self.turn is None:
            return "whole conversation"
        seq_a, seq_b = ("-" if s is None else s for s in (self.seq_a, self.seq_b))
        return f"turn {self.turn} (seq {seq_a} ↔ {seq_b})"

    def _real_changes(self, changes: list[Change]) -> list[Change]:
        """``changes`` with the ids each run really sent (not the placeholders they were compared
        as)."""
        return [
            replace(c, expected=_real(c.expected, self.ids_a), actual=_real(c.actual, self.ids_b))
            for c in changes
        ]

    def change_lines(self, limit: int) -> list[str]:
        """Each change as a line, with the ids each run really sent."""
        out = []
        for c in self._real_changes(self.changes[:limit]):
            a, b = c.shown()
            if c.kind == "added":
                out.append(f"{c.where}: only in B: {b}")
            elif c.kind == "removed":
                out.append(f"{c.where}: only in A: {a}")
            else:
                out.append(f"{c.where}: A {a}, B {b}")
        return out


def _real(value: Any, ids: dict[str, str], depth: int = 0) -> Any:
    """``value`` with ``<id:N>`` placeholders put back to the ids they stood for (bounded walk)."""
    if isinstance(value, str):
        return ids.get(value, value)
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {k: _real(v, ids, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_real(v, ids, depth + 1) for v in value]
    return value


@dataclass(frozen=True)
class Pair:
    """Where two compared turns are: the conversations' ids in A and B, the turn index, each
    run's seq."""

    ida: str
    idb: str
    k: int
    sa: int
    sb: int

    def divergence(self, layer: str, message: str, *more: Any) -> Divergence:
        return Divergence(layer, message, self.ida, self.idb, self.k, self.sa, self.sb, *more)


#: Divergences a diff keeps (the first ones, in order); past it they are counted, not kept: two
#: runs of a million round trips that differ everywhere cost a bounded report, not the run again.
MAX_DIVERGENCES = 5_000


class Divergences(list[Divergence]):
    """The divergences kept, and how many more there were (:data:`MAX_DIVERGENCES`); what was
    tolerated (:mod:`cassettes.matching`: per turn, for a branch beside its origin
    the prefix's as the fork noted it, then the requests that differed only in what the matching
    tolerates; the first :data:`~cassettes.matching.MAX_TURNS` turns, the others
    counted in ``tolerated_left_out``)."""

    left_out: int = 0
    tolerated_left_out: int = 0
    tolerated: list[dict[str, Any]]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.tolerated = []

    def add(self, found: Iterable[Divergence]) -> None:
        for d in found:
            if len(self) < MAX_DIVERGENCES:
                self.append(d)
            else:
                self.left_out += 1

    def tolerate(self, at: Pair, found: list[Tolerated]) -> None:
        """One turn's tolerated differences kept (the first :data:`MAX_TURNS` turns)."""
        if not found:
            return
        if len(self.tolerated) >= MAX_TURNS:
            self.tolerated_left_out += 1
            return
        self.tolerated.append(
            {
                "conversation": at.ida,
                "turn": at.k,
                "seq": at.sa,
                "seq_b": at.sb,
                "tolerated": entries_of(found),
            }
        )


#: Folded differences listed under their change in the text report (``--json``: all).
FOLDED_SHOWN = 10


def divergence_lines(divs: Sequence[Divergence], title: str, max_changes: int = 4) -> list[str]:
    """The text report: what was tolerated (the requests' differences a replay tolerates; for a
    branch beside its origin, first what its prefix tolerated), then the divergences grouped by
    conversation, then turn."""
    tolerated = _tolerated_lines(divs)
    if not divs:
        return [*tolerated, f"{title}: the runs do not diverge"]
    head = tolerated
    left_out = getattr(divs, "left_out", 0)
    total = len(divs) + left_out
    lines = [
        *head,
        f"{title}: {total:{',' if left_out else ''}} divergence{'s' if total > 1 else ''}",
    ]
    by_conv: dict[tuple[str | None, str | None], list[Divergence]] = {}
    for d in divs:
        by_conv.setdefault((d.conversation_a, d.conversation_b), []).append(d)
    for (ca, cb), group in by_conv.items():
        lines.append(f"conversation {ca or '-'} (A) ↔ {cb or '-'} (B):")
        for d in group:
            lines += _divergence_lines(d, max_changes)
    if left_out:
        lines.append(
            f"… and {left_out:,} more divergences, not listed (the first {len(divs):,} are)"
        )
    return lines


def _tolerated_lines(divs: Sequence[Divergence]) -> list[str]:
    """What was tolerated, as :func:`divergence_lines` opens with it."""
    tolerated = report_lines(getattr(divs, "tolerated", []), "")
    if tolerated:
        tolerated.insert(
            0,
            "tolerated (not divergences: what a replay or the fork's "
            "prefix tolerates, each with what tolerated it):",
        )
        tolerated = [tolerated[0], *(f"  {line}" for line in tolerated[1:])]
    more = getattr(divs, "tolerated_left_out", 0)
    if more:
        tolerated.append(f"  … and {more:,} more turns with tolerated differences, not listed")
    return tolerated


def _divergence_lines(d: Divergence, max_changes: int) -> list[str]:
    """One divergence of :func:`divergence_lines`: where, what, its changes and what follows from
    it."""
    lines = [f"  {d.where}: {d.layer}: {d.message}"]
    for f in d.findings_b:
        lines.append(f"      looptap on B's turn: {f}")
    if d.edited_b and d.layer == "C":
        lines.append(f"      EDITED by the fork in B's request: {', '.join(d.edited_b)}")
    for line in d.change_lines(max_changes):
        lines.append(f"      {line}")
    if len(d.changes) > max_changes:
        lines.append(f"      … and {len(d.changes) - max_changes} more")
    if d.folded:
        n = len(d.folded)
        lines.append(
            f"      then {n} difference{'s' if n > 1 else ''} of B's requests that "
            f"follow{'s' if n == 1 else ''} from it (not the client's own):"
        )
        for g in d.folded[:FOLDED_SHOWN]:
            lines.append(f"        {g.where}: {g.layer}: {g.message}")
        if n > FOLDED_SHOWN:
            lines.append(f"        … and {n - FOLDED_SHOWN} more (--json lists them)")
    return lines
