"""What the analysis keeps of a run's conversations (:class:`Conversations`): a
:class:`~._model.Conversation` each, the least recently used kept on disk (:mod:`.spill`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from ._model import Conversation
from .spill import KEEP, Spill, SpillMap

__all__ = ["Conversations"]


def _copy(c: Conversation) -> Conversation:
    """``c`` with a list of turns of its own, every field set (as the analyser makes one)."""
    return Conversation.model_construct(**{**dict(c), "turns": list(c.turns)})


class Conversations(Sequence[Conversation]):
    """A run's conversations in order of their first turn, each given as a copy of the
    analyser's (changing it changes nothing). Past ``keep`` of them the least recently used are
    kept on disk (:mod:`.spill`)."""

    def __init__(
        self,
        conversations: Iterable[Conversation] = (),
        *,
        spill: Spill | None = None,
        keep: int = KEEP,
    ) -> None:
        self._records: SpillMap[int, Conversation] = SpillMap(spill, keep)
        self._n = 0
        for c in conversations:
            self.append(_copy(c))
        self.trim()

    def append(self, record: Conversation) -> int:
        """Add a conversation (the analyser's own); its position."""
        self._records[self._n] = record
        self._n += 1
        return self._n - 1

    def pop(self) -> None:
        """Take the last conversation away (a side call whose one turn joined another)."""
        self._n -= 1
        del self._records[self._n]

    def record(self, i: int) -> Conversation:
        """The conversation at ``i`` itself, to change (until the next :meth:`trim`)."""
        return self._records[i]

    def trim(self) -> None:
        self._records.trim()

    def __len__(self) -> int:
        return self._n

    def _model(self, i: int) -> Conversation:
        return _copy(self._records.peek(i))

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
