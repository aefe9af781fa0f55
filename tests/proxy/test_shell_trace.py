"""``looptap run``'s process tracer (proxy/shell_trace.py) and the core's linking (cassettes/shell),
on a small agent (tests/support/bash_agent.py): a loop on the Anthropic Messages API (the scripted
model) that runs each ``bash`` tool call with ``/bin/bash -c`` and sends back its output, and, with
``--lie``, ``ok`` for a command that failed (a client that hides the exit). Fast and deterministic;
the real coding agents are tests/clients/test_shell_tools.py."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.shell import read_processes
from looptap.proxy.shell_trace import probe
from tests.proxy.test_e2e_node_agents import explain, looptap_run, run_env
from tests.support import bash_agent
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream, bash_steps

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(probe() is not None, reason=f"no process tracer here: {probe()}"),
]

#: The agent (tests/support/bash_agent.py), written beside the run as a script of its own.
AGENT = Path(bash_agent.__file__).read_text()

SECRET = "sk-ant-api03-" + "Q" * 80 + "AA"
COMMANDS = [
    "echo hello > out.txt && cat out.txt",
    f"echo ANTHROPIC_API_KEY={SECRET} > env.txt",
    "python3 -c 'import sys; sys.exit(3)'",
    "mv out.txt moved.txt; rm env.txt",
    f"touch key-{SECRET}.txt; rm key-{SECRET}.txt",
]


_route = bash_steps(COMMANDS)


def _run(
    tmp_path: Path, lie: bool, extra: tuple[str, ...] = ("--shell-trace",), zero: bool = False
) -> dict[str, Any]:
    """``extra=()``: the programs and exits only (``LOOPTAP_SHELL_TRACE=processes``, opt-in)."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    env = run_env(tmp_path, ANTHROPIC_API_KEY=f"sk-ant-shell-{tmp_path.name}")
    env.pop("LOOPTAP_SHELL_TRACE", None)  # (the suite's opt-out: tests/conftest.py)
    env.pop("LOOPTAP_IN_PLACE", None)  # (its forks: isolated, as a user's)
    if not extra:
        env["LOOPTAP_SHELL_TRACE"] = "processes"
    confdir = tmp_path / "conf"
    with ScriptedUpstream(_route, validate=True) as up:
        cmd = [
            sys.executable,
            str(agent),
            *(["--lie"] if lie else []),
            *(["--lie0"] if zero else []),
        ]
        proc, out = looptap_run(tmp_path, confdir, cmd, env, upstream=up, extra=extra)  # type: ignore[arg-type]
    why = explain(proc)
    assert proc.returncode == 0 and out.exists(), why
    return {"out": out, "why": why, "run": open_run(out, whole=True), "work": tmp_path / "work"}


def test_processes_level_programs_exits_and_the_tree(tmp_path: Path) -> None:
    """``LOOPTAP_SHELL_TRACE=processes``, on Linux: each program and its exit (no output, no files
    per process: ``"output": false``), the working tree per turn, the links, no warning."""
    r = _run(tmp_path, lie=False, extra=())
    shell = r["run"].shell
    assert shell.traced, r["why"]
    assert [c.process.exit if c.process else None for c in shell.calls] == [0, 0, 3, 0, 0]
    assert all(c.process and not c.process.output for c in shell.calls)
    assert all(c.process and c.process.stdout == "" and not c.files for c in shell.calls)
    assert shell.as_json()["calls"][0]["process"]["output"] is False
    notes = [json.loads(x) for x in r["out"].read_text().splitlines() if '"note"' in x]
    assert [n.get("traced") for n in notes if n.get("note") == "processes"] == ["processes"]
    # the tree's changes per turn, each named by the call that made it (its arguments name it)
    changed = {
        (c["path"], c["before"] is None, c["after"] is None)
        for t in shell.tree
        for c in t["changes"]
    }
    assert {("out.txt", True, False), ("env.txt", True, False), ("moved.txt", True, False)} <= (
        changed
    ), shell.tree
    assert not shell.findings and r["run"].findings(min_severity="warning") == []
    for f in [r["out"], *Path(f"{r['out']}.files").iterdir()]:
        assert SECRET[:30].encode() not in f.read_bytes(), f


