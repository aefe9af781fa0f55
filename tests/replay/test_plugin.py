"""The pytest plugin, run on inner test files with ``pytester``.

Replay-only (no recorder, no mitmproxy in this environment): a recorded tool loop replays to the
openai SDK and passes; a changed agent fails with the turn, the JSON path and the layer; unplayed
round trips are reported (and fail with ``--looptap-fail-unplayed``); mode ``none`` without a
cassette fails clearly. With the recorder: a real pydantic-ai agent (multi-turn tool loop against
the loopback fake upstream) is recorded once through the plugin, replayed offline, then changed.
"""

from __future__ import annotations

import os
import re
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.replay.conftest import tool_loop, write
from tests.support.upstream import FakeUpstream

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
_PROXY = os.environ.get("LOOPTAP_PROXY_PYTHON") or str(REPO / ".venv-proxy/bin/python")
HAVE_RECORDER = Path(_PROXY).exists()
#: Inner runs: no cache, and without textual's snapshot plugin (its session hook assumes one run per
#: process).
NOPLUG = ("-p", "no:cacheprovider", "-p", "no:textual-snapshot")

_SCRUB = (
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_API_BASE",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "CI",
)


def expect(result: pytest.RunResult, *literals: str) -> None:
    """Lines of the inner run's output, in this order: literal text, ``*`` for anything (unlike
    ``fnmatch_lines``, brackets are literal: JSON paths have them)."""
    result.stdout.re_match_lines(
        [".*" + ".*".join(re.escape(part) for part in lit.split("*")) for lit in literals]
    )


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k in _SCRUB:
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.lower(), raising=False)
    # What the inner sessions put in the temp dir (their web reports: no cache there) stays here.
    (tmp_path / "tmp").mkdir(exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


SDK_LOOP = '''
import os
import pytest
from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
SYSTEM = {"role": "system", "content": "Answer with the weather tool."}
RESULT = "sunny, 21 C"

def agent(turns=2):
    client = OpenAI(max_retries=0)  # base URL and key from the environment the plugin set
    msgs = [SYSTEM, {"role": "user", "content": "Weather in Paris?"}]
    for _ in range(turns):
        r = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS)
        m = r.choices[0].message
        if not m.tool_calls:
            return m.content
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
        msgs += [{"role": "tool", "tool_call_id": c.id, "content": RESULT} for c in m.tool_calls]

@pytest.mark.looptap("cassettes/loop.jsonl")
def test_loop(looptap):
    assert os.environ["OPENAI_BASE_URL"] == looptap.url + "/v1"
    assert agent() == "It is sunny in Paris."
    run = looptap.run
    assert len(run.turns) == 2 and len(run.conversations) == 1
    run.assert_no_findings(layer="C")
    assert run.total_tokens == 120
    assert run.cost is not None and run.cost > 0
'''  # noqa: E501


def _inner(pytester: pytest.Pytester, code: str = SDK_LOOP) -> Path:
    pytester.makepyfile(test_inner=textwrap.dedent(code))
    (pytester.path / "cassettes").mkdir(exist_ok=True)
    return write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())


def test_replay_passes_offline_without_the_recorder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("LOOPTAP_PROXY_PYTHON", "/nonexistent/python")  # replay must not need it
    _inner(pytester)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    expect(
        result,
        "looptap",
        "test_loop: replay *loop.jsonl: played 2 of 2 recorded round trips, 0 unmatched requests",
    )


