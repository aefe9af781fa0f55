"""The inspector shows a tool's HTTP under the model's call it served (issue 84, item 2): in the E
pane, beside the MCP server's side of a call, each tool HTTP call linked to it — method, host,
path, status, time, and the clipped bodies it sent and got."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import loaded, pane_text

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.inspector.app import build_app
from tests.cassettes.test_tool_http import tool, weather_run

pytestmark = pytest.mark.anyio


async def test_each_tool_http_call_is_shown_under_the_call_it_served(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in weather_run():
            w.append(ex)
    app = build_app(path)
    async with app.run_test(size=(180, 50)) as pilot:
        await loaded(pilot)
        text = pane_text(app, "#pane-e")
        paris, tokyo = text.index("id=call_P"), text.index("id=call_T")
        line = "⇄ tool http #2 (by its arguments) GET wx.example.com/v1/now?city=Paris&units=metric → 200  20 ms"  # noqa: E501
        assert line in text, text
        assert paris < text.index(line) < tokyo  # under Paris's call, not Tokyo's
        assert '⇄ tool http #1 (by its arguments) GET wx.example.com/v1/now?city=Tokyo' in text
        assert 'got: {"temp":15}' in text
        assert "telemetry" not in text  # no call was awaiting it


async def test_the_c_pane_shows_what_the_tool_got_beside_the_result_the_client_sent(
    tmp_path: Path,
) -> None:
    """The turn that sends the results back: under each pairing, the tool's HTTP call that served
    that call (here Paris's tool got 503 while the client told the model {"temp":15})."""
    run = weather_run()
    run[2] = tool("GET", "https://wx.example.com/v1/now?city=Paris&units=metric", 503, b"{}")
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in run:
            w.append(ex)
    app = build_app(path)
    async with app.run_test(size=(180, 60)) as pilot:
        await loaded(pilot)
        await pilot.press("j")  # the turn that sent the results (#3)
        await pilot.pause()
        text = pane_text(app, "#pane-c")
        paris = text.index("↔ result call_P")
        tokyo = text.index("↔ result call_T")
        line = "⇄ tool http #2 (by its arguments) GET wx.example.com/v1/now?city=Paris&units=metric → 503"  # noqa: E501
        assert line in text, text
        start = text.index(line)
        assert paris < start and (tokyo < paris or start < tokyo), text  # under Paris's result
        assert "⇄ tool http #1 (by its arguments) GET wx.example.com/v1/now?city=Tokyo" in text
        assert "telemetry" not in text  # answered nothing
