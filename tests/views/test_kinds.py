"""A conversation's kind and parent (issue 45 item 6), computed once by the core
(cassettes/analysis/conversations.py), read the same in every view: ``show``'s heading, ``show
--json`` (``conversation_kind``, ``conversation_parent_seq`` on each round trip), the inspector's
conversation list, the HTML page's conversation menu, MCP's ``run_summary`` and OTel's
conversation span. The run: Google ADK's root agent hands a weather question to weather_agent
(``handoff``), beside an agent used as a tool (``agent_tool``); both recorded shapes are
tests/cassettes/analysis/test_agents.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from test_agents import adk_handoff, agent_as_tool

from looptap.cassettes.cli import main
from looptap.cassettes.reading import open_run
from looptap.cassettes.recording.pipeline import CassetteWriter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    out = tmp_path / "agents.jsonl"
    with CassetteWriter(out, meta={"source": "test"}) as w:
        for i, ex in enumerate([*adk_handoff(), *agent_as_tool()]):
            ex.seq = i
            w.append(ex)
    return out


#: (kind, parent seq) of each conversation, in order: the root, its handoff, then the second
#: root and the agent it used as a tool.
WANT = [("main", None), ("handoff", 0), ("main", None), ("agent_tool", 3)]


async def test_every_view_reads_the_kind_and_parent_the_core_found(
    run_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = open_run(run_file)
    convs = list(run.analysis.conversations)
    assert [(c.kind, c.parent_seq) for c in convs] == WANT
    assert [c.turns for c in convs] == [[0], [1, 2], [3, 5], [4]]

    assert main(["show", str(run_file)]) in (0, 1)
    text = capsys.readouterr().out
    assert f"conversation {convs[1].id} " in text and "2 turns, handoff from #0)" in text
    assert "1 turn, agent used as a tool by #3)" in text

    assert main(["show", "--json", str(run_file)]) in (0, 1)
    objs = [orjson.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.startswith("{")]
    by_conv = {
        o["conversation"]: (o["conversation_kind"], o["conversation_parent_seq"]) for o in objs
    }
    assert [by_conv[c.id] for c in convs] == WANT

    from looptap.inspector.widgets import conversation_label

    assert [conversation_label(c).rsplit(" · ", 1)[-1] for c in convs[1::2]] == [
        "handoff from #0",
        "agent used as a tool by #3",
    ]

    from tests.interop.test_html_report import page_data

    page = tmp_path / "run.html"
    assert main(["export", "--html", str(run_file), "-o", str(page), "-q"]) == 0
    data = page_data(page.read_text())
    assert [(c["kind"], c["parent_seq"]) for c in data["conversations"]] == WANT
    assert [c["kind_text"] for c in data["conversations"]] == [
        "",
        "handoff from #0",
        "",
        "agent used as a tool by #3",
    ]

    from tests.interop.cassette_files import build_request
    from tests.interop.test_otel import attrs, spans_of

    roots = {
        a["looptap.conversation"]: a
        for a in map(attrs, spans_of(build_request(run)))
        if "looptap.turns" in a
    }
    assert [
        (roots[c.id]["looptap.conversation.kind"], roots[c.id].get("looptap.parent_seq"))
        for c in convs
    ] == WANT

    summary = await _mcp_summary(run_file)
    assert [(c["kind"], c["parent_seq"]) for c in summary["recorded"]["conversations"]] == WANT


async def _mcp_summary(path: Path) -> Any:
    pytest.importorskip("mcp")
    from mcp import Client

    from looptap.cassettes.mcp import build_server

    async with Client(build_server([str(path.parent)])) as c:
        r = await c.call_tool("run_summary", {"run": path.name})
        assert not r.is_error
        return orjson.loads("".join(getattr(p, "text", "") for p in r.content))
