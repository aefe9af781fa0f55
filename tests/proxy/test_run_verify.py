"""Which model would have fixed it (issue 104; cassettes/forkcheck/, docs/fork.md): ``looptap run
--from RUN@turn=1 --model A,B --repeat K --verify CMD`` forks a recorded run K times per model,
each branch in its own isolated scratch tree (the real util-linux ``unshare``), runs CMD there once
the agent ends and says per model k/K verified with its interval, cost and requests, beside the
recorded run's own end state verified again. The agent is tests/support/bash_agent.py; the model
is scripted: the model ``GOOD`` (or any model told "carefully") fixes ``calc.py`` so that the check
passes, any other breaks it another way. Recorded once for the module; every fork reads it."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.proxy.test_e2e_node_agents import REPO, explain, looptap_run, run_env
from tests.support import bash_agent, progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare (util-linux) here"),
]

GOOD, BAD = "claude-haiku-4-5", "claude-opus-4-1"
CHECK = 'python3 -c "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"'


def model() -> Any:
    """A scripted model: looks, fixes (right for GOOD or a careful user; else wrong, ``*`` and
    ``**`` in turn, so failed branches differ at the fix), says done."""
    wrong = iter(["*", "**"] * 50)
    lock = threading.Lock()

    def answer(req: ScriptedRequest) -> Reply:
        done = len(req.tool_results())
        if done == 0:
            return Reply.tool("bash", {"command": "cat calc.py"}, what="look")
        if done == 1:
            good = req.model == GOOD or any("carefully" in t for t in req.user_texts())
            with lock:
                fix = "a + b" if good else f"a {next(wrong)} b"
            return Reply.tool("bash", {"command": f"sed -i 's/a - b/{fix}/' calc.py"}, what=fix)
        return Reply.say("done", what="answer")

    return answer


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("verify")
    agent = tmp / "agent.py"
    agent.write_text(Path(bash_agent.__file__).read_text())
    work = tmp / "work"
    work.mkdir()
    (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    env = run_env(tmp, ANTHROPIC_API_KEY="sk-ant-verify")
    env.pop("LOOPTAP_SHELL_TRACE", None)  # the default: the working tree per turn
    env.pop("LOOPTAP_IN_PLACE", None)  # (its forks: isolated, as a user's; tests/conftest.py)
    with ScriptedUpstream(model(), validate=True) as up:
        proc, out = looptap_run(
            tmp, tmp / "conf", [sys.executable, str(agent)], env, upstream=up,  # type: ignore[arg-type]
        )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    assert "a * b" in (work / "calc.py").read_text()  # the recorded run's fix is wrong
    (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")  # the user's tree again
    return {"tmp": tmp, "out": out, "agent": agent, "work": work,
            "env": {**env, "PYTHONPATH": str(REPO)}}  # fmt: skip


def verify(
    r: dict[str, Any],
    name: str,
    *extra: str,
    up: ScriptedUpstream | None = None,
    check: str = CHECK,
) -> Any:
    own = up is None
    up = up or ScriptedUpstream(model(), validate=True).__enter__()
    try:
        argv = [
            *RECORDER, "run", "--from", f"{r['out']}@turn=1", "--verify", check,
            "--confdir", str(r["tmp"] / "conf"), "--upstream", f"anthropic={up.url}",
            "-o", str(r["tmp"] / name), *extra, "--", sys.executable, str(r["agent"]),
        ]  # fmt: skip
        proc = progress.run(
            argv, env=r["env"], capture_output=True, text=True, cwd=r["work"],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        return proc, [x.request.model for x in up.log]
    finally:
        if own:
            up.__exit__(None, None, None)


def test_two_models_three_branches_each_verified_as_the_truth(recorded: dict[str, Any]) -> None:
    r = recorded
    before = digests(r["work"])
    proc, models = verify(r, "two", "--model", f"{GOOD},{BAD}", "--repeat", "3", "--jobs", "2",
                          "--json")  # fmt: skip
    why = explain(proc)
    assert proc.returncode == 0, why
    doc = json.loads(proc.stdout)
    rows = {row["model"]: row for row in doc["rows"]}
    assert (rows[GOOD]["verified"], rows[GOOD]["judged"]) == (3, 3), why
    assert (rows[BAD]["verified"], rows[BAD]["judged"]) == (0, 3), why
    assert rows[GOOD]["low"] > 0.3 and rows[BAD]["high"] < 0.7
    assert doc["baseline"]["result"] == "not verified" and doc["baseline"]["exit"] == 1, why
    # the budget: at most said before anything was sent, and kept; priced for the models named
    assert "intervention" not in proc.stderr and "the recorded model" not in proc.stderr, why
    assert "12 requests expected (2 models × 3 branches, as recorded); estimated cost $" in (
        proc.stderr
    ), why
    assert f"at {GOOD}, {BAD}'s own price" in proc.stderr, why
    (said,) = [x for x in proc.stderr.splitlines() if "sent live in all: 2 models" in x]
    at_most = int(re.search(r"at most (\d+) requests", said).group(1))  # type: ignore[union-attr]
    assert at_most == doc["at_most"] and doc["sent"] == len(models) <= at_most, why
    # nothing live for a model not named: every live request asked for GOOD or BAD
    assert set(models) == {GOOD, BAD} and len(models) == 12, models
    # the user's tree as it was; every branch's tree removed
    assert digests(r["work"]) == before
    removed = re.findall(r"the fork's scratch tree was removed \((\S+);", _logs(doc))
    assert len(removed) == 6 and not any(Path(p).exists() for p in removed), why
    # the same as a static page: no script, the figures in its tables
    page = (Path(doc["output"]) / "verify.html").read_text()
    assert "<script" not in page and f"<td>{GOOD}</td><td>3/3 verified</td>" in page
    # the failed branches fixed it wrong in two ways: they first differed at the fix (turn 1)
    differed = rows[BAD]["differed"]
    assert (differed["conversation"], differed["turn"]) == ("c1", 1), (differed, why)
    assert rows[GOOD]["differed"] is None and rows[BAD]["failed"] == [
        f"{BAD}.{k}.jsonl" for k in (1, 2, 3)
    ]


def _logs(doc: dict[str, Any]) -> str:
    out = Path(doc["output"])
    return "".join((out / b["log"]).read_text() for row in doc["rows"] for b in row["branches"])


def test_text_report_and_an_edit_row_and_keep_tree(recorded: dict[str, Any]) -> None:
    """`--model recorded --edit user[0]=…`: the recorded model told to go carefully is a row; with
    --keep-tree each branch's tree is kept, holding the fix."""
    r = recorded
    proc, models = verify(r, "edit", "--model", "recorded", "--edit", "user[0]=go carefully",
                          "--repeat", "2", "--keep-tree")  # fmt: skip
    why = explain(proc)
    assert proc.returncode == 0, why
    assert "recorded model + edits: 2/2 verified [95% interval " in proc.stdout, why
    assert "recorded run (its end state): not verified (exit status 1)" in proc.stdout, why
    assert set(models) == {"claude-sonnet-4-5"}, models
    kept = re.findall(r"the fork's scratch tree is kept: (\S+) \(", _logs(json.loads(
        (r["tmp"] / "edit" / "verify.json").read_text())))  # fmt: skip
    assert len(kept) == 2, why
    for tree in kept:
        assert "a + b" in (Path(tree) / "calc.py").read_text()
        shutil.rmtree(Path(tree).parent)


