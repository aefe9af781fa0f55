"""The conversation switcher: a run can hold several conversations (sub-agents, parallel tasks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import Select

from ...cassettes.analysis import Conversation, kind_text
from ...cassettes.hints import count
from ..safe import wire_line
from ..turns import ALL

__all__ = ["ConversationSwitcher"]


class ConversationSwitcher(Select[str]):
    """Choose which conversation the turn list shows (or all of them)."""

    @dataclass
    class ConversationChosen(Message):
        """The user picked a conversation (``ALL`` for every one)."""

        switcher: ConversationSwitcher
        conversation: str

        @property
        def control(self) -> ConversationSwitcher:
            return self.switcher

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            [("all conversations", ALL)], allow_blank=False, value=ALL, id=id, compact=True
        )
        self._known: list[tuple[str, str, int]] = []

    def show_conversations(self, conversations: Sequence[Conversation], total_turns: int) -> None:
        """The conversations found so far, each with its turn count (attributes down)."""
        known = [(c.id, conversation_label(c), len(c.turns)) for c in conversations]
        if known == self._known:
            return
        self._known = known
        current = self.value
        options: list[tuple[Text, str]] = [
            (Text(f"all conversations · {count(total_turns, 'turn')}"), ALL)
        ]
        options += [
            (wire_line(f"{cid} · {label} · {count(n, 'turn')}"), cid) for cid, label, n in known
        ]
        with self.prevent(Select.Changed):
            self.set_options(options)
            ids = {ALL, *(cid for cid, _, _ in known)}
            self.value = current if isinstance(current, str) and current in ids else ALL

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if isinstance(event.value, str):
            self.post_message(self.ConversationChosen(self, event.value))


def conversation_label(c: Conversation) -> str:
    """What a conversation is: its label or family, and where it branched from."""
    label = c.label or (f"“{c.title}”" if c.title else c.family)
    if c.parent_seq is not None:
        label += f" · {kind_text(c.kind, c.parent_seq)}"
    return label
