"""The house checks run with the suite: mypy --strict on the packages and ruff on the tree."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.support import progress

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (it comes with the 'dev' extra)")
    return found


def test_mypy_strict() -> None:
    out = progress.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_proxy_against_the_recorder_environment() -> None:
    """proxy/ imports mitmproxy, which lives only in the recorder's environment: mypy runs from
    here but resolves imports in that interpreter's site-packages. Its cache is its own: sharing
    :func:`test_mypy_strict`'s, each run invalidated the other's (another interpreter's
    packages): a warm ``mypy`` took 6.3 s of CPU after this check, 0.3 s after itself
    (session 56)."""
    from tests.support.recorder import PROXY_PYTHON

    if PROXY_PYTHON is None:
        pytest.skip(
            "no recorder environment (LOOPTAP_PROXY_PYTHON or .venv-proxy; .ci/run creates it)"
        )
    out = progress.run(
        [
            _tool("mypy"),
            "--strict",
            "--python-executable",
            str(PROXY_PYTHON),
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "recorder-environment"),
            "-p",
            "looptap.proxy",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff() -> None:
    out = progress.run(
        [_tool("ruff"), "check", "cassettes", "proxy", "inspector", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
