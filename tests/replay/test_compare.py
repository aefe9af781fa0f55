"""``looptap compare``: teacher-forced samples from a candidate, compared with the recording by
layer (issue 31). The candidate is a scripted fake that calls one of two tools at random (seeded):
the agreement rates must match its probability within sampling error (a binomial bound, not a
tuned threshold). The budget guard and ``--dry-run`` send nothing (counted at the fake)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import orjson
import pytest

from cassettes.cli import main
from tests.replay.conftest import SYSTEM, chat_exchange, chat_response, write
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

P_WEATHER = 0.7
TURNS, K = 8, 5


def _run(tmp_path: Path) -> Path:
    """Eight recorded turns, each answered with a call of get_weather."""
    exchanges = [chat_exchange([SYSTEM, {"role": "user", "content": f"Weather in city {i}?"}], chat_response(call=(f"call_{i}", "get_weather", f'{{"city":"c{i}"}}')))
                 for i in range(TURNS)]
    return write(tmp_path / "run.jsonl", exchanges)


@pytest.fixture
def candidate() -> ScriptedUpstream:
    rng = random.Random(20261123)

    def route(req: ScriptedRequest) -> Reply:
        city = req.user_texts()[-1].split()[-1].rstrip("?")
        if rng.random() < P_WEATHER:
            return Reply.tool("get_weather", {"city": f"c{city}"})
        return Reply.tool("get_time", {"city": f"c{city}"})

    return ScriptedUpstream(route)


def test_agreement_rates_match_the_candidates_probability(tmp_path: Path, candidate: ScriptedUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    with candidate as fake:
        rc = main(["compare", str(run), "--model", "cand-1", "--upstream", f"openai={fake.url}", "--samples", str(K), "--json"])
    assert rc == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert len(fake.log) == TURNS * K and {x.request.model for x in fake.log} == {"cand-1"}
    turns = doc["turns"]
    assert len(turns) == TURNS and all(len(t["samples"]) == K for t in turns)
    n = TURNS * K
    agree = sum(t["agreement"] * K for t in turns) / n
    bound = 3 * math.sqrt(P_WEATHER * (1 - P_WEATHER) / n)  # 3 sigma of a binomial proportion
    assert abs(agree - P_WEATHER) <= bound, (agree, bound)
    for t in turns:  # self-agreement is the share of the commoner tool; the other tool is new to the client
        calls = [s["calls"][0]["name"] for s in t["samples"]]
        assert t["self_agreement"] == max(calls.count("get_weather"), calls.count("get_time")) / K
        new = "the tool get_time (never called in the recording; not even offered by the request: the client has no handler for it)"
        assert (new in t["new_to_client"]) == ("get_time" in calls)
        assert t["agreement"] == calls.count("get_weather") / K  # the arguments asked for are the recorded ones


def test_the_budget_guard_and_dry_run_send_nothing(tmp_path: Path, candidate: ScriptedUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    with candidate as fake:
        assert main(["compare", str(run), "--upstream", f"openai={fake.url}", "--samples", str(K), "--max-requests", str(TURNS * K - 1)]) == 2
        assert "over --max-requests" in capsys.readouterr().err
        assert main(["compare", str(run), "--upstream", f"openai={fake.url}", "--samples", str(K), "--max-cost", "0.000001"]) == 2
        assert "over --max-cost" in capsys.readouterr().err
        assert main(["compare", str(run), "--upstream", f"openai={fake.url}", "--samples", str(K), "--dry-run", "--model", "cand-1"]) == 0
        out = capsys.readouterr().out
        assert fake.log == []
    assert out.count("would send 5×") == TURNS and "with model cand-1" in out


def test_the_text_report_says_it_by_layer(tmp_path: Path, candidate: ScriptedUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    with candidate as fake:
        assert main(["compare", str(run), "--upstream", f"openai={fake.url}", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "agrees with the recording" in out and "  E recorded: get_weather" in out and "  A finish tool_calls" in out


# --- arguments against the declared schema ------------------------------------------------------

#: What the candidate emits, per recorded turn: valid, off the schema (a number where the schema
#: wants a string; a required property missing), not JSON at all, equal to the recording.
SCHEMA_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}}, "required": ["city"]}}}]
ANSWERS: list[dict[str, object] | str] = [{"city": "Lyon"}, {"city": 7}, {"unit": "K"}, '{"city": "Par', {"city": "c4"}]


def _schema_run(tmp_path: Path) -> Path:
    exchanges = [chat_exchange([SYSTEM, {"role": "user", "content": f"Weather in city {i}?"}], chat_response(call=(f"call_{i}", "get_weather", f'{{"city":"c{i}"}}')),
                               tools=SCHEMA_TOOLS) for i in range(len(ANSWERS))]
    return write(tmp_path / "run.jsonl", exchanges)


@pytest.fixture
def shaky() -> ScriptedUpstream:
    def route(req: ScriptedRequest) -> Reply:
        i = int(req.user_texts()[-1].split()[-1].rstrip("?"))
        return Reply.tool("get_weather", ANSWERS[i])

    return ScriptedUpstream(route)


def test_arguments_are_checked_against_the_recorded_requests_schema(tmp_path: Path, shaky: ScriptedUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    run = _schema_run(tmp_path)
    with shaky as fake:
        assert main(["compare", str(run), "--upstream", f"openai={fake.url}", "--samples", "2", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    calls = [t["samples"][0]["calls"][0] for t in doc["turns"]]
    assert [c["json"] for c in calls] == [True, True, True, False, True]
    assert [c["schema_valid"] for c in calls] == [True, False, False, None, True]  # not JSON: nothing to check
    assert calls[1]["schema_errors"] == ['$.city: 7 is not of type "string"']
    assert sorted(calls[2]["schema_errors"]) == ['$.unit: "K" is not one of ["C","F"]', "$: missing required property 'city'"]
    assert calls[3]["parse_error"] and calls[3]["arguments"] == '{"city": "Par'
    assert all(c["offered"] for c in calls)
    assert [t["arguments"]["equal_to_recording"] for t in doc["turns"]] == [0, 0, 0, 0, 2]  # only the last answer is the recorded one
    assert doc["arguments"] == {"calls": 10, "json": 8, "schema_checked": 8, "schema_valid": 4, "equal_to_recording": 2, "not_offered": 0}
    assert doc["turns"][0]["recorded"]["calls"][0]["schema_valid"] is True  # the recording's own call, checked the same way


def test_the_text_report_gives_the_argument_checks_by_turn_and_overall(tmp_path: Path, shaky: ScriptedUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    run = _schema_run(tmp_path)
    with shaky as fake:
        assert main(["compare", str(run), "--upstream", f"openai={fake.url}"]) == 0
    out = capsys.readouterr().out
    assert "  E arguments: 1 calls; JSON 1/1; schema-valid 0/1; JSON-equal to the recording 0/1" in out
    assert '  E 1× off the schema: get_weather: $.city: 7 is not of type "string"' in out
    assert "  E arguments: 1 calls; JSON 0/1; schema-valid 0/0 (" not in out  # not JSON: not counted as checked
    assert "E over all turns: 5 calls; JSON 4/5; schema-valid 2/4; JSON-equal to the recording 1/5" in out


@pytest.mark.parametrize("family", ["anthropic", "gemini", "openai_responses"])
def test_each_familys_tool_declarations_are_read_for_the_schema(family: str) -> None:
    """The schema comes from the recorded request as its family declares tools (Anthropic's
    ``input_schema``, Gemini's ``functionDeclarations`` with OpenAPI upper-case types, Responses'
    flat ``function`` tools)."""
    from cassettes.models import ToolCall
    from cassettes.replay.compare import _check, _offered
    from cassettes.wire.exchange import Exchange

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    url, body = {
        "anthropic": ("https://api.anthropic.com/v1/messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}],
                                                                 "tools": [{"name": "get_weather", "input_schema": schema}]}),
        "gemini": ("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent",
                   {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": {
                       "type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]}}]}]}),
        "openai_responses": ("https://api.openai.com/v1/responses", {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "get_weather", "parameters": schema}]}),
    }[family]
    tools = _offered(Exchange("POST", url, [("content-type", "application/json")], orjson.dumps(body)))
    assert [t.name for t in tools] == ["get_weather"]
    assert _check(ToolCall(name="get_weather", arguments={"city": "Oslo"}), tools).schema_valid is True
    bad = _check(ToolCall(name="get_weather", arguments={"town": "Oslo"}), tools)
    assert bad.schema_valid is False and bad.schema_errors == ["$: missing required property 'city'"]
    other = _check(ToolCall(name="get_time", arguments={}), tools)
    assert other.offered is False and other.schema_valid is None


def test_a_saved_report_is_what_the_mcp_comparison_tool_reads(tmp_path: Path, shaky: ScriptedUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    """``--report`` (no file: beside the run) saves what ``--json`` prints; ``looptap mcp``'s
    ``comparison`` answers from it, by the report's path or the run's, and sends nothing."""
    from cassettes.mcp.forkquery import comparison
    from cassettes.mcp.query import QueryError, Runs

    run = _schema_run(tmp_path)
    with shaky as fake:
        assert main(["compare", str(run), "--upstream", f"openai={fake.url}", "--samples", "2", "--report", "--json"]) == 0
        printed = orjson.loads(capsys.readouterr().out)
        saved = tmp_path / "run.jsonl.compare.json"
        assert orjson.loads(saved.read_bytes()) == printed and printed["looptap"] == "compare"
        sent = len(fake.log)
        runs = Runs([tmp_path])
        by_run, by_report = comparison(runs, "run.jsonl"), comparison(runs, str(saved), offset=3, limit=1)
        assert len(fake.log) == sent  # read-only: nothing sent
    assert by_run["turns"] == 5 and by_run["samples"] == 2 and by_run["arguments"] == printed["arguments"]
    turns = by_run["recorded"]["turns"]
    assert [t["seq"] for t in turns] == [0, 1, 2, 3, 4] and by_run["next_offset"] is None
    assert turns[1]["schema_violations"] == [{"n": 2, "violation": 'get_weather: $.city: 7 is not of type "string"'}]
    assert turns[1]["arguments"]["schema_valid"] == 0 and turns[4]["arguments"]["equal_to_recording"] == 2
    assert [t["seq"] for t in by_report["recorded"]["turns"]] == [3] and by_report["next_offset"] == 4
    other = tmp_path / "elsewhere.json"
    assert main(["compare", str(run), "--upstream", f"openai={fake.url}", "--report", str(other), "--dry-run"]) == 0
    assert not other.exists()  # a dry run compares nothing, so saves nothing
    with pytest.raises(QueryError, match="not a comparison report"):
        (tmp_path / "x.json").write_bytes(b"{}")
        comparison(runs, "x.json")
