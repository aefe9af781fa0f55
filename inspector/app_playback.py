"""Playback applied: :class:`inspector.playback.Playback` decides, :class:`AppPlayback` shows it.

A decision starts, reveals or ends the text streaming in the emission pane, or advances the turn
list (at the end of a live recording: waits for its next turn). The ticker runs only while playing
or re-streaming. The keys: ``space``, ``]`` ``[``, ``+`` ``-``, ``r``.
"""

from __future__ import annotations

from typing import assert_never

from inspector.app_panes import AppPanes
from inspector.playback import Advance, Decision, Reveal, StreamEnded, StreamStarted

__all__ = ["AppPlayback"]


class AppPlayback(AppPanes):
    """Playing the turns, stepping through them, re-streaming a turn's text."""

    # -- playback: inspector/playback.py decides, this applies its decisions to the widgets -------

    def _apply(self, decision: Decision) -> None:
        """Show what :class:`Playback` decided."""
        if decision is None:
            pass
        elif isinstance(decision, StreamStarted):
            # One pane at a time: the text streams where it can be seen.
            if not self.pane_visible("E"):
                self.show_view("E")
            self.pane_e.reveal = 0
            self._ticker.resume()
        elif isinstance(decision, Reveal):
            self.pane_e.reveal = decision.chars
        elif isinstance(decision, StreamEnded):
            self.pane_e.reveal = None
        elif isinstance(decision, Advance):
            if not self._move(1):
                if self.live:
                    # The end of a recording still being written: wait for its next turn.
                    self.waiting = True
                else:
                    self._apply(self.playback.pause())
                    self.notice = "end of the turn list"
        else:
            assert_never(decision)
        self._sync_playback()

    def _tick(self) -> None:
        self._apply(self.playback.tick())
        if not self.playback.active:
            self._ticker.pause()

    def _move(self, delta: int) -> bool:
        target = self.turn_list.cursor + delta
        if not 0 <= target < len(self.turn_list.seqs):
            return False
        self.turn_list.move_to(target)
        return True

    def action_play_pause(self) -> None:
        if not self.index.order:
            return
        if self.waiting:
            self.waiting = False
            self._apply(self.playback.pause())
            return
        loaded = self._loaded == self.selected
        decision = self.playback.toggle(loaded)
        if self.playback.playing:
            self._ticker.resume()
        self._apply(decision)

    def action_step(self, delta: int) -> None:
        self._move(delta)

    def action_turn(self, delta: int) -> None:
        """``j``/``k`` from a pane: the turn list moves, focus stays."""
        self._move(delta)

    def action_speed(self, direction: int) -> None:
        self.playback.change_speed(direction)
        self._sync_playback()

    def action_restream(self) -> None:
        if self._loaded is None or self._loaded != self.selected:
            self.notice = "the turn is still loading"
        elif not self.playback.timeline:
            self.notice = "this turn's text was not streamed with timings: nothing to re-stream"
        else:
            self._apply(self.playback.start_stream())

    def _sync_playback(self) -> None:
        """Copy :class:`Playback`'s state (plain Python) into the reactives."""
        self.playing = self.playback.playing
        self.speed = self.playback.speed
        self.streaming = self.playback.streaming
