"""Pilot tests: an imported round trip (``looptap import`` of a trace or trajectory) carries its
provenance mark in the messages view's head, which the core says (what the source gave, what
looptap inferred); the file's words are shown cleaned, never as markup; a recorded run has none."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fixture_run import exchanges
from helpers import loaded, pane_text

from looptap.cassettes.cli import main
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.inspector.app import build_app

pytestmark = pytest.mark.anyio

SIZE = (200, 45)
MARK = "⚙ reconstructed from"


async def test_an_imported_trajectory_shows_what_came_from_it_and_what_was_inferred(
    tmp_path: Path,
) -> None:
    traj, out = tmp_path / "traj.json", tmp_path / "run.jsonl"
    traj.write_bytes(
        orjson.dumps(
            {"model": "gpt-4o-mini", "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "Sunny."},
            ]}
        )
    )  # fmt: skip
    assert main(["import", "-q", str(traj), "-o", str(out)]) == 0
    app = build_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        (head,) = [ln for ln in pane_text(app, "#messages").splitlines() if MARK in ln]
        given, inferred = head.split("; inferred by looptap (not evidence): ")
        assert "reconstructed from a trajectory: " in given
        assert {"messages", "model", "output"} <= set(given.split(": ")[1].split(", "))
        assert {"finish_reason", "response.id", "tools"} <= set(inferred.strip().split(", "))


async def test_the_mark_is_the_files_words_cleaned_and_a_recorded_run_has_none(
    tmp_path: Path, run_file: Path
) -> None:
    hostile = tmp_path / "hostile.jsonl"
    with CassetteWriter(hostile, meta={"source": "otlp"}) as w:
        for ex in exchanges():
            ex.reconstructed = {"v": 1, "source": "[bold red]a trace\x1b]0;pwned\x07\x1b[2J",
                                "from": ["messages\x1b[31m"], "inferred": ["[link=x]ids[/link]"]}  # fmt: skip  # noqa: E501
            w.append(ex)
    app = build_app(hostile)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        text = pane_text(app, "#messages")
        (head,) = [ln for ln in text.splitlines() if MARK in ln]
        assert "[bold red]a trace" in head and "[link=x]ids[/link]" in head  # not markup
        assert "\x1b" not in text and "\x07" not in text
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "reconstructed" not in pane_text(app, "#messages")
