"""``Run``: a recorded or replayed run as tests see it, with assertion helpers.

    run = Run.from_cassette("run.jsonl")        # or the pytest fixture's looptap.run
    run.assert_no_findings(layer="C")           # no client-dispatch warnings or errors
    assert len(run.turns) <= 6
    assert run.total_tokens < 50_000
    assert run.cost is None or run.cost < Decimal("0.05")
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

from cassettes.analysis import Finding, RunAnalysis, Severity, Turn, analyse
from cassettes.exchange import Exchange
from cassettes.store import read_cassette

__all__ = ["Run", "RunConversation"]

_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


class RunConversation(list[Turn]):
    """One conversation's turns, in order (a list), with what the threading knows of it."""

    def __init__(self, turns: Sequence[Turn], id: str, parent_seq: int | None = None, branch: str | None = None, title: str | None = None) -> None:
        super().__init__(turns)
        #: ``c1``, ``c2`` … as in ``looptap show`` and the inspector.
        self.id = id
        #: For a sub-agent or a side call: the turn (seq) it branched from, and which it is.
        self.parent_seq = parent_seq
        self.branch = branch
        #: The first words of its first user message.
        self.title = title

    def __repr__(self) -> str:
        return f"RunConversation({self.id!r}, {len(self)} turns)"


class Run:
    """The layer analysis of a run, and what a regression test asserts on it."""

    def __init__(self, exchanges: Sequence[Exchange], analysis: RunAnalysis | None = None) -> None:
        self.exchanges = list(exchanges)
        self.analysis = analysis if analysis is not None else analyse(self.exchanges)

    @classmethod
    def from_cassette(cls, path: str | Path) -> Run:
        return cls(read_cassette(path).exchanges)

    # -- what happened -------------------------------------------------------------------------
    @property
    def turns(self) -> list[Turn]:
        """Every generation turn, in recording order."""
        return [self.analysis.turns[s] for s in sorted(self.analysis.turns)]

    @property
    def conversations(self) -> list[RunConversation]:
        """Each conversation's turns (a list each), with its ``id``, ``parent_seq``, ``branch``
        and ``title``."""
        return [
            RunConversation(
                [self.analysis.turns[s] for s in c.turns],
                c.id,
                c.parent_seq,
                c.branch,
                c.title,
            )
            for c in self.analysis.conversations
        ]

    def conversation(self, id: str) -> RunConversation:
        """The conversation ``id`` (``c1`` …); ``KeyError`` naming the ones there are."""
        for c in self.conversations:
            if c.id == id:
                return c
        raise KeyError(f"no conversation {id!r} in this run (there are: {', '.join(c.id for c in self.conversations) or 'none'})")

    @property
    def round_trips(self) -> int:
        return len(self.exchanges)

    @property
    def input_tokens(self) -> int:
        return sum(t.tokens.input or 0 for t in self.turns)

    @property
    def output_tokens(self) -> int:
        return sum(t.tokens.output or 0 for t in self.turns)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens over all turns (as reported, or estimated where not)."""
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> Decimal | None:
        """Total cost in USD; ``None`` when no turn's price is known (never 0 for unknown).
        A partial sum when some turns are unpriced: see :attr:`cost_complete`."""
        known = [t.tokens.cost for t in self.turns if t.tokens.cost is not None]
        return sum(known, Decimal(0)) if known else None

    @property
    def cost_complete(self) -> bool:
        return all(t.tokens.cost is not None for t in self.turns)

    def findings(self, layer: str | None = None, min_severity: str | Severity = Severity.WARNING) -> list[Finding]:
        """Findings (of one layer, ``E``/``A``/``C``), at or above ``min_severity``."""
        floor = _RANK[Severity(min_severity)]
        if layer is not None and layer not in ("E", "A", "C"):
            raise ValueError(f"layer must be 'E', 'A' or 'C', not {layer!r}")
        return [f for f in self.analysis.findings if (layer is None or f.layer == layer) and _RANK[f.severity] >= floor]

    def findings_by_layer(self, min_severity: str | Severity = Severity.WARNING) -> dict[str, list[Finding]]:
        return {layer: self.findings(layer, min_severity) for layer in ("E", "A", "C")}

    # -- assertions ----------------------------------------------------------------------------
    def assert_no_findings(self, layer: str | None = None, min_severity: str | Severity = Severity.WARNING) -> None:
        """Fail (``AssertionError``) listing every finding of ``layer`` at or above ``min_severity``."""
        found = self.findings(layer, min_severity)
        if found:
            what = f"layer {layer}" if layer else "any layer"
            lines = [f"{len(found)} finding(s) in {what}:"]
            for f in found:
                where = f"conversation {f.conversation}, turn {f.turn}" if f.conversation is not None else f"seq {f.seq}"
                lines.append(f"  {f.layer} {f.severity.value} {f.code} ({where}{', ' + f.path if f.path else ''}): {f.message}")
            raise AssertionError("\n".join(lines))

    def assert_turns_at_most(self, n: int) -> None:
        if len(self.turns) > n:
            raise AssertionError(f"the run took {len(self.turns)} turns, more than {n}")

    def assert_tokens_at_most(self, n: int) -> None:
        if self.total_tokens > n:
            raise AssertionError(f"the run used {self.total_tokens} tokens, more than {n}")

    def assert_cost_at_most(self, usd: Decimal | float | str) -> None:
        limit = Decimal(str(usd))
        if self.cost is None:
            raise AssertionError("the run's cost is unknown (no price for its model): cannot check it against a limit")
        if self.cost > limit:
            raise AssertionError(f"the run cost ${self.cost:.6f}, more than ${limit}")

    def __repr__(self) -> str:
        return f"Run({len(self.exchanges)} round trips, {len(self.turns)} turns, {self.total_tokens} tokens)"
