"""The pytest plugin's replay and ``why`` run for real on the imported traces of
tests/interop/traces/ (test_instrumented_traces.py imports them and forks them): the agent that
made each trace runs against its imported run as it would against a recording of the same run."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.cli import main
from tests.interop.make_traces import APIS
from tests.interop.test_import_traces import show_json
from tests.interop.test_instrumented_traces import (
    FRAMEWORKS,
    FRAMEWORKS_PYTHON,
    SDK_KINDS,
    TRACES,
    imported,
)
from tests.replay.test_fork import AGENT as FORK_AGENT
from tests.replay.test_fork import origin_route
from tests.support import progress
from tests.support.recorder import clean_env, needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.support.tool_http import PLUGIN

#: The user's pytest of the agent, with looptap's plugin alone (as tests/support/tool_http.py's
#: ``run_plugged``): the test environment's other plugins are not what a user's test of an agent
#: loads, and starting them took 1.8 s of CPU a run against 0.25 s (13 runs by default).
INNER = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN, "tests"]
PLUGIN_ALONE = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

REPLAYED = """
import sys
sys.path.insert(0, {agent_dir!r})
import pytest
from fork_agent import AGENTS, ALL_AGENTS


@pytest.mark.looptap
def test_weather(looptap):
    labels = {labels!r} or sorted(AGENTS)
    for label in labels:
        assert "Sunny in Paris and Lyon." in ALL_AGENTS[label](), label
    assert len(looptap.run.turns) == 3 * len(labels)
"""


#: The plugin's replay of an imported trace by default: the agents of fork_agent.py (Chat and
#: Messages, streamed or not) from OpenLLMetry's trace, and Gemini's from google-genai's.
#: The other kinds run nightly: the same plugin and replay server, and each kind's imported run
#: answering every request its agent sent is shown in process by test_instrumented_traces.py's
#: ``test_every_request_the_agent_sent_is_answered_by_the_imported_run`` (session 55, h105m).
PLUGIN_DEFAULT = ("openllmetry", "google-genai")


def _nightly(kind: str, why: str) -> Any:
    return pytest.param(kind, marks=pytest.mark.slow(reason=why))


@pytest.mark.parametrize(
    "kind",
    [
        k
        if k in PLUGIN_DEFAULT
        else _nightly(k, "another kind's trace through the same replay (1.8-4.3 s of CPU); its "
                      "matching is shown in process by test_instrumented_traces.py")
        for k in SDK_KINDS
    ],
)  # fmt: skip
def test_the_pytest_plugin_replays_an_imported_trace_offline(kind: str, tmp_path: Path) -> None:
    """docs/testing.md's way: a test of the agents the trace came from, its cassette the imported
    trace, replayed offline (``CI=1``: nothing may be recorded)."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_agent.py").write_text(
        REPLAYED.format(agent_dir=str(FORK_AGENT.parent), labels=list(SDK_KINDS[kind]))
    )
    cassette = project / "tests" / "cassettes" / "test_agent" / "test_weather.jsonl"
    assert main(["import", "-q", str(TRACES / f"{kind}.otlp.json"), "-o", str(cassette)]) == 0
    proc = progress.run(
        INNER, env=clean_env(CI="1", OPENAI_API_KEY="sk-i", ANTHROPIC_API_KEY="a",
                             GOOGLE_API_KEY="g", **PLUGIN_ALONE),
        capture_output=True, text=True, cwd=project,
    )  # fmt: skip
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-4000:]


REPLAYED_ELSEWHERE = """
import os
import subprocess

import pytest


@pytest.mark.looptap
def test_weather(looptap):
    # the agent runs in the frameworks' environment, with the base URLs the plugin set; a
    # boto3 or Vertex AI SDK agent is given the replay server as its endpoint
    base = looptap.url.split("/v1")[0]
    env = {{**os.environ, "BEDROCK_BASE_URL": base, "VERTEX_BASE_URL": base}}
    proc = subprocess.run({agent!r}, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("Sunny in Paris and Lyon.") == {n}, proc.stdout
"""


def _all_traces(*params: Any) -> Any:
    """A case run only with ``LOOPTAP_ALL_TRACES=1`` (a minute or more each on a loaded machine)."""
    return pytest.param(*params, marks=pytest.mark.skipif(
        not os.environ.get("LOOPTAP_ALL_TRACES"),
        reason="LOOPTAP_ALL_TRACES=1 runs it on every trace (a minute or more each)",
    ))  # fmt: skip


