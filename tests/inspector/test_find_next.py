"""Issue 71 item 6: ``f`` (next turn with findings) stopped: from turn #1 it said "no further turn
with findings in this list" with warnings on #4 and #5 just below; from #0 it went #4 → #5 → #1
and stopped; no wrap; at 80 columns the message was cut to "…in this". Now ``f`` goes down the
list from the selected turn to the next turn with findings and round to the top, ``F`` up and
round to the bottom, and what the player line says fits 80 columns whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import loaded, plain

from looptap.inspector.app import build_app
from looptap.inspector.widgets import TurnList

pytestmark = pytest.mark.anyio


async def test_f_walks_down_the_list_and_wraps(demo_file: Path) -> None:
    app = build_app(demo_file)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        turns = app.query_one(TurnList)
        flagged = [t.seq for t in turns.turns if t.findings]
        listed = [t.seq for t in turns.turns]
        assert len(flagged) >= 3 and flagged != listed, (flagged, listed)
        player = app.main.player

        async def press(key: str) -> tuple[int | None, str]:
            await pilot.press(key)
            await pilot.pause()
            line = plain(player).rstrip("\n")
            assert len(line) <= 80 and "…" not in line, line  # the whole message, at 80 columns
            return turns.selected_seq, line

        start = flagged[0]
        turns.select_seq(start)
        await pilot.pause()
        seen = [(await press("f"))[0] for _ in flagged]
        # each flagged turn below in list order, then round to the first one
        assert seen == [*flagged[1:], flagged[0]], (seen, flagged)
        # from a turn without findings, the next one below it
        quiet = next(i for i, s in enumerate(listed) if s not in flagged and i > 0)
        turns.select_seq(listed[quiet])
        await pilot.pause()
        below = next(s for s in listed[quiet:] if s in flagged)
        assert (await press("f"))[0] == below
        # F goes up, and round to the bottom from the first
        turns.select_seq(flagged[0])
        await pilot.pause()
        seq, line = await press("F")
        assert seq == flagged[-1] and line.endswith("F: wrapped round to the bottom"), line
        seq, line = await press("f")
        assert seq == flagged[0] and line.endswith("f: wrapped round to the top"), line


async def test_the_run_ended_notice_covers_no_pane(run_file: Path) -> None:
    """Item 12: in ``run --inspect`` the "run ended" toast was drawn over part of the E pane (and
    said what the status line says). Now it is said on the player line and the status line only:
    no toast."""
    from looptap.inspector.reader import ChildExited

    app = build_app(run_file, live=True)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        app.main.post_message(ChildExited(1))
        await pilot.pause()
        await pilot.pause()
        assert app.main.reading.exit_status == 1
        assert list(app._notifications) == [], [n.message for n in app._notifications]
        line = plain(app.main.player).rstrip("\n")
        assert line.endswith("run ended: the command exited with status 1"), line


async def test_the_a_pane_of_a_400_turn_never_says_ok(demo_file: Path, tmp_path: Path) -> None:
    """Item 12: on a 400 turn whose findings are all another layer's (the client's bad request is
    the cause), the A pane's subtitle read "ok". It says the status; a turn the API answered well
    still reads "ok"."""
    from looptap.cassettes.reading import open_run
    from tests.support.failed_turn import with_a_400

    run = with_a_400(demo_file, tmp_path / "failed.jsonl")
    turns = open_run(run).analysis.turns
    app = build_app(run)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        pane: Any = app.query_one("#pane-a")
        pane.show_turn(turns[2].model_copy(update={"findings": []}))  # no A finding
        assert pane.border_subtitle == "HTTP 400"
        pane.show_turn(turns[1].model_copy(update={"findings": []}))
        assert pane.border_subtitle == "ok"
    # the narrow layout's A tab says so too, from the turn's summary
    from looptap.inspector.layout import api_quiet, tab_labels

    summary = app.main.reading.summary(2)
    assert summary is not None and api_quiet(summary.status, summary.error) == "HTTP 400"
    assert tab_labels([], compact=False, room=200, api="HTTP 400")["A"].endswith(" HTTP 400")
