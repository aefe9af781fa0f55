"""The suite's line of progress (issue 105 item 3, tests/support/heartbeat.py): from the start of a
session, every few seconds, the counts (passed, failed, skipped …, to go, running), under
pytest-xdist too (the controller prints what its workers report), and a stall said with the tests
still running. A real pytest with two xdist workers runs a small suite here; one of its tests
waits until this test has seen the stall said, so the stall is the run's, not a clock's guess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import heartbeat, progress

ROOT = Path(__file__).resolve().parents[1]

SUITE = """\
import pathlib, time, pytest

def test_passes():
    assert True

def test_fails():
    assert 1 == 2

def test_skips():
    pytest.skip("not here")

def test_waits():
    go = pathlib.Path(__file__).with_name("go")
    for _ in range(240_000):  # waits for the outer test (at most 20 minutes, never in practice)
        if go.exists():
            return
        time.sleep(0.005)
    raise AssertionError("never told to go")
"""


def _run(tmp_path: Path, *args: str, every: str = "0.2") -> subprocess.Popen[str]:
    (tmp_path / "test_small.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env.update({"PYTHONPATH": str(ROOT), heartbeat.EVERY: every, heartbeat.STALL: "1"})
    # (only xdist of the environment's pytest plugins, as loaded in the suite: the others, loaded
    # in every process of the run, cost about 1.5 s of CPU each and play no part here)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    out = (tmp_path / "out.txt").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-p", "tests.support.heartbeat",
         "-p", "no:cacheprovider", "-p", "no:randomly", *args, "test_small.py"],
        cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _said(tmp_path: Path, pattern: str, proc: subprocess.Popen[str]) -> re.Match[str]:
    return progress.until(
        lambda: re.search(pattern, (tmp_path / "out.txt").read_text(), re.M),
        pids=[proc.pid],
        what=f"a line matching {pattern!r}",
    )


def test_counts_and_a_stall_are_said_under_xdist(tmp_path: Path) -> None:
    proc = _run(tmp_path, "-n", "2")
    first = _said(tmp_path, r"^suite: progress \d+:\d\d: (collecting|\d)", proc)
    counted = _said(
        tmp_path,
        r"^suite: progress \d+:\d\d: 3 of 4 tests done \(1 passed, 1 failed, 1 skipped\), "
        r"1 to go, 1 running$",
        proc,
    )
    stall = _said(
        tmp_path,
        r"^suite: stall: no test has finished for \d+:\d\d; running: "
        r"test_small\.py::test_waits \(\d+:\d\d\)$",
        proc,
    )
    assert first.start() < counted.start() < stall.start()
    (tmp_path / "go").write_text("")
    assert progress.wait(proc) == 1  # the one failure
    out = (tmp_path / "out.txt").read_text()
    assert re.search(r"1 failed, 2 passed, 1 skipped", out), out
    # (the last line said while it ran, or after: never more than the four tests)
    for done in re.findall(r"(\d+) of 4 tests done", out):
        assert int(done) <= 4


def test_without_xdist_and_turned_off(tmp_path: Path) -> None:
    """Without xdist the process that runs the tests says them; ``LOOPTAP_PROGRESS_EVERY=0``
    says nothing."""
    proc = _run(tmp_path)
    _said(tmp_path, r"^suite: stall: .*running: test_small\.py::test_waits", proc)
    (tmp_path / "go").write_text("")
    assert progress.wait(proc) == 1
    assert "3 of 4 tests done" in (tmp_path / "out.txt").read_text()

    (tmp_path / "go").unlink()
    (tmp_path / "go").write_text("")  # (the waiting test returns at once)
    proc = _run(tmp_path, every="0")
    assert progress.wait(proc) == 1
    assert "suite:" not in (tmp_path / "out.txt").read_text()


def test_the_line_before_the_tests_are_known() -> None:
    """Before collection ends: ``collecting``, with the workers that have collected."""

    class Config:
        class option:
            numprocesses = 3

        hook = None
        pluginmanager = None

    beat = heartbeat.Heartbeat(Config(), 30, 300)  # type: ignore[arg-type]
    assert beat.line(beat.start + 31).endswith("progress 0:31: collecting")
    beat.collected = 2
    assert beat.line(beat.start + 75).endswith("collecting (2 of 3 workers done)")
    beat.total = 10
    assert beat.line(beat.start + 3725).endswith("1:02:05: 0 of 10 tests done, 10 to go, 0 running")
