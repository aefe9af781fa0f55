"""The inspector shows an MCP tool server's side of a model's tool call: under the call in the E
pane, the tools/call round trip that ran it, and what the server returned or the error it gave."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import loaded, pane_text

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.inspector.app import build_app
from tests.cassettes.test_mcp_calls import run_exchanges

pytestmark = pytest.mark.anyio


def _write(path: Path, **kw: object) -> Path:
    with CassetteWriter(path) as w:
        for ex in run_exchanges(**kw):  # type: ignore[arg-type]
            w.append(ex)
    return path


@pytest.mark.parametrize("meta", [True, False], ids=["by-id", "by-name-and-arguments"])
async def test_the_server_side_is_shown_under_the_models_call(tmp_path: Path, meta: bool) -> None:
    app = build_app(_write(tmp_path / "run.jsonl", meta=meta))
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        text = pane_text(app, "#pane-e")
        assert "mcp__weather__get_weather" in text
        line = (
            "⇄ MCP server #4 ran get_weather"
            + ("" if meta else ", linked by tool and arguments")
            + " → sunny, 21 C"
        )
        assert line in text, text
        assert "↩ next turn's result: sunny, 21 C" in text


async def test_an_error_hidden_from_the_model_is_shown_beside_what_it_got(tmp_path: Path) -> None:
    err = "City not found: Parus"
    hidden = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "done"}
    app = build_app(_write(tmp_path / "run.jsonl", server_error=err, sent=hidden))
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        text = pane_text(app, "#pane-e")
        assert f"⇄ MCP server #4 ran get_weather → error result: {err}" in text, text
        assert "↩ next turn's result: done" in text


async def test_a_call_no_server_ran_shows_no_server_side(tmp_path: Path) -> None:
    made_up = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "sunny, 21 C"}
    app = build_app(_write(tmp_path / "run.jsonl", sent=made_up, run=False))
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        assert "MCP server" not in pane_text(app, "#pane-e")
        await pilot.press("down")
        await pilot.pause(0.2)
        assert "C.tool_call_not_executed" in pane_text(app, "#pane-c")