def test_changed_agent_fails_naming_turn_path_and_layer(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    _inner(pytester, SDK_LOOP.replace('RESULT = "sunny, 21 C"', 'RESULT = "rainy, 9 C"'))
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(failed=1)
    expect(
        result,
        "ReplayMiss: replay miss at conversation c1, turn 1 (seq 1): C: the tool result for "
        "call_A1 changed (messages[3].content)",
        'messages[3].content: recorded "sunny, 21 C", got "rainy, 9 C"',
    )


def test_swallowed_miss_still_fails_the_test(pytester: pytest.Pytester) -> None:
    """An agent that catches the SDK's error does not hide the miss."""
    pytest.importorskip("openai")
    code = SDK_LOOP.replace(
        "    assert agent() ==",
        "    try:\n        agent()\n    except Exception:\n  "
        "      pass\n    return\n    assert agent() ==",
    )
    _inner(pytester, code.replace('"Weather in Paris?"', '"Weather in Rome?"'))
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(failed=1)
    expect(
        result,
        "replay miss at conversation c1, turn 0 (seq 0): C: the user input at messages[1] changed "
        "(messages[1].content)",
    )


def test_unplayed_round_trips_reported_and_optionally_failing(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    code = SDK_LOOP.replace('assert agent() == "It is sunny in Paris."', "agent(turns=1)").replace(
        "assert len(run.turns) == 2 and", "assert"
    )
    code = code.replace("    assert run.total_tokens == 120\n", "")
    _inner(pytester, code)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    expect(
        result,
        "played 1 of 2 recorded round trips",
        "unplayed: conversation c1, turn 1 (seq 1): POST /v1/chat/completions",
    )
    result = pytester.runpytest_inprocess(
        *NOPLUG, "--looptap-record-mode=none", "--looptap-fail-unplayed"
    )
    result.assert_outcomes(failed=1)
    expect(result, "1 recorded round trip of *loop.jsonl was not played (*fail_unplayed):")


def test_mode_none_without_a_cassette_fails_clearly(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_inner="import pytest\n@pytest.mark.looptap\ndef test_x():\n    pass\n")
    monkeypatch.setenv("CI", "1")  # CI: the default mode is none
    result = pytester.runpytest_inprocess(*NOPLUG)
    result.assert_outcomes(errors=1)
    expect(
        result,
        "looptap: no cassette at *cassettes/test_inner/test_x.jsonl and the record mode is 'none'; "
        "record it with --looptap-record-mode=once",
    )


def test_recording_without_the_recorder_says_how_to_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No LOOPTAP_PROXY_PYTHON (and no mitmproxy here), no recorder where set-up makes it (found
    # there: tests/test_newcomer.py); one that names no file is said as missing
    # (tests/replay/test_plugin_toy_project.py).
    from looptap.cassettes import hints

    monkeypatch.delenv("LOOPTAP_PROXY_PYTHON", raising=False)
    monkeypatch.setattr(hints, "found_recorder", lambda: None)
    pytester.makepyfile(test_inner="import pytest\n@pytest.mark.looptap\ndef test_x():\n    pass\n")
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=once")
    result.assert_outcomes(errors=1)
    expect(
        result,
        "looptap: cannot record *test_x.jsonl (mode once): recording needs the looptap recorder "
        "(mitmproxy*LOOPTAP_PROXY_PYTHON",
    )
    # what installs looptap (in the checkout, entered by its absolute path), never -e '.[proxy]'
    # from where the user is, which in the user's project would install the user's project
    out = result.stdout.str()
    assert f"`(cd {REPO} && python3 -m venv .venv-proxy && " in out, out


# ---------------------------------------------------------------------------------------------
# A real framework agent: recorded once through the plugin, replayed offline, then changed


PYDANTIC_AI_TEST = '''
import os
import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel

SYSTEM = "Answer with the weather tool."
RESULT = "sunny, 21 C in {city}"

def weather_agent():
    agent = Agent(OpenAIChatModel("gpt-4o"), system_prompt=SYSTEM)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city right now."""
        return RESULT.format(city=city)

    return agent

@pytest.mark.looptap("cassettes/weather.jsonl")
def test_weather_agent(looptap):
    assert os.environ["OPENAI_BASE_URL"].startswith("http://127.0.0.1:")
    answer = weather_agent().run_sync("Weather in Paris?").output
    assert answer
    run = looptap.run
    assert len(run.turns) == 2  # the tool call, then the answer to its result
    run.assert_no_findings(layer="C")
'''


@pytest.mark.skipif(
    not HAVE_RECORDER, reason=f"recorder environment missing ({_PROXY}); set LOOPTAP_PROXY_PYTHON"
)
@pytest.mark.slow(
    reason=(
        "pydantic-ai recorded through the recorder by the plugin (about 4 s of CPU): the "
        "plugin records through the recorder in test_record_modes_all_then_new_episodes and "
        "test_a_session_records_every_test_through_one_recorder, and a changed tool result or "
        "prompt fails a replay naming its path in "
        "test_readme_example_replays_and_fails_when_the_tool_changes and "
        "test_changed_agent_fails_naming_turn_path_and_layer"
    )
)
def test_framework_agent_recorded_once_replayed_offline_then_changed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pydantic_ai")
    monkeypatch.setenv("LOOPTAP_PROXY_PYTHON", _PROXY)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_agent=PYDANTIC_AI_TEST)
    cassette = pytester.path / "cassettes" / "weather.jsonl"
    # 1. Record once, through the recorder, against the loopback fake upstream's tool loop.
    with FakeUpstream(delay=0.005, default_scenario="tool_loop:1") as up:
        result = pytester.runpytest_inprocess(
            *NOPLUG, "--looptap-record-mode=once", "--looptap-upstream", f"openai={up.url}"
        )
        served = len(up.llm_served())
    result.assert_outcomes(passed=1)
    assert served == 2 and cassette.exists()
    expect(result, "recorded 2 round trips into *weather.jsonl")
    # 2. Offline: the upstream is gone, the cassette answers.
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    expect(result, "played 2 of 2 recorded round trips, 0 unmatched requests")
    # 3. The agent changed: a tool's result.
    pytester.makepyfile(
        test_agent=PYDANTIC_AI_TEST.replace(
            'RESULT = "sunny, 21 C in {city}"', 'RESULT = "rainy, 9 C in {city}"'
        )
    )
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r".*ReplayMiss: replay miss at conversation c1, turn 1 \(seq 1\): C: the tool result "
            r"for call_\w+ changed \(messages\[3\]\.content\)",
            r'.*messages\[3\]\.content: recorded "sunny, 21 C in value", got "rainy, 9 C in value"',
        ]
    )
    print(
        "\n".join(
            ln for ln in result.outlines if "ReplayMiss:" in ln or "messages[3].content:" in ln
        )
    )
    # 4. The agent changed: its prompt.
    pytester.makepyfile(
        test_agent=PYDANTIC_AI_TEST.replace(
            'SYSTEM = "Answer with the weather tool."',
            'SYSTEM = "Answer briefly, with the weather tool."',
        )
    )
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(failed=1)
    expect(
        result,
        "ReplayMiss: replay miss at conversation c1, turn 0 (seq 0): C: the system prompt changed "
        "(messages[0].content)",
        'messages[0].content: recorded "Answer with the weather '
        'tool.", got "Answer briefly, with the weather tool."',
    )
    print(
        "\n".join(
            ln for ln in result.outlines if "ReplayMiss:" in ln or "messages[0].content:" in ln
        )
    )


