"""The suite does not depend on how it was started: run as a background job of a non-interactive
shell (``cmd &``, ``setsid nohup …``), it inherits SIGINT ignored, and the tests that press Ctrl-C
in a command they start must still see the command get it (tests/conftest.py restores it)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tests.support import progress

REPO = Path(__file__).resolve().parents[1]

#: A test that presses Ctrl-C in a command it starts, and fails when the command never gets it.
_PRESSES_CTRL_C = '''
import signal, subprocess, sys

def test_a_child_gets_ctrl_c():
    proc = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGINT)"])
    assert proc.returncode != 0, "the child ignored Ctrl-C"
'''  # noqa: E501


def _ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_suite_started_with_sigint_ignored_still_gives_its_commands_ctrl_c(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_presses.py").write_text(_PRESSES_CTRL_C)
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    # the suite's conftest without the environment's other plugins (1.4 s of CPU with them)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = progress.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:looptap",
            str(tmp_path / "test_presses.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=_ignored,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout, proc.stdout[-2000:]
