"""Issue 42, "one branch, one numbering": a branch (``looptap run --from RUN@turn=1``) keeps its
origin's turn numbers everywhere. One branch turn (the branch's second round trip, #1: the origin's
turn 2) read through ``show``, ``show --json``, ``show --turn``, the inspector's turn list,
``diff``, MCP (``fork_diff`` and ``turn``) and a pytest test forked with the marker: the same
number, 2.

The branch file is written here with the header a fork writes (``fork.branch_meta``'s
``origin``); tests/replay/test_fork.py checks the same numbers on a real fork through the
recorder."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import orjson
import pytest
from fork_fixture import answer_body, chat_exchange, origin, tool_call, tool_result

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.replay.forking.fork import ForkSource, origin_meta
from looptap.cassettes.replay.forking.placement import parse_cursor
from looptap.cassettes.wire import Exchange

pytest_plugins = ["pytester"]

SYSTEM = {"role": "system", "content": "Use the weather tool."}
USER = {"role": "user", "content": "Weather in Paris, then somewhere warm?"}
WEATHER = {
    "Paris": "sunny, 21 C in Paris",
    "Lyon": "sunny, 19 C in Lyon",
    "Nice": "sunny, 24 C in Nice",
}


def branch_exchanges() -> list[Exchange]:
    """From turn 1, live on another model: Nice instead of Lyon, then the answer (no edit)."""
    h1 = [SYSTEM, USER, tool_call("call_A1", "Paris"), tool_result("call_A1", WEATHER["Paris"])]
    h2 = [*h1, tool_call("call_B1", "Nice"), tool_result("call_B1", WEATHER["Nice"])]
    return [
        chat_exchange(h1, answer_body(None, ("call_B1", "Nice")), "gpt-4o-mini"),
        chat_exchange(h2, answer_body("Go to Nice."), "gpt-4o-mini"),
    ]


def write_pair(folder: Path) -> tuple[Path, Path]:
    run, branch = folder / "run.jsonl", folder / "branch.jsonl"
    with CassetteWriter(run) as w:
        for ex in origin():
            w.append(ex)
    meta = origin_meta(
        ForkSource(run, parse_cursor("turn=1")), "gpt-4o-mini", {"c1": 1}, [], {"c1": 1}, branch
    )
    with CassetteWriter(branch, meta={"source": "looptap run --from", "origin": meta}) as w:
        for ex in branch_exchanges():
            w.append(ex)
    return run, branch


INNER = """
import os
import pytest
from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
WEATHER = __WEATHER__

@pytest.mark.looptap("run.jsonl", fork="turn=1", live={"openai": os.environ["FAKE_NEW_MODEL"]}, model="gpt-4o-mini")
def test_forked(looptap):
    client = OpenAI(max_retries=0)
    msgs = [{"role": "system", "content": "Use the weather tool."}, {"role": "user", "content": "Weather in Paris, then somewhere warm?"}]
    for _ in range(5):
        m = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS).choices[0].message
        if not m.tool_calls:
            break
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
        msgs += [{"role": "tool", "tool_call_id": c.id, "content": WEATHER[__import__("json").loads(c.function.arguments)["city"]]} for c in m.tool_calls]
    assert m.content == "the recorded answer"  # fails: the test's web page shows the run as served
""".replace("__WEATHER__", repr(WEATHER))  # noqa: E501


def _pytest_turn(pytester: pytest.Pytester, run: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The number the pytest plugin's output (the failed test's web page of the run as served)
    gives the request the branch recorded as #1 (the second live one)."""
    from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

    def new_model(req: ScriptedRequest) -> Reply:
        return (
            Reply.tool("get_weather", {"city": "Nice"})
            if len(req.tool_results()) == 1
            else Reply.say("Go to Nice.")
        )

    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "HTTP_PROXY", "HTTPS_PROXY", "CI"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-numbering")
    pytester.makepyfile(test_inner=INNER)
    (pytester.path / "run.jsonl").write_bytes(run.read_bytes())
    # looptap's plugin alone of the environment's (1.7 s of CPU with every installed plugin,
    # 0.25 s with one: session 54, tests/test_heartbeat.py)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    with ScriptedUpstream(new_model) as fake:
        monkeypatch.setenv("FAKE_NEW_MODEL", fake.url)
        result = pytester.runpytest_subprocess(
            "-p",
            "looptap.cassettes.replay.testing.plugin",
            "-p",
            "no:cacheprovider",
            "--looptap-record-mode=none",
        )
    result.assert_outcomes(failed=1)
    assert len(fake.log) == 2  # turns 1 and 2 live
    out = result.stdout.str()
    pages = re.findall(r"looptap: the run as a web page: (\S+\.html)", out)
    assert pages, out
    # the run as served: #0 replayed, #1 and #2 live
    return _page_turn(Path(pages[0]).read_text(), 2)


