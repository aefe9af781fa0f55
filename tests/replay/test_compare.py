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
        assert ("the tool get_time (never called in the recording)" in t["new_to_client"]) == ("get_time" in calls)
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