def test_refused_before_anything_is_sent(recorded: dict[str, Any]) -> None:
    r = recorded
    with ScriptedUpstream(model(), validate=True) as up:
        for extra, said in (
            (
                ("--model", f"{GOOD},{BAD}", "--repeat", "2", "--in-place"),
                "--in-place with several",
            ),
            (("--model", f"{GOOD},{BAD}", "--max-cost", "0.001"), "over --max-cost 0.001"),
            (("--model", "gpt-5"), "error: gpt-5: --model gpt-5"),
            (("--model", f"{GOOD},{GOOD}"), "--model names a model twice"),
        ):
            proc, _ = verify(r, "refused", *extra, up=up)
            assert proc.returncode == 2 and said in proc.stderr, explain(proc)
        assert up.log == []
    assert not (r["tmp"] / "refused").exists()


def test_from_python_and_read_by_mcp(recorded: dict[str, Any], monkeypatch: Any) -> None:
    """``looptap.cassettes.forkcheck.verify`` (what a pytest test calls) runs the command's code;
    MCP's read-only ``verify_report`` reads what it wrote."""
    from looptap.cassettes.forkcheck import verify as verify_api
    from looptap.cassettes.mcp.query import Runs, verify_report

    r = recorded
    for k in ("HOME", "ANTHROPIC_API_KEY", "PYTHONPATH"):
        monkeypatch.setenv(k, r["env"][k])
    with ScriptedUpstream(model(), validate=True) as up:
        result = verify_api(
            f"{r['out']}@turn=1", [sys.executable, str(r["agent"])], CHECK,
            output=r["tmp"] / "py", models=[GOOD, "recorded"], repeat=2,
            upstream={"anthropic": up.url}, confdir=r["tmp"] / "conf", cwd=r["work"],
        )  # fmt: skip
        sent = len(up.log)
    rows = result.rows
    assert (rows[GOOD]["verified"], rows["recorded"]["verified"]) == (2, 0), result.lines
    assert result.doc["sent"] == sent <= result.doc["at_most"]
    answer = verify_report(Runs([str(r["tmp"])]), "py", 0, 20, 6000)
    got = {x["model"]: x["verified"] for x in answer["recorded"]["rows"]}
    assert got == {GOOD: 2, None: 0} and answer["recorded"]["baseline"]["result"] == "not verified"