@pytest.mark.skipif(not FRAMEWORKS_PYTHON, reason="LOOPTAP_TRACES_PYTHON: the frameworks")
@pytest.mark.parametrize(
    ("kind", "agent", "n"),
    [
        _all_traces("openinference-langchain", [FRAMEWORKS, "langchain"], 4),
        _all_traces("openllmetry-langchain", [FRAMEWORKS, "langchain"], 4),
        _all_traces("pydantic-ai", [FRAMEWORKS, "pydantic-ai"], 4),
        ("logfire-pydantic-ai", [FRAMEWORKS, "pydantic-ai"], 4),
        _all_traces(
            "openinference-openai-agents",
            [FRAMEWORKS, "openai-agents", "openai", "openai-stream"],
            2,
        ),
        ("openinference-bedrock", [FORK_AGENT, "bedrock", "bedrock-stream"], 2),
        _all_traces("vertexai", [FORK_AGENT, "vertex"], 1),
    ],
)
def test_the_pytest_plugin_replays_a_frameworks_trace(
    kind: str, agent: list[Any], n: int, tmp_path: Path
) -> None:
    """The LangChain, pydantic-ai, openai-agents, boto3 and Vertex AI SDK agents run for real
    inside a pytest test of the plugin, against the imported trace replayed offline (``CI=1``)."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    argv = [str(FRAMEWORKS_PYTHON), *map(str, agent)]
    (project / "tests" / "test_agent.py").write_text(REPLAYED_ELSEWHERE.format(agent=argv, n=n))
    cassette = project / "tests" / "cassettes" / "test_agent" / "test_weather.jsonl"
    assert main(["import", "-q", str(TRACES / f"{kind}.otlp.json"), "-o", str(cassette)]) == 0
    env = clean_env(
        CI="1", OPENAI_API_KEY="sk-i", ANTHROPIC_API_KEY="a", AWS_ACCESS_KEY_ID="AKIDREPLAY",
        AWS_SECRET_ACCESS_KEY="secret-replay", **PLUGIN_ALONE,
    )  # fmt: skip
    proc = progress.run(INNER, env=env, capture_output=True, text=True, cwd=project)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-4000:]


#: The agent that made each trace, as ``why`` reruns it: (whether it needs the traces'
#: environment, LOOPTAP_TRACES_PYTHON, else the test environment's; the script; the arguments
#: before the label).
WHY_AGENTS: dict[str, tuple[bool, Path, tuple[str, ...]]] = {
    **{k: (False, FORK_AGENT, ()) for k in SDK_KINDS},
    "openinference-langchain": (True, FRAMEWORKS, ("langchain",)),
    "openllmetry-langchain": (True, FRAMEWORKS, ("langchain",)),
    "pydantic-ai": (True, FRAMEWORKS, ("pydantic-ai",)),
    "logfire-pydantic-ai": (True, FRAMEWORKS, ("pydantic-ai",)),
    "openinference-openai-agents": (True, FRAMEWORKS, ("openai-agents",)),
    "openinference-bedrock": (True, FORK_AGENT, ()),  # boto3
    "vertexai": (True, FORK_AGENT, ()),  # google-cloud-aiplatform
}


def _final_label(trace: Path, views: list[dict[str, Any]]) -> str:
    """The agent loop (fork_agent's label) whose answer is the run's final one: ``why`` judges
    the answer of the last turn that answered with text."""
    from looptap.cassettes.reading import open_run

    last = max(v["seq"] for v in views if v["text"])
    ex = next(ex for ex in open_run(trace, whole=True).exchanges if ex.seq == last)
    found = re.search(rb"\[([a-z-]+)\] Weather", ex.request_body)
    assert found is not None, ex.request_body[:2000]
    return found.group(1).decode()


#: ``why`` on each trace costs 40–70 s on a loaded machine: by default one trace per API family
#: (Chat + Messages, Gemini, Bedrock Converse); Logfire's and OpenLIT's (the same agents over Chat
#: and Messages) nightly (session 55, h105m); ``LOOPTAP_ALL_TRACES=1`` runs every one.
WHY_DEFAULT = ("openllmetry", "google-genai", "openinference-bedrock")
WHY_NIGHTLY = ("logfire", "openlit")


def _why_case(kind: str) -> Any:
    if kind in WHY_DEFAULT:
        return kind
    if kind in WHY_NIGHTLY:
        return _nightly(
            kind, "why over the same agents and families as OpenLLMetry's trace (about 12 s of CPU)"
        )
    return _all_traces(kind)


@needs_recorder
@pytest.mark.parametrize("kind", [_why_case(k) for k in WHY_AGENTS])
def test_why_runs_on_an_imported_trace(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``why`` run on the imported run as on a recording (K=1, its branches forks of the imported
    run against a scripted upstream): the failure (the answer names Lyon) is read from it, every
    branch runs the agent live past its cursor, and it ends with a verdict (here "not
    determined": the scripted model answers as recorded), never a traceback. The agent runs
    only the loop whose answer is the final one: the others' conversations are not intervened on."""
    traces, script, args = WHY_AGENTS[kind]
    if traces and not FRAMEWORKS_PYTHON:
        pytest.skip("LOOPTAP_TRACES_PYTHON: the traces' environment")
    python = FRAMEWORKS_PYTHON if traces else sys.executable
    trace = imported(kind, tmp_path)
    label = _final_label(trace, show_json(trace, capsys))
    agent = [str(python), str(script), *args, label]
    env = clean_env(
        OPENAI_API_KEY="sk-why", ANTHROPIC_API_KEY="sk-ant-why", GOOGLE_API_KEY="g-why",
        AWS_ACCESS_KEY_ID="AKIDWHY", AWS_SECRET_ACCESS_KEY="secret-why",
    )  # fmt: skip
    with ScriptedUpstream(origin_route) as fake:
        up = [f for api in APIS for f in ("--upstream", f"{api}={fake.url}")]
        proc = progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", "why", str(trace), "--answer-matches", "Lyon",  # noqa: E501
             "--samples", "1", "--jobs", "3", "-o", str(tmp_path / "why"), "--confdir",
             str(tmp_path / "conf"), *up, "--", *agent],
            env=env, capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("verdict: "), proc.stdout
    assert "the recorded run fails by the outcome" in proc.stderr
    runs = [line for line in proc.stderr.splitlines() if " sample 1/1: " in line]
    assert runs and all(line.endswith((": failed", ": flipped")) for line in runs), runs
    assert fake.log, "no branch sent anything live"
