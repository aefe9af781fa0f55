"""``looptap run --inspect`` in a real terminal (tmux): the inspector follows the run live while the
example agent's tool loop is recorded; quitting it ends the run with the child's status and the
summary, and the cassette holds every round trip."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

from looptap.cassettes.replay.serving.server import ReplayServer  # noqa: E402
from looptap.cassettes.storage import load_vcr, read_records  # noqa: E402
from tests.support import progress  # noqa: E402

PROXY_PYTHON = Path(os.environ.get("LOOPTAP_PROXY_PYTHON") or REPO / ".venv-proxy/bin/python")

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(
        not PROXY_PYTHON.exists(), reason=f"recorder environment missing: {PROXY_PYTHON}"
    ),
]


def _screen(session: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=False
    ).stdout


def _tmux_pids() -> list[int]:
    return progress.tmux_pids(
        lambda *args: (
            subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout
        )
    )


def _wait_for(session: str, text: str) -> str:
    """The screen once ``text`` is on it: hung only when neither the screen nor what runs in tmux
    makes progress (no wall-clock limit: the machine may be busy)."""
    return progress.wait_screen(lambda: _screen(session), text, pids=_tmux_pids())


def test_run_inspect_follows_the_recording_live(tmp_path: Path) -> None:
    has_textual = (
        subprocess.run(
            [str(PROXY_PYTHON), "-c", "import textual"], capture_output=True, check=False
        ).returncode
        == 0
    )
    if not has_textual:
        pytest.skip("the recorder's environment has no inspector (the 'inspector' extra)")
    out = tmp_path / "live.jsonl"
    status = tmp_path / "status"
    agent = REPO / "cassettes/examples/tool_search_agent.py"
    session = f"looptap-{uuid.uuid4().hex[:8]}"
    with ReplayServer(
        load_vcr(REPO / "cassettes/examples/tool_loop_anthropic.yaml"), pace="x4"
    ) as up:
        cmd = " ".join(
            shlex.quote(a)
            for a in [
                str(PROXY_PYTHON), "-m", "looptap.cassettes.cli", "run", "--inspect", "-o", str(out),  # noqa: E501
                "--upstream", f"anthropic={up.url}", "--confdir", str(tmp_path / "conf"),
                "--", sys.executable, str(agent),
            ]
        )  # fmt: skip
        # The inspector draws on the terminal (Textual writes to stderr): nothing is redirected; the
        # summary is read off the screen once the inspector has closed.
        script = (
            f"cd {shlex.quote(str(tmp_path))} && ANTHROPIC_API_KEY=sk-ant-test-key {cmd}; echo $? "
            f"> {status}; sleep 60"
        )
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", "150", "-y", "45", script],
            check=True,
        )
        try:
            # the last turns arrived while the inspector was open
            screen = _wait_for(session, "11 turns")
            assert "live.jsonl" in screen and "4 conversations" in screen
            screen = _wait_for(session, "ended (exit 0)")  # the agent exited: no longer "live"
            assert "● live" not in screen
            subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
            progress.until(status.exists, pids=_tmux_pids(), what="looptap run to end")
            err = _wait_for(session, "looptap: details:")
        finally:
            subprocess.run(
                ["tmux", "kill-session", "-t", session], capture_output=True, check=False
            )
    assert status.exists(), "looptap run did not end after the inspector was closed"
    assert status.read_text().strip() == "0"
    assert "11 round trips" in err and "4 conversations, 11 turns" in err, err
    assert "the command exited with status 0" in err, err
    log = Path(str(out) + ".log").read_text()
    assert "A: The current stock price for AAPL (Apple Inc.) is **$150.00**." in log
    cas = read_records(out)
    assert len(cas.exchanges) == 11 and not cas.problems


def test_closing_the_inspector_early_says_the_command_still_runs(tmp_path: Path) -> None:
    has_textual = (
        subprocess.run(
            [str(PROXY_PYTHON), "-c", "import textual"], capture_output=True, check=False
        ).returncode
        == 0
    )
    if not has_textual:
        pytest.skip("the recorder's environment has no inspector (the 'inspector' extra)")
    out = tmp_path / "live.jsonl"
    status = tmp_path / "status"
    go = tmp_path / "go"  # (the command runs on until the test saw the inspector closed)
    agent = REPO / "cassettes/examples/tool_search_agent.py"
    session = f"looptap-{uuid.uuid4().hex[:8]}"
    with ReplayServer(
        load_vcr(REPO / "cassettes/examples/tool_loop_anthropic.yaml"), pace="x4"
    ) as up:
        cmd = " ".join(
            shlex.quote(a)
            for a in [
                str(PROXY_PYTHON), "-m", "looptap.cassettes.cli", "run", "--inspect", "-o", str(out),  # noqa: E501
                "--upstream", f"anthropic={up.url}", "--confdir", str(tmp_path / "conf"),
                "--", "sh", "-c", f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))}; "
                f"while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.2; done",
            ]
        )  # fmt: skip
        script = (
            f"cd {shlex.quote(str(tmp_path))} && ANTHROPIC_API_KEY=sk-ant-test-key {cmd}; echo $? "
            f"> {status}; sleep 60"
        )
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", "150", "-y", "45", script],
            check=True,
        )
        try:
            # the inspector is up (its key line, in every layout); the command runs until told
            _wait_for(session, "q quit")
            subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
            screen = _wait_for(session, "the inspector was closed; the command is still running")
            assert "live.jsonl.log" in screen  # where its output goes
            assert not status.exists()  # (it was: it still runs)
            go.touch()
            progress.until(status.exists, pids=_tmux_pids(), what="looptap run to end")
            err = _wait_for(session, "looptap: details:")
        finally:
            subprocess.run(
                ["tmux", "kill-session", "-t", session], capture_output=True, check=False
            )
    assert status.read_text().strip() == "0"
    assert "the command exited with status 0" in err and "11 round trips" in err, err


def test_run_inspect_without_o_records_into_a_new_file(tmp_path: Path) -> None:
    """The README's ``looptap run --inspect -- python agent.py``: without ``-o`` (refused on main:
    "the following arguments are required: -o/--output") the run goes into a new
    ``run-DATE-TIME.jsonl`` in the current directory, said before the inspector opens and in the
    summary."""
    has_textual = (
        subprocess.run(
            [str(PROXY_PYTHON), "-c", "import textual"], capture_output=True, check=False
        ).returncode
        == 0
    )
    if not has_textual:
        pytest.skip("the recorder's environment has no inspector (the 'inspector' extra)")
    status = tmp_path / "status"
    said = tmp_path / "said"
    agent = REPO / "cassettes/examples/tool_search_agent.py"
    session = f"looptap-{uuid.uuid4().hex[:8]}"
    with ReplayServer(
        load_vcr(REPO / "cassettes/examples/tool_loop_anthropic.yaml"), pace="x4"
    ) as up:
        cmd = " ".join(
            shlex.quote(a)
            for a in [
                str(PROXY_PYTHON), "-m", "looptap.cassettes.cli", "run", "--inspect",
                "--upstream", f"anthropic={up.url}", "--confdir", str(tmp_path / "conf"),
                "--", sys.executable, str(agent),
            ]
        )  # fmt: skip
        script = (
            f"cd {shlex.quote(str(tmp_path))} && ANTHROPIC_API_KEY=sk-ant-test-key {cmd} 2> >(tee "
            f"{said} >&2); echo $? > {status}; sleep 60"
        )
        subprocess.run(
            [
                "tmux",
                "new-session",
                "-d",
                "-s",
                session,
                "-x",
                "150",
                "-y",
                "45",
                f"bash -c {shlex.quote(script)}",
            ],
            check=True,
        )
        try:
            # What this test is about is where the run goes, not the live view (that is
            # test_run_inspect_follows_the_recording_live's): wait for the agent's last answer in
            # the command's output log, then close the inspector.
            def agent_done() -> bool:
                logs = sorted(tmp_path.glob("run-*.jsonl.log"))
                return bool(logs) and "Is there anything else I can help you with?" in logs[
                    0
                ].read_text(errors="replace")

            progress.until(agent_done, pids=_tmux_pids(), what="the agent to finish")
            assert "run-" in _wait_for(session, "run-")  # the inspector names the file it follows
            subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
            progress.until(status.exists, pids=_tmux_pids(), what="looptap run to end")
        finally:
            subprocess.run(
                ["tmux", "kill-session", "-t", session], capture_output=True, check=False
            )
    assert status.read_text().strip() == "0"
    runs = sorted(tmp_path.glob("run-*.jsonl"))
    assert len(runs) == 1, sorted(p.name for p in tmp_path.iterdir())
    err = said.read_text()
    assert (
        f"looptap: recording into {runs[0].name} (no -o given); "
        f"the command's output goes to {runs[0].name}.log" in err
    ), err
    assert len(read_records(runs[0]).exchanges) == 11


def test_run_without_o_or_inspect_says_o_is_needed(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            str(PROXY_PYTHON),
            "-m",
            "looptap.cassettes.cli",
            "run",
            "--",
            sys.executable,
            "-c",
            "print('STARTED')",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert proc.returncode == 2 and "STARTED" not in proc.stdout
    assert proc.stderr.strip().splitlines() == [
        "looptap: error: -o FILE names the cassette to record into (looptap run -o run.jsonl -- "
        "python agent.py); only --inspect may leave it out"
    ], proc.stderr
    assert list(tmp_path.iterdir()) == []
