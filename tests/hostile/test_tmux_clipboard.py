"""A real terminal with ``set-clipboard on``: hostile recorded text (an OSC 52 clipboard write, a
screen clear, cursor moves) shown by ``looptap show``, ``textconv`` and ``looptap inspect`` must
leave tmux's clipboard untouched and the screen as it was. A control run of the raw bytes proves
that this tmux would have taken the clipboard write, so the test can fail."""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from looptap.cassettes.recording.pipeline import CassetteWriter
from tests.hostile.corpus import hostile_exchanges
from tests.support import progress

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

LOOPTAP = Path(sys.executable).parent / "looptap"


@pytest.fixture
def tmux() -> Iterator[Callable[..., str]]:
    # A socket of its own per test: a server still shutting down after the previous test's
    # kill-server must not take (and lose) the next test's new-session.
    sock = f"looptap-clip-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def run(*args: str) -> str:
        done = progress.run(
            ["tmux", "-L", sock, "-f", "/dev/null", *args], capture_output=True, text=True
        )
        if args[0] == "new-session" and done.returncode:
            raise AssertionError(f"tmux new-session failed: {done.stderr}")
        return done.stdout

    yield run
    progress.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clip") / "hostile.jsonl"
    with CassetteWriter(path) as w:
        for ex in hostile_exchanges()[:8]:
            w.append(ex)
    return path


def _session(tmux: Callable[..., str], name: str, command: str) -> None:
    # The option is set in the same tmux call that starts the server; the command waits a moment
    # so that it is in force before anything is printed.
    tmux(
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        "160",
        "-y",
        "45",
        f"sleep 1; {command}",
        ";",
        "set",
        "-g",
        "set-clipboard",
        "on",
    )


def _wait(tmux: Callable[..., str], name: str, text: str) -> str:
    """The screen once ``text`` is on it: no wall-clock limit, hung only when neither the screen
    nor the programs in tmux make progress."""
    return progress.wait_screen(
        lambda: tmux("capture-pane", "-p", "-S", "-", "-t", name),
        text,
        pids=progress.tmux_pids(tmux),
    )


def test_the_control_run_shows_this_tmux_takes_an_osc52_write(tmux: Callable[..., str]) -> None:
    _session(tmux, "control", "printf 'x\\033]52;c;cHduZWQ=\\007y\\n'; echo DONE; sleep 30")
    _wait(tmux, "control", "DONE")
    time.sleep(0.3)
    assert "pwned" in tmux("show-buffer"), (
        "tmux did not take the raw OSC 52 write: the other tests would prove nothing"
    )


@pytest.mark.parametrize("command", ["show", "textconv"])
def test_printing_hostile_content_leaves_the_clipboard_and_screen_alone(
    tmux: Callable[..., str], hostile: Path, command: str
) -> None:
    if not LOOPTAP.exists():
        pytest.skip("the looptap script is not installed in this environment")
    _session(
        tmux,
        "show",
        f"echo BEFORE-MARK; {LOOPTAP} {command} {hostile} | tail -n 400; echo AFTER-MARK; sleep 60",
    )
    screen = _wait(tmux, "show", "AFTER-MARK")
    time.sleep(0.3)
    assert tmux("list-buffers").strip() == "", "the clipboard (a tmux buffer) was written"
    assert "BEFORE-MARK" in screen, "the screen was cleared"
    assert "␛]52" in screen  # the escape is shown, visibly, instead of acted on


def test_inspecting_hostile_content_leaves_the_clipboard_alone(
    tmux: Callable[..., str], hostile: Path
) -> None:
    if not LOOPTAP.exists():
        pytest.skip("the looptap script is not installed in this environment")
    _session(tmux, "inspect", f"{LOOPTAP} inspect {hostile}; echo INSPECT-DONE; sleep 60")
    _wait(tmux, "inspect", "conversation")
    for key in ("Down", "Down", "Down", "f", "n", "Tab", "Tab", "End"):
        tmux("send-keys", "-t", "inspect", key)
        time.sleep(0.4)
    screen = tmux("capture-pane", "-p", "-t", "inspect")
    tmux("send-keys", "-t", "inspect", "q")
    _wait(tmux, "inspect", "INSPECT-DONE")
    assert tmux("list-buffers").strip() == "", "the clipboard (a tmux buffer) was written"
    # the hostile text was on screen
    assert "[@click=" in screen or "␛" in screen or "evil" in screen, screen
