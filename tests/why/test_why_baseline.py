"""``looptap why``'s baseline runs isolated, as every branch does (issue 100 item 4,
cassettes/why/_branches.py ``Branches.baseline``): the command run once against the whole recording
is one more fork (``looptap run --from RUN@divergence --max-requests 0``), so the commands its agent
runs again (a file written in its tree, one through an absolute path outside it, one in ``$HOME``)
change nothing the user owns; where the mount cannot be made (an ``unshare`` on ``PATH`` that fails,
as a kernel without user namespaces makes it) ``why`` is refused before anything runs, unless
``--in-place``, which runs it in the user's tree and says so; a command whose requests the recording
lacks is refused as not reproducing the run, nothing sent. One recording for the module: the suite's
bash agent (tests/support/bash_agent.py) on a scripted model, traced by the real strace, the mount
the real util-linux ``unshare``."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looptap.proxy.shell_trace import probe
from tests.proxy.test_e2e_node_agents import REPO, explain, run_env
from tests.proxy.test_fork_isolation import digests, record_bash, refusing_unshare
from tests.support import bash_agent, progress
from tests.support.recorder import PROXY_PYTHON, needs_recorder
from tests.support.scripted import ScriptedUpstream, bash_steps
from tests.why.test_why import AGENT as SDK_AGENT

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(probe() is not None, reason=f"no process tracer here: {probe()}"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare (util-linux) here"),
]

#: The user's bytes in the file the agent's command overwrites through an absolute path.
THEIRS = b"the user's, outside the tree\n"
#: The check: fails on the recorded end state (made.txt says "made"), so there is a why to run.
CHECK = "grep -q fixed made.txt"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The recording (once for the module), its writes then undone: the user's tree and files as
    they are before each why."""
    tmp = tmp_path_factory.mktemp("why-baseline")
    agent = tmp / "agent.py"
    agent.write_text(Path(bash_agent.__file__).read_text())
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    outside = elsewhere / "outside.txt"
    work = tmp / "work"
    work.mkdir()
    (work / "kept.txt").write_text("the user's\n")
    env = run_env(tmp, ANTHROPIC_API_KEY="sk-ant-why-baseline")
    env.pop("LOOPTAP_SHELL_TRACE", None)
    env.pop("LOOPTAP_IN_PLACE", None)  # (the why's forks: isolated, as a user's)
    commands = [
        f'echo made > made.txt; echo abs > {outside}; echo home > "$HOME/home.txt"',
    ]
    out = record_bash(tmp, agent, env, commands)
    home = Path(env["HOME"])
    assert (work / "made.txt").read_text() == "made\n" and outside.read_text() == "abs\n"
    (work / "made.txt").unlink()
    (home / "home.txt").unlink()
    outside.write_bytes(THEIRS)
    yield {
        "tmp": tmp, "out": out, "agent": agent, "work": work, "home": home, "outside": outside,
        "env": {**env, "PYTHONPATH": str(REPO), "LOOPTAP_PROXY_PYTHON": str(PROXY_PYTHON)},
        "commands": commands,
    }  # fmt: skip


def _why(
    r: dict[str, Any],
    name: str,
    *extra: str,
    path: str | None = None,
    agent: list[str] | None = None,
) -> tuple[Any, int]:
    """``looptap why RUN --check CHECK --layer C`` (no C repair in this run: the baseline is all it
    runs) in the user's tree; what the scripted upstream heard."""
    env = dict(r["env"])
    agent = agent or [sys.executable, str(r["agent"])]
    if path is not None:
        env["PATH"] = f"{path}:{env['PATH']}"
    with ScriptedUpstream(bash_steps(r["commands"]), validate=True) as up:
        proc = progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", "why", str(r["out"]),
             "--upstream", f"anthropic={up.url}", "--confdir", str(r["tmp"] / "conf"),
             "--check", CHECK, "--layer", "C", "--samples", "1", "--json",
             "-o", str(r["tmp"] / name), *extra, "--", *agent],
            env=env, capture_output=True, text=True, cwd=r["work"],
        )  # fmt: skip
        heard = len(up.log)
    return proc, heard


