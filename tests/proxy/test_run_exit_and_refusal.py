"""Two ends of ``looptap run``, through the real command (issue 100, items 4 and 5):

- **exit 4**: a run whose recording makes a check raise (one planted in the recorder's own
  process through ``sitecustomize``: no check is known to raise on a real run today) still ends,
  its summary says the step that failed, it exits 4 (``EXIT_NOT_JUDGED``), and ``show --json``
  of the recording carries the round trip's ``*.not_judged`` note. The suite's
  ``LOOPTAP_RAISE_CONTAINED`` is unset here, as a user runs.
- **a fork of a run with no working tree** (recorded with ``--no-shell-trace``) is refused
  without ``--in-place``: exit 2, nothing sent, no branch written; with it, it runs here.

The agent is curl, calling the OpenAI chat API through the recorder's listener, answered by a
scripted upstream on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.proxy.test_e2e_node_agents import REPO, explain, run_env
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedUpstream

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(shutil.which("curl") is None, reason="no curl command"),
]

AGENT = (
    'curl -sS --fail --max-time 60 "$OPENAI_BASE_URL/chat/completions" '
    "-H 'content-type: application/json' -H \"authorization: Bearer $OPENAI_API_KEY\" "
    '-d \'{"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}\''
)
#: Put first on the recorder's PYTHONPATH: a check that raises on every round trip.
PLANTED = """
try:
    from looptap.cassettes.analysis import _analyser
except Exception:
    pass
else:
    def _planted(ctx):
        raise TypeError("planted: 'int' object is not iterable")

    _analyser.CHECKS = (*_analyser.CHECKS, _planted)
"""


def _run(tmp: Path, out: Path, env: dict[str, str], up: Any, *extra: str) -> Any:
    argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(tmp / "conf"),
            "--upstream", f"openai={up.url}", *extra, "--", "sh", "-c", AGENT]  # fmt: skip
    return progress.run(
        argv, env=env, capture_output=True, text=True, cwd=tmp, stdin=subprocess.DEVNULL
    )


def test_a_check_that_raises_ends_the_run_with_exit_4_and_the_note(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(PLANTED)
    env = run_env(tmp_path, OPENAI_API_KEY="sk-test-exit4", PYTHONPATH=f"{planted}:{REPO}")
    env.pop("LOOPTAP_RAISE_CONTAINED", None)  # (as a user runs: what raises is contained)
    out = tmp_path / "run.jsonl"
    with ScriptedUpstream(lambda _req: Reply.say("Hello.")) as up:
        proc = _run(tmp_path, out, env, up)
    assert proc.returncode == 4, explain(proc)
    assert '"Hello."' in proc.stdout, explain(proc)  # (the agent got its answer)
    said = [line for line in proc.stderr.splitlines() if "analysis step failed" in line]
    assert len(said) == 1 and "planted" in said[0] and "exit status 4" in said[0], explain(proc)
    assert "Traceback" not in proc.stderr, explain(proc)
    show = progress.run([*RECORDER, "show", "--json", "--no-cache", str(out)], env=env,
                        capture_output=True, text=True)  # fmt: skip
    assert show.returncode == 4, show.stderr[-2000:]
    notes = [
        f
        for line in show.stdout.splitlines()
        if line.startswith("{")
        for f in json.loads(line).get("findings") or []
        if str(f.get("code", "")).endswith(".not_judged")
    ]
    assert notes and all("_planted" in json.dumps(n) for n in notes), show.stdout[-3000:]


def test_a_fork_of_a_run_with_no_working_tree_is_refused_without_in_place(
    tmp_path: Path,
) -> None:
    env = run_env(tmp_path, OPENAI_API_KEY="sk-test-notree", PYTHONPATH=str(REPO))
    env.pop("LOOPTAP_IN_PLACE", None)  # (the suite's: tests/conftest.py)
    out = tmp_path / "run.jsonl"
    with ScriptedUpstream(lambda _req: Reply.say("Hello.")) as up:
        proc = _run(tmp_path, out, env, up, "--no-shell-trace")
        assert proc.returncode == 0, explain(proc)
        sent = len(up.log)
        branch = tmp_path / "branch.jsonl"
        refused = _run(tmp_path, branch, env, up, "--from", f"{out}@turn=0")
        assert refused.returncode == 2, explain(refused)
        assert len(up.log) == sent and not branch.exists(), explain(refused)
        assert "the fork is refused: the recording holds no working tree" in refused.stderr
        assert "--in-place" in refused.stderr, refused.stderr
        ran = _run(tmp_path, branch, env, up, "--from", f"{out}@turn=0", "--in-place")
    assert ran.returncode == 0, explain(ran)
    assert "--in-place: the fork runs the agent in your working tree" in ran.stderr, explain(ran)
    assert len(up.log) == sent + 1 and branch.exists(), explain(ran)