def test_a_check_past_its_limit_is_not_verified(recorded: dict[str, Any]) -> None:
    r = recorded
    proc, _ = verify(r, "slow", "--verify-timeout", "1", "--json", check="touch began; sleep 60")
    doc = json.loads(proc.stdout)
    (branch,) = doc["rows"][0]["branches"]
    assert branch["result"] == "not verified", explain(proc)
    assert branch["why"] == "timed out (past 1 s)", explain(proc)
    assert doc["baseline"]["why"] == "timed out (past 1 s)"


def test_why_check_judges_each_branch_in_its_own_tree(recorded: dict[str, Any]) -> None:
    """``looptap why --check`` on the same recording: each branch is isolated in its scratch tree,
    so its check runs there (the fork's ``--verify``), never in the user's tree, which fails the
    check whatever the branches do, while the branch re-sampled on GOOD at turn 1 fixes its copy
    (the only flip); the recorded outcome is judged on the recorded end state (``a * b``)."""
    r = recorded
    with ScriptedUpstream(model(), validate=True) as up:
        argv = [
            *RECORDER, "why", str(r["out"]), "--check", CHECK, "--layer", "E", "--model", GOOD,
            "--samples", "1", "--jobs", "2", "--confdir", str(r["tmp"] / "conf"), "--upstream",
            f"anthropic={up.url}", "-o", str(r["tmp"] / "why"), "--json",
            "--", sys.executable, str(r["agent"]),
        ]  # fmt: skip
        proc = progress.run(
            argv, env=r["env"], capture_output=True, text=True, cwd=r["work"],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    (r["work"] / "calc.py").write_text("def add(a, b):\n    return a - b\n")  # (the baseline's)
    why = explain(proc)
    assert proc.returncode == 0, why
    doc = json.loads(proc.stdout)
    # the recorded end state fails the check (a * b); the replay exited 0
    assert doc["recorded"] == {"failed": True, "exit": 0, "check": 1}, why
    state = json.loads((r["tmp"] / "why" / "why.json").read_text())
    flipped = {k for k, v in state["branches"].items() if v["1"]["result"] == "flipped"}
    assert flipped == {f"E-c1-t1-e-model-{GOOD}"}, (state["branches"], why)
    assert len(state["branches"]) == 6 and all(
        v["1"]["result"] == "failed" for k, v in state["branches"].items() if k not in flipped
    ), state["branches"]
    log = (r["tmp"] / "why" / f"E-c1-t1-e-model-{GOOD}.1.jsonl.log").read_text()
    assert "--verify: the command exited 0 in the branch's tree: verified" in log, log[-3000:]
    v = doc["verdict"]
    assert (v["intervention"], v["flips"], v["samples"]) == (f"E-c1-t1-e-model-{GOOD}", 1, 1), v