def test_processes_only_a_result_that_may_carry_the_output_is_not_judged(tmp_path: Path) -> None:
    """The processes-only tracer did not see the command's stderr: a failure whose result says "ok"
    may have carried it, so no warning (``--shell-trace`` judges it:
    test_a_failure_the_result_hides_is_warned)."""
    r = _run(tmp_path, lie=True, extra=())
    shell = r["run"].shell
    assert shell.calls[2].process is not None and shell.calls[2].process.exit == 3
    assert not shell.findings


def test_processes_only_a_result_stating_exit_0_for_a_failure_is_warned(tmp_path: Path) -> None:
    """A result that states the command exited 0 (Codex's words) while it exited 3: warned at the
    processes level too (the output is not needed to see the contradiction)."""
    r = _run(tmp_path, lie=True, extra=(), zero=True)
    shell = r["run"].shell
    failed = shell.calls[2]
    assert failed.process is not None and failed.process.exit == 3 and not failed.process.output
    (f,) = shell.findings
    assert f.code == "C.shell_failure_hidden" and f.tool_call_id == failed.call_id


def test_no_shell_trace_opts_out(tmp_path: Path) -> None:
    r = _run(tmp_path, lie=False, extra=("--no-shell-trace",))
    data = r["out"].read_bytes()
    assert b'"process"' not in data and b'"type":"files"' not in data
    assert not Path(f"{r['out']}.files").exists()
    assert not r["run"].shell.traced


def test_each_command_linked_with_its_exit_and_files(tmp_path: Path) -> None:
    r = _run(tmp_path, lie=False)
    shell = r["run"].shell
    # (the key in the second is masked alike in the model's call and the process's argv)
    assert [c.command for c in shell.calls] == [
        c.replace(SECRET, "[REDACTED]") for c in COMMANDS
    ], shell.as_json()
    assert [c.process.exit if c.process else None for c in shell.calls] == [0, 0, 3, 0, 0]
    work = str(r["work"])
    assert shell.calls[0].process.stdout.startswith("hello")
    assert ("write", f"{work}/out.txt") in shell.calls[0].files
    assert ("remove", f"{work}/out.txt") in shell.calls[3].files
    assert ("write", f"{work}/moved.txt") in shell.calls[3].files
    assert ("remove", f"{work}/env.txt") in shell.calls[3].files
    assert ("write", f"{work}/key-[REDACTED].txt") in shell.calls[4].files
    # the client said the exit code: no warning; the agent's own processes (python itself) apart
    assert not shell.findings and r["run"].findings(min_severity="warning") == []
    # the opt-in tracer says what it takes from the agent (ptrace), once
    assert r["why"].count("traced with ptrace (--shell-trace)") == 1, r["why"]
    # the secret the command line, its output, the file and a file's name carried reached no
    # byte of the cassette, nor of the contents kept beside it
    on_disk = [r["out"], *Path(f"{r['out']}.files").iterdir()]
    for f in on_disk:
        assert SECRET[:30].encode() not in f.read_bytes(), f
    # the working tree per turn: each change before the request that followed it, made by the
    # call whose command wrote it
    tree = {t["seq"]: t["changes"] for t in shell.tree}
    by = {
        (c["path"], c["before"] is None, c["after"] is None): c["by"]
        for t in tree.values()
        for c in t
    }
    ids = [c.call_id for c in shell.calls]
    assert by[("out.txt", True, False)] == [ids[0]]
    assert by[("env.txt", True, False)] == [ids[1]]
    assert by[("moved.txt", True, False)] == [ids[3]]
    assert by[("out.txt", False, True)] == [ids[3]] and by[("env.txt", False, True)] == [ids[3]]
    # the contents kept: the file written (not the one that held the key)
    (out_txt,) = [c for t in tree.values() for c in t if c["path"] == "out.txt" and c["after"]]
    assert (Path(f"{r['out']}.files") / out_txt["after"]).read_bytes() == b"hello\n"
    (env,) = [c for t in tree.values() for c in t if c["path"] == "env.txt" and c["after"]]
    assert env["unkept"].startswith("withheld")


