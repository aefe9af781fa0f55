"""Which model would have fixed it, with real coding agents (issue 104; docs/fork.md, "Which model
would have fixed it (verify)"): Claude Code, opencode and Codex (pinned in .npm-agents) recorded
once each through ``looptap run`` (the working tree per turn, the default) against a scripted model
that reads ``calc.py`` and then fixes it wrong; then ``looptap run --from RUN@turn=1 --model
GOOD,BAD --repeat 2 --verify 'python test_calc.py'``: every branch re-lives turn 0 in its own
scratch tree, turn 1 goes live to the scripted model, which fixes ``calc.py`` right for GOOD and
wrong for BAD; the test runs in each branch's tree. The counts must be the truth (2/2 and 0/2),
the baseline (the recorded end state) not verified, the user's tree byte for byte what it was,
every branch's tree removed, nothing live for a model not named, the requests under the at-most
said first. One recording per agent (module fixture), one ``--verify`` per agent."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.clients.test_shell_tools import CALC, SHELL_TOOLS, TEST
from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, explain, looptap_run, need, run_env
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

#: Per agent: the model recorded, the one whose fix passes, the one whose fix does not.
MODELS = {
    "claude-code": ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"),
    "opencode": ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"),
    "codex": ("gpt-5-codex", "gpt-5", "gpt-5-mini"),
}
CHECK = f"{shlex.quote(sys.executable)} test_calc.py"


def _patch(op: str) -> str:
    """Codex's edit: an ``apply_patch`` it applies itself."""
    return (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n"
        f"-    return a - b\n+    return a {op} b\n*** End Patch\nEOF\n"
    )


def route(good: str) -> Any:
    """Reads calc.py, fixes it (right for ``good``, else wrong), answers."""

    def answer(req: ScriptedRequest) -> Reply:
        shell = next((t for t in SHELL_TOOLS if t in req.tools), None)
        if shell is None:
            return Reply.say("(side call)", what="side")
        key = "cmd" if shell == "exec_command" else "command"
        op = "+" if req.model == good else "*"
        fix = _patch(op) if shell == "exec_command" else f"sed -i 's/a - b/a {op} b/' calc.py"
        steps = [{key: "cat calc.py"}, {key: fix}]
        if shell != "exec_command":  # (Codex's schema takes no other argument)
            steps = [{**s, "description": "Look" if i == 0 else "Fix"} for i, s in enumerate(steps)]
        done = len(req.tool_results())
        if done < len(steps):
            return Reply.tool(shell, steps[done], what=f"step{done + 1}:{op}")
        return Reply.say("Fixed calc.py.", what="answer")

    return answer


def _command(agent: str, tmp: Path) -> tuple[list[str], dict[str, str]]:
    if agent == "claude-code":
        claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
        env = run_env(tmp, ANTHROPIC_API_KEY="sk-ant-verify-agents", **CLAUDE_OFFLINE)
        return [
            str(claude), "-p", "Fix calc.py so that test_calc.py passes.", "--model",
            "claude-sonnet-4-5", "--output-format", "json", "--no-session-persistence",
            "--allowedTools", "Bash",
        ], env  # fmt: skip
    if agent == "opencode":
        from tests.clients.test_agents import OPENCODE_OFFLINE

        opencode = need("opencode-ai", bin_name="opencode", node=False)
        env = run_env(tmp, ANTHROPIC_API_KEY="sk-ant-verify-agents", **OPENCODE_OFFLINE)
        return [
            str(opencode), "run", "-m", "anthropic/claude-sonnet-4-5",
            "Fix calc.py so that test_calc.py passes.",
        ], env  # fmt: skip
    from tests.clients.outcome import codex_wrapper
    from tests.clients.test_context import CODEX_CONFIG

    codex = need("@openai/codex", bin_name="codex")
    home = tmp / "codex-home"
    home.mkdir()
    wrapper = codex_wrapper(tmp, codex, CODEX_CONFIG)
    env = run_env(tmp, CODEX_HOME=str(home), LOOPTAP_CODEX_KEY="sk-verify-agents")
    return [
        str(wrapper), "exec", "--skip-git-repo-check", "--sandbox", "workspace-write",
        "Fix calc.py so that test_calc.py passes.",
    ], env  # fmt: skip


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


