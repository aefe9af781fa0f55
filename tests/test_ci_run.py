""".ci/run finds uv without installing it into the global Python (issue 32): the one on PATH, else
the test environment's own (``.venv/bin/python -m uv``), else a bootstrap environment of its own.

The script runs for real, in a copy of the checkout's layout, with every Python it calls a stub
that logs its arguments (milliseconds: nothing is installed, no network)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STUB = """#!/bin/bash
echo "$0 $*" >> "$LOG"
here=$(dirname "$0")
if [ "$1" = "-m" ] && [ "$2" = "uv" ] && [ "$3" = "--version" ]; then [ -e "$here/has-uv" ]; exit $?; fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ] && [ "$3" = "install" ]; then touch "$here/has-uv"; fi
exit 0
"""  # noqa: E501


def _stub(path: Path, has_uv: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STUB)
    path.chmod(0o755)
    if has_uv:
        (path.parent / "has-uv").touch()
    return path


def _run(tmp: Path, venv_has_uv: bool) -> list[str]:
    (tmp / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp / ".ci" / "run")
    tools = tmp / "tools"
    tools.mkdir()
    for name in ("bash", "dirname", "grep", "mkdir", "cp", "touch"):  # no uv, no npm on this PATH
        found = shutil.which(name)
        assert found is not None, name
        (tools / name).symlink_to(found)
    log = tmp / "log"
    env = {
        "PATH": str(tools),
        "LOG": str(log),
        "PYTHON": str(_stub(tmp / "global" / "python3")),
        "LOOPTAP_TEST_VENV": str(
            _stub(tmp / "venv" / "bin" / "python", has_uv=venv_has_uv).parent.parent
        ),
        "LOOPTAP_PROXY_VENV": str(_stub(tmp / "proxy" / "bin" / "python").parent.parent),
        "LOOPTAP_CLIENTS_VENV": str(_stub(tmp / "clients" / "bin" / "python").parent.parent),
        "LOOPTAP_BOOTSTRAP_VENV": str(tmp / "boot"),
    }
    proc = subprocess.run(
        [shutil.which("bash") or "bash", str(tmp / ".ci" / "run")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines()


@pytest.mark.parametrize("venv_has_uv", [True, False], ids=["venv-has-uv", "no-uv-anywhere"])
def test_ci_run_never_installs_uv_into_the_global_python(tmp_path: Path, venv_has_uv: bool) -> None:
    calls = _run(tmp_path, venv_has_uv)
    glob = [c for c in calls if c.startswith(str(tmp_path / "global"))]
    # the global Python is never installed into
    assert not any(" pip install" in c for c in glob), calls
    uv_calls = [c for c in calls if " -m uv pip install" in c]
    assert uv_calls, calls
    if venv_has_uv:
        assert not glob, calls
        assert all(c.startswith(str(tmp_path / "venv")) for c in uv_calls), uv_calls
    else:  # a bootstrap environment holds uv
        assert [c.split(" ", 1)[1] for c in glob] == [f"-m venv {tmp_path / 'boot'}"], calls
        assert any(c.startswith(str(tmp_path / "boot")) and "-m pip install" in c for c in calls), (
            calls
        )
        assert all(c.startswith(str(tmp_path / "boot")) for c in uv_calls), uv_calls
    # and the suite runs
    assert calls[-1].startswith(str(tmp_path / "venv" / "bin" / "python") + " -m pytest"), calls