# ---------------------------------------------------------------------------------------------
# The documented example (docs/testing.md), as written there


def _readme_example() -> str:
    readme = (REPO / "docs" / "testing.md").read_text()
    section = readme[readme.index("# Regression tests"):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("```", start)]


def test_readme_example_replays_and_fails_when_the_tool_changes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example records (here: its agent run against the loopback fake upstream's tool loop,
    captured into the cassette the marker names), replays and passes, then fails on a changed
    tool."""
    pytest.importorskip("openai")
    import importlib.util

    from looptap.cassettes.recording.pipeline import CassetteWriter

    code = _readme_example()
    src = pytester.path / "test_weather_agent.py"
    src.write_text(code)
    spec = importlib.util.spec_from_file_location("readme_example", src)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with FakeUpstream(delay=0.001, default_scenario="tool_loop:1") as up:
        monkeypatch.setenv("OPENAI_BASE_URL", up.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        assert example.weather_agent("What is the weather in Paris?")
        served = up.llm_served()
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    cassette = pytester.path / "cassettes" / "test_weather_agent" / "test_weather.jsonl"
    cassette.parent.mkdir(parents=True)
    with CassetteWriter(cassette) as w:
        for s in served:
            ex = s.as_exchange()
            ex.url = "https://api.openai.com" + s.target
            w.append(ex)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    src.write_text(
        code.replace('return f"sunny, 21 C in {city}"', 'return f"rainy, 9 C in {city}"')
    )
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(failed=1)
    expect(
        result,
        "ReplayMiss: replay miss at conversation c1, turn 1 (seq 1): C: the tool result for call_* "
        "changed (messages[3].content)",
        'messages[3].content: recorded "sunny, 21 C in value", got "rainy, 9 C in value"',
    )
    print(
        "\n".join(
            ln
            for ln in result.outlines
            if (ln.startswith("E ") and "ReplayMiss" in ln) or "messages[3]" in ln
        )
    )


NEW_EPISODES = (
    SDK_LOOP.replace(
        """    assert agent() == "It is sunny in Paris."
    run = looptap.run
    assert len(run.turns) == 2 and len(run.conversations) == 1
    run.assert_no_findings(layer="C")
    assert run.total_tokens == 120
    assert run.cost is not None and run.cost > 0""",
        """    for city in CITIES:
        assert agent(city=city)
    assert len(looptap.run.turns) == 2 * len(CITIES)""",
    )
    .replace(
        'assert os.environ["OPENAI_BASE_URL"] == looptap.url + "/v1"',
        'assert os.environ["OPENAI_BASE_URL"].startswith("http://127.0.0.1:")',
    )
    .replace("def agent(turns=2):", "CITIES = ['Paris']\n\ndef agent(turns=2, city='Paris'):")
    .replace('"Weather in Paris?"', 'f"Weather in {city}?"')
)


@pytest.mark.skipif(
    not HAVE_RECORDER, reason=f"recorder environment missing ({_PROXY}); set LOOPTAP_PROXY_PYTHON"
)
def test_record_modes_all_then_new_episodes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``all`` records through the recorder; ``new_episodes`` replays what is recorded and sends
    the rest through the recorder, appended to the cassette; ``none`` then replays all of it."""
    pytest.importorskip("openai")
    from looptap.cassettes.storage import read_records

    monkeypatch.setenv("LOOPTAP_PROXY_PYTHON", _PROXY)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    # recording needs the caller's key (the upstream here is fake)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-recording")
    pytester.makepyfile(test_inner=NEW_EPISODES)
    cassette = pytester.path / "cassettes" / "loop.jsonl"
    with FakeUpstream(delay=0.002, default_scenario="tool_loop:1") as up:
        result = pytester.runpytest_inprocess(
            *NOPLUG, "--looptap-record-mode=all", "--looptap-upstream", f"openai={up.url}"
        )
        result.assert_outcomes(passed=1)
        assert len(read_records(cassette).exchanges) == 2 and len(up.llm_served()) == 2
        pytester.makepyfile(
            test_inner=NEW_EPISODES.replace("CITIES = ['Paris']", "CITIES = ['Paris', 'Lyon']")
        )
        result = pytester.runpytest_inprocess(
            *NOPLUG, "--looptap-record-mode=new_episodes", "--looptap-upstream", f"openai={up.url}"
        )
        result.assert_outcomes(passed=1)
        # Paris replayed, Lyon went to the upstream through the recorder
        assert len(up.llm_served()) == 4
    expect(
        result,
        "played 2 of 2 recorded round trips, 0 unmatched requests",
        "recorded 2 new round trips into *loop.jsonl",
    )
    cas = read_records(cassette)
    assert not cas.problems and len(cas.exchanges) == 4
    assert all(b"Lyon" in ex.request_body for ex in cas.exchanges[2:])
    result = pytester.runpytest_inprocess(
        *NOPLUG, "--looptap-record-mode=none", "--looptap-fail-unplayed"
    )
    result.assert_outcomes(passed=1)
    expect(result, "played 4 of 4 recorded round trips, 0 unmatched requests")


