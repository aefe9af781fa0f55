"""The inspector shows a traced shell command under the model's call that ran it (issue 93): in
the E pane under the call, and in the C pane beside the result the client sent back — the
command, its exit or signal, its output's start and the files it touched, as the core computed
them (cassettes/views/_shell.py), recorded text never raw on the terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import loaded, pane_text, settled, shown, until
from textual.pilot import Pilot

from looptap.inspector.app import build_app
from tests.cassettes.shell_fixture import Cmd, shell_run

pytestmark = pytest.mark.anyio

HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J[bold red]boom[/] \u202eevil"


def _run(tmp_path: Path) -> Path:
    return shell_run(
        tmp_path / "run.jsonl",
        [
            Cmd(
                "pytest -q", exit=1, stdout="1 failed: test_add\n", files=[("write", "/w/.cache/x")]
            ),
            Cmd("cat banner.txt", exit=0, stdout=HOSTILE),
            Cmd("pytest -q || true", exit=0, stdout="", result="ok"),
        ],
        "Fixed.",
    )


async def _pane(tmp_path: Path, seq: int, pane: str) -> str:
    app = build_app(_run(tmp_path))
    async with app.run_test(size=(180, 50)) as pilot:
        await loaded(pilot)
        app.query_one("#turn-list").select_seq(seq)  # type: ignore[attr-defined]
        await until(pilot, lambda: shown(app, seq))
        await until(pilot, lambda: settled(app))
        return pane_text(app, pane)


async def test_the_e_pane_shows_the_command_under_its_call(tmp_path: Path) -> None:
    text = await _pane(tmp_path, 0, "#pane-e")
    line = "⌁ traced $ pytest -q → exit 1 · stdout: “1 failed: test_add”"
    assert line in text, text
    assert "files: +/w/.cache/x" in text
    assert text.index("id=call_0") < text.index(line) < text.index("next turn's result")


async def test_the_c_pane_shows_it_beside_the_result_sent_back(tmp_path: Path) -> None:
    text = await _pane(tmp_path, 1, "#pane-c")
    result = text.index("↔ result call_0")
    line = text.index("⌁ traced $ pytest -q → exit 1")
    assert result < line, text


async def test_hostile_output_is_shown_as_text(tmp_path: Path) -> None:
    text = await _pane(tmp_path, 1, "#pane-e")
    line = "⌁ traced $ cat banner.txt → exit 0 · stdout: “␛]52;c;ZXZpbA==␇␛[2J[bold red]boom[/] \\u202eevil”"  # noqa: E501
    assert line in text, text
    assert "\x1b" not in text and "\u202e" not in text


def _at(seq: int) -> Any:
    async def run_before(pilot: Pilot[None]) -> None:
        app = await loaded(pilot)
        app.query_one("#turn-list").select_seq(seq)  # type: ignore[attr-defined]
        await until(pilot, lambda: shown(app, seq))
        await until(pilot, lambda: settled(app))
        await pilot.pause(0.3)

    return run_before


def test_shell_snapshot(snap_compare: Any, tmp_path: Path) -> None:
    """Turn 1: the E pane's traced command (hostile output, made safe) under its call, and the C
    pane's failed command beside the result the client sent back."""
    assert snap_compare(build_app(_run(tmp_path)), terminal_size=(160, 45), run_before=_at(1))