#: Claude Code's by default; opencode's and Codex's nightly (the same verify, each branch's tree
#: re-lived from the recorded working tree per turn, whatever the agent; session 55, h105m).
_NIGHTLY = pytest.mark.slow(
    reason="the same verify on another coding agent (opencode about 15 s, Codex about 8 s of CPU): "
    "Claude Code's by default, and tests/proxy/test_run_verify.py's"
)


@pytest.fixture(
    scope="module",
    params=[a if a == "claude-code" else pytest.param(a, marks=_NIGHTLY) for a in sorted(MODELS)],
)
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The agent's failed run, recorded once: its fix is wrong."""
    agent = request.param
    _recorded_model, good, _bad = MODELS[agent]
    tmp = tmp_path_factory.mktemp(f"verify-{agent}")
    cmd, env = _command(agent, tmp)
    work = tmp / "work"
    work.mkdir()
    (work / "calc.py").write_text(CALC)
    (work / "test_calc.py").write_text(TEST)
    env.pop("LOOPTAP_SHELL_TRACE", None)  # the default: the working tree per turn, no ptrace
    env.update(SHELL="/bin/bash", PWD=str(work))  # (opencode runs its commands in $PWD)
    with ScriptedUpstream(route(good), validate=True) as up:
        proc, out = looptap_run(tmp, tmp / "conf", cmd, env, upstream=up)  # type: ignore[arg-type]
        said = "\n".join(x.line() for x in up.log)
    assert proc.returncode == 0, explain(proc) + "\n--- scripted\n" + said
    assert "a * b" in (work / "calc.py").read_text(), said  # the recorded fix is wrong
    (work / "calc.py").write_text(CALC)  # the user's tree as it was before the agent
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return {"agent": agent, "tmp": tmp, "out": out, "cmd": cmd, "work": work, "env": env,
            "models": MODELS[agent]}  # fmt: skip


def test_the_counts_are_the_truth(recorded: dict[str, Any]) -> None:
    r = recorded
    _recorded_model, good, bad = r["models"]
    before = _digests(r["work"])
    out = r["tmp"] / "verify"
    with ScriptedUpstream(route(good), validate=True, ids="f") as up:
        argv = [
            *RECORDER, "run", "--from", f"{r['out']}@turn=1", "--model", f"{good},{bad}",
            "--repeat", "2", "--jobs", "2", "--verify", CHECK, "--json", "-o", str(out),
            "--confdir", str(r["tmp"] / "conf"), "--upstream", f"anthropic={up.url}",
            "--upstream", f"openai={up.url}", "--", *r["cmd"],
        ]  # fmt: skip
        proc = progress.run(argv, env=r["env"], capture_output=True, text=True, cwd=r["work"])
        models = [x.request.model for x in up.log]
        said = "\n".join(x.line() for x in up.log)
    logs = "".join(p.read_text() for p in out.glob("*.log"))
    why = f"{r['agent']}: {explain(proc)}\n--- scripted\n{said}\n--- branch logs\n{logs[-6000:]}"
    assert proc.returncode == 0, why
    doc = json.loads(proc.stdout)
    rows = {row["model"]: row for row in doc["rows"]}
    assert (rows[good]["verified"], rows[good]["judged"]) == (2, 2), why
    assert (rows[bad]["verified"], rows[bad]["judged"]) == (0, 2), why
    assert doc["baseline"]["result"] == "not verified", why
    # nothing live for a model not named, and no more than said before anything was sent
    assert models and set(models) <= {good, bad}, models
    assert doc["sent"] <= doc["at_most"] and len(models) <= doc["at_most"], why
    # the user's tree as it was, and every branch's tree removed
    assert _digests(r["work"]) == before, why
    removed = re.findall(r"the fork's scratch tree was removed \((\S+);", logs)
    assert len(removed) == 4 and not any(Path(p).exists() for p in removed), why
