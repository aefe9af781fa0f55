"""A staged output file (``.NAME.<pid>-<start>-XXXX.tmp``, storage/_paths.py ``staged``) left by a
writer killed outright (SIGKILL: no ``finally`` runs) is removed by the next write of the same
target; a live writer's file, a link, another name and an old-style name are left alone. Before,
a killed ``looptap export`` of a huge run left a hidden file of hundreds of MB beside its target
for good."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from looptap.cassettes.cli import main
from looptap.cassettes.recording import seal
from looptap.cassettes.storage import check_target, process_start, reclaim_staged, staged

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "cassettes" / "examples" / "tool_loop_anthropic.yaml"

_CHILD = """
import sys, time
from looptap.cassettes.recording import seal
from looptap.cassettes.storage import check_target, staged
with staged(check_target(sys.argv[1], "the test's output")) as s:
    s.write(seal(b"x" * 100_000))
    s.flush()
    print(s.path, flush=True)
    time.sleep(600)
"""


def _killed_mid_write(target: Path) -> Path:
    """The staged file of a writer SIGKILLed before it put its output in place."""
    p = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(target)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert p.stdout is not None
        left = Path(p.stdout.readline().decode().strip())
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        if p.stdout is not None:
            p.stdout.close()
    assert left.is_file() and left.stat().st_size == 100_000, (
        "nothing was left behind: the test tests nothing"
    )
    return left


def test_the_next_export_removes_what_a_killed_export_left(tmp_path: Path) -> None:
    har = tmp_path / "run.har"
    left = _killed_mid_write(har)
    assert left.name.startswith(".run.har.") and left.name.endswith(".tmp")
    assert main(["export", str(EXAMPLE), "--har", str(har), "-q"]) == 0
    assert har.is_file()
    assert not left.exists(), "the killed writer's staged file is still there"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.har"]


def test_only_dead_writers_own_staged_files_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    dead = _killed_mid_write(target)
    me = os.getppid()  # a live process (this test's parent), with its real start time
    live = tmp_path / f".out.json.{me}-{process_start(me)}-abc.tmp"
    # its pid, another start time: a reused pid, so ended
    reused = tmp_path / f".out.json.{me}-1-abc.tmp"
    # an older looptap's name: whose it is cannot be told
    old_style = tmp_path / ".out.json.k3j4h5.tmp"
    other_target = tmp_path / f".other.json.{dead.name.split('.')[3]}.tmp"
    for p in (live, reused, old_style, other_target):
        p.write_bytes(b"y")
    link = tmp_path / ".out.json.999999999-5-lnk.tmp"
    link.symlink_to(live)  # a link is no regular file: never touched (nor its target)
    removed = reclaim_staged(target)
    assert sorted(removed) == sorted([dead, reused])
    for kept in (live, old_style, other_target, link):
        assert kept.exists() or kept.is_symlink(), kept
    # and a write of the target goes through it: nothing of this scheme whose writer ended is left
    with staged(check_target(target, "the test's output")) as s:
        s.write(seal(b"{}"))
    assert target.read_bytes() == b"{}"
