"""The real command in a real terminal: `looptap inspect FILE` in tmux, keys sent, screen read."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import progress

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

LOOPTAP = Path(sys.executable).parent / "looptap"
#: tmux 3.3 sizes a detached window to -x/-y a moment after starting its command; a program that
#: reads the terminal size at once would see 80×24 (and the SIGWINCH can come before it listens).
SETTLE = "sleep 0.5; "


@pytest.fixture
def tmux() -> Iterator[Callable[..., str]]:
    # A socket of its own per test: a server still shutting down after the previous test's
    # kill-server must not take (and lose) the next test's new-session.
    sock = f"looptap-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def run(*args: str) -> str:
        return progress.run(["tmux", "-L", sock, *args], capture_output=True, text=True).stdout

    yield run
    progress.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


def _wait_for(tmux: Callable[..., str], *texts: str) -> str:
    """The screen, once every one of ``texts`` is on it (the machine may be slow to start Python:
    no wall-clock limit, hung only when neither the screen nor the app makes progress)."""
    return progress.wait_screen(
        lambda: tmux("capture-pane", "-p", "-t", "inspect"), *texts, pids=progress.tmux_pids(tmux)
    )


def _start(tmux: Callable[..., str], path: Path, width: int, height: int) -> None:
    if not LOOPTAP.exists():
        pytest.skip("the looptap script is not installed in this environment")
    tmux(
        "new-session",
        "-d",
        "-s",
        "inspect",
        "-x",
        str(width),
        "-y",
        str(height),
        f"{SETTLE}exec {LOOPTAP} inspect {path}",
    )


def _key_line_whole(tmux: Callable[..., str], width: int) -> None:
    """The last line is the key line, every key whole (issue 32: `space P▏^p palette`). Waited
    for: the key line is drawn again once the app has the terminal's final size, and a loaded
    machine can capture the screen between the two."""
    from looptap.inspector.widgets import key_line

    want = key_line(width - 2).plain.strip()
    screen = _wait_for(tmux, want)
    last = screen.rstrip("\n").splitlines()[-1].strip()
    assert last == want, (last, screen)


def test_inspect_at_200_by_60(tmux: Callable[..., str], run_file: Path) -> None:
    """Wide: the three panes side by side; after `l` (focus in a layer pane) `j` still moves the
    turns, the screen says where focus is, and `2` shows the growth chart."""
    _start(tmux, run_file, 200, 60)
    screen = _wait_for(
        tmux,
        "2 conversations · 5 turns · 4 findings",
        "#0    c1/0    E  A  C  ",
        "▌ NEW [0] user",
        "^p commands",
    )
    _key_line_whole(tmux, 200)
    assert (
        "E · model emission" in screen
        and "A · API verdict" in screen
        and "C · client dispatch" in screen
    )
    tmux("send-keys", "-t", "inspect", "f")  # the first turn below with findings: #2's warning
    _wait_for(tmux, "E.arguments_schema", "#2 c2/turn 0", "Checking both cities.")
    tmux("send-keys", "-t", "inspect", "l")
    _wait_for(tmux, "focus: A pane")
    tmux("send-keys", "-t", "inspect", "j")
    _wait_for(tmux, "#3 c2/turn 1", "focus: A pane")
    tmux("send-keys", "-t", "inspect", "2")
    _wait_for(tmux, "token-cost growth · conversation c2")
    tmux("send-keys", "-t", "inspect", "3")
    _wait_for(tmux, "C.dropped_tool_result", "C.truncated_treated_as_complete")
    tmux("send-keys", "-t", "inspect", "q")
    # q quit the app and the session with it
    progress.until(
        lambda: "inspect" not in tmux("list-sessions"),
        pids=progress.tmux_pids(tmux),
        what="the session to end after q",
    )


def test_inspect_at_100_by_30(tmux: Callable[..., str], run_file: Path) -> None:
    """The narrow layout in a real terminal: E, A and C as tabs, one pane at full width; the pane
    with a turn's warning or error comes up; the key line whole; every finish in the turn list
    whole."""
    _start(tmux, run_file, 100, 30)
    # (the key line is drawn last: wait for it too, or a loaded machine captures the screen before
    # it)
    screen = _wait_for(
        tmux,
        "E emission ok",
        "A API verdict ok",
        "C client ok",
        "▌ NEW [0] user",
        "c conv",
        "l layer",
    )
    _key_line_whole(tmux, 100)
    assert "310→40" in screen and "440→20" in screen, screen  # never "310→…"
    for finish in ("→1 call ", "→2 calls", "max_tokens", "end_turn"):
        assert finish in screen, (finish, screen)
    assert "E · model emission" in screen and "A · API verdict" not in screen  # one pane at a time
    tmux("send-keys", "-t", "inspect", "f")  # #2, the first below with findings: E's warning
    screen = _wait_for(tmux, "#2 c2/turn 0", "E emission ▲1", "E.arguments_schema")
    tmux("send-keys", "-t", "inspect", "j")  # #3: an A warning and a C error: C comes up
    screen = _wait_for(tmux, "#3 c2/turn 1", "C client ✖1", "C.dropped_tool_result")
    assert "A API verdict ▲1" in screen and "E · model emission" not in screen, screen
    tmux("send-keys", "-t", "inspect", "l")  # C → E
    tmux("send-keys", "-t", "inspect", "l")  # E → A
    screen = _wait_for(tmux, "A · API verdict", "A.truncated_length")
    assert "C · client dispatch" not in screen, screen
    tmux("send-keys", "-t", "inspect", "q")


def test_inspect_at_80_by_24(tmux: Callable[..., str], run_file: Path) -> None:
    """The compact layout: the turn list above one pane at full width, the messages a tab; every
    layer's finding count on screen; the key line whole."""
    _start(tmux, run_file, 80, 24)
    screen = _wait_for(
        tmux,
        "Messages",
        "E emission ok",
        "A API verdict ok",
        "C client ok",
        "#4    c2/2",
        "l layer",
    )
    _key_line_whole(tmux, 80)
    assert "E · model emission" in screen and "max_tokens" in screen, screen
    tmux("send-keys", "-t", "inspect", "j", "j", "j")  # #3: A warning, C error: C comes up
    screen = _wait_for(
        tmux, "#3 c2/turn 1", "A API verdict ▲1", "C client ✖1", "C.dropped_tool_result"
    )
    tmux("send-keys", "-t", "inspect", "a")  # the messages tab, every message
    _wait_for(tmux, "all, parts whole (a: fold)", "Checking both cities.")
    tmux("send-keys", "-t", "inspect", "q")


def test_inspect_a_bad_file_in_a_real_terminal(tmux: Callable[..., str], tmp_path: Path) -> None:
    if not LOOPTAP.exists():
        pytest.skip("the looptap script is not installed in this environment")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\x00\x01 binary junk\n")
    tmux(
        "new-session",
        "-d",
        "-s",
        "inspect",
        "-x",
        "120",
        "-y",
        "30",
        f"{SETTLE}{LOOPTAP} inspect {bad}; sleep 30",
    )
    screen = _wait_for(tmux, "Cannot inspect")
    assert "not a looptap cassette" in screen and "Traceback" not in screen
