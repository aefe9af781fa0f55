"""Node 20's built-in ``fetch`` on the replay side: the AI SDK agent of
tests/proxy/test_e2e_tool_http.py (``ai`` 6.0.325, ``@ai-sdk/openai`` 3.0.141, on the Node here)
with plain ``fetch`` tools (``DISPATCH=0``: no ``EnvHttpProxyAgent`` of its own), recorded once a
session through the real ``looptap run`` (``tool_agent_run``), then replayed with its tool server
and its model both stopped. Node 20's ``fetch`` reads no proxy variable: the replay side puts
looptap's shim (cassettes/net/node_env_proxy.cjs) into ``NODE_OPTIONS``, after the user's own, as
``looptap run`` does; without it the tools' calls went past the replay server to the stopped tool
server (and the test failed).

1. The pytest plugin: an inner test starting the Node agent passes, every tool call served.
2. ``looptap replay``'s export lines evaluated by a shell (``eval``, as ``eval "$(looptap
   replay …)"``), with a ``NODE_OPTIONS`` of the user's holding a space: the same.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.net import NODE_SHIM
from looptap.cassettes.replay.serving.agent_env import placeholder_keys, read_export, replay_env
from tests.proxy.test_e2e_tool_http import AGENT_ENV, AGENTS, NODE, NPM_CLIENTS
from tests.proxy.test_e2e_tool_replay import PLUGGED  # the user's test of the agent
from tests.support import progress
from tests.support.recorder import clean_env, needs_recorder
from tests.support.tool_http import run_plugged

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(
        NODE is None or not (NPM_CLIENTS / "node_modules" / "ai").exists(),
        reason="no node or .npm-clients (.ci/run makes it)",
    ),
]

pytest_plugins = ["pytester"]

#: The agent's own environment: plain ``fetch`` (no undici agent of its own).
PLAIN = {**AGENT_ENV, "DISPATCH": "0"}
#: A ``NODE_OPTIONS`` of the user's, kept before the shim: two options, one with a space in a
#: quoted value (Node's own quoting).
USERS = '--max-old-space-size=300 --title="node agent"'
SERVED = "played 4 of 4 recorded round trips and served 5 of 5 tool HTTP calls"


@pytest.fixture
def recorded(tool_agent_run: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    made = tool_agent_run("ai-sdk")
    assert made["proc"].returncode == 0, made["proc"].stdout + made["proc"].stderr[-3000:]
    assert len(made["seen"]) == 5
    return made


def test_the_plugin_serves_plain_fetch_tools_offline(
    recorded: dict[str, Any], pytester: pytest.Pytester
) -> None:
    script = pytester.path / "agent.cjs"
    script.write_text(AGENTS["ai-sdk"][0])
    pytester.makepyfile(
        test_inner=PLUGGED.format(
            cassette=str(recorded["run"]),
            env={**PLAIN, "TOOL_URL": recorded["tool_url"]},
            argv=[str(NODE), str(script)],
            answer='"answer:" in done.stdout and "umbrella" in done.stdout',
        )
    )
    result = run_plugged(pytester)
    out = result.stdout.str()
    assert result.ret == 0, out[-6000:]
    result.assert_outcomes(passed=1)
    assert SERVED in out, out[-3000:]


def test_looptap_replay_export_lines_evaluated_by_a_shell(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    given = clean_env(NODE_OPTIONS=USERS, **PLAIN)
    replay = subprocess.Popen(
        [sys.executable, "-m", "looptap.cassettes.cli", "replay", "--strict", str(recorded["run"])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=given,
    )  # fmt: skip
    assert replay.stdout is not None and replay.stderr is not None
    last = list({**replay_env("http://x"), **placeholder_keys(given)})[-1]
    lines: list[str] = []
    try:
        while not lines or not lines[-1].startswith(f"export {last}="):
            line = replay.stdout.readline()
            assert line, replay.stderr.read()
            lines.append(line.rstrip("\n"))
        env = dict(read_export(line) or ("", "") for line in lines)
        # the user's NODE_OPTIONS first, then the shim; one shell word, quoted
        assert env["NODE_OPTIONS"] == f"{USERS} --require={NODE_SHIM}", lines
        assert env["NODE_USE_ENV_PROXY"] == "1" and "" not in env
        script = tmp_path / "agent.cjs"
        script.write_text(AGENTS["ai-sdk"][0])
        agent = progress.run(
            ["/bin/sh", "-c", 'eval "$LINES" && exec "$NODE" "$SCRIPT"'],
            env={**given, "LINES": "\n".join(lines), "NODE": str(NODE), "SCRIPT": str(script),
                 "TOOL_URL": recorded["tool_url"]},
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    finally:
        replay.send_signal(signal.SIGINT)
        _, err = replay.communicate(timeout=120)
    assert agent.returncode == 0, agent.stdout + agent.stderr[-3000:] + err[-3000:]
    assert "answer:" in agent.stdout and "umbrella" in agent.stdout
    assert replay.returncode == 0, err
    assert SERVED in err and "0 unmatched requests" in err, err
    assert "unplayed" not in err and "live" not in err
