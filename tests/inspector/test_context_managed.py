"""The inspector shows where the context was managed (issue 82): a mark in the turn list on the turn
whose request the client trimmed or summarised, and in its C pane what was dropped (by role, the
user's messages quoted) and what replaced it — computed by the core (``Dispatch.context``), drawn
here. On fec4f2c2 the summarised request was the first turn of a conversation of its own: no mark,
nothing said."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import loaded, pane_text, shown, until

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.inspector.app import build_app
from looptap.inspector.widgets import TurnList
from looptap.inspector.widgets._turn_list import MANAGED_MARK, turn_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cassettes" / "analysis"))
from context_cases import wild_langchain_summarization

pytestmark = pytest.mark.anyio


async def test_the_summarised_turn_is_marked_and_its_c_pane_says_what_was_dropped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in wild_langchain_summarization().script.exchanges:
            w.append(ex)
    app = build_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        turns = app.query_one(TurnList)
        marked = [t.seq for t in turns.turns if MANAGED_MARK in turn_line(t, True).plain]
        assert marked == [4]
        assert [t.managed for t in turns.turns if t.seq == 4] == ["summarised"]
        turns.select_seq(4)
        await until(pilot, lambda: shown(app, 4))
        text = pane_text(app, "#pane-c")
        assert "✂ context managed: the client summarised the history of #2's request" in text, text
        assert "dropped 5 messages (2 assistant, 2 tool, 1 user)" in text, text
        assert (
            "- dropped user message: What is the weather in Paris, Tokyo, Berlin and Madrid?"
            in text
        )
        assert "replaced by a summary: history item [1], the answer of #3" in text
        assert "C.history_trimmed" in text
