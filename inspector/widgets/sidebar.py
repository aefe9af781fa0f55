"""The sidebar: the conversation switcher above the turn list.

:class:`Sidebar` owns which conversation is listed and keeps its two widgets in step: the switcher
shows the run's conversations (with their turn counts), the turn list the turns of the one chosen.
The screen hands it the run's index (attributes down) and says when turns were read; a choice in the
switcher comes up as ``ConversationSwitcher.ConversationChosen``, a turn chosen in the list as
``TurnList.TurnSelected`` (messages up).
"""

from __future__ import annotations

from functools import cached_property

from textual.app import ComposeResult
from textual.containers import Vertical

from inspector.layout import sidebar_width, width_sample
from inspector.turns import TurnIndex
from inspector.widgets.conversations import ALL, ConversationSwitcher
from inspector.widgets.turn_list import TurnList, turn_width

__all__ = ["Sidebar"]


class Sidebar(Vertical):
    """The conversation switcher and the turn list (``esc`` brings focus back to the list)."""

    def __init__(self, index: TurnIndex, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = index
        #: The conversation listed (``ALL``: every one).
        self.conversation = ALL
        # How many conversations the switcher was last built for.
        self._switcher_convs = -1

    def compose(self) -> ComposeResult:
        yield ConversationSwitcher(id="conversations")
        yield TurnList(id="turn-list")

    @cached_property
    def turn_list(self) -> TurnList:
        return self.query_one(TurnList)

    @cached_property
    def switcher(self) -> ConversationSwitcher:
        return self.query_one(ConversationSwitcher)

    def show_conversation(self, conversation: str, select: int | None = None) -> int:
        """List ``conversation``'s turns (``select``: the turn to move to); how many."""
        self.conversation = conversation
        if self.switcher.value != conversation:
            with self.switcher.prevent(ConversationSwitcher.Changed):
                self.switcher.value = conversation
        seqs = self.index.seqs(conversation)
        self.turn_list.show_conversation = conversation == ALL and len(self.index.conv) > 1
        self.turn_list.set_turns(seqs, self.index.source.summaries, select=select)
        return len(seqs)

    def next_conversation(self) -> str:
        """The conversation after the one listed (after the last: all of them)."""
        order = [ALL, *self.index.conv]
        i = order.index(self.conversation) if self.conversation in order else 0
        return order[(i + 1) % len(order)]

    def add_fresh(self, fresh: list[int], *, first: bool, live: bool, at_end: bool) -> None:
        """Turns read for the first time: the first batch lists the conversation viewed; later ones
        append its fresh turns."""
        multi = len(self.index.conv) > 1
        if first:
            self.turn_list.show_conversation = multi
            self.turn_list.set_turns(
                self.index.seqs(self.conversation), self.index.source.summaries
            )
        else:
            if multi and self.conversation == ALL:
                self.turn_list.show_conversation = True
            summaries = self.index.source.summaries
            self.turn_list.extend(
                [s for s in fresh if self.conversation in (ALL, summaries[s].conversation)]
            )
        # The switcher's labels carry turn counts; rebuilding them for every batch of a big
        # file costs more than it tells: only when a conversation appears, live, or at the end.
        if live or at_end or len(self.index.conv) != self._switcher_convs:
            self.update_switcher()

    def update_switcher(self) -> None:
        self._switcher_convs = len(self.index.conv)
        convs = self.index.source.conversations()
        # The switcher lists the conversations the list can show (a repeated seq moves turns).
        counted = [c for c in convs if c.id in self.index.conv]
        self.switcher.show_conversations(counted, len(self.index.order))

    def fit(self, *, compact: bool, width: int) -> None:
        """As wide as the turn list's rows need (finish whole), within a share of the terminal
        ``width``; what is left of a long finish is shortened by whole words (``turn_line``)."""
        if compact:
            self.styles.width = None
            return
        summaries = self.index.source.summaries
        sample = width_sample(self.turn_list.seqs)
        need = max(
            (turn_width(summaries[s], self.turn_list.show_conversation) for s in sample), default=40
        )
        self.styles.width = sidebar_width(width, need)
