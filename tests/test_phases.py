"""The suite's two phases (issue 94 item 1, tests/support/phases.py): which tests need the matrix
(the client, agent and trace environments, the Node packages, Chromium) is read from what each
module names, its imports too; the core phase runs without them, and a core test that turns out to
need one fails saying so instead of skipping quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import phases, progress

ROOT = Path(__file__).resolve().parents[1]


def test_every_resource_has_its_matrix_modules_and_the_core_names_none() -> None:
    """Each resource ``.ci/run``'s second phase installs is needed by a module it finds; a module
    that reaches one through a test-suite import only (the split view's browser test imports the
    HTML report's ``chromium()``) is found too; every core module names none."""
    modules = sorted((ROOT / "tests").rglob("test_*.py"))
    matrix = {p.relative_to(ROOT).as_posix(): phases.needs(p) for p in modules if phases.needs(p)}
    assert set().union(*matrix.values()) == set(phases.RESOURCES), matrix
    assert "tests/clients/test_matrix.py" in matrix
    assert matrix["tests/views/test_one_split.py"] == {"chromium"}
    assert "chromium" not in (ROOT / "tests/views/test_one_split.py").read_text().split("import")[0]
    core = [p for p in modules if phases.in_phase(p, "core")]
    assert len(core) > 5 * len(matrix), (len(core), len(matrix))
    for p in core:
        text = p.read_text()
        assert not any(pat.search(text) for pat, _ in phases.RESOURCES.values()), p


def _pytest(phase: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", phases.PHASE)}
    env[phases.PHASE] = phase
    return progress.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip


def test_a_core_test_that_needs_the_matrix_fails_saying_which(tmp_path: Path) -> None:
    """The guard: a test that reads the clients' environment without naming it where the
    classifier looks (here through a variable name built at run time) runs in the core phase; it
    finds the path the core phase points it at absent, and its skip becomes a failure naming the
    resource. Outside the core phase it runs, or skips, as it would."""
    (tmp_path / "test_sneaky.py").write_text(
        "import os, pathlib, pytest\n"
        "def test_frameworks():\n"
        "    py = os.environ.get('LOOPTAP_' + 'CLIENTS_PYTHON', '/nowhere/python')\n"
        "    if not pathlib.Path(py).exists():\n"
        "        pytest.skip(f'no frameworks at {py}')\n"
        "def test_plain():\n"
        "    assert True\n"
    )
    sneaky = ["-p", "tests.conftest", str(tmp_path / "test_sneaky.py")]
    r = _pytest("core", *sneaky)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout, r.stdout
    assert "needs .venv-clients, which only the matrix phase installs" in r.stdout, r.stdout
    r = _pytest("", *sneaky)
    assert r.returncode == 0 and "failed" not in r.stdout, r.stdout  # (here, or skipped)


def test_each_phase_collects_its_own_modules() -> None:
    """The matrix phase does not import the core's modules (its collection costs what the
    matrix's modules cost); the core phase deselects the matrix's tests."""
    core, matrix = "tests/test_words.py", "tests/views/test_small_words.py"
    assert phases.in_phase(ROOT / core, "core") and phases.in_phase(ROOT / matrix, "matrix")
    r = _pytest("matrix", "--collect-only", core, matrix)
    listed = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert listed and all(ln.startswith(matrix) for ln in listed), r.stdout
    r = _pytest("core", "--collect-only", core, matrix)
    listed = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert listed and all(ln.startswith(core) for ln in listed), r.stdout
