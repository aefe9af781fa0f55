"""What every part of the inspector app stands on: the run being read, the reactive state, the widgets.

:class:`AppBase` holds the run (an :class:`inspector.source.TurnSource`, which keeps the turns'
summaries, and the :class:`inspector.turns.TurnIndex` of seqs into them: the one copy of the turns),
the reactive state the status and playback lines are computed from (:attr:`AppBase.run_state`,
:attr:`AppBase.play_state`), an accessor for each widget the app drives, and the output boundary
(every line drawn and every toast goes through :mod:`inspector.safe` / :func:`cassettes.untrusted.clean`).
The parts of the app are built on it, each using only those below it:
:mod:`inspector.app_panes` → :mod:`inspector.app_playback` → :mod:`inspector.app_navigation` →
:mod:`inspector.app_reading` → :class:`inspector.app.InspectorApp`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App
from textual.containers import Vertical
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.widgets import Static, TabbedContent, Tabs

from cassettes.analysis.model import Layer
from cassettes.untrusted import clean, clean_line
from cassettes.views.search import SearchHit
from cassettes.views.summary import TurnSummary
from inspector.layout import View
from inspector.playback import Clock, Playback
from inspector.safe import UntrustedFilter
from inspector.source import TurnSource, open_source
from inspector.turns import TurnIndex
from inspector.widgets.conversations import ALL, ConversationSwitcher
from inspector.widgets.findings import FindingsTable
from inspector.widgets.growth import GrowthView
from inspector.widgets.layers import ApiPane, DispatchPane, EmissionPane, LayerPane
from inspector.widgets.messages import MessagesView
from inspector.widgets.status import PlayState, RunState
from inspector.widgets.turn_list import TurnList

if TYPE_CHECKING:
    from textual.timer import Timer

__all__ = ["AppBase"]


class AppBase(App[None]):
    """The inspector's state and widgets (:class:`inspector.app.InspectorApp` is the app itself)."""

    # -- reactive state: the status and playback lines are computed from it ------------------------

    #: Following a recording still being written.
    live: reactive[bool] = reactive(False)
    #: The whole file was read and the end-of-run checks ran.
    complete: reactive[bool] = reactive(False)
    #: Share of the file read (``None``: unknown or done).
    progress: reactive[float | None] = reactive(0.0)
    #: Why the run cannot be shown (``None``: it can).
    failed: reactive[str | None] = reactive(None)
    #: ``looptap run --inspect``: the recorded command's exit status once it exited.
    exit_status: reactive[int | None] = reactive(None)
    #: The recorder closed the file (a recording followed live has ended).
    recorder_closed: reactive[bool] = reactive(False)
    conversation_count: reactive[int] = reactive(0)
    turn_count: reactive[int] = reactive(0)
    finding_count: reactive[int] = reactive(0)
    problem_count: reactive[int] = reactive(0)
    torn: reactive[bool] = reactive(False)
    #: The selected turn's seq, its place in the list and the list's length.
    selected: reactive[int | None] = reactive(None)
    position: reactive[int] = reactive(0)
    listed: reactive[int] = reactive(0)
    playing: reactive[bool] = reactive(False)
    speed: reactive[float] = reactive(1.0)
    streaming: reactive[bool] = reactive(False)
    #: Playing at the end of a live recording: the next turn is awaited.
    waiting: reactive[bool] = reactive(False)
    following: reactive[bool] = reactive(False)
    #: The latest short notice (a search match, where focus is): one at a time, replaced.
    notice: reactive[str] = reactive("")

    run_state: reactive[RunState] = reactive(RunState)
    play_state: reactive[PlayState] = reactive(PlayState)

    #: Runs while playing or re-streaming (started paused when the app is mounted).
    _ticker: Timer

    def __init__(
        self, path: str | Path, *, live: bool = False, clock: Clock = time.monotonic, child_status: str | Path | None = None
    ) -> None:
        super().__init__()
        self.path = Path(path)
        #: ``looptap run --inspect``: where the recorder writes the command's exit status.
        self.child_status = Path(child_status) if child_status is not None else None
        self.clock = clock
        self.source: TurnSource = open_source(self.path, live=live)
        # Seq indexes into the source's summaries (the one copy of the turns).
        self.index = TurnIndex(self.source)
        self.conversation = ALL
        #: The turn whose full request and timeline were read (``None``: the selected one is loading).
        self._loaded: int | None = None
        #: The turn whose E, A and C panes are drawn (read by another worker than the request).
        self._panes_of: int | None = None
        self.playback = Playback(clock)
        # search
        self._query = ""
        self._hits: list[SearchHit] = []
        self._hit = -1
        self._dirty_findings = True
        self._dirty_growth = True
        self._switcher_convs = -1
        self._repeated: set[int] = set()
        self._untrusted_filter = UntrustedFilter()
        #: The pane shown in the narrow and compact layouts (``M``: the messages, compact only).
        self.view: View = "E"
        self.set_reactive(AppBase.live, live)

    # -- the widgets ---------------------------------------------------------------------------------

    @cached_property
    def turn_list(self) -> TurnList:
        return self.query_one(TurnList)

    @cached_property
    def messages(self) -> MessagesView:
        return self.query_one(MessagesView)

    @cached_property
    def pane_e(self) -> EmissionPane:
        return self.query_one(EmissionPane)

    @cached_property
    def pane_a(self) -> ApiPane:
        return self.query_one(ApiPane)

    @cached_property
    def pane_c(self) -> DispatchPane:
        return self.query_one(DispatchPane)

    @cached_property
    def layer_panes(self) -> dict[Layer, LayerPane]:
        return {"E": self.pane_e, "A": self.pane_a, "C": self.pane_c}

    @cached_property
    def layer_tabs(self) -> Tabs:
        return self.query_one("#layer-tabs", Tabs)

    @cached_property
    def tabs(self) -> TabbedContent:
        return self.query_one("#tabs", TabbedContent)

    @cached_property
    def switcher(self) -> ConversationSwitcher:
        return self.query_one(ConversationSwitcher)

    @cached_property
    def findings_table(self) -> FindingsTable:
        return self.query_one(FindingsTable)

    @cached_property
    def growth_view(self) -> GrowthView:
        return self.query_one(GrowthView)

    @cached_property
    def sidebar(self) -> Vertical:
        return self.query_one("#sidebar", Vertical)

    @cached_property
    def error_view(self) -> Static:
        return self.query_one("#error-view", Static)

    @property
    def turns(self) -> list[TurnSummary]:
        """Every turn read so far, in recording order (from the source's summaries)."""
        return self.index.turns

    @property
    def conv_turns(self) -> dict[str, list[int]]:
        """Each conversation's turns (seqs), in order."""
        return self.index.conv

    def summary(self, seq: int | None) -> TurnSummary | None:
        return self.source.summaries.get(seq) if seq is not None else None

    # -- the output boundary (inspector/safe.py) -----------------------------------------------

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the one that strips any control a widget let through."""
        return [*super().get_line_filters(), self._untrusted_filter]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Toasts carry file and wire text (problems, error messages, search queries): cleaned,
        and never read as markup, whatever the caller asks."""
        super().notify(clean(message), title=clean_line(title), severity=severity, timeout=timeout, markup=False)

    # -- the status and playback lines (computed from the reactive state) ----------------------------

    def compute_run_state(self) -> RunState:
        note = ""
        if self.failed:
            note = "cannot read this file"
        elif self.torn:
            note = "truncated: the last record was cut off"
        elif self.exit_status is not None:
            note = f"ended (exit {self.exit_status})"
        elif self.recorder_closed:
            note = "recording ended"
        return RunState(
            name=self.path.name,
            conversations=self.conversation_count,
            turns=self.turn_count,
            findings=self.finding_count,
            progress=None if self.complete or self.live else self.progress,
            problems=self.problem_count,
            live=self.live,
            note=note,
        )

    def compute_play_state(self) -> PlayState:
        turn = self.summary(self.selected)
        label = f"#{turn.seq} {turn.conversation}/turn {turn.index}" if turn is not None else ""
        return PlayState(
            playing=self.playing,
            speed=self.speed,
            position=self.position,
            total=self.listed,
            streaming=self.streaming,
            label=label,
            waiting=self.waiting,
            following=self.following and self.live,
            notice=self.notice,
        )

    # -- the selected turn's layer panes: read by the app's own worker --------------------------------

    def _load_panes(self, seq: int) -> object:
        """Restore turn ``seq`` for the layer panes, in a worker (:meth:`inspector.app.InspectorApp._load_panes`)."""
        raise NotImplementedError
