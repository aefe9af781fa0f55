"""Playback on the main screen: :class:`inspector.playback.Playback` decides, :class:`Player`
applies.

The player holds the :class:`Playback` (plain Python: what to do next) and the ticker that drives
it while playing or re-streaming, and applies each decision to the screen: the emission pane's
revealed text, the next turn in the list, and the screen's playback reactives (``playing``,
``speed``, ``streaming``, ``waiting``, ``notice``) the playback line is computed from. What it
needs of the screen is :class:`PlayerScreen` (public members only; the main screen is one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, assert_never

from textual.timer import Timer

from cassettes.views.timeline import TimelinePoint
from inspector.layout import View
from inspector.playback import (
    Advance,
    Clock,
    Decision,
    Playback,
    Reveal,
    StreamEnded,
    StreamStarted,
)
from inspector.turns import TurnIndex
from inspector.widgets.turn_list import TurnList
from inspector.widgets.turn_pane import TurnPane

__all__ = ["Player", "PlayerReading", "PlayerScreen"]


class PlayerReading(Protocol):
    """What the player reads of the run (:class:`inspector.screens.reading.RunReading` is one)."""

    @property
    def index(self) -> TurnIndex: ...

    @property
    def request_of(self) -> int | None: ...


class PlayerScreen(Protocol):
    """What the player needs of its screen: its playback reactives, the turn list and pane."""

    live: bool
    selected: int | None
    playing: bool
    speed: float
    streaming: bool
    waiting: bool
    notice: str

    @property
    def reading(self) -> PlayerReading: ...

    @property
    def turn_list(self) -> TurnList: ...

    @property
    def turn_pane(self) -> TurnPane: ...

    def pane_visible(self, view: View) -> bool: ...

    def show_view(self, view: View) -> None: ...

    def set_interval(
        self, interval: float, callback: Callable[[], None], *, pause: bool
    ) -> Timer: ...


class Player:
    """The main screen's playback: play, pause, step, speed, re-stream."""

    #: Runs while playing or re-streaming (started paused when the screen is mounted).
    _ticker: Timer

    def __init__(self, screen: PlayerScreen, clock: Clock) -> None:
        self.screen = screen
        self.playback = Playback(clock)

    def start(self) -> None:
        # Runs only while playing or re-streaming: an idle timer would take the GIL from the reader.
        self._ticker = self.screen.set_interval(1 / 30, self._tick, pause=True)

    def apply(self, decision: Decision) -> None:
        """Show what :class:`Playback` decided."""
        screen = self.screen
        pane_e = screen.turn_pane.pane_e
        if decision is None:
            pass
        elif isinstance(decision, StreamStarted):
            # One pane at a time: the text streams where it can be seen.
            if not screen.pane_visible("E"):
                screen.show_view("E")
            pane_e.reveal = 0
            self._ticker.resume()
        elif isinstance(decision, Reveal):
            pane_e.reveal = decision.chars
        elif isinstance(decision, StreamEnded):
            pane_e.reveal = None
        elif isinstance(decision, Advance):
            self._advance()
        else:
            assert_never(decision)
        self.sync()

    def _advance(self) -> None:
        """The turn's dwell is over: the next turn, or (none) wait for it live, or pause."""
        if self.move(1):
            return
        if self.screen.live:
            # The end of a recording still being written: wait for its next turn.
            self.screen.waiting = True
        else:
            self.apply(self.playback.pause())
            self.screen.notice = "end of the turn list"

    def _tick(self) -> None:
        self.apply(self.playback.tick())
        if not self.playback.active:
            self._ticker.pause()

    def move(self, delta: int) -> bool:
        """The turn ``delta`` rows from the cursor (``False``: there is none)."""
        turn_list = self.screen.turn_list
        target = turn_list.cursor + delta
        if not 0 <= target < len(turn_list.seqs):
            return False
        turn_list.move_to(target)
        return True

    def sync(self) -> None:
        """Copy :class:`Playback`'s state (plain Python) into the screen's reactives."""
        self.screen.playing = self.playback.playing
        self.screen.speed = self.playback.speed
        self.screen.streaming = self.playback.streaming

    # -- what the screen tells it ------------------------------------------------------------------

    def turn_selected(self) -> None:
        self.apply(self.playback.turn_selected())
        self.sync()

    def turn_loaded(self, timeline: Sequence[TimelinePoint]) -> None:
        self.apply(self.playback.turn_loaded(timeline))
        self.sync()

    def turn_came(self, *, following: bool) -> None:
        """Playing at the end of a live recording: the awaited turn was read."""
        self.screen.waiting = False
        if not following:
            self.apply(Advance())

    def end_wait(self) -> None:
        """The live recording ended: no next turn to wait for."""
        if self.screen.waiting:
            self.screen.waiting = False
            self.apply(self.playback.pause())
            self.sync()

    # -- the keys ----------------------------------------------------------------------------------

    def play_pause(self) -> None:
        screen = self.screen
        if not screen.reading.index.order:
            return
        if screen.waiting:
            screen.waiting = False
            self.apply(self.playback.pause())
            return
        loaded = screen.reading.request_of == screen.selected
        decision = self.playback.toggle(loaded)
        if self.playback.playing:
            self._ticker.resume()
        self.apply(decision)

    def change_speed(self, direction: int) -> None:
        self.playback.change_speed(direction)
        self.sync()

    def restream(self) -> None:
        request_of = self.screen.reading.request_of
        if request_of is None or request_of != self.screen.selected:
            self.screen.notice = "the turn is still loading"
        elif not self.playback.timeline:
            self.screen.notice = (
                "this turn's text was not streamed with timings: nothing to re-stream"
            )
        else:
            self.apply(self.playback.start_stream())
