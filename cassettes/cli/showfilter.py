"""``looptap show --conversation/--turn/--layer/--severity``: which round trips and findings
print."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import CassetteError
from ..untrusted import clean_line

__all__ = ["ShowFilter", "show_filter"]

_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


class ShowFilter:
    """``show --conversation/--turn/--layer/--severity``: which round trips and findings print.
    A round trip is kept when it is in the conversation and turn asked for and, with a layer or
    severity, has a finding of that layer at least that severe."""

    def __init__(
        self, conversation: str | None, turn: int | None, layer: str | None, severity: str | None
    ) -> None:
        self.conversation, self.turn, self.layer = conversation, turn, layer
        self.least = _SEVERITY_RANK[severity] if severity else None
        self.said = ", ".join(
            f"{k} {v}"
            for k, v in (
                ("conversation", conversation),
                ("turn", turn),
                ("layer", layer),
                ("severity", severity and f">= {severity}"),
            )
            if v is not None
        )

    def _finding(self, f: dict[str, Any]) -> bool:
        return (self.layer is None or f.get("layer") == self.layer) and (
            self.least is None or _SEVERITY_RANK.get(str(f.get("severity")), 0) >= self.least
        )

    def _place(self, conversation: Any, turn: Any) -> bool:
        return (self.conversation is None or conversation == self.conversation) and (
            self.turn is None or turn == self.turn
        )

    def roundtrip(self, v: dict[str, Any]) -> bool:
        if not self._place(v.get("conversation"), v.get("turn")):
            return False
        if self.layer is None and self.least is None:
            return True
        return any(self._finding(f) for f in v.get("findings") or [])

    def analysis(self, analysis: Any) -> Any:
        """The analysis with only the findings and conversations asked for (a shallow copy)."""
        findings = [
            f
            for f in analysis.findings
            if self._place(f.conversation, f.turn)
            and self._finding({"layer": f.layer, "severity": f.severity.value})
        ]
        with_findings = {f.conversation for f in findings}
        convs = _Kept(
            analysis.conversations,
            lambda c: (
                (self.conversation is None or c.id == self.conversation)
                and ((self.layer is None and self.least is None) or c.id in with_findings)
            ),
        )
        return analysis.model_copy(update={"findings": findings, "conversations": convs})


class _Kept(Sequence[Any]):
    """The conversations a filter keeps, read from the run's on each pass (never held: ``--turn 0``
    of a million conversations keeps them all)."""

    def __init__(self, items: Sequence[Any], keep: Callable[[Any], bool]) -> None:
        self._items, self._keep = items, keep
        self._len: int | None = None

    def __iter__(self) -> Iterator[Any]:
        return (c for c in self._items if self._keep(c))

    def __len__(self) -> int:
        if self._len is None:
            self._len = sum(1 for _ in self)
        return self._len

    def __getitem__(self, i: Any) -> Any:
        return list(self)[i]


def show_filter(args: argparse.Namespace, analysis: Any) -> ShowFilter | None:
    """The filter ``show`` was asked for, ``None`` for none; a :class:`CassetteError` when it
    names a conversation the run does not have."""
    conversation, turn = getattr(args, "conversation", None), getattr(args, "turn", None)
    layer, severity = getattr(args, "layer", None), getattr(args, "severity", None)
    if conversation is None and turn is None and layer is None and severity is None:
        return None
    if conversation is not None and not any(c.id == conversation for c in analysis.conversations):
        # (not every id: a run may have millions)
        ids = [c.id for c, _ in zip(analysis.conversations, range(21), strict=False)]
        n = len(analysis.conversations)
        listed = ", ".join(ids[:20]) + (f", … ({n} in all)" if n > 20 else "")
        raise CassetteError(
            f"--conversation {clean_line(conversation)[:80]}: no such conversation in this run (it "
            f"has {listed or 'none'})"
        )
    return ShowFilter(conversation, turn, layer, severity)