SESSION_SUITE = '''
import os
import pytest
from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]

def agent(city):
    client = OpenAI(max_retries=0)
    msgs = [{"role": "system", "content": "Answer with the weather tool."}, {"role": "user", "content": f"Weather in {city}?"}]
    for _ in range(3):
        m = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS).choices[0].message
        if not m.tool_calls:
            return m.content
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
        msgs += [{"role": "tool", "tool_call_id": c.id, "content": f"sunny in {city}"} for c in m.tool_calls]

@pytest.mark.parametrize("city", ["Paris", "Lyon", "Oslo", "Rome"])
@pytest.mark.looptap
def test_city(looptap, city):
    with open(os.environ["SEEN"], "a") as f:
        f.write(os.environ["OPENAI_BASE_URL"] + "\\n")
    assert looptap.url is not None and looptap.url in looptap.base_urls.values()
    assert looptap.base_urls["OPENAI_BASE_URL"] == os.environ["OPENAI_BASE_URL"]
    assert agent(city)
    assert city != "Oslo", "a failing test: its round trips are still its own"
    run = looptap.run  # ends this test's recording: exactly its own round trips
    assert len(run) == 2 and [t.conversation for t in run.turns] == ["c1", "c1"]
    assert run.conversations[0].id == "c1" and len(run.conversations[0]) == 2

@pytest.mark.looptap
def test_quiet(looptap):
    assert looptap.base_urls  # records, sends nothing
'''  # noqa: E501


