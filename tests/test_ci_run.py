""".ci/run finds uv without installing it into the global Python (issue 32): the one on PATH, else
the test environment's own (``.venv/bin/python -m uv``), else a bootstrap environment of its own.

The script runs for real, in a copy of the checkout's layout, with every Python it calls a stub
that logs its arguments (milliseconds: nothing is installed, no network)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STUB = """#!/bin/bash
echo "$0 $*${LOOPTAP_PHASE:+ [phase $LOOPTAP_PHASE]}" >> "$LOG"
here=$(dirname "$0")
if [ "$1" = "-m" ] && [ "$2" = "uv" ] && [ "$3" = "--version" ]; then [ -e "$here/has-uv" ]; exit $?; fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; fi
if [ "$1" = "-m" ] && [ "$2" = "uv" ] && [ "$3" = "venv" ]; then for a; do v=$a; done; mkdir -p "$v/bin"; cp "$0" "$v/bin/python"; fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ] && [ "$3" = "install" ]; then touch "$here/has-uv"; fi
if [ "$1" = "-m" ] && [ "$2" = "pytest" ] && [ -n "$LOOPTAP_PHASE" ] && [ "$LOOPTAP_PHASE" = "$FAIL_PHASE" ]; then exit 1; fi
exit 0
"""  # noqa: E501


def _stub(path: Path, has_uv: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STUB)
    path.chmod(0o755)
    if has_uv:
        (path.parent / "has-uv").touch()
    return path


#: The checkout's files whose contents say whether an environment is up to date.
_INPUTS = (
    "pyproject.toml",
    ".ci/proxy-overrides.txt",
    "tests/clients/requirements.txt",
    "tests/clients/requirements-agents.txt",
    "tests/clients/requirements-crewai.txt",
    "tests/interop/traces/requirements.txt",
    "tests/interop/traces/requirements-strands.txt",
    "tests/interop/traces/requirements-adk.txt",
    "tests/interop/traces/requirements-adk1.txt",
)


def _run(
    tmp: Path, venv_has_uv: bool, fail_phase: str = "", args: tuple[str, ...] = ()
) -> tuple[int, list[str], str]:
    """``.ci/run`` with stubs; its status, the stubs' calls (from this run only), its output."""
    if not (tmp / ".ci").exists():
        _layout(tmp, venv_has_uv)
    log = tmp / "log"
    log.unlink(missing_ok=True)
    env = {
        "PATH": str(tmp / "tools"),
        "LOG": str(log),
        "FAIL_PHASE": fail_phase,
        "PYTHON": str(tmp / "global" / "python3"),
        "LOOPTAP_TEST_VENV": str(tmp / "venv"),
        "LOOPTAP_PROXY_VENV": str(tmp / "proxy"),
        "LOOPTAP_CLIENTS_VENV": str(tmp / "clients"),
        "LOOPTAP_BOOTSTRAP_VENV": str(tmp / "boot"),
    }
    proc = subprocess.run(
        [shutil.which("bash") or "bash", str(tmp / ".ci" / "run"), *args],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, log.read_text().splitlines(), proc.stdout + proc.stderr


def _layout(tmp: Path, venv_has_uv: bool) -> None:
    (tmp / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp / ".ci" / "run")
    for name in _INPUTS:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp / name)
    _stub(tmp / "global" / "python3")
    _stub(tmp / "venv" / "bin" / "python", has_uv=venv_has_uv)
    _stub(tmp / "proxy" / "bin" / "python")
    _stub(tmp / "clients" / "bin" / "python")
    tools = tmp / "tools"
    tools.mkdir()
    # no uv, no npm on this PATH
    for name in ("bash", "dirname", "grep", "mkdir", "cp", "touch", "cat", "sha256sum", "cut",
                 "sleep", "du"):  # fmt: skip
        found = shutil.which(name)
        assert found is not None, name
        (tools / name).symlink_to(found)


@pytest.mark.parametrize("venv_has_uv", [True, False], ids=["venv-has-uv", "no-uv-anywhere"])
def test_ci_run_never_installs_uv_into_the_global_python(tmp_path: Path, venv_has_uv: bool) -> None:
    status, calls, said = _run(tmp_path, venv_has_uv)
    assert status == 0, said
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
    # and the suite runs: its matrix phase last
    assert calls[-1].startswith(str(tmp_path / "venv" / "bin" / "python") + " -m pytest"), calls
    assert calls[-1].endswith("[phase matrix]"), calls


