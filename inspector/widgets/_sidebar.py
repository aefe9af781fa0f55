"""The sidebar: the conversation switcher above the turn list.

:class:`Sidebar` owns which conversation is listed and keeps its two widgets in step: the switcher
shows the run's conversations (with their turn counts), the turn list the turns of the one chosen.
The screen hands it the run's index (attributes down), says when turns were read and asks for the
moves (``c``, ``f``/``F``, a jump to a turn of any conversation); a choice in the switcher is taken
here. Another conversation listed comes up as :class:`Sidebar.ConversationShown`, a turn chosen in
the list as ``TurnList.TurnSelected`` (messages up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message

from ...cassettes.views import TurnSummary
from ..layout import sidebar_width, width_sample
from ..turns import ALL, TurnIndex
from ._conversations import ConversationSwitcher
from ._turn_list import TurnList, turn_width

__all__ = ["Sidebar"]


class Sidebar(Vertical):
    """The conversation switcher and the turn list (``esc`` brings focus back to the list)."""

    @dataclass
    class ConversationShown(Message):
        """The list shows ``conversation``'s turns now, ``count`` of them."""

        conversation: str
        count: int

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

    def show_conversation(self, conversation: str, select: int | None = None) -> None:
        """List ``conversation``'s turns (``select``: the turn to move to)."""
        self.conversation = conversation
        if self.switcher.value != conversation:
            with self.switcher.prevent(ConversationSwitcher.Changed):
                self.switcher.value = conversation
        seqs = self.index.seqs(conversation)
        self.turn_list.show_conversation = conversation == ALL and len(self.index.conv) > 1
        self.turn_list.set_turns(seqs, self.index.source.summaries, select=select)
        self.post_message(self.ConversationShown(conversation, len(seqs)))

    @on(ConversationSwitcher.ConversationChosen)
    def _conversation_chosen(self, message: ConversationSwitcher.ConversationChosen) -> None:
        message.stop()
        self.show_conversation(message.conversation)

    def next_conversation(self) -> None:
        """``c``: the conversation after the one listed (after the last: all of them)."""
        order = [ALL, *self.index.conv]
        i = order.index(self.conversation) if self.conversation in order else 0
        self.show_conversation(order[(i + 1) % len(order)])

    def jump(self, seq: int, conversation: str | None) -> None:
        """To turn ``seq`` in the list, listing its ``conversation`` (or all) if it is not."""
        if not self.turn_list.select_seq(seq):
            self.show_conversation(conversation or ALL, select=seq)

    def next_finding(self, direction: int) -> tuple[TurnSummary, bool] | None:
        """``f`` / ``F``: to the next / previous listed turn with a finding, in list order,
        wrapping around; and whether it wrapped (``None``: no listed turn has one)."""
        rows = self.turn_list.turns
        found = next_finding(rows, self.turn_list.selected_seq, direction)
        if found is None or not self.turn_list.select_seq(found[0]):
            return None
        return rows[self.turn_list.cursor], found[1]

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
        convs = self.index.source.analysis.conversations
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


def next_finding(
    rows: Sequence[TurnSummary], here: int | None, direction: int
) -> tuple[int, bool] | None:
    """The next / previous turn with a finding in the list's order, from turn ``here`` (from the
    top / the bottom when it is not listed), wrapping around past the end / the start; with whether
    it wrapped. ``None``: no listed turn has a finding."""
    n = len(rows)
    at = next((i for i, t in enumerate(rows) if t.seq == here), None)
    if at is None:
        at = -1 if direction > 0 else n
    for step in range(1, n + 1):
        i = at + direction * step
        if rows[i % n].findings:
            return rows[i % n].seq, not 0 <= i < n
    return None
