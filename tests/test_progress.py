"""The suite's hang detection (tests/support/progress.py): a child that works slowly is waited for
however long it takes; one that stops making progress, or spins past its CPU budget, is killed and
called hung. The stalls here are short (2 s) so the test is quick; the suite's default is 300 s."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile.matrix import run_limited
from tests.support import progress

#: Works for ~3 s of wall time in short bursts of CPU time (30 ms every quarter of a second, about
#: 0.4 s in all; it printed nothing until the end): slower than the 2 s stall, never stalled.
#: (Session 55: it spun 3 s of CPU time, the same progress signal at eight times the cost.)
SLOW = (
    "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end:\n"
    "    t = time.process_time()\n    while time.process_time() - t < 0.03:\n        pass\n"
    "    time.sleep(0.25)\nprint('done')"
)


def test_a_slow_child_that_keeps_working_is_waited_for() -> None:
    out = progress.run([sys.executable, "-c", SLOW], capture_output=True, text=True, stall=2)
    assert out.returncode == 0 and out.stdout.strip() == "done"


def test_a_child_that_stops_progressing_is_hung() -> None:
    with pytest.raises(progress.Hung, match="made no progress"):
        progress.run(["sleep", "600"], stall=2)


def test_a_spinning_child_is_stopped_by_its_cpu_budget() -> None:
    with pytest.raises(progress.Hung, match="CPU time"):
        progress.run([sys.executable, "-c", "while True: pass"], cpu=1)


def test_a_wall_clock_limit_would_have_killed_the_slow_child() -> None:
    """What the matrix did before: a fixed limit shorter than the child's time on a busy machine."""
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", SLOW], capture_output=True, timeout=1)


def test_the_hostile_matrix_waits_for_a_slow_cell_and_kills_a_stalled_one(tmp_path: Path) -> None:
    code, out, _, _, _, hung = run_limited([sys.executable, "-c", SLOW], 60, tmp_path, stall=2)
    assert (code, out.strip(), hung) == (0, b"done", False)
    code, _, _, _, _, hung = run_limited(["sleep", "600"], 60, tmp_path, stall=2)
    assert hung and code is not None and code < 0


def test_until_watches_the_threads_of_this_process() -> None:
    import threading

    done = threading.Event()

    def work() -> None:
        import time

        end = time.monotonic() + 3  # bursts of CPU time, as SLOW's
        while time.monotonic() < end:
            t = time.thread_time()
            while time.thread_time() - t < 0.03:
                pass
            time.sleep(0.25)
        done.set()

    threading.Thread(target=work, daemon=True).start()
    assert progress.until(done.is_set, stall=2)
    with pytest.raises(progress.Hung):
        progress.until(lambda: False, stall=2)
