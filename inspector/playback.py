"""Playback: playing the turns one after another, and re-streaming a turn's text at recorded pace.

:class:`Playback` holds the state (playing or paused, the speed, the selected turn's text timeline,
when its stream started, when the next turn is due) and decides, from the time an injected clock
gives, what should happen next. It imports no Textual: the app applies each decision to its
widgets (the emission pane's ``reveal``, the turn list's cursor, the playback bar, the ticker).

A decision is one of :class:`StreamStarted`, :class:`Reveal`, :class:`StreamEnded`,
:class:`Advance`, or ``None`` (nothing to do).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..cassettes.views.timeline import TimelinePoint

__all__ = [
    "DWELL",
    "SPEEDS",
    "Advance",
    "Clock",
    "Decision",
    "Playback",
    "Reveal",
    "StreamEnded",
    "StreamStarted",
]

Clock = Callable[[], float]

#: Playback speeds, slowest first (× recorded pace).
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: Seconds (at 1×) a turn stays on screen during playback after its text has finished.
DWELL = 1.0


@dataclass(frozen=True)
class StreamStarted:
    """The text is re-streamed from its start: show none of it yet, and keep the clock ticking."""


@dataclass(frozen=True)
class Reveal:
    """Show the first ``chars`` characters of the streamed text."""

    chars: int


@dataclass(frozen=True)
class StreamEnded:
    """The stream is over (ran out, or stopped): show the whole text again."""


@dataclass(frozen=True)
class Advance:
    """The turn's dwell is over: select the next turn (none left: call :meth:`Playback.pause`)."""


Decision = StreamStarted | Reveal | StreamEnded | Advance | None


class Playback:
    """The playback state of the inspector, moved on by :meth:`tick`."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.playing = False
        #: One of :data:`SPEEDS`.
        self.speed = 1.0
        #: The selected turn's text over time (empty: not streamed with recorded timings).
        self.timeline: Sequence[TimelinePoint] = []
        #: When the text started streaming (clock time, as if at the current speed); ``None``: not
        #: streaming.
        self.stream_start: float | None = None
        #: When playback moves to the next turn (clock time); ``None``: not waiting to.
        self.advance_at: float | None = None

    @property
    def streaming(self) -> bool:
        return self.stream_start is not None

    @property
    def active(self) -> bool:
        """Playing or streaming: something may change with time, so the app's ticker must run."""
        return self.playing or self.stream_start is not None

    # -- what the user or the app did ---------------------------------------------------------

    def start_stream(self) -> StreamStarted:
        """Re-stream the timeline from its start."""
        self.stream_start = self.clock()
        return StreamStarted()

    def stop_stream(self) -> StreamEnded | None:
        if self.stream_start is None:
            return None
        self.stream_start = None
        return StreamEnded()

    def turn_selected(self) -> StreamEnded | None:
        """Another turn was selected: its timeline is not known yet, nothing is due."""
        self.advance_at = None
        return self.stop_stream()

    def turn_loaded(self, timeline: Sequence[TimelinePoint]) -> StreamStarted | None:
        """The selected turn's timeline arrived; while playing, its text streams (or, not
        streamed, the turn dwells)."""
        self.timeline = timeline
        if not self.playing:
            return None
        if timeline:
            return self.start_stream()
        self._dwell(self.clock())
        return None

    def toggle(self, loaded: bool) -> StreamStarted | StreamEnded | None:
        """Play or pause (``loaded``: :attr:`timeline` is the selected turn's)."""
        if self.playing:
            return self.pause()
        self.playing = True
        if loaded and self.timeline and self.stream_start is None:
            return self.start_stream()
        if self.stream_start is None:
            self._dwell(self.clock())
        return None

    def pause(self) -> StreamEnded | None:
        self.playing = False
        self.advance_at = None
        return self.stop_stream()

    def change_speed(self, direction: int) -> None:
        """One step faster (``1``) or slower (``-1``) in :data:`SPEEDS`, none past either end; a
        stream keeps its position."""
        i = SPEEDS.index(self.speed) + direction
        if not 0 <= i < len(SPEEDS):
            return
        if self.stream_start is not None:
            now = self.clock()
            pos = (now - self.stream_start) * self.speed
            self.stream_start = now - pos / SPEEDS[i]
        self.speed = SPEEDS[i]

    # -- time passing ------------------------------------------------------------------------------

    def tick(self) -> Reveal | StreamEnded | Advance | None:
        """What the time now asks for."""
        now = self.clock()
        if self.stream_start is not None and self.timeline:
            pos = (now - self.stream_start) * self.speed
            if pos >= self.timeline[-1].offset:
                self.stream_start = None
                if self.playing:
                    self._dwell(now)
                return StreamEnded()
            return Reveal(self._chars_at(pos))
        if self.playing and self.advance_at is not None and now >= self.advance_at:
            self.advance_at = None
            return Advance()
        return None

    def _chars_at(self, pos: float) -> int:
        """Characters that had arrived ``pos`` seconds (recorded pace) into the stream."""
        chars = 0
        for p in self.timeline:
            if p.offset > pos:
                break
            chars = p.chars
        return chars

    def _dwell(self, now: float) -> None:
        self.advance_at = now + DWELL / self.speed
