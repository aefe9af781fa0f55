"""One conversation of a run as :attr:`Run.conversations <cassettes.reading._run.Run>` hands it
out: its turns in order (a list), with what the threading knows of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..hints import count

if TYPE_CHECKING:
    from ..analysis import Turn

__all__ = ["RunConversation"]


class RunConversation(list["Turn"]):
    """One conversation's turns, in order (a list), with what the threading knows of it."""

    def __init__(
        self,
        turns: Sequence[Turn],
        id: str,
        parent_seq: int | None = None,
        branch: str | None = None,
        title: str | None = None,
    ) -> None:
        super().__init__(turns)
        #: ``c1``, ``c2`` … as in ``looptap show`` and the inspector.
        self.id = id
        #: For a sub-agent or a side call: the turn (seq) it branched from, and which it is.
        self.parent_seq = parent_seq
        self.branch = branch
        #: The first words of its first user message.
        self.title = title

    def __repr__(self) -> str:
        return f"RunConversation({self.id!r}, {count(len(self), 'turn')})"
