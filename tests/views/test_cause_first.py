"""Root cause first in every view (issue 54): the analysis orders a turn's findings and the run's
once (errors, then warnings, then infos; a consequence, ``details.caused_by``, right after its
cause), and ``show``, ``show --json``, the inspector (Findings tab, ``f``), the HTML page and the
MCP server keep that order.

The run: an OpenAI chat agent that calls the same tool twice (the model's own ``E.repeated_call``,
an info: a second try can be legitimate), then a Gemini agent whose client never runs the model's
call, so the model calls it again: ``C.dropped_tool_result`` (an error) with ``E.repeated_call``
folded under it (info, ``caused_by``). Both wire formats as tests/cassettes/analysis/scenarios.py
writes them.

Before: ``show``'s turn block and ``show --json`` listed the folded ``↳ E.repeated_call`` above its
cause (the checks' order), the run's summary began with the E infos (grouped by layer, in
recording order), the inspector's Findings tab listed in recording order and ``f`` went to the
first info (#1) before the run's first error (#4). The HTML page and MCP already ordered with
``ordered_findings``; each view sorting for itself is what let the others differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from scenarios import WEATHER, Call, Script

pytest.importorskip("textual")
pytest.importorskip("mcp")

from helpers import loaded, until
from textual.widgets import TabbedContent

from looptap.cassettes.cli import main
from looptap.cassettes.recording.pipeline import CassetteWriter

pytestmark = pytest.mark.anyio

#: The Gemini turn with the cause and its folded consequence; the OpenAI turn with the lone info.
CAUSE_SEQ, INFO_SEQ = 4, 1
#: The run's findings root cause first: the two errors (each cause followed by what it caused),
#: then the info, as (code, seq, folded).
WANT = [
    ("C.dropped_tool_result", 4, False),
    ("E.repeated_call", 4, True),
    ("C.dropped_tool_result", 5, False),
    ("E.repeated_call", 1, False),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _loop() -> list[Any]:
    """OpenAI chat: the same call twice, each run and answered alike, then an answer."""
    s = Script("openai_chat", tools=[WEATHER])
    s.user("Weather in Paris?")
    for _ in range(2):
        s.reply(calls=[Call("get_weather", {"city": "Paris"})])
        s.results("sunny, 21 °C")
    s.reply("It is sunny in Paris.")
    return s.exchanges


def _never_run() -> list[Any]:
    """Gemini: the client echoes the model's call and never runs it; the model calls it again."""
    s = Script("gemini", tools=[WEATHER])
    s.user("Weather in Rome?")
    for _ in range(2):
        s.reply(calls=[Call("get_weather", {"city": "Rome"})])
    s.reply("I could not get the weather.")
    return s.exchanges


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    out = tmp_path / "run.jsonl"
    with CassetteWriter(out, meta={"source": "test"}) as w:
        for i, ex in enumerate([*_loop(), *_never_run()]):
            ex.seq = i
            w.append(ex)
    return out


def _key(f: dict[str, Any]) -> tuple[str, int, bool]:
    """(code, seq, folded) of a finding in JSON: ``details.caused_by``, or MCP's ``caused_by``."""
    return (
        f["code"],
        f["seq"],
        bool(f.get("caused_by") or (f.get("details") or {}).get("caused_by")),
    )


def _show(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the turn's block: the cause, then its consequence indented under it
    block = lines[lines.index(next(ln for ln in lines if ln.startswith(f"#{CAUSE_SEQ} "))) :]
    found = [ln.strip() for ln in block[: block.index("")] if "C.dropped" in ln or "E.rep" in ln]
    assert [ln.split(":")[0] for ln in found] == [
        "✖ C C.dropped_tool_result",
        "↳ · E E.repeated_call",
    ], found
    # the run's list leads with the worst root cause, not with the E layer's infos
    head = lines.index("findings, root causes first:")
    listed = lines[head + 1 : head + 1 + len(WANT)]
    assert [ln.split()[:4] for ln in listed] == [
        ["✖", "C", "C.dropped_tool_result", f"(#{CAUSE_SEQ}"],
        ["↳", "·", "E", "E.repeated_call"],
        ["✖", "C", "C.dropped_tool_result", "(#5"],
        ["·", "E", "E.repeated_call", f"(#{INFO_SEQ}"],
    ], listed
    assert "(caused by C.dropped_tool_result on #4)" in listed[1]


def _show_json(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--json", str(path)]) == 0
    objs = {o["seq"]: o for o in map(orjson.loads, capsys.readouterr().out.splitlines())}
    assert [_key(f) for f in objs[CAUSE_SEQ]["findings"]] == WANT[:2]


async def _inspector(path: Path) -> None:
    from looptap.inspector.app import build_app
    from looptap.inspector.widgets import FindingsTable, TurnList

    app = build_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        turns = app.query_one(TurnList)
        assert turns.selected_seq == 0
        # f walks the list down (issue 71 item 6): the info on #1, then the error on #4, #5; the
        # Findings tab (3) is where the root cause comes first
        await pilot.press("f")
        assert turns.selected_seq == INFO_SEQ
        await pilot.press("f")
        assert turns.selected_seq == CAUSE_SEQ
        await pilot.press("3")
        assert app.query_one(TabbedContent).active == "findings"
        table = app.query_one(FindingsTable)
        await until(pilot, lambda: len(table.findings) == len(WANT))
        assert [(f.code, f.seq, bool(f.details.get("caused_by"))) for f in table.findings] == WANT


def _html(path: Path, tmp_path: Path) -> None:
    from tests.interop.test_html_report import page_data

    page = tmp_path / "run.html"
    assert main(["export", "--html", str(path), "-o", str(page), "-q"]) == 0
    data = page_data(page.read_text())
    assert [_key(f) for f in data["findings"]] == WANT
    assert [_key(f) for f in data["detail"][str(CAUSE_SEQ)]["findings"]] == WANT[:2]


async def _mcp(path: Path) -> None:
    from mcp import Client

    from looptap.cassettes.mcp import build_server

    async with Client(build_server([str(path.parent)])) as c:

        async def call(tool: str, args: dict[str, Any]) -> Any:
            r = await c.call_tool(tool, args)
            assert not r.is_error
            return orjson.loads("".join(getattr(p, "text", "") for p in r.content))

        listed = await call("findings", {"run": path.name})
        assert [_key(f) for f in listed["recorded"]["findings"]] == WANT
        summary = await call("run_summary", {"run": path.name})
        roots = [(f["code"], f["seq"]) for f in summary["root_causes"]]
        assert roots == [("C.dropped_tool_result", 4), ("C.dropped_tool_result", 5),
                         ("E.repeated_call", 1)]  # fmt: skip
        turn = await call("turn", {"run": path.name, "seq": CAUSE_SEQ})
        assert [_key(f) for f in turn["findings"]] == WANT[:2]


async def test_every_view_lists_the_root_cause_first(
    run_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from looptap.cassettes.reading import open_run

    analysis = open_run(run_file).analysis
    assert [(f.code, f.seq, bool(f.details.get("caused_by"))) for f in analysis.findings] == WANT
    _show(run_file, capsys)
    _show_json(run_file, capsys)
    await _inspector(run_file)
    _html(run_file, tmp_path)
    await _mcp(run_file)
