"""inspector/playback.py: the playback decisions, driven by a fake clock (no app, no Textual).

Offsets and clock steps are binary fractions (0.25, 0.125 …), so the sums are exact and every
boundary is tested at the exact instant.
"""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import FakeClock

from looptap.cassettes.views.timeline import TimelinePoint
from looptap.inspector.playback import (
    DWELL,
    SPEEDS,
    Advance,
    Playback,
    Reveal,
    StreamEnded,
    StreamStarted,
)
from tests.support import progress

ROOT = Path(__file__).resolve().parents[2]

#: 5 characters had arrived 0.25 s after the request, 12 at 0.5 s, all 20 at 0.75 s.
TIMELINE = [TimelinePoint(0.25, 5), TimelinePoint(0.5, 12), TimelinePoint(0.75, 20)]


def _playback(timeline: list[TimelinePoint] | None = None) -> tuple[Playback, FakeClock]:
    clock = FakeClock()
    pb = Playback(clock)
    pb.turn_loaded(TIMELINE if timeline is None else timeline)
    return pb, clock


def test_a_new_playback_is_paused_at_1x_with_nothing_due() -> None:
    pb = Playback(FakeClock())
    assert (pb.playing, pb.speed, pb.streaming, pb.active) == (False, 1.0, False, False)
    assert pb.advance_at is None and list(pb.timeline) == []
    assert pb.tick() is None
    assert SPEEDS == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0) and DWELL == 1.0


def test_streaming_reveals_characters_by_recorded_offsets() -> None:
    pb, clock = _playback()
    assert pb.start_stream() == StreamStarted()
    assert pb.streaming and pb.active and pb.stream_start == 1000.0
    seen = []
    for step in (0.0, 0.125, 0.125, 0.125, 0.125, 0.125):  # 0, 0.125 … 0.625 s into the stream
        clock.advance(step)
        seen.append(pb.tick())
    assert seen == [Reveal(0), Reveal(0), Reveal(5), Reveal(5), Reveal(12), Reveal(12)]
    clock.advance(0.125)  # 0.75 s: the last point, the whole text
    assert pb.tick() == StreamEnded()
    assert not pb.streaming and not pb.active
    assert pb.advance_at is None  # paused: a re-stream moves nowhere afterwards
    assert pb.tick() is None


def test_streaming_at_2x_takes_half_the_recorded_time() -> None:
    pb, clock = _playback()
    pb.change_speed(1)
    assert pb.speed == 2.0
    pb.start_stream()
    clock.advance(0.0625)  # 0.125 s of recorded time
    assert pb.tick() == Reveal(0)
    clock.advance(0.0625)
    assert pb.tick() == Reveal(5)
    clock.advance(0.0625)
    assert pb.tick() == Reveal(5)
    clock.advance(0.0625)
    assert pb.tick() == Reveal(12)
    clock.advance(0.125)
    assert pb.tick() == StreamEnded()


def test_a_speed_change_mid_stream_keeps_the_position() -> None:
    pb, clock = _playback()
    pb.start_stream()
    clock.advance(0.375)
    assert pb.tick() == Reveal(5)
    pb.change_speed(1)  # 2×, 0.375 s into the stream
    assert pb.speed == 2.0
    assert pb.stream_start == 1000.375 - 0.1875
    assert pb.tick() == Reveal(5)  # not 12: the position did not jump
    clock.advance(0.0625)  # 0.125 s of recorded time at 2×
    assert pb.tick() == Reveal(12)
    pb.change_speed(-1)
    pb.change_speed(-1)  # 0.5×, still at 0.5 s into the stream
    assert pb.speed == 0.5
    assert pb.tick() == Reveal(12)
    clock.advance(0.25)  # 0.125 s of recorded time at 0.5×
    assert pb.tick() == Reveal(12)
    clock.advance(0.25)
    assert pb.tick() == StreamEnded()


def test_speed_stops_at_either_end_and_a_change_without_a_stream_starts_none() -> None:
    pb, _ = _playback()
    for _ in range(10):
        pb.change_speed(1)
    assert pb.speed == 16.0
    for _ in range(3):
        pb.change_speed(-1)
    assert pb.speed == 2.0
    for _ in range(10):
        pb.change_speed(-1)
    assert pb.speed == 0.25
    assert pb.stream_start is None


