"""A price is marked estimated wherever it is one (issue 54), in every family and every view.

The runs: pydantic-ai's tool-search eval recorded against OpenAI chat, Anthropic and Gemini (real
recordings from ../shared/corpus), each moved to one local gateway at ``127.0.0.1:4000`` as a user
who records through their own gateway has them. genai-prices knows no such host: every price is the
model's list price, an estimate, ``~`` in text and ``price_estimated: true`` in JSON, whichever
family's wire format the gateway speaks.

Before: the OpenAI run read ``~$0.00030`` while the Anthropic and Gemini runs on the same host read
``$0.0036`` and ``$0.00031`` with ``price_estimated: false`` (priced as the vendor their format
names, as if the gateway were that vendor); and a price of token counts looptap estimated (a
stream without usage) was not marked either. The token split disagreed as well: on a logical turn
whose tool result was new, OpenAI's ``results`` (re-sent tool results) read 4 and Anthropic's 0,
the tool message's template tokens counted as results in one wire and as user text in the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from scenarios import FAMILIES, WEATHER, Call, Script

pytest.importorskip("textual")
pytest.importorskip("mcp")

from helpers import loaded, plain, shown, until
from textual.widgets import Static

from looptap.cassettes.cli import main
from looptap.cassettes.reading import open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.views import growth_bars
from tests.real_corpus import CORPUS, load

EVAL = CORPUS / "pydantic-ai/tests/cassettes/test_tool_search"
RECORDINGS = {
    family: EVAL / f"test_tool_search_eval[{name}].yaml"
    for family, name in (("openai_chat", "openai-chat"), ("anthropic", "anthropic"),
                         ("gemini", "google"))
}  # fmt: skip
GATEWAY = "http://127.0.0.1:4000/"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    """The three recordings in one cassette, every URL moved to the gateway."""
    missing = [str(p) for p in RECORDINGS.values() if not p.exists()]
    if missing:
        pytest.skip(f"the corpus recordings are not here: {missing}")
    out = tmp_path / "gateway.jsonl"
    seq = 0
    with CassetteWriter(out, meta={"source": "vcr"}) as w:
        for path in RECORDINGS.values():
            for ex in load(path):
                u = urlsplit(ex.url)
                ex.url = ex.url.replace(f"{u.scheme}://{u.netloc}/", GATEWAY)
                ex.seq = seq
                seq += 1
                w.append(ex)
    return out


def _first_of_each_family(path: Path) -> dict[str, int]:
    """The first priced turn of each family (seq), checked in the core: priced, estimated."""
    a = open_run(path).analysis
    firsts: dict[str, int] = {}
    for t in a.turns.values():
        firsts.setdefault(t.family, t.seq)
        k = t.tokens
        assert k.cost is not None, (t.family, t.seq, k.price_source)
        assert k.price_estimated and k.cumulative_estimated, (t.family, t.seq, k.price_source)
    assert set(firsts) == set(RECORDINGS)
    return firsts


def _show(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every row of every growth table: both costs with their ``~``, and what ``~`` means."""
    assert main(["show", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = 0
    for i, ln in enumerate(lines):
        if ln.startswith("token growth, conversation "):
            head = lines[i + 1].split()
            assert head[-3:] == ["cost", "cumulative", "source"], head
            for row in lines[i + 2 :]:
                cells = row.split()
                if not cells or not cells[0].isdigit():
                    break
                assert cells[-3].startswith("~$") and cells[-2].startswith("~$"), (ln, row)
                rows += 1
    assert rows == len(open_run(path).analysis.turns)
    assert sum(ln.strip().startswith("(~: estimated cost") for ln in lines) >= len(RECORDINGS)


def _show_json(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--json", str(path)]) == 0
    objs = [orjson.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    tokens = [o["tokens"] for o in objs if o.get("tokens")]
    assert len(tokens) == len(objs) > 0
    for k in tokens:
        assert (k["price_estimated"], k["cumulative_estimated"]) == (True, True), k
        assert k["price_source"].startswith("estimated:"), k["price_source"]


async def _inspector(path: Path, firsts: dict[str, int]) -> None:
    """The A pane's cost row of a turn of each family, and the Growth tab's detail line."""
    from looptap.inspector.app import build_app
    from looptap.inspector.widgets import TurnList

    app = build_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        for family, seq in firsts.items():
            app.query_one(TurnList).select_seq(seq)
            await until(pilot, lambda s=seq: shown(app, s))
            pane = plain(app.query_one("#pane-a Static", Static))
            cost = next(ln for ln in pane.splitlines() if ln.startswith("cost"))
            assert cost.split()[1].startswith("~$") and "so far ~$" in cost, (family, cost)
            assert "(~: estimated)" in cost, (family, cost)
            app.action_tab("growth")
            await until(pilot, lambda s=seq: f"(#{s})" in plain(app.query_one("#growth-detail")))
            detail = " ".join(plain(app.query_one("#growth-detail", Static)).split())
            assert " cost ~$" in detail and " cumulative ~$" in detail, (family, detail)
            app.action_tab("turn")


def _html(path: Path, tmp_path: Path) -> None:
    from tests.interop.test_html_report import page_data

    page = tmp_path / "run.html"
    assert main(["export", "--html", str(path), "-o", str(page), "-q"]) == 0
    data = page_data(page.read_text())
    assert data["totals"]["cost_estimated"] and data["totals"]["cost_text"].startswith("~$")
    for seq, d in data["detail"].items():
        k = d["layers"]["A"]["tokens"]
        assert (k["price_estimated"], k["cumulative_estimated"]) == (True, True), seq
        assert k["cost_text"].startswith("~$") and k["cumulative_cost_text"].startswith("~$")
    for bars in data["growth"].values():
        assert all(b[10].startswith("~$") for b in bars)  # the chart's cumulative cost


async def _mcp(path: Path) -> None:
    from mcp import Client

    from looptap.cassettes.mcp import build_server

    async with Client(build_server([str(path.parent)])) as c:

        async def call(tool: str, args: dict[str, Any]) -> Any:
            r = await c.call_tool(tool, args)
            assert not r.is_error
            return orjson.loads("".join(getattr(p, "text", "") for p in r.content))

        summary = await call("run_summary", {"run": path.name})
        assert summary["cost_estimated"] is True
        for conv in summary["recorded"]["conversations"]:
            assert conv["cost_estimated"] is True, conv
            answer = await call("growth", {"run": path.name, "conversation": conv["conversation"]})
            for row in answer["growth"]:
                assert (row["cost_estimated"], row["cumulative_estimated"]) == (True, True), row
                assert row["cost"].startswith("~$") and row["cumulative_cost"].startswith("~$")


def _otel(path: Path) -> None:
    from tests.interop.cassette_files import build_request
    from tests.interop.test_otel import attrs, spans_of

    turns = [a for a in map(attrs, spans_of(build_request(open_run(path)))) if "looptap.seq" in a]
    assert turns and all(
        a["looptap.cost.estimated"] and a["looptap.cost.cumulative_estimated"] for a in turns
    )


def _closing_line(path: Path) -> None:
    """``looptap run``'s closing summary."""
    from looptap.proxy.summary import summary_lines

    line = next(ln for ln in summary_lines(path) if ln.startswith("tokens in "))
    assert line.endswith(
        "(estimated cost: the host is not a provider looptap knows, so the model's list price)"
    ), line  # issue 71 item 11: which of the two it is, not "… or the API reported no usage"


async def test_a_gateway_price_reads_estimated_in_every_family_and_every_view(
    run_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    firsts = _first_of_each_family(run_file)
    _show(run_file, capsys)
    _show_json(run_file, capsys)
    await _inspector(run_file, firsts)
    _html(run_file, tmp_path)
    await _mcp(run_file)
    _otel(run_file)
    _closing_line(run_file)


def test_the_closing_line_says_which_estimate_in_one_pair_of_parentheses(
    run_file: Path, tmp_path: Path
) -> None:
    """Issue 71 item 11: with an error turn the closing line read "(some prices unknown)
    (estimated cost, …; the host is not a provider looptap knows, or the API reported no usage …)":
    parentheses doubled, and an either/or. Now one pair, and the reason that holds; a price of
    looptap's token estimate says that one instead."""
    from looptap.cassettes.views import BY_HOST, BY_TOKENS, estimated_note, estimated_why
    from looptap.proxy.summary import summary_lines

    failed = tmp_path / "failed.jsonl"
    exchanges = list(open_run(run_file, whole=True).exchanges)
    bad = exchanges[0]
    bad.seq, bad.status = len(exchanges), 400
    bad.response_chunks = [(None, orjson.dumps({"error": {"message": "bad", "type": "invalid"}}))]
    with CassetteWriter(failed, meta={"source": "vcr"}) as w:
        for ex in [*exchanges, bad]:
            w.append(ex)
    line = next(ln for ln in summary_lines(failed) if ln.startswith("tokens in "))
    assert line.count("(") == 1 and line.endswith(
        "(some prices unknown; estimated cost: the host is not a provider looptap knows, so the "
        "model's list price)"
    ), line
    # each reason by itself, and both
    host = next(iter(open_run(run_file).analysis.turns.values())).tokens
    assert estimated_why(host) == BY_HOST
    guessed = host.model_copy(update={"source": "estimated", "price_source": "genai-prices"})
    assert estimated_why(guessed) == BY_TOKENS
    assert estimated_note(BY_TOKENS) == (
        "~: estimated cost: the API reported no usage, so looptap estimated the tokens"
    )
    assert "list price; the API reported no usage" in estimated_note(BY_HOST | BY_TOKENS)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_at_an_unknown_host_is_estimated_or_unknown(family: str) -> None:
    """Each family's wire format at a host genai-prices does not know: a price found is the
    list price (``~``), never the vendor's own; one not found is unknown, never $0."""
    s = Script(family, tools=[WEATHER])
    s.user("What's the weather in Paris?")
    s.reply("Checking.", calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny, 21C")
    s.reply("It is sunny in Paris.")
    for ex in s.exchanges:
        u = urlsplit(ex.url)
        ex.url = ex.url.replace(f"{u.scheme}://{u.netloc}/", GATEWAY)
    for t in s.analyse().turns.values():
        k = t.tokens
        assert k.cost is None or (k.price_estimated and k.cumulative_estimated), k.price_source


def test_a_new_tool_result_is_new_in_every_family() -> None:
    """The same logical conversation in every family: on the turn that sends the first tool result
    back, nothing is re-sent tool results (``results`` 0: the result is ``new``); on the turn after,
    the families agree on the split to within the estimator's rounding."""
    splits: dict[str, list[tuple[int, int, int]]] = {}
    for family in FAMILIES:
        s = Script(family, tools=[WEATHER])
        s.user("What's the weather in Paris?")
        s.reply("Checking.", calls=[Call("get_weather", {"city": "Paris"})])
        s.results("sunny, 21C")
        s.reply("It is sunny in Paris.")
        s.user("And in Rome?")
        s.reply("Sunny too.")
        bars = growth_bars(s.analyse().turns.values())
        splits[family] = [(b.history, b.tool_results, b.new) for b in bars]
        assert bars[1].tool_results == 0, (family, splits[family])
        assert bars[2].tool_results > 0, (family, splits[family])
    results = [v[2][1] for v in splits.values()]
    assert max(results) - min(results) <= 1, splits
