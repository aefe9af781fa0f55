"""Every view of a turn says the same thing (issue 43, item 3): one real turn's token split and
cost, read through ``looptap show`` (text), ``show --json``, the inspector (its Growth tab and A
pane, driven with Pilot), the HTML page (the data it embeds and writes), the MCP ``growth`` tool
and the OTel export, are equal — same parts, same numbers, the same cost text with the same ``~``.

The turn: a real recording of pydantic-ai's tool-search eval (OpenAI chat, a tool loop: turn 2 of
its first conversation re-sends history and a tool result and appends new input), its URL moved to
a local OpenAI-compatible gateway (``127.0.0.1``), as a user who records through their own gateway
has it: the price is then the model's list price by its name, an estimate, shown ``~``.

On main this fails: ``show`` printed the analysis' raw segments (``user``, ``history`` that was the
assistant's part, and ``new`` overlapping them) where the inspector and HTML drew another split;
``show --json``, MCP and OTel carried no split (MCP the raw segments); the inspector's cumulative
cost had no ``~``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("textual")
pytest.importorskip("mcp")

from helpers import loaded, plain, shown, until
from textual.widgets import Static, TabbedContent

from looptap.cassettes.cli import main
from looptap.cassettes.reading import open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.views import growth_bars, money
from tests.real_corpus import CORPUS, load

RECORDING = (
    CORPUS / "pydantic-ai/tests/cassettes/test_tool_search/test_tool_search_eval[openai-chat].yaml"
)
#: The turn read through every view: conversation c1, turn 2.
SEQ = 2
PARTS = ("system", "tools", "history", "tool_results", "new")

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    """The recording as looptap's writer stores it, sent to a local gateway instead of
    api.openai.com."""
    if not RECORDING.exists():
        pytest.skip(f"the corpus recording is not here: {RECORDING}")
    out = tmp_path / "gateway.jsonl"
    with CassetteWriter(out, meta={"source": "vcr"}) as w:
        for ex in load(RECORDING):
            ex.url = ex.url.replace("https://api.openai.com/", "http://127.0.0.1:4000/")
            w.append(ex)
    return out


def _expected(path: Path) -> dict[str, Any]:
    """What the core computes for the turn: its split and its costs as text."""
    run = open_run(path)
    t = run.analysis.turns[SEQ]
    (bar,) = growth_bars([t])
    k = t.tokens
    assert t.conversation == "c1" and t.index == 2
    # the gateway: a list price by name
    assert k.price_estimated and k.cumulative_estimated, k.price_source
    split = {p: getattr(bar, p) for p in PARTS}
    assert sum(split.values()) == k.input
    # a turn that has them all
    assert split["history"] and split["tool_results"] and split["new"] and split["tools"]
    return {
        "split": split,
        "input": k.input,
        "cost": money(k.cost, True),
        "cumulative": money(k.cumulative_cost, True),
        "cost_usd": float(k.cost),  # type: ignore[arg-type]
        "cumulative_usd": float(k.cumulative_cost),  # type: ignore[arg-type]
    }


def _show_text(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The turn's row in ``show``'s growth table, by its column headings."""
    assert main(["show", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(ln for ln in lines if ln.split()[:3] == ["turn", "#", "input"])
    names = head.split()
    row = next(
        ln.split()
        for ln in lines
        if ln.split()[:2] == ["2", str(SEQ)] and len(ln.split()) == len(names)
    )
    cells = dict(zip(names, row, strict=True))
    labels = {
        "system": "system",
        "tools": "tools",
        "history": "history",
        "tool_results": "results",
        "new": "new",
    }
    assert "user" not in names  # the raw segments' column, overlapping the others
    return {
        "split": {p: int(cells[labels[p]]) for p in PARTS},
        "input": int(cells["input"]),
        "cost": cells["cost"],
        "cumulative": cells["cumulative"],
        "note": any(ln.strip().startswith("(~: estimated cost") for ln in lines),
    }


def _show_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["show", "--json", str(path)]) == 0
    objs = [orjson.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.startswith("{")]
    k = next(o for o in objs if o.get("seq") == SEQ)["tokens"]
    assert "segments" not in k  # the overlapping working figures are not another split to read
    return {
        "split": {p: k["split"][p] for p in PARTS},
        "input": k["split"]["input"],
        "cost_usd": float(k["cost"]),
        "cumulative_usd": float(k["cumulative_cost"]),
        "estimated": (k["price_estimated"], k["cumulative_estimated"]),
    }


async def _inspector(path: Path) -> dict[str, Any]:
    """The Growth tab's line for the turn and the A pane's cost row, as the screen shows them."""
    from looptap.inspector.app import build_app
    from looptap.inspector.widgets import TurnList

    app = build_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        app.query_one(TurnList).select_seq(SEQ)
        await until(pilot, lambda: shown(app, SEQ))
        a_pane = plain(app.query_one("#pane-a Static", Static))
        app.action_tab("growth")
        await until(pilot, lambda: app.query_one(TabbedContent).active == "growth")
        await until(pilot, lambda: f"(#{SEQ})" in plain(app.query_one("#growth-detail", Static)))
        detail = " ".join(plain(app.query_one("#growth-detail", Static)).split())
    m = re.search(
        r"input ([\d,]+) = system ([\d,]+) · tools ([\d,]+) · history ([\d,]+) · results ([\d,]+) "
        r"· new ([\d,]+) output [\d,]+ cost (\S+) cumulative (\S+)",
        detail,
    )
    assert m, detail
    nums = [int(g.replace(",", "")) for g in m.groups()[:6]]
    cost_row = next(ln for ln in a_pane.splitlines() if ln.startswith("cost"))
    return {
        "split": dict(zip(PARTS, nums[1:], strict=True)),
        "input": nums[0],
        "cost": m.group(7),
        "cumulative": m.group(8),
        "a_pane": cost_row,
    }


def _html(path: Path, tmp_path: Path) -> dict[str, Any]:
    """The data the HTML page embeds and writes out: the turn's A detail and its growth bar."""
    from tests.interop.test_html_report import page_data

    page = tmp_path / "run.html"
    assert main(["export", "--html", str(path), "-o", str(page), "-q"]) == 0
    data = page_data(page.read_text())
    k = data["detail"][str(SEQ)]["layers"]["A"]["tokens"]
    bar = next(b for b in data["growth"]["c1"] if b[0] == SEQ)
    # chart = detail
    assert dict(zip(PARTS, bar[2:7], strict=True)) == {p: k["split"][p] for p in PARTS}
    return {
        "split": {p: k["split"][p] for p in PARTS},
        "input": k["split"]["input"],
        "cost": k["cost_text"],
        "cumulative": k["cumulative_cost_text"],
        "chart_cumulative": bar[10],
    }


async def _mcp(path: Path) -> dict[str, Any]:
    """The MCP server's ``growth`` tool, called as a client calls it."""
    from mcp import Client

    from looptap.cassettes.mcp import build_server

    async def call(tool: str, args: dict[str, Any]) -> Any:
        async with Client(build_server([str(path.parent)])) as c:
            r = await c.call_tool(tool, args)
            assert not r.is_error
            return orjson.loads("".join(getattr(p, "text", "") for p in r.content))

    answer = await call("growth", {"run": path.name, "conversation": "c1"})
    row = next(r for r in answer["growth"] if r["seq"] == SEQ)
    summary = await call("run_summary", {"run": path.name})
    c1 = next(c for c in summary["recorded"]["conversations"] if c["conversation"] == "c1")
    # the total's number carries its flag too
    assert c1["cost_estimated"] is True and summary["cost_estimated"] is True
    return {
        "split": {p: row["split"][p] for p in PARTS},
        "input": row["split"]["input"],
        "cost": row["cost"],
        "cumulative": row["cumulative_cost"],
        "cost_usd": row["cost_usd"],
        "cumulative_usd": row["cumulative_cost_usd"],
        "estimated": (row["cost_estimated"], row["cumulative_estimated"]),
    }


def _otel(path: Path) -> dict[str, Any]:
    from tests.interop.cassette_files import build_request
    from tests.interop.test_otel import attrs, spans_of

    span = next(
        s for s in spans_of(build_request(open_run(path))) if attrs(s).get("looptap.seq") == SEQ
    )
    a = attrs(span)
    return {
        "split": {p: a[f"looptap.tokens.split.{p}"] for p in PARTS},
        "input": a["gen_ai.usage.input_tokens"],
        "cost_usd": a["looptap.cost.usd"],
        "cumulative_usd": a["looptap.cost.cumulative_usd"],
        "estimated": (a["looptap.cost.estimated"], a["looptap.cost.cumulative_estimated"]),
    }


async def test_one_turn_reads_the_same_split_and_cost_in_every_view(
    run_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    want = _expected(run_file)
    views = {
        "show": _show_text(run_file, capsys),
        "show --json": _show_json(run_file, capsys),
        "inspector": await _inspector(run_file),
        "html": _html(run_file, tmp_path),
        "mcp": await _mcp(run_file),
        "otel": _otel(run_file),
    }
    for name, got in views.items():
        assert got["split"] == want["split"], name
        assert got["input"] == want["input"], name
        for key in ("cost", "cumulative", "cost_usd", "cumulative_usd"):
            if key in got:
                assert got[key] == want[key], (name, key, got[key], want[key])
        if "estimated" in got:
            assert got["estimated"] == (True, True), name
    assert want["cost"].startswith("~$") and want["cumulative"].startswith("~$")
    assert views["show"]["note"]  # what ``~`` means, under the table
    assert views["html"]["chart_cumulative"] == want["cumulative"]
    assert views["inspector"]["a_pane"].split()[1:5] == [want["cost"], "·", "so", "far"]
    assert want["cumulative"] in views["inspector"]["a_pane"]


def test_a_transport_error_has_a_status_word_not_none(
    run_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A round trip that failed before an HTTP status came back (the upstream reset the connection)
    reads ``transport-error`` where the status goes, in ``show`` and in ``textconv``; on main both
    printed ``None``."""
    exs = load(RECORDING)[:2]
    exs[1].status, exs[1].reason, exs[1].response_chunks = None, None, []
    exs[1].response_headers, exs[1].transport_error = [], "Connection reset by peer"
    out = tmp_path / "reset.jsonl"
    with CassetteWriter(out, meta={"source": "vcr"}) as w:
        for ex in exs:
            w.append(ex)
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    head = next(ln for ln in text.splitlines() if ln.startswith("#1 "))
    assert "  transport-error  " in head and "None" not in head, head
    assert "    transport error: Connection reset by peer" in text
    # nor as a finish reason the API never sent (the normalised one stands alone)
    assert "None" not in text
    assert main(["textconv", str(out)]) == 0
    conv = capsys.readouterr().out
    assert (
        " transport-error" in next(ln for ln in conv.splitlines() if ln.startswith("#1"))
        and " None" not in conv
    )


async def test_the_c_panes_link_says_what_it_means(tmp_path: Path) -> None:
    """A turn threaded by the ``X-Looptap-Conversation`` header (as ``looptap demo``'s agent sends
    it) reads ``linked by header — the X-Looptap-Conversation request header puts it after #1`` in
    the C pane and on the HTML page; on main the pane said ``link header (previous turn #1)`` and no
    doc said what that was. docs/reading.md explains every link kind."""
    from looptap.inspector.app import build_app
    from looptap.inspector.widgets import TurnList

    if not RECORDING.exists():
        pytest.skip(f"the corpus recording is not here: {RECORDING}")
    out = tmp_path / "labelled.jsonl"
    with CassetteWriter(out, meta={"source": "vcr"}) as w:
        for ex in load(RECORDING)[:3]:
            ex.request_headers = [*ex.request_headers, ("X-Looptap-Conversation", "agent-1")]
            w.append(ex)
    app = build_app(out)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        app.query_one(TurnList).select_seq(2)
        await until(pilot, lambda: shown(app, 2))
        c = " ".join(plain(app.query_one("#pane-c Static", Static)).split())
    assert "linked by header — the X-Looptap-Conversation request header puts it after #1" in c, c
    from looptap.cassettes.views.report import report_data

    assert report_data(open_run(out))["detail"]["2"]["layers"]["C"]["link_text"].startswith(
        "header — the X-Looptap-Conversation"
    )
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reading.md").read_text()
    section = doc[doc.index("How a turn was linked") :]
    for kind in ("start", "extends", "rewritten", "previous_response_id", "header", "retry"):
        assert f"`{kind}`" in section, kind


def test_one_cost_text() -> None:
    """Four decimals from a tenth of a cent up, two significant digits below (a small cost never
    reads ``$0.0000``), ``~`` for an estimated price, ``unknown`` for none."""
    from decimal import Decimal

    assert money(Decimal("0.0036")) == "$0.0036"
    assert money(Decimal("0.0003855"), True) == "~$0.00039"
    assert money(Decimal("0.0000123"), True) == "~$0.000012"
    assert money(Decimal("1234.5"), True) == "~$1,234.5000"
    assert money(Decimal(0)) == "$0.0000"
    assert money(None) == money(None, True) == "unknown"
    assert money(0.00004) == "$0.000040"


def test_the_html_page_as_a_browser_shows_it(run_file: Path, tmp_path: Path) -> None:
    """The same turn on the HTML page as Chromium renders it (its A pane's split and cost rows, the
    page's summary): the text is the one the other views print (skips without Chromium)."""
    pytest.importorskip(
        "playwright.sync_api", reason="playwright (the test extra) is not installed"
    )
    from tests.interop.test_html_browser import chromium, clean_run, open_page

    exe = chromium()
    if exe is None:
        pytest.skip("no Chromium (apt-get install chromium, or LOOPTAP_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    want = _expected(run_file)
    page_file = tmp_path / "run.html"
    assert main(["export", "--html", str(run_file), "-o", str(page_file), "-q"]) == 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = open_page(browser, page_file)
            page.locator("#turnlist .row").nth(SEQ).click()
            assert page.text_content("#detail h2").startswith(f"#{SEQ} · c1 turn 2")
            a_pane = " ".join(page.text_content("#detail .layer-A").split())
            clean_run(page)
        finally:
            browser.close()
    s = want["split"]
    assert (
        f"input {want['input']} = system {s['system']} · tools {s['tools']} · history "
        f"{s['history']} · results {s['tool_results']} · new {s['new']} (estimated)"
    ) in a_pane, a_pane
    assert f"cost{want['cost']} · cumulative {want['cumulative']}" in a_pane, a_pane


def test_the_table_in_reading_md_is_what_show_prints(
    run_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/reading.md explains the growth table on this recording's table: it is show's, line for
    line."""
    assert main(["show", str(run_file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith("token growth, conversation c1 ")))
    table = lines[start : lines.index("", start)]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reading.md").read_text()
    assert "```text\n" + "\n".join(table) + "\n```" in doc


def test_the_recorders_closing_line_writes_the_run_cost_as_every_view(run_file: Path) -> None:
    """``looptap run``'s last lines give the run's cost with the same formatting and ``~``."""
    from looptap.proxy.summary import summary_lines

    run = open_run(run_file)
    line = next(ln for ln in summary_lines(run_file) if ln.startswith("tokens in "))
    assert f"; cost {money(run.cost, True)} (estimated cost: the host is not a " in line, line
