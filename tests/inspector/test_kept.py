"""Issue 48: the inspector of a finished run takes the analysis an earlier reader kept (its
whole-file read is then no analysis at all: docs/kept-analysis.md), and shows the same turns and
findings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import loaded

from looptap.cassettes.analysis import RunAnalyser
from looptap.cassettes.reading import RunReader, keep
from looptap.inspector.app import build_app
from looptap.inspector.widgets import TurnList, turn_line

pytestmark = pytest.mark.anyio


async def _seen(path: Path) -> tuple[list[str], list[tuple[str, int | None]]]:
    app = build_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        turn_list = app.query_one(TurnList)
        rows = [turn_line(t, True, 150).plain for t in turn_list.turns]
        findings = sorted(
            (f.code, f.seq) for s in app.main.reading.source.summaries.values() for f in s.findings
        )
        return rows, findings


async def test_the_inspector_of_a_finished_run_takes_its_kept_analysis(
    run_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(run_file.read_bytes())
    monkeypatch.setitem(keep.__globals__, "MIN_BYTES", 0)  # (the kept analysis' module)
    monkeypatch.setenv("LOOPTAP_CACHE_DIR", str(tmp_path / "cache"))
    added = []
    real = RunAnalyser.add

    def add(analyser: RunAnalyser, *a: Any, **k: Any) -> Any:
        added.append(1)
        return real(analyser, *a, **k)

    monkeypatch.setattr(RunAnalyser, "add", add)
    first = await _seen(path)
    analysed = len(added)
    assert analysed and list((tmp_path / "cache").glob("*.sqlite"))
    assert await _seen(path) == first
    assert len(added) == analysed  # nothing analysed: the kept analysis was taken
    assert first[1]  # (findings in E, A and C)


async def test_every_turn_of_a_kept_analysis_is_listed_not_only_its_first_and_last_steps(
    run_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept analysis is summarised a few turns a step, and those steps read no record: each
    must still reach the screen (they were dropped, so the 1 GB run listed 888 of 52,600 turns)."""
    from looptap.inspector import reader

    path = tmp_path / "run.jsonl"
    path.write_bytes(run_file.read_bytes())
    monkeypatch.setitem(keep.__globals__, "MIN_BYTES", 0)  # (the kept analysis' module)
    monkeypatch.setenv("LOOPTAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(RunReader.step.__globals__, "KEPT_STEP", 1)  # (the reader's module)
    monkeypatch.setattr(reader, "SHOW_EVERY", 0)  # every step shown as it comes
    first = await _seen(path)
    assert len(first[0]) == 5 and list((tmp_path / "cache").glob("*.sqlite"))
    assert await _seen(path) == first