def _index(calls: list[str], needle: str) -> int:
    return next(i for i, c in enumerate(calls) if needle in c)


def test_the_core_phase_runs_and_says_its_result_before_the_matrix_is_installed(
    tmp_path: Path,
) -> None:
    """Issue 94 item 1: the README's test command said nothing useful for 54 minutes (34 of
    installs). The core's tests run right after the test and recorder environments, before any
    environment of the matrix; its result is said before them; the matrix's installs are
    numbered; both phases run once each."""
    status, calls, said = _run(tmp_path, venv_has_uv=True)
    assert status == 0, said
    core = _index(calls, "-m pytest -q -n 3 --dist loadgroup --durations=25 [phase core]")
    matrix = _index(calls, "-m pytest -q -n 3 --dist loadgroup --durations=25 [phase matrix]")
    clients = _index(calls, f"--python {tmp_path / 'clients'}/bin/python")
    proxy = _index(calls, f"--python {tmp_path / 'proxy'}/bin/python")
    assert proxy < core < clients < matrix, calls
    assert sum("-m pytest" in c and "--collect-only" not in c for c in calls) == 2, calls
    out = said.splitlines()
    passed = out.index(
        ".ci/run: phase 1 of 2, the core: passed. Now the matrix (client frameworks, agents, "
        "browser)."
    )
    steps = [i for i, ln in enumerate(out) if re.match(r"\.ci/run: \[\d+/10\] ", ln)]
    assert len(steps) == 10 and passed < steps[0], out


@pytest.mark.parametrize("fail_phase", ["core", "matrix"])
def test_either_phase_failing_fails_the_run(tmp_path: Path, fail_phase: str) -> None:
    """CI's gate: a failure in either phase is a non-zero exit; a failed core still runs the
    matrix (one run says everything)."""
    status, calls, said = _run(tmp_path, venv_has_uv=True, fail_phase=fail_phase)
    assert status != 0, said
    assert calls[-1].endswith("[phase matrix]"), calls
    last = [ln for ln in said.splitlines() if ln.startswith(".ci/run: ")][-1]
    assert f"the {fail_phase}: FAILED (1)" in last, said


def test_a_second_run_installs_nothing(tmp_path: Path) -> None:
    """Installs are incremental: an environment whose inputs (its requirement files, extras,
    overrides) are those of its last install is not installed again; a changed input installs
    that environment alone."""
    status, calls, said = _run(tmp_path, venv_has_uv=True)
    assert status == 0 and sum(" pip install " in c for c in calls) >= 6, calls
    status, calls, said = _run(tmp_path, venv_has_uv=True)
    assert status == 0, said
    assert not [c for c in calls if " pip install " in c or " venv " in c], calls
    assert said.count("up to date") >= 6, said
    with (tmp_path / "tests/clients/requirements-crewai.txt").open("a") as f:
        f.write("# changed\n")
    status, calls, said = _run(tmp_path, venv_has_uv=True)
    installs = [c for c in calls if " pip install " in c]
    assert len(installs) == 1 and "requirements-crewai.txt" in installs[0], installs


def test_a_selection_without_matrix_tests_installs_no_matrix(tmp_path: Path) -> None:
    """``bash .ci/run tests/inspector``: the matrix's tests of the selection are counted first
    (collected alone); none, and nothing of the matrix is installed."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    stub = STUB.replace("exit 0\n", 'case "$*" in *--collect-only*) exit 5;; esac\nexit 0\n')
    _layout(tmp_path, venv_has_uv=True)
    (tmp_path / "venv" / "bin" / "python").write_text(stub)
    status, calls, said = _run(tmp_path, venv_has_uv=True, args=("tests/inspector",))
    assert status == 0, said
    assert not [
        c
        for c in calls
        if "clients" in c or c.endswith("--durations=25 tests/inspector [phase matrix]")
    ], calls
    assert calls[-2].endswith("tests/inspector [phase core]"), calls
    assert "none of the tests selected needs it" in said, said
