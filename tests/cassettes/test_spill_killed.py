"""A process killed outright while its analysis is spilled to disk (SIGKILL: no exit handler runs)
leaves nothing behind: the spill is SQLite's own temporary database, a file in ``$TMPDIR`` that
SQLite unlinks as soon as it has opened it (mode 0600 while it is there)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

_CHILD = """
import os, sys, time
from looptap.cassettes.analysis.spill import Spill, SpillMap
s = Spill(cache=64)  # (a small page cache: the rows reach the file)
m = SpillMap(s, keep=2)
for k in range(3000):
    m[k] = {"hashes": list(range(40))}
    m.trim()
assert s.used and len(m) == 3000 and m[7] == {"hashes": list(range(40))}
tmp = os.environ["TMPDIR"]
for fd in os.listdir("/proc/self/fd"):
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if where.startswith(tmp):
        st = os.stat(f"/proc/self/fd/{fd}")
        print(where, oct(st.st_mode & 0o777), st.st_size, flush=True)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="reads the child's open files in /proc"
)
def test_a_process_killed_mid_spill_leaves_nothing_in_the_temporary_directory(
    tmp_path: Path,
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("SQLITE_TMPDIR", None)
    p = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    held: list[str] = []
    try:
        assert p.stdout is not None
        for line in p.stdout:
            if line.strip() == b"ready":
                break
            held.append(line.decode())
    finally:
        p.send_signal(signal.SIGKILL)
        p.communicate()
    # the rows were on disk, in this TMPDIR, in a private file already unlinked
    assert held, "the spill wrote no file in $TMPDIR: the test tests nothing"
    assert any(int(h.split()[-1]) > 0 for h in held), held
    for h in held:
        assert h.split()[-3] == "(deleted)" and h.split()[-2] == oct(stat.S_IRUSR | stat.S_IWUSR), h
    assert list(tmp.iterdir()) == []
