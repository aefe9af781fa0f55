"""HTTPS tools served back (issue 84, item 4): the agents of tests/proxy/test_e2e_tool_replay.py
(the openai SDK with httpx tools, a LangChain agent with requests tools) whose tool server speaks
HTTPS on 127.0.0.1 (a certificate of its own, which the recorder's mitmproxy is told not to
verify: ``--ssl-insecure``). Recorded through the real ``looptap run``, the agent trusting the
recorder's CA; then, with the tool server and the model both stopped:

1. ``looptap replay``: the agent run with its export lines (the proxy variables and a CA store
   trusting the replay's own CA) gets every tool answer over HTTPS, nothing live.
2. The pytest plugin: the same agent in an inner test passes; on the base commit (CONNECT
   refused) it failed.
3. A fork at turn 2: the prefix's HTTPS tool calls and the live turn's order served; and, when
   the live turns ask for other calls (the tool server back at its address), each goes live
   tunnelled through the fork's recorder, which intercepts its TLS with its own CA: the branch
   records it as ``looptap run`` records a tool's HTTP, its key redacted (before, it went from
   the replay server and the branch held none).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.storage import read_records
from tests.proxy.test_e2e_tool_http import (
    CLIENTS_PYTHON,
    LANGCHAIN_AGENT,
    OPENAI_AGENT,
    TOOL_KEY,
    ToolServer,
    looptap_run,
    route,
)
from tests.proxy.test_e2e_tool_replay import _fork, _plugged, _replay, _stop
from tests.support import progress
from tests.support.recorder import clean_env, needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(not CLIENTS_PYTHON.exists(), reason="no .venv-clients (.ci/run makes it)"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command"),
]

pytest_plugins = ["pytester"]

AGENTS = {"openai": OPENAI_AGENT, "langchain": LANGCHAIN_AGENT}


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (OpenSSL's own command line): the
    tool server's, which no store trusts."""
    cert, key = directory / "tool-cert.pem", directory / "tool-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=tools",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class HttpsToolServer(ToolServer):
    """The weather and orders API over HTTPS (its own self-signed certificate for 127.0.0.1), on
    ``port`` (0: a free one)."""

    def __init__(self, cert: tuple[Path, Path], port: int = 0) -> None:
        super().__init__()
        if port:  # (the address a run recorded: its server stopped since)
            handler = self.server.RequestHandlerClass
            self.server.server_close()
            self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
            self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
            self.url = f"http://127.0.0.1:{port}"
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*cert)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = self.url.replace("http://", "https://")


#: The openai SDK's agent (httpx) by default; the LangChain agent's (requests) nightly: requests
#: verifying the replay's certificate through the exported ``REQUESTS_CA_BUNDLE`` is
#: tests/replay/test_tool_https.py's (in process), LangChain's tool requests are served over HTTP
#: by default in test_e2e_tool_replay.py, and requests trusting a CA through its variables under
#: ``looptap run`` is test_e2e_tool_trust.py's (session 55, h105m).
_NIGHTLY = pytest.mark.slow(
    reason="the LangChain agent's HTTPS tools (about 20 s of CPU for its four tests): requests and "
    "the replay's CA in tests/replay/test_tool_https.py, LangChain's tools served in "
    "test_e2e_tool_replay.py"
)


@pytest.fixture(
    scope="module",
    params=[a if a == "openai" else pytest.param(a, marks=_NIGHTLY) for a in sorted(AGENTS)],
)
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp(f"{request.param}-https-tools")
    cert = _self_signed(tmp)
    with ScriptedUpstream(route) as fake, HttpsToolServer(cert) as tools:
        proc, run = looptap_run(tmp, AGENTS[request.param], fake, tools, "--ssl-insecure")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "answer: Ordered an umbrella." in proc.stdout and len(tools.seen) == 5
    tool = [ex for ex in read_records(run).exchanges if ex.tool]
    assert len(tool) == 5 and all(ex.url.startswith(tools.url + "/") for ex in tool)
    yield {
        "name": request.param, "run": run, "tool_url": tools.url, "agent": AGENTS[request.param],
        "cert": cert,
    }  # fmt: skip