def test_the_baseline_runs_isolated_and_changes_nothing_the_user_owns(
    recorded: dict[str, Any],
) -> None:
    r = recorded
    before = digests(r["work"], r["home"], r["outside"].parent)
    proc, heard = _why(r, "isolated")
    assert proc.returncode in (0, 1) and proc.stdout.startswith("{"), explain(proc)
    assert heard == 0, explain(proc)  # the baseline sent nothing
    # the user's tree, the file outside it and HOME: byte for byte as they were
    assert digests(r["work"], r["home"], r["outside"].parent) == before, explain(proc)
    assert r["outside"].read_bytes() == THEIRS and not (r["work"] / "made.txt").exists()
    # the agent ran again (its fork's log, beside the why), in a scratch copy of the tree
    log = (r["tmp"] / "isolated" / "baseline.jsonl.log").read_text()
    assert "the fork runs in a scratch copy of the working tree" in log, log[-3000:]
    assert json.loads(proc.stdout)["recorded"] == {"failed": True, "exit": 0, "check": 1}


def test_where_the_baseline_cannot_be_isolated_why_is_refused_unless_in_place(
    recorded: dict[str, Any],
) -> None:
    r = recorded
    before = digests(r["work"], r["home"], r["outside"].parent)
    refusing = refusing_unshare(r["tmp"])
    proc, heard = _why(r, "refused", path=refusing)
    assert proc.returncode == 2 and heard == 0, explain(proc)
    (said,) = proc.stderr.splitlines()
    assert said.startswith(
        "looptap why: the command could not be run against the recording (nothing sent): the fork "
        "is refused: its agent cannot be isolated from your files (the mount namespace was refused"
    ), said
    assert "--in-place runs it in your working tree anyway" in said, said
    assert digests(r["work"], r["home"], r["outside"].parent) == before
    assert not (r["tmp"] / "refused").exists()  # the new directory goes with the refusal
    # --in-place: run in the user's tree, as it was before the baseline was a fork, and said
    proc, heard = _why(r, "in-place", "--in-place", path=refusing)
    assert proc.returncode in (0, 1) and heard == 0, explain(proc)
    assert "looptap why: --in-place: the command runs against the recording" in proc.stderr
    assert (r["work"] / "made.txt").read_text() == "made\n" and r["outside"].read_text() == "abs\n"
    (r["work"] / "made.txt").unlink()
    (r["home"] / "home.txt").unlink()
    r["outside"].write_bytes(THEIRS)


def _not_reproduced(r: dict[str, Any], name: str, agent: list[str]) -> str:
    """The one line of a why refused because ``agent`` does not reproduce the recorded run: nothing
    sent, nothing of the user's changed, no directory left."""
    before = digests(r["work"], r["home"], r["outside"].parent)
    proc, heard = _why(r, name, agent=agent)
    assert proc.returncode == 2 and heard == 0, explain(proc)
    assert digests(r["work"], r["home"], r["outside"].parent) == before
    assert not (r["tmp"] / name).exists(), list((r["tmp"] / name).iterdir())
    (said,) = proc.stderr.splitlines()
    head = (
        "looptap why: the command does not reproduce the recorded run: against the recording "
        "(nothing sent) it made a request the recording does not have, so no fork of it can be "
        "trusted: the client diverged before the cursor at conversation c1, turn 0 (seq 0): C: "
    )
    assert said.startswith(head), said
    return said.removeprefix(head)


def test_a_command_that_does_not_reproduce_the_run_is_refused_with_nothing_sent(
    recorded: dict[str, Any],
) -> None:
    """Another agent (an SDK one: its first request is not the recording's), and the recorded one
    run twice (past the recording's end, a request it lacks): their requests go nowhere, and why
    says the command does not reproduce the recorded run, naming the first difference."""
    r = recorded
    other = _not_reproduced(r, "other", [sys.executable, str(SDK_AGENT), "--family", "anthropic"])
    assert other.startswith("the model requested changed"), other
    again = f"{sys.executable} {r['agent']} && {sys.executable} {r['agent']}"
    twice = _not_reproduced(r, "again", ["/bin/sh", "-c", again])
    assert twice.startswith("the request repeats conversation c1, turn 0 (seq 0)"), twice
