"""A run ended by a signal to its whole process group (what ``timeout``, CI runners and ``kill --
-PGID`` send): every process of the run gets it, the recorder's writer among them. What the end
says was recorded is what the cassette holds, counted from the file, never guessed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.proxy.test_e2e_node_agents import REPO, run_env
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

#: An agent of three model calls on the Anthropic Messages API, then a wait for its end.
AGENT = """
import json, os, sys, time, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"].rstrip("/")
for i in range(3):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 16,
            "messages": [{"role": "user", "content": f"call {i}"}]}
    req = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-api-key": "sk-ant-group",
                 "anthropic-version": "2023-06-01"})
    urllib.request.urlopen(req).read()
open(sys.argv[1], "w").close()
time.sleep(600)
"""


def _route(req: ScriptedRequest) -> Reply:
    return Reply.say(f"answer to {req.last_user_text()}")


@needs_recorder
@pytest.mark.parametrize(
    ("sig", "traced"), [(signal.SIGTERM, True), (signal.SIGINT, False)], ids=["term", "int"]
)
def test_a_signal_to_the_group_ends_with_the_files_counts(
    tmp_path: Path, sig: signal.Signals, traced: bool
) -> None:
    """Three exchanges recorded, then the signal to the run's process group (SIGTERM at the
    default level: the tracer and the working tree's records beside the round trips): the end
    line says 3 round trips (the file's count), no STORAGE ERROR, nothing said lost."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    out = tmp_path / "run.jsonl"
    env = {**run_env(tmp_path), "PYTHONPATH": str(REPO)}
    if traced:
        env.pop("LOOPTAP_SHELL_TRACE", None)  # (the suite's opt-out: the default level here)
    work = tmp_path / "work"
    work.mkdir()
    sent = tmp_path / "sent"
    with ScriptedUpstream(_route) as up:
        argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(tmp_path / "conf")]
        argv += ["--upstream", f"anthropic={up.url}", "--", "python3", str(agent), str(sent)]
        # in a process group of its own, as a CI job's; stdin and stdout /dev/null
        quiet, pipe = subprocess.DEVNULL, subprocess.PIPE
        opts: dict[str, Any] = {"cwd": work, "env": env, "stdin": quiet, "stdout": quiet}
        with subprocess.Popen(argv, **opts, stderr=pipe, text=True, start_new_session=True) as proc:
            try:  # the agent's three answers came back (hung: no progress of the run's tree)
                progress.until(lambda: sent.exists() or proc.poll() is not None, pids=[proc.pid])
                os.killpg(proc.pid, sig)
                _, stderr = progress.communicate(proc, what="looptap run after the signal")
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
    in_file = sum(
        1 for x in out.read_text().splitlines() if json.loads(x).get("type") == "exchange"
    )
    assert in_file == 3, stderr
    assert "STORAGE ERROR" not in stderr and "not recorded" not in stderr, stderr
    assert "NOT recorded" not in stderr, stderr
    assert f"{in_file} round trips in {out}" in stderr, stderr
