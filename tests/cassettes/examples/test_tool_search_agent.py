"""The demo agent re-sends exactly what the recorded agent sent, so a strict replay of the bundled
recording matches it turn for turn (``looptap demo`` relies on that)."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import pytest

from looptap.cassettes.examples import tool_search_agent as agent
from looptap.cassettes.storage import load_vcr


def _recorded() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    path = files("looptap.cassettes").joinpath("examples/tool_loop_anthropic.yaml")
    exchanges = load_vcr(path)  # type: ignore[arg-type]
    return [(ex.request_json(), json.loads(ex.response_body)) for ex in exchanges]


def test_agent_requests_equal_the_recording(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = _recorded()
    sent: list[dict[str, Any]] = []

    def fake_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        i = len(sent)
        sent.append(
            json.loads(
                json.dumps(
                    {
                        "max_tokens": 4096,
                        "messages": messages,
                        "model": agent.MODEL,
                        "stream": False,
                        "tool_choice": {"type": "auto"},
                        "tools": tools,
                    }
                )
            )
        )
        return recorded[i][1]

    monkeypatch.setattr(agent, "call_model", fake_model)
    assert agent.main() == 0
    assert len(sent) == len(recorded) == 11
    for i, (body, (want, _)) in enumerate(zip(sent, recorded, strict=True)):
        assert body == want, f"request #{i} differs from the recording"
    out = capsys.readouterr().out
    assert "1 USD = 0.92 EUR" in out and "$150.00" in out


def test_validation_error_names_missing_and_extra_fields() -> None:
    schema = agent.DEFERRED["stock_lookup"]["input_schema"]
    errs = agent.validation_errors(schema, {"ticker": "AAPL"})
    assert [e["type"] for e in errs] == ["missing", "extra_forbidden"]
    assert agent.validation_errors(schema, {"symbol": "AAPL"}) == []


def test_search_finds_only_relevant_tools() -> None:
    assert (
        json.loads(agent.search_tools(["stock price"]))["discovered_tools"][0]["name"]
        == "stock_lookup"
    )
    assert json.loads(agent.search_tools(["translate", "French"]))["discovered_tools"] == []
