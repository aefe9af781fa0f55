"""Issue 82, item 4: a run whose client trims its history (LangChain ``trim_messages``' shape: the
system prompt and everything from the latest question on) replays through the pytest plugin —
the trimmed request matched as the recording has it — and forks at a turn after the trim.

The recording is the table case ``langchain_trim_messages`` (tests/cassettes/analysis/
context_cases.py); the inner agent is the openai SDK sending the same requests. On fec4f2c2 the
trimmed request started a second conversation: the run read as two, the turn before the trim got
``C.stopped_with_pending_calls``, and ``turn=4`` (the conversation's fifth turn) selected nothing
to fork at."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Loaded here, once: an inner run's imports are undone after it (pytester's sys.modules
# snapshot), and a fork's classes must be those the replay server was built with.
from looptap.cassettes.replay.forking import cursor as _cursor  # noqa: F401
from tests.replay.conftest import write
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytest_plugins = ["pytester"]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cassettes" / "analysis"))
from context_cases import wild_langchain_trim  # noqa: E402

NOPLUG = ("-p", "no:cacheprovider", "-p", "no:textual-snapshot")

AGENT = '''
import json
import os
import pytest
from openai import OpenAI

S = {"role": "system", "content": "You are a weather assistant. Use the get_weather tool for every city."}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": False}}}]
WEATHER = {"Paris": "sunny", "Tokyo": "rainy", "Berlin": "cloudy"}

def trim(history):
    """trim_messages(strategy="last", include_system=True, start_on="human"): past 6 messages,
    the system prompt and everything from the latest question on."""
    if len(history) <= 6:
        return history
    last = max(i for i, m in enumerate(history) if m["role"] == "user")
    return [S, *history[last:]]

def agent():
    client = OpenAI(max_retries=0)
    history, answers = [S], []
    for q in ("What is the weather in Paris?", "And in Tokyo and Berlin?"):
        history.append({"role": "user", "content": q})
        for _ in range(5):
            m = client.chat.completions.create(model="gpt-4o-mini", messages=trim(history), tools=TOOLS).choices[0].message
            if not m.tool_calls:
                history.append({"role": "assistant", "content": m.content})
                answers.append(m.content)
                break
            history.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
            for c in m.tool_calls:
                city = json.loads(c.function.arguments)["city"]
                history.append({"role": "tool", "tool_call_id": c.id, "content": f"WEATHER: {city} is {WEATHER[city]}"})
    return answers
'''  # noqa: E501

REPLAY = (
    AGENT
    + """
@pytest.mark.looptap("cassettes/trim.jsonl")
def test_trimming_agent(looptap):
    assert agent() == ["FORECAST: Paris", "FORECAST: Tokyo, Berlin"]
    run = looptap.run
    assert len(run.turns) == 5 and len(run.conversations) == 1
    run.assert_no_findings()                  # nothing false: no pending calls, no rewrite
    trims = [f for f in run.findings("C", "info") if f.code == "C.history_trimmed"]
    assert [f.turn for f in trims] == [3]
"""
)

FORK = (
    AGENT
    + """
@pytest.mark.looptap("cassettes/trim.jsonl", fork="turn=4", live={"openai": os.environ["FAKE_NEW_MODEL"]}, model="new-model-2")
def test_forked_after_the_trim(looptap):
    assert agent() == ["FORECAST: Paris", "NEW MODEL (new-model-2): Tokyo and Berlin are warm."]
    run = looptap.run
    assert len(run.conversations) == 1
    run.assert_no_findings(layer="C")
"""  # noqa: E501
)


def _cassette(pytester: pytest.Pytester) -> None:
    (pytester.path / "cassettes").mkdir(exist_ok=True)
    write(pytester.path / "cassettes" / "trim.jsonl", wild_langchain_trim().script.exchanges)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "HTTP_PROXY", "HTTPS_PROXY", "CI"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.lower(), raising=False)


def test_a_trimming_agent_replays_as_one_conversation(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    pytester.makepyfile(test_inner=REPLAY)
    _cassette(pytester)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r".*played 5 of 5 recorded round trips, 0 unmatched requests"])


def _new_model(req: ScriptedRequest) -> Reply:
    return Reply.say(f"NEW MODEL ({req.model}): Tokyo and Berlin are warm.")


def test_a_trimming_agent_forks_at_a_turn_after_the_trim(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    pytester.makepyfile(test_inner=FORK)
    _cassette(pytester)
    with ScriptedUpstream(_new_model) as fake:
        monkeypatch.setenv("FAKE_NEW_MODEL", fake.url)
        result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    # turns 0-3 replayed (the trimmed request #3 matched as recorded), turn 4 sent live, trimmed
    (sent,) = fake.log
    assert sent.request.model == "new-model-2" and len(sent.request.tool_results()) == 2
    assert [m["role"] for m in sent.request.body["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