@pytest.mark.skipif(
    not HAVE_RECORDER, reason=f"recorder environment missing ({_PROXY}); set LOOPTAP_PROXY_PYTHON"
)
def test_a_session_records_every_test_through_one_recorder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16: each recording test used to start its own recorder (3 s of start-up and more).
    Now one recorder serves the session, and each test's cassette holds exactly its own round
    trips, a failing test's included."""
    pytest.importorskip("openai")
    from looptap.cassettes.storage import read_records

    seen = pytester.path / "seen.txt"
    monkeypatch.setenv("LOOPTAP_PROXY_PYTHON", _PROXY)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-recording")
    monkeypatch.setenv("SEEN", str(seen))
    pytester.makepyfile(test_inner=SESSION_SUITE)
    tmp = pytester.path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with FakeUpstream(delay=0.002, default_scenario="tool_loop:1") as up:
        result = pytester.runpytest_inprocess(
            *NOPLUG, "--looptap-record-mode=all", "--looptap-upstream", f"openai={up.url}"
        )
        served = len(up.llm_served())
    result.assert_outcomes(passed=4, failed=1)
    # Every temporary directory the plugin and its recorder made is gone, a quiet test's too.
    assert sorted(p.name for p in tmp.iterdir()) == []
    assert not (pytester.path / "cassettes" / "test_inner" / "test_quiet.jsonl").exists()
    assert served == 8
    assert len(set(seen.read_text().split())) == 1  # one recorder: every test got the same listener
    for city in ["Paris", "Lyon", "Oslo", "Rome"]:
        cas = read_records(pytester.path / "cassettes" / "test_inner" / f"test_city[{city}].jsonl")
        assert not cas.problems and len(cas.exchanges) == 2, city
        assert all(f"Weather in {city}?".encode() in ex.request_body for ex in cas.exchanges), city
    expect(result, "test_city[Oslo]: recorded 2 round trips into *test_city[Oslo].jsonl")


FAULT_TEST = (
    SDK_LOOP.replace(
        "def agent(turns=2):\n    client = OpenAI(max_retries=0)",
        "def agent(turns=2, retries=2):\n    client = OpenAI(max_retries=retries)",
    )
    + """

@pytest.mark.looptap("cassettes/loop.jsonl", fault="turn=1:overloaded=0*2")
def test_loop_survives_an_overloaded_api(looptap):
    assert agent() == "It is sunny in Paris."  # the SDK retries twice, then gets the recorded answer
    assert [seq for _, seq, _ in looptap.faults_fired] == [1, 1]
    assert [ex.status for ex in looptap.run.exchanges] == [200, 503, 503, 200]

@pytest.mark.looptap("cassettes/loop.jsonl", fault="turn=1:overloaded=0*2")
def test_loop_without_retries(looptap):
    agent(retries=0)
"""  # noqa: E501
)


def test_a_fault_marker_replays_the_api_misbehaving(pytester: pytest.Pytester) -> None:
    """docs/faults.md: the recorded test, the same test with the API overloaded on turn 1 (passes:
    the SDK retries), and with the agent's retries off (fails, saying what the API said)."""
    pytest.importorskip("openai")
    _inner(pytester, FAULT_TEST)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=2, failed=1)
    expect(
        result,
        "*test_loop_without_retries*",
        "openai.InternalServerError: Error code: 503 - The engine "
        "is currently overloaded, please try again later",
    )
    bad = FAULT_TEST.replace(
        'fault="turn=1:overloaded=0*2")\ndef test_loop_without_retries',
        'fault="turn=1:teapot")\ndef test_loop_without_retries',
    )
    _inner(pytester, bad)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    assert (
        "looptap: --fault 'turn=1:teapot': unknown fault 'teapot'"
        in result.stderr.str() + result.stdout.str()
    )