def test_playing_streams_the_text_then_dwells_then_advances() -> None:
    pb, clock = _playback()
    assert pb.toggle(loaded=True) == StreamStarted()
    assert pb.playing and pb.advance_at is None
    clock.advance(0.75)
    assert pb.tick() == StreamEnded()
    assert pb.advance_at == 1000.75 + DWELL  # the dwell starts when the text has finished
    assert pb.active  # still playing: the ticker keeps running
    clock.advance(0.5)
    assert pb.tick() is None
    clock.advance(0.5)
    assert pb.tick() == Advance()
    assert pb.advance_at is None
    clock.advance(5.0)
    assert pb.tick() is None  # one advance; the next turn's load sets what comes next


def test_the_dwell_is_shorter_at_higher_speed() -> None:
    pb, clock = _playback()
    pb.change_speed(1)
    pb.change_speed(1)  # 4×
    pb.toggle(loaded=True)
    clock.advance(0.1875)  # 0.75 s of recorded time at 4×
    assert pb.tick() == StreamEnded()
    assert pb.advance_at == 1000.1875 + DWELL / 4
    clock.advance(0.25)
    assert pb.tick() == Advance()


def test_the_next_turn_loaded_while_playing_streams_or_dwells() -> None:
    pb, clock = _playback([])
    assert pb.toggle(loaded=True) is None  # nothing to stream: the turn dwells
    assert pb.advance_at == 1000.0 + DWELL
    clock.advance(DWELL)
    assert pb.tick() == Advance()
    assert pb.turn_selected() is None
    clock.advance(0.25)
    assert pb.turn_loaded(TIMELINE) == StreamStarted()
    assert pb.stream_start == 1000.0 + DWELL + 0.25
    assert pb.turn_selected() == StreamEnded()  # moved on mid-stream: the stream stops
    assert pb.stream_start is None and pb.advance_at is None
    assert pb.turn_loaded([]) is None
    assert pb.advance_at == 1000.0 + DWELL + 0.25 + DWELL


def test_a_turn_loaded_while_paused_only_keeps_its_timeline() -> None:
    pb, clock = _playback([])
    assert pb.turn_loaded(TIMELINE) is None
    assert list(pb.timeline) == TIMELINE
    assert (pb.streaming, pb.advance_at) == (False, None)
    clock.advance(10.0)
    assert pb.tick() is None


def test_the_end_of_the_list_pauses() -> None:
    """The app cannot move past the last turn: it pauses, and nothing more happens."""
    pb, clock = _playback([])
    pb.toggle(loaded=True)
    clock.advance(DWELL)
    assert pb.tick() == Advance()
    assert pb.pause() is None
    assert (pb.playing, pb.active, pb.advance_at) == (False, False, None)
    clock.advance(100.0)
    assert pb.tick() is None


def test_toggling() -> None:
    pb, clock = _playback()
    # Play before the selected turn's timeline is loaded: the turn dwells.
    assert pb.toggle(loaded=False) is None
    assert pb.playing and not pb.streaming and pb.advance_at == 1000.0 + DWELL
    # Pause: nothing is due any more.
    assert pb.toggle(loaded=False) is None
    assert not pb.playing and pb.advance_at is None
    clock.advance(DWELL)
    assert pb.tick() is None
    # Play with the timeline loaded: the text streams from its start.
    assert pb.toggle(loaded=True) == StreamStarted()
    assert pb.stream_start == 1000.0 + DWELL
    clock.advance(0.25)
    assert pb.tick() == Reveal(5)
    # Pause mid-stream: the stream stops and the whole text shows.
    assert pb.toggle(loaded=True) == StreamEnded()
    assert (pb.playing, pb.streaming, pb.advance_at) == (False, False, None)


def test_playing_during_a_restream_carries_it_on() -> None:
    pb, clock = _playback()
    pb.start_stream()  # ``r`` while paused
    clock.advance(0.5)
    assert pb.toggle(loaded=True) is None  # not restarted, no dwell yet
    assert pb.playing and pb.stream_start == 1000.0 and pb.advance_at is None
    assert pb.tick() == Reveal(12)
    clock.advance(0.25)
    assert pb.tick() == StreamEnded()
    assert pb.advance_at == 1000.75 + DWELL


def test_playback_imports_no_textual() -> None:
    code = (
        "import sys, looptap.inspector.playback; print(sorted(m for "
        "m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    out = progress.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"
