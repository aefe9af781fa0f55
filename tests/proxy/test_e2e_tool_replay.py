"""The tools' recorded HTTP served back (issue 84, item 4): the six agents of
tests/proxy/test_e2e_tool_http.py (the openai SDK with httpx tools, LangChain with requests tools,
LlamaIndex, pydantic-ai, CrewAI, and the AI SDK on Node 20 with ``fetch`` tools), each recorded
once a session through the real ``looptap run --tool-http-loopback`` (the ``tool_agent_run``
fixture, tests/proxy/conftest.py), replay with their tool server and their model both gone.

1. ``looptap replay`` (the openai SDK and LangChain agents): the agent is pointed at it by its
   export lines (the base URLs and, as the recording's tools made HTTP calls, ``HTTP_PROXY`` with
   the loopback no longer left out): every model call and every tool call answered from the run,
   nothing live.
2. The pytest plugin, for each of the six: an inner test runs the agent (Python, or ``node`` for
   the AI SDK: a Python test starting the Node agent, as a user would) with the environment the
   plugin set; it passes with the tool server gone, and the same test over the run without its
   tool exchanges fails (the tool's request refused: what replay did before item 4). A tool
   request the run does not answer fails the test, named with the recorded call closest to it
   and the model's tool call that one served.
3. A fork at turn 2 (``looptap run --from run.jsonl@turn=2``), for each of the six (the AI SDK
   agent with plain ``fetch``: the Node shim, cassettes/net/node_env_proxy.cjs): the prefix's tools
   served, the model live from turn 2, and the order the live turn asks for served from the
   run while its request matches; with a request that no longer matches the tool goes live —
   through the fork's recorder, into the branch, linked to the live turn's call — or fails under
   ``--tools-offline``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.storage import read_records
from tests.proxy.test_e2e_tool_http import (
    AGENT_ENV,
    AGENTS,
    CLIENTS_PYTHON,
    NODE,
    OPENAI_AGENT,
    TOOL_KEY,
    ToolServer,
    looptap_run,
    route,
)
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream
from tests.support.tool_http import run_plugged, start_replay, stop_replay

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(not CLIENTS_PYTHON.exists(), reason="no .venv-clients (.ci/run makes it)"),
]

pytest_plugins = ["pytester"]


@pytest.fixture(params=sorted(AGENTS))
def recorded(
    request: pytest.FixtureRequest, tool_agent_run: Callable[[str], dict[str, Any]]
) -> dict[str, Any]:
    """A run of the agent recorded with its tools' HTTP (once a session: tests/proxy/conftest.py);
    the tool server and the model stopped once it was (nothing listens at their URLs any more)."""
    return _recorded(tool_agent_run, request.param)


def _recorded(tool_agent_run: Callable[[str], dict[str, Any]], name: str) -> dict[str, Any]:
    made = tool_agent_run(name)
    proc = made["proc"]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "umbrella" in proc.stdout and len(made["seen"]) == 5
    assert sum(ex.tool for ex in read_records(made["run"]).exchanges) == 5
    return made


def _agent(name: str, where: Path, script: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The agent's command (its script written into ``where``) and what its process gets beyond
    what looptap sets: the same as when it was recorded."""
    agent, python, node = AGENTS[name]
    path = where / ("agent.cjs" if node else "agent.py")
    path.write_text(script or agent)
    env = {**AGENT_ENV, "DISPATCH": "1"} if node else dict(AGENT_ENV)
    return [str(NODE or "node") if node else str(python), str(path)], env


def _answered(recorded: dict[str, Any], out: str) -> bool:
    """The agent's final answer printed (a framework words it its own way: the order said)."""
    if recorded["name"] in ("openai", "langchain"):
        return "answer: Ordered an umbrella." in out
    return "answer:" in out and "umbrella" in out