def test_looptap_replay_serves_https_tools_with_nothing_live(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    replay, env = _replay(recorded["run"], "--strict")
    try:
        assert env["HTTPS_PROXY"] == env["OPENAI_BASE_URL"].removesuffix("/v1")
        ca = Path(env["SSL_CERT_FILE"])
        assert ca.is_file() and env["REQUESTS_CA_BUNDLE"] == str(ca)
        assert not ca.is_relative_to(recorded["run"].parent)  # never beside the user's files
        script = tmp_path / "agent.py"
        script.write_text(recorded["agent"])
        agent = progress.run(
            [str(CLIENTS_PYTHON), str(script)],
            env=clean_env(**env, TOOL_URL=recorded["tool_url"], TOOL_KEY=TOOL_KEY),
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    finally:
        err = _stop(replay)
    assert agent.returncode == 0, agent.stdout + agent.stderr[-3000:]
    assert "answer: Ordered an umbrella." in agent.stdout
    assert replay.returncode == 0, err
    assert "played 4 of 4 recorded round trips and served 5 of 5 tool HTTP calls" in err, err
    assert "0 unmatched requests" in err and "unplayed" not in err and "live" not in err
    assert not ca.exists() and not ca.parent.exists()  # the replay's CA gone with it


def test_the_plugin_replays_https_tools_offline(
    recorded: dict[str, Any], pytester: pytest.Pytester
) -> None:
    result = _plugged(pytester, recorded, recorded["run"], recorded["agent"])
    out = result.stdout.str()
    result.assert_outcomes(passed=1)
    assert "played 4 of 4 recorded round trips and served 5 of 5 tool HTTP calls" in out, out


def test_a_fork_at_turn_2_serves_the_https_tools(recorded: dict[str, Any], tmp_path: Path) -> None:
    asked: list[int] = []

    def live(req: ScriptedRequest) -> Reply:
        asked.append(len(req.tool_results()))
        return route(req)

    with ScriptedUpstream(live) as fake:
        proc, _ = _fork(recorded, fake, tmp_path, recorded["tool_url"])
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "answer: Ordered an umbrella." in proc.stdout
    assert asked == [4, 5]  # turns 2 and 3 went live; 0 and 1 were served
    assert "served 5 of 5 tool HTTP calls" in proc.stderr, proc.stderr[-3000:]


def test_a_fork_records_its_live_https_tool_calls(recorded: dict[str, Any], tmp_path: Path) -> None:
    """Turn 2 live asks for the weather in three more cities, turn 3 for an order of three
    umbrellas: none of the four calls is the run's, so each goes to the tool server (back at the
    recorded address) through the fork's recorder, and the branch holds all four."""
    if recorded["name"] != "openai":
        pytest.skip("one agent is enough")

    def more(req: ScriptedRequest) -> Reply:
        done = len(req.tool_results())
        if done == 4:
            cities = ("Rome", "Lima", "Bern")
            return Reply(calls=tuple(Call("get_weather", {"city": c}) for c in cities))
        if done == 7:
            return Reply.tool("place_order", {"item": "umbrella", "quantity": 3})
        return route(req)

    port = int(recorded["tool_url"].rsplit(":", 1)[1])
    with ScriptedUpstream(more) as fake, HttpsToolServer(recorded["cert"], port) as tools:
        proc, branch = _fork(recorded, fake, tmp_path, recorded["tool_url"], "--ssl-insecure")
    said = proc.stdout + proc.stderr[-3000:]
    assert proc.returncode == 0, said
    assert "answer: Ordered an umbrella." in proc.stdout, said
    assert sorted(p for _, p, _ in tools.seen) == [
        "/orders", "/weather?city=Bern&key=" + TOOL_KEY, "/weather?city=Lima&key=" + TOOL_KEY,
        "/weather?city=Rome&key=" + TOOL_KEY,
    ], said  # fmt: skip
    assert "served 4 of 5 tool HTTP calls" in proc.stderr, said
    went = [ex for ex in read_records(branch).exchanges if ex.tool]
    assert sorted((ex.method, ex.url.split("?")[0], ex.status) for ex in went) == [
        ("GET", f"{tools.url}/weather", 200), ("GET", f"{tools.url}/weather", 200),
        ("GET", f"{tools.url}/weather", 200), ("POST", f"{tools.url}/orders", 201),
    ], said  # fmt: skip
    assert TOOL_KEY.encode() not in branch.read_bytes()  # redacted as the recorder redacts
    # linked to the live turn's calls (the order by its arguments), as looptap run links them
    forked = open_run(branch, whole=True)
    (order,) = [c for c in forked.analysis.mcp_calls.values() if c.http and c.http.method == "POST"]
    calls = {tc.id: tc for _, rt in forked.pairs if rt.response for tc in rt.response.tool_calls}
    assert order.linked_by == "arguments" and calls[order.call_id].arguments == {
        "item": "umbrella", "quantity": 3,
    }  # fmt: skip
