"""Snapshots of the main screens (SVG, compared with the committed ones under __snapshots__).

Fixture cassette, fixed terminal size, pinned Textual (pyproject: textual>=8.2,<8.3); nothing on
these screens reads the wall clock. Update after an intended change with
``pytest tests/inspector/test_snapshots.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import loaded, settled, shown, until
from textual.pilot import Pilot

from looptap.inspector.app import InspectorApp, build_app

SIZE = (160, 45)


def _at(seq: int, *keys: str) -> Any:
    async def run_before(pilot: Pilot[None]) -> None:
        app = await loaded(pilot)
        app.query_one("#turn-list").select_seq(seq)  # type: ignore[attr-defined]
        await until(pilot, lambda: shown(app, seq))
        for k in keys:
            await pilot.press(k)
        await until(pilot, lambda: settled(app))
        await pilot.pause(0.3)

    return run_before


def test_main_screen(snap_compare: Any, run_file: Path) -> None:
    """Turn 1 of c1: the tool result the client appended marked NEW, the streamed answer, A and
    C."""
    assert snap_compare(build_app(run_file), terminal_size=SIZE, run_before=_at(1))


def test_turn_with_findings(snap_compare: Any, run_file: Path) -> None:
    """c2 turn 1: a dropped tool result (C error) and a truncation (A warning) in their panes."""
    assert snap_compare(build_app(run_file), terminal_size=SIZE, run_before=_at(3))


def test_growth_chart(snap_compare: Any, demo_file: Path) -> None:
    """Token-cost growth of the demo's 4-turn conversation c2, turn 3 selected."""
    assert snap_compare(build_app(demo_file), terminal_size=SIZE, run_before=_at(6, "2"))


def test_findings_view(snap_compare: Any, run_file: Path) -> None:
    assert snap_compare(build_app(run_file), terminal_size=SIZE, run_before=_at(3, "3"))


def test_bad_file(snap_compare: Any, tmp_path: Path) -> None:
    bad = tmp_path / "notes.jsonl"
    bad.write_text("hello, this is not a cassette\n")

    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, InspectorApp)
        await until(pilot, lambda: app.main.reading.failed is not None)
        # The path is a tmp dir: show a stable one on screen.
        app.main.reading.path = Path("notes.jsonl")
        app.main.show_failure((app.main.reading.failed or "").replace(str(bad), "notes.jsonl"))
        app.clear_notifications()
        await pilot.pause(0.2)

    assert snap_compare(build_app(bad), terminal_size=(100, 20), run_before=run_before)


# -- every tab at the two sizes a new user tries (issue 16): 160×45 and 100×30 --------------------

NARROW_SIZE = (100, 30)


def _search(query: str) -> Any:
    async def run_before(pilot: Pilot[None]) -> None:
        app = await loaded(pilot)
        app.query_one("#turn-list").select_seq(1)  # type: ignore[attr-defined]
        await until(pilot, lambda: shown(app, 1))
        await until(pilot, lambda: settled(app))
        await pilot.press("slash")
        from textual.widgets import Input

        # a blinking cursor would make the picture depend on time
        for box in pilot.app.screen.query(Input):
            box.cursor_blink = False
        for ch in query:
            await pilot.press(ch)
        await pilot.press("enter")

        # the search runs in a worker: wait for its answer, not a fixed time
        def searched() -> bool:
            summary = pilot.app.screen.query("#search-summary")
            return bool(summary) and "match" in str(summary.first().render())

        await until(pilot, searched)
        await pilot.pause(0.2)

    return run_before


def test_help_wide(snap_compare: Any, run_file: Path) -> None:
    assert snap_compare(build_app(run_file), terminal_size=SIZE, run_before=_at(1, "question_mark"))


def test_search_wide(snap_compare: Any, run_file: Path) -> None:
    assert snap_compare(build_app(run_file), terminal_size=SIZE, run_before=_search("weather"))


def test_turn_narrow(snap_compare: Any, run_file: Path) -> None:
    """100×30: E, A and C as tabs; turn #3's error brings C up; the token counts whole."""
    assert snap_compare(build_app(run_file), terminal_size=NARROW_SIZE, run_before=_at(3))


def test_growth_narrow(snap_compare: Any, demo_file: Path) -> None:
    assert snap_compare(build_app(demo_file), terminal_size=NARROW_SIZE, run_before=_at(6, "2"))


def test_findings_narrow(snap_compare: Any, run_file: Path) -> None:
    assert snap_compare(build_app(run_file), terminal_size=NARROW_SIZE, run_before=_at(3, "3"))


def test_help_narrow(snap_compare: Any, run_file: Path) -> None:
    assert snap_compare(
        build_app(run_file), terminal_size=NARROW_SIZE, run_before=_at(1, "question_mark")
    )


def test_search_narrow(snap_compare: Any, run_file: Path) -> None:
    assert snap_compare(
        build_app(run_file), terminal_size=NARROW_SIZE, run_before=_search("weather")
    )


# -- the compact layout (issue 32: 80×24) and a big terminal --------------------------------------

COMPACT_SIZE = (80, 24)
BIG_SIZE = (200, 60)


def test_turn_compact(snap_compare: Any, run_file: Path) -> None:
    """80×24: the turn list above one pane; turn #3's C error brings C up; every count in the
    tabs."""
    assert snap_compare(build_app(run_file), terminal_size=COMPACT_SIZE, run_before=_at(3))


def test_messages_compact(snap_compare: Any, run_file: Path) -> None:
    """80×24 after ``a``: the messages tab, every message, parts whole."""
    assert snap_compare(build_app(run_file), terminal_size=COMPACT_SIZE, run_before=_at(1, "a"))


def test_growth_compact(snap_compare: Any, demo_file: Path) -> None:
    assert snap_compare(build_app(demo_file), terminal_size=COMPACT_SIZE, run_before=_at(6, "2"))


def test_turn_big(snap_compare: Any, run_file: Path) -> None:
    """200×60 with focus in the A pane (``l``): the playback line says so."""
    assert snap_compare(build_app(run_file), terminal_size=BIG_SIZE, run_before=_at(3, "l"))


def test_fork_tab(snap_compare: Any, tmp_path: Path) -> None:
    """A branch forked at turn 1 with its first tool result edited, beside its origin (4): the
    origin's turn 0 served, the fork point, the branch's turns 1 and 2 with the edit and the
    differences marked."""
    from fork_fixture import write

    async def run_before(pilot: Pilot[None]) -> None:
        app = await loaded(pilot)
        await until(
            pilot,
            lambda: bool(app.query("#fork-view")) and app.query_one("#fork-view")._view is not None,
        )  # type: ignore[attr-defined]
        await pilot.press("4")
        await pilot.pause(0.3)

    assert snap_compare(build_app(write(tmp_path)), terminal_size=SIZE, run_before=run_before)
