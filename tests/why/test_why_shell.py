"""``looptap why``'s C repair of a hidden command failure (issue 93, cassettes/why/_shell_truth.py):
a scripted agent (tests/proxy/test_shell_trace.py's, with ``--lie``: it sends ``ok`` back for a
command that failed) recorded with ``looptap run --shell-trace``; its command exits 3 silently, the
scripted model, told ``ok``, answers "All checks passed" (the run failed: ``--answer-matches``).
The C intervention puts the command's real end in the result the model gets (a
``tool_result[CALL_ID]`` edit) and flips every sample: the model, told, answers that the check
failed. Each branch (``looptap run --from``) runs the agent in a scratch copy of the tree: the
file the re-run command writes never reaches the user's tree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from looptap.proxy.shell_trace import probe
from tests.proxy.test_e2e_node_agents import explain, looptap_run, run_env
from tests.proxy.test_shell_trace import AGENT
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(probe() is not None, reason=f"no process tracer here: {probe()}"),
]

#: Samples per intervention.
K = 2
#: The command: writes a file, then fails silently (the shell's status: 3).
SILENT = "echo made > made.txt; python3 -c 'import sys; sys.exit(3)'"


def model(req: ScriptedRequest) -> Reply:
    results = req.tool_results()
    if not results:
        return Reply.tool("bash", {"command": SILENT}, what="run")
    if "exit" in results[-1]:
        return Reply.say("The check failed.", what="told")
    return Reply.say("All checks passed.", what="not told")


def test_the_real_exit_told_flips_the_outcome(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    env = run_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-why-shell")
    env.pop("LOOPTAP_SHELL_TRACE", None)
    env.pop("LOOPTAP_IN_PLACE", None)  # (its forks: isolated, as a user's)
    with ScriptedUpstream(model, validate=True) as up:
        proc, out = looptap_run(
            tmp_path, tmp_path / "conf", [sys.executable, str(agent), "--lie"], env, upstream=up,  # type: ignore[arg-type]
            extra=("--shell-trace",),
        )  # fmt: skip
        assert proc.returncode == 0, explain(proc)
        assert "All checks passed." in out.read_text()
        # the user's tree since: the command's file removed; each branch re-runs the prefix's
        # command in a scratch copy of the tree (``run --from``), never here
        work = tmp_path / "work"
        (work / "made.txt").unlink()
        before = sorted(p.name for p in work.iterdir())
        why = progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", "why", str(out),
             "--upstream", f"anthropic={up.url}", "--confdir", str(tmp_path / "conf"),
             "--answer-matches", "All checks passed", "--samples", str(K), "--layer", "C",
             "--json", "-o", str(tmp_path / "why"), "--", sys.executable, str(agent), "--lie"],
            env={**env, "LOOPTAP_PROXY_PYTHON": str(PROXY_PYTHON)},
            capture_output=True, text=True, cwd=tmp_path / "work",
        )  # fmt: skip
    assert why.returncode in (0, 1) and why.stdout.startswith("{"), why.stderr[-3000:]
    assert sorted(p.name for p in work.iterdir()) == before, why.stderr[-3000:]
    doc = json.loads(why.stdout)
    (c,) = [i for i in doc["interventions"] if i["kind"] == "c-shell-truth"]
    assert c["finding"] == "C.shell_failure_hidden" and c["runnable"], c
    assert c["edits"][0].startswith("tool_result[") and "exit 3" in c["edits"][0], c
    branches = c.get("branches") or []
    assert len(branches) == K and all(b.get("result") == "flipped" for b in branches), doc
