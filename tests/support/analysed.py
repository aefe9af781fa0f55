"""A command run in this process, its output captured (the kept-analysis tests, and tests about
what a command says rather than its wiring), and a count of the round trips this process analysed
(0: a kept analysis was taken instead)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from looptap.cassettes.analysis import RunAnalyser
from looptap.cassettes.cli import main
from looptap.cassettes.reading import keep


def cli_output(*argv: str) -> tuple[int, bytes, str]:
    """``looptap ARGV`` run in this process: exit status, stdout bytes, stderr text."""
    out = io.BytesIO()
    text = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    err = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as exc:
            rc = int(exc.code or 0)
    text.flush()
    return rc, out.getvalue(), err.getvalue()


def cli_run(*argv: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``looptap ARGV`` run in this process with ENV added and in CWD, as a process of it would
    give it (its status, stdout and stderr as text): for a test about what a command says, not
    about its wiring, where a process each was most of the test's time (a second or more on a
    loaded machine)."""
    with mock.patch.dict(os.environ, env), contextlib.chdir(cwd or Path.cwd()):
        rc, out, err = cli_output(*argv)
    return subprocess.CompletedProcess(["looptap", *argv], rc, out.decode(), err)


class Analysed:
    """How many round trips this process analysed from now on (0: a kept analysis was taken)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.added = 0
        real = RunAnalyser.add

        def add(analyser: RunAnalyser, *a: Any, **k: Any) -> Any:
            self.added += 1
            return real(analyser, *a, **k)

        monkeypatch.setattr(RunAnalyser, "add", add)


def keep_every_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every run's analysis kept (however small), in a cache of the test's own: its directory."""
    monkeypatch.setitem(keep.__globals__, "MIN_BYTES", 0)  # (the kept analysis' module)
    monkeypatch.setenv("LOOPTAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LOOPTAP_NO_CACHE", raising=False)
    return tmp_path / "cache"
