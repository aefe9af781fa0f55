"""Issue 54: the inspector's E pane marks a call the API ran itself: no result due from the client.

Was: the tool-search answer's server call read "↩ no next turn yet: the result has not been sent"
(with a next turn, "↩ the next turn sent no result for this call" in red), as if the client owed
it. The recording is the corpus' real one (pydantic-ai's
test_anthropic_native_tool_search: the API's ``tool_search_tool_bm25`` beside the client's
``get_exchange_rate``, the run's last turn), imported as ``looptap import`` does. Twin: the
client's own call keeps its line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import loaded, pane_text
from real_corpus import CORPUS

from looptap.cassettes.cli import main
from looptap.inspector.app import build_app

pytestmark = pytest.mark.anyio

RUN = (
    CORPUS / "pydantic-ai/tests/cassettes/test_native_tool_search_vcr/"
    "test_anthropic_native_tool_search.yaml"
)


async def test_the_e_pane_says_the_api_ran_its_own_tool(tmp_path: Path) -> None:
    run = tmp_path / "run.jsonl"
    assert main(["import", "-q", "-o", str(run), str(RUN)]) == 0
    app = build_app(run)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        e = pane_text(app, "#pane-e")
        server, client = e.split("get_exchange_rate", 1)
        assert "tool_search_tool_bm25" in server and "run by the API" in server
        assert "no result" not in server and "not been sent" not in server
        assert "no next turn yet" in client  # the client's call: its result is still to come
