"""The inspector reads a replay miss as the page and ``looptap show`` do (issue 43, item 3): the
turn's row says ``replay miss``, the A pane says looptap's replay answered (no API error), the C
pane carries the divergence and its differences."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import loaded, pane_text, shown, until

from looptap.inspector.app import build_app
from looptap.inspector.widgets import turn_line
from tests.replay.conftest import served_miss_run

pytestmark = pytest.mark.anyio


async def test_a_replay_miss_reads_as_the_clients_divergence(tmp_path: Path) -> None:
    app = build_app(served_miss_run(tmp_path / "served.jsonl"))
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        rows = [turn_line(t, show_conversation=True).plain for t in app.main.reading.index.turns]
        assert "replay miss" in rows[1] and "HTTP 400" not in rows[1], rows
        await pilot.press("down")
        await until(pilot, lambda: shown(app, 1))
        a, c = pane_text(app, "#pane-a"), pane_text(app, "#pane-c")
        assert (
            "A.http_error" not in a
            and "looptap_replay_miss" not in a
            and "answered by looptap's replay, not the API" in a
        ), a
        assert (
            "C.diverged_from_recording" in c
            and "C: the tool result for call_A1 changed (messages[3].content)"
            in " ".join(c.split())
        ), c
        assert 'messages[3].content: recorded "sunny, 21 C", got "rainy, 9 C"' in c, c