def _page_turn(page: str, seq: int) -> int:
    """The turn number a web page (``looptap export --html``) gives the round trip ``seq``."""
    data = re.search(r'<script[^>]*id="looptap-data"[^>]*>(.*?)</script>', page, re.S)
    assert data is not None
    found = re.search(rf'"seq":{seq},"conv":"[^"]*","turn":(\d+)', data.group(1))
    assert found is not None, data.group(1)[:2000]
    return int(found.group(1))


def test_one_branch_turn_has_the_same_number_everywhere(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from looptap.cassettes.cli import main

    run, branch = write_pair(tmp_path)
    seen: dict[str, int] = {}

    # show: the round trip #1's line, and the branch said first
    assert main(["show", str(branch)]) == 0
    out = capsys.readouterr().out
    assert "branch of " in out and "run.jsonl at turn=1" in out, out[:500]
    seen["show"] = int(
        re.search(
            r"^#1  c1/"
            r"turn (\d+)",
            out,
            re.M,
        ).group(1)
    )  # type: ignore[union-attr]

    # show --json
    assert main(["show", str(branch), "--json"]) == 0
    lines = [orjson.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    seen["show --json"] = next(v["turn"] for v in lines if v["seq"] == 1)

    # show --turn N: the number the others give prints that round trip (and only it)
    assert main(["show", str(branch), "--turn", "2"]) == 0
    out = capsys.readouterr().out
    assert "#1  c1/turn 2" in out and "#0  " not in out, out
    seen["show --turn"] = 2

    # the inspector's turn list
    from helpers import loaded

    from looptap.inspector.app import build_app
    from looptap.inspector.widgets import TurnList, turn_line

    async def inspector() -> int:
        app = build_app(branch)
        async with app.run_test(size=(160, 45)) as pilot:
            await loaded(pilot)
            tl = app.query_one(TurnList)
            row = next(turn_line(t, False).plain for t in tl.turns if t.seq == 1)
            return int(re.search(r"turn (\d+)", row).group(1))  # type: ignore[union-attr]

    seen["inspector"] = asyncio.run(inspector())

    # diff: the branch's #1 lined up with the origin's turn
    assert main(["diff", str(run), str(branch)]) == 1
    out = capsys.readouterr().out
    seen["diff"] = int(
        re.search(
            r"turn (\d+) \(seq \d+ ↔ "
            r"1\)",
            out,
        ).group(1)
    )  # type: ignore[union-attr]
    assert main(["diff", str(run), str(branch), "--json"]) == 1
    doc = orjson.loads(capsys.readouterr().out)
    assert {d["turn"] for d in doc["divergences"] if d["seq_b"] == 1} == {seen["diff"]}

    # MCP: fork_diff, and the turn tool named by conversation and that number
    from looptap.cassettes.mcp.query import Runs, fork_diff, turn

    runs = Runs([str(tmp_path)])
    answer = fork_diff(runs, str(branch), None, None, 20, 6000)
    seen["mcp fork_diff"] = next(
        d["turn"] for d in answer["recorded"]["divergences"] if d["seq_branch"] == 1
    )
    by_number = turn(runs, str(branch), None, "c1", 2, None, 400, 6000)
    assert by_number["seq"] == 1, by_number
    seen["mcp turn"] = turn(runs, str(branch), 1, None, None, None, 400, 6000)["turn"]

    # the HTML export of the branch (what the pytest plugin writes for a failed test)
    page = tmp_path / "branch.html"
    assert main(["export", "--html", str(branch), "-o", str(page)]) == 0
    capsys.readouterr()
    seen["export --html"] = _page_turn(page.read_text(), 1)

    # pytest: the same fork made from a test with the marker
    seen["pytest"] = _pytest_turn(pytester, run, monkeypatch)

    assert seen == dict.fromkeys(seen, 2), seen