def _replay(run: Path, *flags: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    return start_replay(run, *flags, env=clean_env())


def _stop(replay: subprocess.Popen[str]) -> str:
    return stop_replay(replay, timeout=120)


def test_looptap_replay_serves_the_tools_with_nothing_live(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    if recorded["name"] not in ("openai", "langchain"):
        pytest.skip("the plugin and the fork below take every agent; two are enough here")
    replay, env = _replay(recorded["run"], "--strict")
    try:
        assert env["HTTP_PROXY"] == env["OPENAI_BASE_URL"].removesuffix("/v1")
        assert "127.0.0.1" not in env["NO_PROXY"].split(",")  # the tools called the loopback
        argv, extra = _agent(recorded["name"], tmp_path)
        agent = progress.run(
            argv, env=clean_env(**env, TOOL_URL=recorded["tool_url"], **extra),
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    finally:
        err = _stop(replay)
    assert agent.returncode == 0, agent.stdout + agent.stderr[-3000:]
    assert "answer: Ordered an umbrella." in agent.stdout
    assert replay.returncode == 0, err
    assert "played 4 of 4 recorded round trips and served 5 of 5 tool HTTP calls" in err, err
    assert "0 unmatched requests" in err and "unplayed" not in err and "live" not in err


PLUGGED = """
import os, subprocess
import pytest

@pytest.mark.looptap({cassette!r})
def test_agent(looptap):
    env = {{**os.environ, **{env!r}}}
    done = subprocess.run({argv!r}, env=env, capture_output=True, text=True)
    print(done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0
    assert {answer}
"""


def _plugged(
    pytester: pytest.Pytester, recorded: dict[str, Any], cassette: Path, script: str | None = None
) -> pytest.RunResult:
    """The user's test of the agent under the plugin, with no rules of its own: LlamaIndex's
    ``FunctionAgent`` appends the results of an answer's parallel calls in the order they
    complete (Paris and Tokyo recorded one first; replayed, served at once, either first), and
    such a group of results matches in any order (cassettes/providers/_result_groups.py).
    Before, its request missed in 2 of 3 runs, and its test needed the rules ``ignore =
    ["messages[*].tool_call_id"]`` and ``volatile_tools = ["get_weather"]``."""
    argv, env = _agent(recorded["name"], pytester.path, script)
    answer = (
        '"answer: Ordered an umbrella." in done.stdout'
        if recorded["name"] in ("openai", "langchain")
        else '"answer:" in done.stdout and "umbrella" in done.stdout'
    )
    pytester.makepyfile(
        test_inner=PLUGGED.format(
            cassette=str(cassette), env={**env, "TOOL_URL": recorded["tool_url"]}, argv=argv,
            answer=answer,
        )
    )  # fmt: skip
    return run_plugged(pytester)


def test_the_plugin_replays_tools_and_model_offline(
    recorded: dict[str, Any], pytester: pytest.Pytester
) -> None:
    result = _plugged(pytester, recorded, recorded["run"])
    out = result.stdout.str()
    assert result.ret == 0, out[-6000:]
    result.assert_outcomes(passed=1)
    assert "played 4 of 4 recorded round trips and served 5 of 5 tool HTTP calls" in out, out


#: The control's agents: the openai SDK's by default; the others' (each agent's test above passes
#: by default) refused by the same replay server, nightly.
CONTROL = [
    name if name == "openai" else pytest.param(name, marks=pytest.mark.slow(
        reason="the control on one agent by default (the openai SDK's): the same refusal"))
    for name in sorted(AGENTS)
]  # fmt: skip


@pytest.mark.parametrize("name", CONTROL)
def test_without_its_tools_http_the_plugins_test_fails(
    name: str, tool_agent_run: Callable[[str], dict[str, Any]], pytester: pytest.Pytester
) -> None:
    """The control of the test above: the same run without its tools' HTTP, as a replay before
    issue 84's item 4 saw it (the tools' calls refused: their server is gone), fails the same
    test."""
    recorded = _recorded(tool_agent_run, name)
    bare = pytester.path / "bare.jsonl"
    lines = recorded["run"].read_bytes().splitlines(keepends=True)
    bare.write_bytes(
        b"".join(ln for ln in lines if b'"tool": true' not in ln and b'"tool":true' not in ln)
    )
    assert sum(ex.tool for ex in read_records(bare).exchanges) == 0
    failed = _plugged(pytester, recorded, bare)
    failed.assert_outcomes(failed=1)


def test_a_tool_request_the_run_does_not_answer_fails_named_with_its_tool_call(
    recorded: dict[str, Any], pytester: pytest.Pytester
) -> None:
    if recorded["name"] != "openai":
        pytest.skip("one agent is enough for the miss's words")
    changed = AGENTS["openai"][0].replace(
        'params={"city": city, "key": KEY}', 'params={"city": city, "key": KEY, "units": "metric"}'
    )
    assert changed != AGENTS["openai"][0]
    result = _plugged(pytester, recorded, recorded["run"], changed)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "tool HTTP call seq" in out and "GET 127.0.0.1:" in out, out[-3000:]
    assert (
        "GET 127.0.0.1:" in out
        and "the closest (not yet served) served the tool call get_weather id=call_s0001 of "
        "conversation c1, turn 0"
        in out
    ), out[-4000:]
    assert "units=metric" in out
    assert TOOL_KEY not in out  # the tool's key, sent in its query, never printed


def _fork(
    recorded: dict[str, Any],
    fake: ScriptedUpstream,
    tmp: Path,
    tool_url: str,
    *flags: str,
    turn: int = 2,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    argv, env = _agent(recorded["name"], tmp)
    # the AI SDK agent's plain fetch, no EnvHttpProxyAgent of its own: the fork keeps looptap run's
    # NODE_OPTIONS shim, which sends it to the fork's replay server (in absolute form, where the
    # recording's undici agent tunnelled: the same requests)
    env = {**env, "DISPATCH": "0"} if "DISPATCH" in env else env
    branch = tmp / "branch.jsonl"
    proc = progress.run(
        [*RECORDER, "run", "--from", f"{recorded['run']}@turn={turn}", "-o", str(branch),
         "--confdir", str(tmp / "conf"), "--upstream", f"openai={fake.url}", *flags, "--", *argv],
        env=clean_env(OPENAI_API_KEY="sk-test-tools", TOOL_URL=tool_url,
                      LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON), **env),
        capture_output=True, text=True, cwd=tmp,
    )  # fmt: skip
    return proc, branch


#: The fork at turn 2 by default: the openai SDK's agent and the AI SDK's (plain ``fetch`` through
#: the Node shim). The Python frameworks' forks run nightly: each framework's tool requests are
#: matched and served by default in its plugin test above (the same replay server and matcher), and
#: a fork's prefix and live turn by these two (session 55, h105m).
FORK_NIGHTLY = pytest.mark.slow(
    reason="a fork of another Python framework's agent (4-7 s of CPU): its tool requests are "
    "served by default in test_the_plugin_replays_tools_and_model_offline, a fork's by the openai "
    "SDK's and the AI SDK's agents"
)


@pytest.mark.parametrize(
    "recorded",
    [
        n if n in ("openai", "ai-sdk") else pytest.param(n, marks=FORK_NIGHTLY)
        for n in sorted(AGENTS)
    ],
    indirect=True,
)
def test_a_fork_at_turn_2_serves_the_tools(recorded: dict[str, Any], tmp_path: Path) -> None:
    """Turns 0 and 1 (and their four weather calls) served from the run; turn 2 live, asking for
    the recorded order: its POST matches the recorded one and is served (the tool server is
    gone); an answer live after it."""
    asked: list[int] = []

    def live(req: ScriptedRequest) -> Reply:
        asked.append(len(req.tool_results()))
        return route(req)

    with ScriptedUpstream(live) as fake:
        proc, _ = _fork(recorded, fake, tmp_path, recorded["tool_url"])
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert _answered(recorded, proc.stdout), proc.stdout + proc.stderr[-3000:]
    assert asked == [4, 5]  # turns 2 and 3 went live; 0 and 1 were served
    assert "served 5 of 5 tool HTTP calls" in proc.stderr, proc.stderr[-3000:]


def test_a_fork_sends_a_changed_tool_request_live_or_fails_it(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    """Turn 2 live asks for another order (3 umbrellas): the tool's POST no longer matches the
    run's. With a tool server at another address every tool request goes live (none matches);
    at the run's address (nothing listening) the prefix's weather calls are served and the
    changed order goes live (refused: the server is gone), or, with ``--tools-offline``, fails
    closed: a 400 naming the recorded call closest to it, which the agent hands the model. The
    tool calls that went live are in the branch, as ``looptap run`` records a tool's HTTP."""
    if recorded["name"] != "openai":
        pytest.skip("one agent is enough")

    def three(req: ScriptedRequest) -> Reply:
        if len(req.tool_results()) == 4:
            return Reply.tool("place_order", {"item": "umbrella", "quantity": 3})
        return route(req)

    with ScriptedUpstream(three) as fake, ToolServer() as tools:
        proc, live = _fork(recorded, fake, tmp_path, tools.url)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        assert "answer: Ordered an umbrella." in proc.stdout
        assert len(tools.seen) == 5  # all live: the weather calls too (another address)
        offline = tmp_path / "offline"
        offline.mkdir()
        proc, branch = _fork(recorded, fake, offline, recorded["tool_url"], "--tools-offline")
    assert len(tools.seen) == 5
    assert "answer: Ordered an umbrella." in proc.stdout, proc.stdout + proc.stderr[-3000:]
    said = proc.stderr
    assert "served 4 of 5 tool HTTP calls" in said, said[-3000:]
    assert "unmatched: POST http://127.0.0.1:" in said and "/orders" in said, said[-3000:]
    assert "the closest (not yet served) served the tool call place_order" in said
    # the model was told the miss: the agent's place_order returned the 400's text
    sent = [ex for ex in read_records(branch).exchanges if not ex.tool]
    assert b"looptap_replay_miss" in sent[-1].request_body
    # the live tool calls went through the fork's recorder: in the branch, as tool exchanges,
    # the changed order linked to the live turn's place_order call by its arguments
    went = [ex for ex in read_records(live).exchanges if ex.tool]
    assert sorted((ex.method, urlsplit(ex.url).path, ex.status) for ex in went) == [
        ("GET", "/weather", 200), ("GET", "/weather", 200), ("GET", "/weather", 200),
        ("GET", "/weather", 200), ("POST", "/orders", 201),
    ], proc.stderr[-3000:]  # fmt: skip
    assert all(urlsplit(ex.url).netloc == urlsplit(tools.url).netloc for ex in went)
    assert TOOL_KEY.encode() not in live.read_bytes()  # redacted as the recorder redacts
    forked = open_run(live, whole=True)
    (order,) = [c for c in forked.analysis.mcp_calls.values() if c.http and c.http.method == "POST"]
    calls = {tc.id: tc for _, rt in forked.pairs if rt.response for tc in rt.response.tool_calls}
    assert order.linked_by == "arguments" and calls[order.call_id].arguments == {
        "item": "umbrella", "quantity": 3,
    }  # fmt: skip


def test_the_served_answers_are_the_recorded_ones(recorded: dict[str, Any], tmp_path: Path) -> None:
    """What the tools got in replay is what they got when recorded (status and body)."""
    import httpx

    from looptap.cassettes.replay.serving.server import ReplayServer

    cas = read_records(recorded["run"])
    tool = [ex for ex in cas.exchanges if ex.tool]
    with ReplayServer(recorded["run"]) as server:
        with httpx.Client(proxy=server.url, trust_env=False) as client:
            for ex in tool:
                got = client.request(ex.method, ex.url.replace("key=REDACTED", f"key={TOOL_KEY}"),
                                     content=ex.request_body or b"",
                                     headers={"content-type": "application/json"})  # fmt: skip
                assert (got.status_code, json.loads(got.content)) == (
                    ex.status,
                    json.loads(ex.response_body),
                )
    assert not server.misses


HIDING = """
import os, subprocess
import pytest

@pytest.mark.looptap({cassette!r})
def test_agent(looptap):
    env = {{**os.environ, **{env!r}}}
    done = subprocess.run({argv!r}, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    looptap.run.assert_no_findings(layer="C")
"""


def _lyon(req: ScriptedRequest) -> Reply:
    if not req.tool_results():
        return Reply.tool("get_weather", {"city": "Lyon"})
    return Reply.say("It is fine in Lyon.")


@pytest.fixture(scope="module")
def hiding(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The openai SDK agent with httpx tools that hides a 503 from the model (it hands it
    ``{}``), asked for Lyon's weather (the tool server answers Lyon 503), recorded once for the
    two tests below; the tool server and the model stopped once it was."""
    tmp = tmp_path_factory.mktemp("hiding")
    with ScriptedUpstream(_lyon) as fake, ToolServer() as tools:
        proc, run = looptap_run(tmp, OPENAI_AGENT, fake, tools)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return {"run": run, "tool_url": tools.url}


def test_the_plugins_run_holds_the_tool_findings(
    hiding: dict[str, Any], pytester: pytest.Pytester
) -> None:
    """Issue 91, item 4: docs/testing.md's ``run.assert_no_findings(layer="C")`` fails for an
    agent that hides a 503 from the model (the openai SDK agent with httpx tools turns it into
    ``{}``), replayed by the plugin with the tool server and the model stopped: the tool calls it
    served are the run's tool exchanges, linked and judged. On c86d115d they were served as
    plain round trips and the assertion passed."""
    run = hiding["run"]
    recorded = [f.code for f in open_run(run, whole=True).analysis.findings]
    assert "C.tool_http_error_hidden" in recorded
    argv, env = _agent("openai", pytester.path)
    env["TOOL_URL"] = hiding["tool_url"]
    pytester.makepyfile(test_inner=HIDING.format(cassette=str(run), argv=argv, env=env))
    result = run_plugged(pytester)
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "C.tool_http_error_hidden" in out and "served 1 of 1 tool HTTP call" in out, out[-4000:]


def test_a_forks_branch_holds_the_tool_calls_it_served_with_their_findings(
    hiding: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 91, item 4: a fork's branch holds the tool calls the replay server answered from the
    recording once the branch had begun (not only those that went live), each where it started,
    linked to the live turn's call it served and judged: the agent that hides a 503, forked at
    turn 0 with its tool server stopped, has its ``C.tool_http_error_hidden`` in the branch, the
    served call noted with the origin's seq. On c86d115d the branch held no tool exchange."""
    run, tool_url = hiding["run"], hiding["tool_url"]
    (origin_tool,) = [ex for ex in read_records(run).exchanges if ex.tool]
    made = {"name": "openai", "run": run}
    fork = tmp_path / "fork"
    fork.mkdir()
    with ScriptedUpstream(_lyon) as fake:
        proc, branch = _fork(made, fake, fork, tool_url, "--tools-offline", turn=0)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "served 1 of 1 tool HTTP call" in proc.stderr, proc.stderr[-3000:]
    exchanges = read_records(branch).exchanges
    assert [ex.tool for ex in exchanges] == [False, True, False], proc.stderr[-3000:]
    assert [ex.seq for ex in exchanges] == [0, 1, 2]
    served = exchanges[1]
    assert served.status == 503 and served.url == origin_tool.url
    assert f"served from the recording (the origin's seq {origin_tool.seq})" in served.notes
    assert TOOL_KEY.encode() not in branch.read_bytes()
    forked = open_run(branch, whole=True)
    (call,) = forked.analysis.mcp_calls.values()
    assert call.linked_by == "arguments" and call.tool == "get_weather"
    assert "C.tool_http_error_hidden" in [f.code for f in forked.analysis.findings]
