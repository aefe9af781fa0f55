"""The tabs beside the turn list: Turn, Growth, Findings and, for a branch, Fork.

:class:`RunTabs` owns what its Growth and Findings tabs show and when they are redrawn: only when
shown, and only if the run changed since (they can be large). The screen tells it what changed
(attributes down: :meth:`RunTabs.run_changed`, :meth:`RunTabs.turn_selected`,
:meth:`RunTabs.conversation_shown`); a tab activated (a click, a key) redraws it here.
"""

from __future__ import annotations

from textual.widgets import TabbedContent, TabPane

from ...cassettes.replay.forking.forkview import ForkComparison
from ..turns import ALL, TurnIndex
from ._findings import FindingsTable
from ._fork import ForkPane
from ._growth import GrowthView

__all__ = ["RunTabs"]


class RunTabs(TabbedContent):
    """The Turn tab (the screen composes the panes) and the run-wide tabs, redrawn when shown."""

    def __init__(self, index: TurnIndex, *, id: str | None = None) -> None:
        super().__init__(id=id, initial="turn")
        self.index = index
        #: The selected turn (the growth chart shows its conversation) and the conversation listed.
        self.selected: int | None = None
        self.conversation = ALL
        self._dirty_findings = self._dirty_growth = True

    def run_changed(self) -> None:
        """The run changed: the findings table and the chart are redrawn when next shown."""
        self._dirty_findings = self._dirty_growth = True
        self.redraw()

    def turn_selected(self, seq: int) -> None:
        self.selected = seq
        self._dirty_growth = True
        self.redraw()

    def conversation_shown(self, conversation: str) -> None:
        self.conversation = conversation
        self.run_changed()

    def on_tabbed_content_tab_activated(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Redraw the findings table or the chart if it is the tab shown and the run changed."""
        if not self.is_attached:
            return
        index = self.index
        if self.active == "findings" and self._dirty_findings:
            self._dirty_findings = False
            # Every finding of the run (whatever conversation is viewed: a jump switches to it).
            self.query_one(FindingsTable).show_findings(index.findings())
        if self.active == "growth" and self._dirty_growth:
            self._dirty_growth = False
            seq = self.selected
            turn = index.source.summaries.get(seq) if seq is not None else None
            conv = index.growth_conversation(turn, self.conversation)
            self.query_one(GrowthView).show_bars(index.bars(conv), seq, conv)

    @property
    def forked(self) -> bool:
        """The run is a branch: the Fork tab is there."""
        return bool(self.query("#fork-view"))

    async def show_fork(self, view: ForkComparison | None, note: str) -> bool:
        """The branch beside its origin in the Fork tab (``True``: the tab was added for it)."""
        added = not self.forked
        if added:
            await self.add_pane(TabPane("Fork", ForkPane(id="fork-view"), id="fork"))
        self.query_one("#fork-view", ForkPane).show_view(view, note)
        return added
