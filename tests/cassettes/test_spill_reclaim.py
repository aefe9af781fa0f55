"""A spill directory left by a process killed mid-spill (SIGKILL: no exit handler runs) is removed
by the next looptap process; a live process's directory, a symlink, another user's mode or an
unknown name is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from looptap.cassettes.analysis import spill
from looptap.cassettes.cli import main
from looptap.cassettes.storage import process_start
from tests.support.huge import write_huge

_CHILD = """
import sys, time
from looptap.cassettes.analysis.spill import Spill, SpillMap
s = Spill()
m = SpillMap(s, keep=2)
for k in range(50):
    m[k] = {"hashes": list(range(20))}
    m.trim()
assert s.used
print(s._dir, flush=True)
time.sleep(600)
"""


def _killed_mid_spill(tmp: Path) -> Path:
    """The spill directory of a process SIGKILLed while its tables are on disk."""
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    p = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, env=env)
    try:
        assert p.stdout is not None
        where = Path(p.stdout.readline().decode().strip())
        assert where.is_dir() and (where / "spill.db").stat().st_size > 0
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert where.is_dir(), "nothing was left behind: the test tests nothing"
    return where


def test_the_next_run_removes_the_spill_dir_of_a_killed_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    left = _killed_mid_spill(tmp_path)
    assert left.name.startswith(f"{spill.PREFIX}")
    run = write_huge(tmp_path / "run.jsonl", 3)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spill.reclaim_once.cache_clear()  # as in a new process
    assert main(["show", str(run)]) == 0
    capsys.readouterr()
    assert not left.exists()


def test_only_dead_processes_own_private_dirs_are_reclaimed(tmp_path: Path) -> None:
    left = _killed_mid_spill(tmp_path)
    dead = left.name.split("-")[2:4]
    # a live process (this one's parent), with its true start time
    ppid = os.getppid()
    live = tmp_path / f"{spill.PREFIX}{ppid}-{process_start(ppid)}-abc"
    live.mkdir(mode=0o700)
    # the dead pid, but a directory that is not private, a symlink to one, a name of no pid
    loose = tmp_path / f"{spill.PREFIX}{dead[0]}-{dead[1]}-loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    target = tmp_path / "precious"
    target.mkdir(mode=0o700)
    (target / "keep").write_text("x")
    link = tmp_path / f"{spill.PREFIX}{dead[0]}-{dead[1]}-link"
    link.symlink_to(target)
    old = tmp_path / f"{spill.PREFIX}k2j4h5"
    old.mkdir(mode=0o700)
    removed = spill.reclaim_stale(str(tmp_path))
    assert removed == [str(left)]
    assert (
        live.is_dir()
        and loose.is_dir()
        and link.is_symlink()
        and (target / "keep").exists()
        and old.is_dir()
    )
