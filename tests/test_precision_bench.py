"""bench/precision.py's page: precision by API family beside the totals, before and after (the
client matrix and the corpus are judged per family for issues 90-92)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _precision() -> Any:
    spec = importlib.util.spec_from_file_location(
        "precision_bench", ROOT / "bench" / "precision.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rec(code: str, family: str | None, true: bool, multi: bool = True) -> dict[str, Any]:
    r: dict[str, Any] = {"section": "matrix", "where": f"x (bug) #{len(code)}", "code": code}
    r.update(message="m", multi=multi, true=true, why="w")
    if family is not None:
        r["family"] = family
    return r


def _run(commit: str, recs: list[dict[str, Any]]) -> dict[str, Any]:
    stats = {"files": 2, "turns": 5, "multi_turns": 4}
    return {"commit": commit, "sections": {"matrix": {"findings": recs, "stats": stats}}}


def test_by_family_side_by_side() -> None:
    p = _precision()
    after = _run("aaaa", [_rec("C.x", "anthropic", True), _rec("C.y", "gemini", False, False)])
    before = _run("bbbb", [_rec("C.x", "anthropic", True), _rec("C.x", "gemini", True)])
    page = p.render(after, before)
    assert "## matrix: by API family" in page
    rows = [ln for ln in page.splitlines() if ln.startswith(("| anthropic", "| gemini"))]
    assert rows == [
        "| anthropic | 1 of 1: 100.0% | 1 of 1: 100.0% | 1 of 1: 100.0% | 1 of 1: 100.0% |",
        "| gemini | 1 of 1: 100.0% | 1 of 1: 100.0% | 0 of 1: 0.0% | no warnings or errors |",
    ]


def test_saved_run_without_families() -> None:
    """A --json saved before the family was kept still renders: its findings under "–"."""
    p = _precision()
    page = p.render(
        _run("aaaa", [_rec("C.x", "openai_chat", True)]), _run("bbbb", [_rec("C.x", None, True)])
    )
    assert (
        "| – | 1 of 1: 100.0% | 1 of 1: 100.0% | no warnings or errors | no warnings or errors |"
        in page
    )
    assert (
        "| openai_chat | no warnings or errors | no warnings or errors | 1 of 1: 100.0% |" in page
    )
