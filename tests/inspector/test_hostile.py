"""The inspector on a cassette whose every shown field is hostile (terminal escapes, bidi,
Rich/Textual markup and action strings): the findings cells and toasts built from wire text show
markup literally. Every tab, every turn, findings, search, help and the command palette visited,
then every widget in the DOM walked (nothing rendered holds a raw control, no markup interpreted,
the literal ``[@click=app.quit]`` visible, the app still running, no screenshot file written): the
hostile matrix's inspect cells (tests/hostile/test_matrix.py), on this same file among others."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import until
from textual.widgets import DataTable
from textual.widgets._toast import Toast

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.untrusted import has_unsafe
from looptap.inspector.app import InspectorApp
from looptap.inspector.safe import wire, wire_line
from tests.hostile.corpus import HOSTILE, PWNED_DIR, hostile_exchanges
from tests.hostile.drive_inspector import rendered_lines

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def hostile_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "hostile.jsonl"
    with CassetteWriter(path) as w:
        for ex in hostile_exchanges():
            w.append(ex)
    return path


def test_wire_text_is_cleaned_and_never_markup() -> None:
    t = wire(HOSTILE)
    assert not has_unsafe(t.plain)
    assert "[@click=app.quit]" in t.plain and not t.spans  # literal text, no style parsed from it
    assert "\n" not in wire_line("a\nb").plain


# Every widget on every screen, driven over the same file (every hostile family): the hostile
# matrix's inspect cell
# (tests/hostile/test_matrix.py::test_the_inspector_finds_nothing_unsafe_on_any_screen) runs
# tests/hostile/drive_inspector.py's drive() on it, in a process of its own, and checks its verdict.


async def test_findings_cells_and_toasts_show_markup_literally(
    hostile_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = InspectorApp(hostile_file)
    # Pilot hides toasts and tooltips unless asked: here they are rendered and walked.
    async with app.run_test(size=(160, 45), notifications=True, tooltips=True) as pilot:
        # hung only when nothing progresses
        await until(pilot, lambda: app.main.reading.complete or app.main.reading.failed)
        # A toast built from wire text: [type=x] once crashed the TUI with a MarkupError.
        # (Kept up for an hour: on a busy machine the default few seconds ran out before they
        # were read. Waited for by state, not by pauses.)
        app.notify("tool failed: " + HOSTILE, timeout=3600)
        app.notify("title test", title=HOSTILE, timeout=3600)
        app.notify("[@click=app.quit]Q[/] [type=x]\x1b[2J", timeout=3600)
        await until(pilot, lambda: len(app.screen.query(Toast)) >= 3)
        app.query_one("#tabs").active = "findings"  # type: ignore[attr-defined]
        await until(pilot, lambda: any(t.row_count for t in app.screen.query(DataTable)))
        await pilot.pause()
        cells = [
            str(c)
            for t in app.screen.query(DataTable)
            for row in range(t.row_count)
            for c in t.get_row_at(row)
        ]
        assert any("[@click=" in c for c in cells), cells[:5]
        lines = [
            line for w in app.screen.walk_children(with_self=True) for line in rendered_lines(w)
        ]
        toasts = " ".join(line for t in app.screen.query(Toast) for line in rendered_lines(t))
        assert "tool failed" in toasts and "title test" in toasts
        assert "[@click=app.quit]Q[/] [type=x]␛[2J" in toasts, toasts
        assert not [line for line in lines if has_unsafe(line)]
        assert app.is_running
        await pilot.press("q")
    assert not list(tmp_path.glob("*.svg")) and not Path(PWNED_DIR).exists()