def test_a_failure_the_result_hides_is_warned(tmp_path: Path) -> None:
    r = _run(tmp_path, lie=True)
    shell = r["run"].shell
    failed = shell.calls[2]
    assert failed.process is not None and failed.process.exit == 3
    (f,) = shell.findings
    assert f.code == "C.shell_failure_hidden" and f.tool_call_id == failed.call_id
    assert f.seq == failed.result_seq
    assert f in r["run"].findings(min_severity="warning")
    # in show --json's line for the run
    got = read_processes(r["out"])
    assert got.traced and not got.malformed


def test_a_run_without_the_tracer_says_so(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    env = run_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-x", PATH="/nonexistent:/usr/bin:/bin")
    env["PATH"] = str(Path(sys.executable).parent) + ":/nonexistent"  # no strace on it
    with ScriptedUpstream(_route, validate=True) as up:
        proc, out = looptap_run(
            tmp_path, tmp_path / "conf", [sys.executable, str(agent)], env, upstream=up,  # type: ignore[arg-type]
            extra=("--shell-trace",),
        )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    assert "shell commands not traced: no strace on PATH" in proc.stderr
    assert b'"process"' not in out.read_bytes()
    assert json.loads(out.read_text().splitlines()[0])["type"] == "header"


CALC, FIXED = "def add(a, b):\n    return a - b\n", "def add(a, b):\n    return a + b\n"
TEST = (
    "import sys\nfrom calc import add\nok = add(2, 3) == 5\n"
    "print('1 passed' if ok else '1 failed')\nsys.exit(0 if ok else 1)\n"
)


def _coder(req: ScriptedRequest) -> Reply:
    """Runs the test (it fails), writes the fix with the agent's own file tool, runs it again."""
    steps = [
        ("bash", {"command": "python3 test_calc.py"}),
        ("write", {"path": "calc.py", "content": FIXED}),
        ("bash", {"command": "python3 test_calc.py"}),
    ]
    done = len(req.tool_results())
    if done < len(steps):
        return Reply.tool(*steps[done], what=f"step{done}")
    return Reply.say("fixed: the test passes", what="answer")


def _digests(root: Path) -> dict[str, str]:
    import hashlib

    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_fork_runs_in_a_scratch_tree_as_at_the_start(tmp_path: Path) -> None:
    from tests.support import progress
    from tests.support.recorder import RECORDER

    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text(CALC)
    (work / "test_calc.py").write_text(TEST)
    env = run_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-fork")
    env.pop("LOOPTAP_SHELL_TRACE", None)
    env.pop("LOOPTAP_IN_PLACE", None)  # (its forks: isolated, as a user's)
    with ScriptedUpstream(_coder, validate=True) as up:
        proc, out = looptap_run(
            tmp_path, tmp_path / "conf", [sys.executable, str(agent)], env, upstream=up,  # type: ignore[arg-type]
            extra=("--shell-trace",),
        )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    origin = open_run(out, whole=True).shell
    assert [c.process.exit for c in origin.calls if c.process] == [1, 0], origin.as_json()
    # the agent's own write, on the tree's record before the request that sent its result
    (fixed,) = [c for t in origin.tree for c in t["changes"] if c["path"] == "calc.py"]
    assert len(fixed["by"]) == 1 and fixed["by"][0] not in {c.call_id for c in origin.calls}
    assert (work / "calc.py").read_text() == FIXED
    # the user's tree now: the fix, and a file of the user's own since
    (work / "notes.txt").write_text("mine")
    before = _digests(work)
    branch = tmp_path / "branch.jsonl"
    env = {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    # the fork's --confdir is inside the tree: hidden from the agent by the copy mounted over the
    # tree, it moves with the copy (the agent reads the CA files the recorder gives it, and the
    # user's tree gets no CA files of the fork's)
    def forked(branch: Path, *extra: str) -> Any:
        with ScriptedUpstream(_coder, validate=True) as up:
            argv = [
                *RECORDER, "run", "-o", str(branch), "--confdir", str(work / ".conf"),
                "--upstream", f"anthropic={up.url}", "--from", f"{out}@turn=2", "--shell-trace",
                *extra, "--", sys.executable, str(agent),
            ]  # fmt: skip
            return progress.run(argv, env=env, capture_output=True, text=True, cwd=work)

    # by default the scratch tree is removed when the fork ends, said in one line; what the fork
    # changed there is on the branch's record (the fix's contents kept beside it)
    fork = forked(tmp_path / "gone.jsonl")
    why = explain(fork)
    assert fork.returncode == 0, why
    (line,) = [x for x in fork.stderr.splitlines() if "scratch copy of the working tree" in x]
    gone = Path(line.split(": ", 2)[2].split(" (")[0])
    assert not gone.exists() and not gone.parent.exists(), why
    (said,) = [x for x in fork.stderr.splitlines() if "scratch tree was removed" in x]
    assert str(gone) in said and "--keep-tree keeps it" in said
    done = open_run(tmp_path / "gone.jsonl", whole=True).shell
    changed = [c for t in done.tree for c in t["changes"] if c["path"] == "calc.py"]
    assert [c["after"] for c in changed] == [hashlib.sha256(FIXED.encode()).hexdigest()]
    assert (tmp_path / "gone.jsonl.files" / changed[0]["after"]).read_text() == FIXED
    assert _digests(work) == before
    # with --keep-tree it is kept, and said where
    fork = forked(branch, "--keep-tree")
    why = explain(fork)
    assert fork.returncode == 0, why
    assert any("the fork's scratch tree is kept: " in x for x in fork.stderr.splitlines()), why
    # the user's tree untouched, and told it differs from the recording's start
    assert _digests(work) == before
    assert "your working tree differs from the recording's start" in fork.stderr, why
    (line,) = [x for x in fork.stderr.splitlines() if "scratch copy of the working tree" in x]
    scratch = Path(line.split(": ", 2)[2].split(" (")[0])
    # the fork finished like the recording: from the cursor (turn 2) the same command with the
    # same exit, the answer the same; before it the agent ran the prefix's tools again in the
    # scratch tree (the test failed there as it did: the tree was the recording's start)
    shell = open_run(branch, whole=True).shell
    live = [(c.command, c.process.exit if c.process else None) for c in shell.calls]
    assert live == [(origin.calls[1].command, 0)], shell.as_json()
    reran = read_processes(branch).processes
    assert [p.exit for p in reran if p.argv[-1:] == ("python3 test_calc.py",)] == [1, 0]
    assert "fixed: the test passes" in branch.read_text()
    assert (scratch / "calc.py").read_text() == FIXED and (scratch / "notes.txt").exists()
    shutil.rmtree(scratch.parent)


def test_how_a_run_traces_by_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from looptap.proxy.cli import _shell_trace

    def ns(**kw: bool) -> argparse.Namespace:
        return argparse.Namespace(shell_trace=False, no_shell_trace=False, **kw)

    monkeypatch.delenv("LOOPTAP_SHELL_TRACE", raising=False)
    assert _shell_trace(ns()) == "tree"  # the default: the working tree, no ptrace
    assert _shell_trace(argparse.Namespace(shell_trace=True, no_shell_trace=False)) == "full"
    assert _shell_trace(argparse.Namespace(shell_trace=False, no_shell_trace=True)) == ""
    monkeypatch.setenv("LOOPTAP_SHELL_TRACE", "off")
    assert _shell_trace(ns()) == ""
    assert _shell_trace(argparse.Namespace(shell_trace=True, no_shell_trace=False)) == "full"
    monkeypatch.setenv("LOOPTAP_SHELL_TRACE", "full")
    assert _shell_trace(ns()) == "full"
    monkeypatch.setenv("LOOPTAP_SHELL_TRACE", "processes")
    assert _shell_trace(ns()) == "processes"
