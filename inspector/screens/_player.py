"""Playback, and the line that says it: :class:`inspector.playback.Playback` decides,
:class:`Player` applies.

The player is the playback line at the foot of the main screen. It holds the :class:`Playback`
(plain Python: what to do next), the ticker that drives it while playing or re-streaming, and
the state the line shows as reactives (``playing``, ``speed``, ``streaming``, ``waiting``, the
selected turn and the latest ``notice``). It applies each decision to the Turn tab it plays into
(the emission pane's revealed text, handed down at compose); when a turn's dwell is over it posts
:class:`Player.TurnPlayed`, and the screen moves the list on (or calls :meth:`Player.ran_out`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static

from ...cassettes.untrusted import clean_line
from ...cassettes.views import TurnSummary
from ...cassettes.views.timeline import TimelinePoint
from ..playback import (
    Advance,
    Clock,
    Decision,
    Playback,
    Reveal,
    StreamEnded,
    StreamStarted,
)
from ..widgets import TurnPane

__all__ = ["Player"]


class Player(Static):
    """Play, pause, step, speed, re-stream; and the line: playing or paused, the speed, and which
    turn is selected, named as everywhere else (``#seq``, its conversation and turn), with its
    place in the list; then the latest notice."""

    playing: reactive[bool] = reactive(False)
    speed: reactive[float] = reactive(1.0)
    streaming: reactive[bool] = reactive(False)
    #: Playing at the end of a live recording: the next turn is awaited.
    waiting: reactive[bool] = reactive(False)
    #: The selected turn (``#seq conversation/turn index``), its place in the list, the list's
    #: length, and whether the list follows new turns of a live recording.
    label: reactive[str] = reactive("")
    position: reactive[int] = reactive(0)
    total: reactive[int] = reactive(0)
    following: reactive[bool] = reactive(False)
    #: Following a recording still being written (the screen says when it ends).
    live: reactive[bool] = reactive(False)
    #: The latest short notice (a search match, where focus is): one at a time, replaced.
    notice: reactive[str] = reactive("")
    #: The line drawn from the reactives above (recomputed when any of them changes).
    line: reactive[Text] = reactive(Text, layout=False)

    @dataclass
    class TurnPlayed(Message):
        """The turn's dwell is over: the next turn, please (none: :meth:`Player.ran_out`)."""

    #: Runs while playing or re-streaming (started paused when mounted).
    _ticker: Timer

    def __init__(self, clock: Clock, turn: TurnPane, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.playback = Playback(clock)
        self._turn = turn
        #: The selected turn's timeline is the one :attr:`playback` holds.
        self._loaded = False

    def on_mount(self) -> None:
        # Runs only while playing or re-streaming: an idle timer would take the GIL from the reader.
        self._ticker = self.set_interval(1 / 30, self._tick, pause=True)

    def compute_line(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis", end="")
        if self.waiting:
            t.append("▶ waiting for the next turn", style="bold yellow")
        else:
            t.append(
                "▶ playing" if self.playing else "⏸ paused",
                style="bold green" if self.playing else "bold",
            )
        t.append(f"  {self.speed:g}×")
        if self.total:
            t.append(f"  {clean_line(self.label)}" if self.label else "", style="bold")
            t.append(f" ({self.position + 1}/{self.total})", style="dim")
        else:
            t.append("  no turns yet", style="dim")
        if self.following and self.live:
            t.append("  following new turns (G)", style="cyan")
        if self.streaming:
            t.append("  re-streaming at recorded pace", style="yellow")
        if self.notice:
            t.append(f"  │ {clean_line(self.notice)}", style="bold")
        return t

    def watch_line(self, line: Text) -> None:
        self.update(line)

    # -- applying what Playback decided ------------------------------------------------------------

    def _apply(self, decision: Decision) -> None:
        pane_e = self._turn.pane_e
        if decision is None:
            pass
        elif isinstance(decision, StreamStarted):
            # One pane at a time: the text streams where it can be seen.
            if not self._turn.pane_visible("E"):
                self._turn.show_view("E")
            pane_e.reveal = 0
            self._ticker.resume()
        elif isinstance(decision, Reveal):
            pane_e.reveal = decision.chars
        elif isinstance(decision, StreamEnded):
            pane_e.reveal = None
        elif isinstance(decision, Advance):
            self.post_message(self.TurnPlayed())
        else:
            assert_never(decision)
        self._sync()

    def _tick(self) -> None:
        self._apply(self.playback.tick())
        if not self.playback.active:
            self._ticker.pause()

    def _sync(self) -> None:
        """Copy :class:`Playback`'s state (plain Python) into the reactives."""
        self.playing = self.playback.playing
        self.speed = self.playback.speed
        self.streaming = self.playback.streaming

    # -- what the screen tells it ------------------------------------------------------------------

    def turn_selected(
        self, turn: TurnSummary, *, position: int, total: int, following: bool
    ) -> None:
        self.label = f"#{turn.seq} {turn.conversation}/turn {turn.index}"
        self.position, self.total, self.following = position, total, following
        self._loaded = False
        self._apply(self.playback.turn_selected())

    def turn_loaded(self, timeline: Sequence[TimelinePoint]) -> None:
        self._loaded = True
        self._apply(self.playback.turn_loaded(timeline))

    def turn_came(self, *, following: bool) -> None:
        """Playing at the end of a live recording: the awaited turn was read."""
        self.waiting = False
        if not following:
            self._apply(Advance())

    def ran_out(self) -> None:
        """No next turn to play: wait for it (a recording still being written) or pause."""
        if self.live:
            self.waiting = True
        else:
            self._apply(self.playback.pause())
            self.notice = "end of the turn list"

    def end_wait(self) -> None:
        """The live recording ended: no next turn to wait for."""
        self.live = False
        if self.waiting:
            self.waiting = False
            self._apply(self.playback.pause())

    # -- the keys ----------------------------------------------------------------------------------

    def play_pause(self) -> None:
        if not self.total:  # no turns listed: nothing to play
            return
        if self.waiting:
            self.waiting = False
            self._apply(self.playback.pause())
            return
        decision = self.playback.toggle(self._loaded)
        if self.playback.playing:
            self._ticker.resume()
        self._apply(decision)

    def change_speed(self, direction: int) -> None:
        self.playback.change_speed(direction)
        self._sync()

    def restream(self) -> None:
        if not self._loaded:
            self.notice = "the turn is still loading"
        elif not self.playback.timeline:
            self.notice = "this turn's text was not streamed with timings: nothing to re-stream"
        else:
            self._apply(self.playback.start_stream())
