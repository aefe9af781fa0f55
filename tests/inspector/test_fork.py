"""Pilot tests: a branch (looptap run --from) in the inspector: the edited message marked with
what the client had sent, and the Fork tab (4) beside the origin: its turns before the cursor,
the fork point, the turns past it as the branch or (o) the origin has them, edits and differences
marked; a clear line when the origin file is not there; nothing of it for a plain run."""

from __future__ import annotations

from pathlib import Path

import pytest
from fork_fixture import CHANGED, EDITED, ORIGINAL, write, write_tolerant
from helpers import loaded, pane_text, until

from looptap.inspector.app import InspectorApp, build_app
from looptap.inspector.widgets import ForkPane

pytestmark = pytest.mark.anyio

SIZE = (160, 45)


async def _fork_tab(pilot: object, app: InspectorApp) -> str:
    await until(
        pilot,
        lambda: (
            bool(app.query("#fork-view"))
            and app.query_one("#fork-view", ForkPane)._view is not None
        ),
    )  # type: ignore[arg-type]
    await pilot.press("4")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    assert app.main.tabs.active == "fork"
    return pane_text(app, "#fork-view")


async def test_the_edited_message_is_marked_with_what_the_client_sent(tmp_path: Path) -> None:
    app = build_app(write(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        text = pane_text(app, "#messages")
        assert "✎ EDITED by the fork: tool_result[call_A1]" in text  # the head line
        line = next(ln for ln in text.splitlines() if "[3] tool" in ln)
        assert "✎ EDITED by the fork" in line  # the message the edit rewrote, and only it
        assert sum("✎ EDITED by the fork" in ln for ln in text.splitlines()) == 2
        # the model's text, and the client's beneath it
        assert EDITED in text and "the client sent" in text and ORIGINAL in text
        assert text.index(EDITED) < text.index(ORIGINAL)


async def test_a_branch_is_shown_beside_its_origin_with_the_fork_point_marked(
    tmp_path: Path,
) -> None:
    app = build_app(write(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        text = await _fork_tab(pilot, app)
        assert (
            "branch of run.jsonl forked at turn=1" in text
            and "edited: tool_result[call_A1]" in text
        )
        lines = text.splitlines()
        prefix = next(i for i, ln in enumerate(lines) if "served from the origin" in ln)
        fork = next(i for i, ln in enumerate(lines) if "fork point: live from turn 1" in ln)
        past = [i for i, ln in enumerate(lines) if "branch #" in ln and "turn " in ln]
        assert prefix < fork < past[0] and len(past) == 2
        # the origin's turn 0, read from the origin file
        assert 'get_weather({"city":"Paris"})' in lines[prefix]
        assert 'get_weather({"city":"Nice"})' in lines[past[0]] and "≠" in lines[past[0]]
        assert "✎ EDITED tool_result[call_A1] at messages[3]" in text
        assert (
            "fork: edited tool_result[call_A1] at messages[3] (asked with --edit)" in text
            and "E: the model emitted something else" in text
        )
        await pilot.press("o")  # the origin's turns past the cursor instead
        await pilot.pause()
        text = pane_text(app, "#fork-view")
        assert (
            "origin #1: " in text
            and 'get_weather({"city":"Lyon"})' in text
            and 'get_weather({"city":"Nice"})' not in text
        )
        assert "fork point" in text and "served from the origin" in text
        await pilot.press("o")
        await pilot.pause()
        assert 'get_weather({"city":"Nice"})' in pane_text(app, "#fork-view")


async def test_what_a_tolerant_prefix_tolerated_is_shown_under_its_turn(tmp_path: Path) -> None:
    """Issue 44: the changed tool result served in position (turn 1, from the fork's note) and the
    same result in the live turn's request (turn 2: no C divergence) are listed as tolerated."""
    app = build_app(write_tolerant(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        text = await _fork_tab(pilot, app)
        lines = text.splitlines()
        served = next(i for i, ln in enumerate(lines) if "turn 1 origin #1" in ln)
        tolerated = [i for i, ln in enumerate(lines) if "≈ tolerated messages[3].content" in ln]
        assert len(tolerated) == 2 and tolerated[0] == served + 1, text
        assert f'recorded "{ORIGINAL}", live "{CHANGED}" (by tool_result)' in lines[tolerated[0]]
        assert "C: the tool result" not in text and "fork point: live from turn 2" in text


async def test_a_branch_without_its_origin_says_so_and_shows_its_own_turns(tmp_path: Path) -> None:
    app = build_app(write(tmp_path, with_origin=False))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        text = await _fork_tab(pilot, app)
        assert "origin not found" in text and "the origin run.jsonl is not here" in text
        assert (
            "served from the origin" not in text and "fork point: live from its first turn" in text
        )
        assert 'get_weather({"city":"Nice"})' in text and "✎ EDITED tool_result[call_A1]" in text


async def test_a_plain_run_has_no_fork_tab(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        await pilot.pause()
        assert (
            not app.query("#fork-view")
            and app.main.tabs.active == "turn"
            and "not a branch" in app.main.player.notice
        )
        assert "EDITED" not in pane_text(app, "#messages")
