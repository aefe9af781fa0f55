"""The app's index of the turns read so far: seqs into the source's summaries, no copy of them.

Recording order and each conversation's turns; a seq the
run reports twice (records appended again) keeps one place, and moves to the conversation of its
later record. Plain Python (no Textual): the run being read holds one
(:class:`inspector.screens._reading.RunReading`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..cassettes.analysis import Finding
from ..cassettes.analysis.dispatch import ordered_findings
from ..cassettes.reading import Run
from ..cassettes.views import GrowthBar, TurnSummary

__all__ = ["ALL", "Added", "SeqSet", "TurnIndex"]

#: The conversation switcher's value for every conversation.
ALL = "*"


class SeqSet:
    """A set of seqs in a byte a seq: a run's seqs count up from 0, so a seq below twice the
    count (and 65,536) is a byte of a :class:`bytearray`, another one an entry of a set. A set
    or a dict of every seq held a larger entry a turn (and a dict an int object): about 4 MB each
    at a 1 GB run's 58,900 turns, against 59 KB."""

    def __init__(self, seqs: Iterable[int] = ()) -> None:
        self._bytes = bytearray()
        self._other: set[int] = set()
        self._count = 0
        for s in seqs:
            self.add(s)

    def __contains__(self, seq: int) -> bool:
        if 0 <= seq < len(self._bytes):
            return self._bytes[seq] == 1
        return seq in self._other

    def add(self, seq: int) -> None:
        if seq in self:
            return
        self._count += 1
        if 0 <= seq < max(2 * self._count, 1 << 16):
            if seq >= len(self._bytes):
                self._bytes.extend(bytes(seq + 1 - len(self._bytes)))
            self._bytes[seq] = 1
        else:
            self._other.add(seq)


@dataclass
class Added:
    """What one batch added to the index."""

    #: Seqs seen for the first time, in recording order.
    fresh: list[int] = field(default_factory=list)
    #: Seqs seen before (the source now holds their later record).
    repeated: list[int] = field(default_factory=list)
    #: Findings of the fresh turns.
    findings: int = 0


class TurnIndex:
    """Seq indexes into ``source.summaries`` (the one copy of the turns)."""

    def __init__(self, source: Run) -> None:
        self.source = source
        #: Every seq, in recording order.
        self.order: list[int] = []
        #: Each conversation's seqs, in order.
        self.conv: dict[str, list[int]] = {}
        #: The seqs in :attr:`order` (a dict of their places, which nothing read, was about 4 MB
        #: at a 1 GB run's 58,900 turns).
        self.seen = SeqSet()

    @property
    def turns(self) -> list[TurnSummary]:
        summaries = self.source.summaries
        return [summaries[s] for s in self.order]

    def add(self, turns: Iterable[TurnSummary]) -> Added:
        added = Added()
        for t in turns:
            if t.seq in self.seen:
                self._moved(t.seq)
                added.repeated.append(t.seq)
                continue
            self.seen.add(t.seq)
            self.order.append(t.seq)
            self.conv.setdefault(t.conversation, []).append(t.seq)
            added.findings += len(t.findings)
            added.fresh.append(t.seq)
        return added

    def _moved(self, seq: int) -> None:
        """The later record of ``seq`` may belong to another conversation: move the seq there."""
        turn = self.source.summaries[seq]
        for conv, seqs in self.conv.items():
            if seq in seqs and conv != turn.conversation:
                seqs.remove(seq)
                self.conv.setdefault(turn.conversation, []).append(seq)
                break
        self.conv = {c: s for c, s in self.conv.items() if s}

    def seqs(self, conversation: str) -> list[int]:
        """The seqs of ``conversation`` (:data:`ALL`: every one)."""
        return self.order if conversation == ALL else self.conv.get(conversation, [])

    def next_seq(self, turn: TurnSummary) -> int | None:
        """The conversation's next turn (the one that sent this turn's tool results back)."""
        summaries = self.source.summaries
        return next(
            (
                s
                for s in self.conv.get(turn.conversation, [])
                if summaries[s].previous_seq == turn.seq
            ),
            None,
        )

    def findings(self) -> list[Finding]:
        """Every finding of the run, root causes first (the core's order, as the HTML page and
        ``show`` list them)."""
        summaries = self.source.summaries
        return ordered_findings(f for s in self.order for f in summaries[s].findings)

    def finding_count(self) -> int:
        summaries = self.source.summaries
        return sum(len(summaries[s].findings) for s in self.order)

    def growth_conversation(self, selected: TurnSummary | None, viewed: str) -> str:
        """The conversation the growth chart shows: the selected turn's, else the one viewed, else
        the first."""
        if selected is not None:
            return selected.conversation
        return viewed if viewed != ALL else next(iter(self.conv), "")

    def bars(self, conversation: str) -> list[GrowthBar]:
        summaries = self.source.summaries
        return [summaries[s].bar for s in self.conv.get(conversation, [])]
