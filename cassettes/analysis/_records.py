"""What the analysis keeps of a run's conversations: a compact record each
(:class:`ConversationRecord`), given as :class:`~._model.Conversation` models on access
(:class:`Conversations`), the least recently used kept on disk (:mod:`.spill`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from cassettes.analysis._model import Conversation
from cassettes.analysis.spill import KEEP, Spill, SpillMap

__all__ = ["ConversationRecord", "Conversations"]


class ConversationRecord:
    """A conversation's record as the analyser keeps it: a :class:`Conversation` without
    pydantic's per-instance cost (a pydantic model is about 1.2 KB; this, a fifth of that), which
    matters for a run of a million conversations."""

    __slots__ = ("branch", "family", "id", "label", "parent_seq", "title", "turns")

    def __init__(
        self,
        id: str,
        family: str,
        label: str | None,
        title: str | None,
        parent_seq: int | None,
        branch: str | None,
    ) -> None:
        self.id, self.family, self.label, self.title, self.parent_seq, self.branch = (
            id,
            family,
            label,
            title,
            parent_seq,
            branch,
        )
        self.turns: list[int] = []

    def model(self) -> Conversation:
        return Conversation.model_construct(
            id=self.id,
            family=self.family,
            turns=list(self.turns),
            label=self.label,
            title=self.title,
            parent_seq=self.parent_seq,
            branch=self.branch,
        )


class Conversations(Sequence[Conversation]):
    """A run's conversations in order of their first turn, each given as a :class:`Conversation`
    made on access from the analyser's compact record (so a copy: changing it changes nothing).
    Past ``keep`` records the least recently used are kept on disk (:mod:`.spill`)."""

    def __init__(
        self,
        conversations: Iterable[Conversation] = (),
        *,
        spill: Spill | None = None,
        keep: int = KEEP,
    ) -> None:
        self._records: SpillMap[int, ConversationRecord] = SpillMap(spill, keep)
        self._n = 0
        for c in conversations:
            r = ConversationRecord(c.id, c.family, c.label, c.title, c.parent_seq, c.branch)
            r.turns = list(c.turns)
            self.append(r)
        self.trim()

    def append(self, record: ConversationRecord) -> int:
        """Add a record; its position."""
        self._records[self._n] = record
        self._n += 1
        return self._n - 1

    def record(self, i: int) -> ConversationRecord:
        """The record at ``i``, to change (until the next :meth:`trim`)."""
        return self._records[i]

    def trim(self) -> None:
        self._records.trim()

    def __len__(self) -> int:
        return self._n

    def _model(self, i: int) -> Conversation:
        return self._records.peek(i).model()

    @overload
    def __getitem__(self, i: int) -> Conversation: ...
    @overload
    def __getitem__(self, i: slice) -> list[Conversation]: ...
    def __getitem__(self, i: int | slice) -> Conversation | list[Conversation]:
        if isinstance(i, slice):
            return [self._model(j) for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._model(i)

    def __iter__(self) -> Iterator[Conversation]:
        return (self._model(i) for i in range(self._n))

    def ids(self) -> Iterator[str]:
        """The conversations' ids, in order."""
        return (self._records.peek(i).id for i in range(self._n))

    def __reduce__(self) -> tuple[Any, ...]:  # (a copy holds its records in memory)
        return (Conversations, (list(self),))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Conversations({len(self)})"
