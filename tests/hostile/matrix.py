"""Every looptap command on every hostile file, each in its own process: what the user is told,
and whether anything went wrong (a traceback, a raw control byte on the terminal, a hang, a crash,
too much memory). Used by ``tests/hostile/test_matrix.py`` and ``bench/hostile.py``."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.hostile.corpus import RAW_CONTROLS
from tests.support.progress import POLL, STALL, Hung, Watch

ROOT = Path(__file__).resolve().parents[2]
LOOPTAP = [sys.executable, "-m", "cassettes.cli"]
INSPECT_DRIVER = Path(__file__).with_name("drive_inspector.py")
#: Address-space cap per child: a bomb must fail inside looptap's bounds, never take the box down.
AS_LIMIT = 6 * 1024**3

COMMANDS = (
    "show",
    "show --json",
    "textconv",
    "export --otel",
    "export --har",
    "diff self",
    "diff clean",
    "verify",
    "import",
    "replay",
    "inspect",
)
#: Outputs that are JSON for programs (controls escaped inside strings, never raw).
_TRACEBACK = re.compile(rb"Traceback \(most recent call last\)|Fatal Python error|Segmentation fault|core dumped")


@dataclass
class Cell:
    command: str
    file: str
    exit: int | None
    seconds: float
    peak_rss_mb: float
    traceback: bool
    raw_controls: list[str]
    hang: bool
    told: str

    @property
    def ok(self) -> bool:
        return not (self.traceback or self.raw_controls or self.hang or (self.exit is not None and self.exit < 0))

    @property
    def problems(self) -> list[str]:
        out = []
        if self.traceback:
            out.append("traceback")
        if self.raw_controls:
            out.append("raw " + "/".join(self.raw_controls))
        if self.hang:
            out.append("hang")
        if self.exit is not None and self.exit < 0:
            out.append(f"killed by signal {-self.exit}")
        return out


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    os.setsid()


#: Runs the command as its own child and writes that child's peak RSS (KB) to the file named
#: first. Linux carries a process's RSS high-water mark across fork and exec, so a command started
#: straight from this (large) process would report this process's size as its own peak; started
#: from a small launcher, its figure is its own.
_LAUNCH = """
import os, signal, sys
path, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
signal.signal(signal.SIGTERM, lambda *a: os.kill(pid, signal.SIGKILL))
_, status, usage = os.wait4(pid, 0)
with open(path, "w") as fh:
    fh.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    if -code not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def _run(argv: list[str], cpu: float, cwd: Path, stdin: bytes | None = None, stall: float = STALL) -> tuple[int | None, bytes, bytes, float, float, bool]:
    """(exit, stdout, stderr, seconds, peak RSS MB, hung) of one child, its RSS from wait4 in a
    small launcher (see :data:`_LAUNCH`). Hung means no progress (CPU time, I/O, processes of its
    tree) for ``stall`` seconds, or more than ``cpu`` seconds of CPU time spent (a runaway loop):
    never a wall-clock limit, so a child slowed by a busy machine is not killed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "160"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as rss_file:
        t0 = time.monotonic()
        argv = [sys.executable, "-S", "-c", _LAUNCH, rss_file.name, *argv]
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env, preexec_fn=_limit)
        watch = Watch(p.pid, stall=stall, cpu=cpu, what=" ".join(argv[-3:]))
        hung = False
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            try:
                watch.check()
            except Hung:
                hung = True
                watch.kill()
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(POLL)
        p.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        measured = rss_file.read().strip()
        rss_kb = int(measured) if measured.isdigit() else usage.ru_maxrss  # killed: the launcher's figure
        return p.returncode, out.read(), err.read(), seconds, rss_kb / 1024, hung


def _replay_argv(file: Path) -> list[str]:
    """A child that runs `looptap replay FILE`, sends one request to it and stops it with SIGINT,
    passing the replay command's own output through."""
    code = f"""
import os, signal, subprocess, sys, urllib.request
p = subprocess.Popen({LOOPTAP!r} + ["replay", {str(file)!r}], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
url = None
while True:  # the matrix watches this process tree for progress: no wall-clock limit here
    line = p.stdout.readline()
    if not line:
        break
    sys.stdout.buffer.write(line)
    if line.startswith(b"export OPENAI_BASE_URL="):
        url = line.split(b"=", 1)[1].strip().decode()
        break
if url:
    req = urllib.request.Request(url.rstrip("/") + "/chat/completions", data=b'{{"model":"gpt-4o","messages":[{{"role":"user","content":"hi"}}]}}',
                                 headers={{"content-type": "application/json", "authorization": "Bearer sk-test-HOSTILEKEY0123456789"}})
    try:
        urllib.request.urlopen(req).read()
    except Exception as exc:
        print("request:", type(exc).__name__)
    p.send_signal(signal.SIGINT)
rest_out, rest_err = p.communicate()
sys.stdout.buffer.write(rest_out)
sys.stderr.buffer.write(rest_err)
sys.exit(p.returncode)
"""
    return [sys.executable, "-c", code]


def argv_for(command: str, file: Path, work: Path, clean_file: Path) -> list[str]:
    out = work / f"{file.stem}.{command.replace(' ', '_').replace('-', '')}.out"
    match command:
        case "show":
            return [*LOOPTAP, "show", str(file)]
        case "show --json":
            return [*LOOPTAP, "show", "--json", str(file)]
        case "textconv":
            return [*LOOPTAP, "textconv", str(file)]
        case "export --otel":
            return [*LOOPTAP, "export", "--otel", str(out), str(file)]
        case "export --har":
            return [*LOOPTAP, "export", "--har", str(out), str(file)]
        case "diff self":
            return [*LOOPTAP, "diff", str(file), str(file)]
        case "diff clean":
            return [*LOOPTAP, "diff", str(clean_file), str(file)]
        case "verify":
            return [*LOOPTAP, "verify", str(file)]
        case "import":
            return [*LOOPTAP, "import", "-f", "-o", str(out.with_suffix(".jsonl")), str(file)]
        case "replay":
            return _replay_argv(file)
        case "inspect":
            return [sys.executable, str(INSPECT_DRIVER), str(file)]
    raise ValueError(command)


def _told(stderr: bytes, stdout: bytes) -> str:
    for stream in (stderr, stdout):
        for line in stream.decode("utf-8", "replace").splitlines():
            line = line.strip()
            if line:
                return line[:160]
    return ""


def run_cell(command: str, file: Path, work: Path, clean_file: Path, cpu: float = 120, stall: float = STALL) -> Cell:
    """One command on one file; ``cpu`` is its CPU-time budget in seconds (load does not inflate
    it as it does wall-clock time), ``stall`` how long it may go without any progress."""
    argv = argv_for(command, file, work, clean_file)
    code, out, err, seconds, rss, hung = _run(argv, cpu, work, stall=stall)
    texts = (out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape"))
    leaks = sorted({repr(c) for c in RAW_CONTROLS for text in texts if c in text})
    return Cell(
        command=command,
        file=file.name,
        exit=code,
        seconds=seconds,
        peak_rss_mb=rss,
        traceback=bool(_TRACEBACK.search(out) or _TRACEBACK.search(err)),
        raw_controls=leaks,
        hang=hung,
        told=_told(err, out),
    )
