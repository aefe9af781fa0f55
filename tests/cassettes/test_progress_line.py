"""The progress line of the commands that read a whole run first (``show``, ``textconv``,
``export``, ``diff``): a 1 GB run takes minutes to read, and a command silent for that long looks
hung. On a real terminal (a pty): the line is rewritten in place, erased before the output, and
shows a hostile file name's controls as text; never on a pipe, a file or a test's capture."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from support.huge import write_huge

from looptap.cassettes.reading import open_run

ROOT = Path(__file__).resolve().parents[2]

#: The command in a child, with steps of 2 KB and the line shown at once: a small run read in
#: many steps, as a large one is.
_CHILD = """
import sys
import looptap.cassettes.reading as r, looptap.cassettes.views._progress as p
r.open_run.__globals__["STEP_BYTES"], p.AFTER, p.EVERY = 2_000, 0.0, 0.0
from looptap.cassettes.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def _run(tmp_path: Path, name: str = "run.jsonl") -> Path:
    return write_huge(tmp_path / name, 24, "long", turns=8)


def test_open_run_reports_each_step_up_to_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _run(tmp_path)
    monkeypatch.setitem(open_run.__globals__, "STEP_BYTES", 2_000)  # (the run's module)
    calls: list[tuple[int, int, int]] = []
    run = open_run(path, progress=lambda read, size, records: calls.append((read, size, records)))
    size = path.stat().st_size
    assert len(calls) >= 5
    assert [c[0] for c in calls] == sorted(c[0] for c in calls) and {c[1] for c in calls} == {size}
    assert calls[-1] == (size, size, len(run)) == (size, size, 24)


def _on_a_terminal(
    argv: list[str], stdout: int | None, tmp_path: Path, columns: int = 200, term: str = "xterm"
) -> tuple[int, bytes]:
    """``looptap ARGV`` with stderr (and stdin) on a pty ``columns`` wide: its exit code and what
    the terminal got."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "TERM": term,
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, *argv],
        stdin=slave,
        stdout=stdout,
        stderr=slave,
        cwd=tmp_path,
        env=env,
    )
    os.close(slave)
    got = b""
    ends = [master] + ([proc.stdout.fileno()] if proc.stdout is not None else [])
    # until the child closes the terminal (no time limit: a hang shows as the test's own)
    while master in ends:
        for fd in select.select(ends, [], [])[0]:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: every writer of the terminal closed
                data = b""
            if not data:
                ends.remove(fd)
            elif fd == master:
                got += data
    os.close(master)
    if proc.stdout is not None:
        proc.stdout.read()
        proc.stdout.close()
    return proc.wait(), got


def test_show_on_a_terminal_rewrites_one_line_and_erases_it(tmp_path: Path) -> None:
    hostile = "run\x1b]0;owned\x07\u202e.jsonl"
    path = _run(tmp_path, hostile)
    out = tmp_path / "out.txt"
    with out.open("wb") as f:
        code, term = _on_a_terminal(["show", str(path)], f.fileno(), tmp_path)
    assert code == 0, term
    lines = term.split(b"\r\x1b[K")
    assert term.startswith(b"\r\x1b[K") and term.endswith(b"\r\x1b[K"), term[:200]
    updates = [x for x in lines if x]
    assert len(updates) >= 5 and all(x.startswith(b"looptap: reading run") for x in updates), (
        updates[:3]
    )
    assert b"100 %" in updates[-1] and b"24 round trips" in updates[-1]
    # the name's controls are shown, not obeyed: no escape but the erase, no bell, no bidi override
    assert (
        term.count(b"\x1b") == term.count(b"\r\x1b[K")
        and b"\x07" not in term
        and "\u202e".encode() not in term
    )
    assert b"\n" not in term  # one line, rewritten: nothing scrolled
    assert "turn" in out.read_text()  # the command's own output, untouched


def test_the_line_fits_a_narrow_terminal(tmp_path: Path) -> None:
    """A line wider than the terminal wraps, and the erase then clears only its last row."""
    path = _run(tmp_path, "a-run-with-a-long-name-" + "漢" * 30 + ".jsonl")
    code, term = _on_a_terminal(["show", str(path)], subprocess.DEVNULL, tmp_path, columns=40)
    updates = [x.decode() for x in term.split(b"\r\x1b[K") if x]
    assert code == 0 and updates
    for u in updates:  # a wide character takes two cells
        assert len(u) + sum(1 for ch in u if ch == "漢") <= 39 and u.endswith("…"), u


@pytest.mark.parametrize("where", ["pipe", "dumb terminal", "capture"])
def test_no_line_where_stdout_is_a_pipe_or_stderr_is_not_a_terminal(
    tmp_path: Path, where: str
) -> None:
    path = _run(tmp_path)
    # `looptap show run.jsonl | less`: the pager shares the terminal; TERM=dumb: no erase
    if where != "capture":
        stdout = subprocess.PIPE if where == "pipe" else subprocess.DEVNULL
        code, term = _on_a_terminal(
            ["show", str(path)],
            stdout,
            tmp_path,
            term="dumb" if where == "dumb terminal" else "xterm",
        )
        assert code == 0 and term == b"", term[:200]
        return
    proc = subprocess.run([sys.executable, "-c", _CHILD, "show", str(path)], capture_output=True, cwd=tmp_path,  # noqa: E501
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)  # fmt: skip
    assert proc.returncode == 0 and b"reading" not in proc.stderr and b"\x1b" not in proc.stderr, (
        proc.stderr[:300]
    )
