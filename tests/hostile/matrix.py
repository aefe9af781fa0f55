"""Every looptap command on every hostile file, each in its own process: what the user is told,
and whether anything went wrong (a traceback, a raw control byte on the terminal, a hang, a crash,
too much memory). Used by ``tests/hostile/test_matrix.py`` and ``bench/hostile.py``."""

from __future__ import annotations

import json
import os
import re
import resource
import select
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
LOOPTAP = [sys.executable, "-m", "looptap.cassettes.cli"]
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
_TRACEBACK = re.compile(
    rb"Traceback \(most recent call last\)|Fatal Python error|Segmentation fault|core dumped"
)


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
    #: The inspector driver's own verdict (``inspect`` cells): its ``PROBLEM:`` lines and its
    #: summary line (``inspect FILE: N problems; hostile text shown: B``), as it printed them
    #: cleaned.
    verdict: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (
            self.traceback
            or self.raw_controls
            or self.hang
            or (self.exit is not None and self.exit < 0)
        )

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
LAUNCH = """
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


#: A server of looptap processes: imports looptap once (and every module the commands load, learned
#: by a throwaway child that runs them on a clean file), then forks one child per request. Each
#: child is a process of its own as ``python -m cassettes.cli ARGS`` would be: its own session,
#: the address-space cap, stdin /dev/null, stdout and stderr to files, ``sys.argv`` as ``-m`` sets
#: it, and the interpreter's own exit (uncaught exceptions print their traceback, exit handlers
#: run). What it saves is the interpreter's start and the imports (most of a small command's CPU).
#: Its peak RSS counts the pages it touches, the server's inherited ones included (as wait4 reports
#: it). Protocol on stdin/stdout (one line each): a JSON request ``{"argv", "cwd", "out", "err"}``
#: is answered ``pid N`` once forked and ``done EXIT MAXRSS_KB`` once it ended.
_ZYGOTE = r"""
import json, os, resource, sys
AS_LIMIT, WARM, NAMES = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])

def warm():
    # The modules the commands import, from a child that runs them (its output goes nowhere),
    # unless another server learned them already.
    if NAMES:
        return import_all(NAMES)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        from looptap.cassettes.cli import main
        for cwd, argv in WARM:
            os.chdir(cwd)
            try:
                main(argv)
            except BaseException:
                pass
        os.write(w, "\n".join(sorted(sys.modules)).encode())
        os._exit(0)
    os.close(w)
    names = b""
    while chunk := os.read(r, 1 << 16):
        names += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return import_all(names.decode().split())

def import_all(names):
    import importlib
    for name in names:
        if name not in sys.modules and name != "__main__":
            try:
                importlib.import_module(name)
            except BaseException:
                pass
    return names

def serve():
    import looptap.cassettes.cli
    names = warm()
    os.write(1, ("ready " + json.dumps(names) + "\n").encode())
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                return None
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return req  # the child leaves the server's loop and runs the command as its main program
        os.write(1, f"pid {pid}\n".encode())
        _, status, usage = os.wait4(pid, 0)
        os.write(1, f"done {os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}\n".encode())

req = serve()
if req is None:
    sys.exit(0)
os.setsid()
resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
os.chdir(req["cwd"])
for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["out"], os.O_WRONLY), (2, req["err"], os.O_WRONLY)):
    os.dup2(os.open(path, flags), fd)
import looptap.cassettes.cli
sys.argv = [looptap.cassettes.cli.__file__, *req["argv"]]
del req
sys.exit(looptap.cassettes.cli.main())
"""  # noqa: E501


class Zygote:
    """One :data:`_ZYGOTE` server; serves one cell at a time (a pool uses one per thread)."""

    def __init__(
        self,
        warm: list[tuple[Path, list[str]]],
        *,
        modules: list[str] | None = None,
        as_limit: int = AS_LIMIT,
    ) -> None:
        """``warm``: the commands a throwaway child runs to learn the modules to import (or
        ``modules``, another server's :attr:`modules`); ``as_limit``: each child's address-space
        cap."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "160"}
        spec = json.dumps([(str(cwd), argv) for cwd, argv in warm])
        argv = [sys.executable, "-c", _ZYGOTE, str(as_limit), spec, json.dumps(modules or [])]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._buf = b""
        ready, _, names = self._line(
            Watch(self.proc.pid, what="the looptap process server")
        ).partition(" ")
        assert ready == "ready", ready
        self.modules: list[str] = json.loads(names)

    def _line(self, watch: Watch) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            if select.select([fd], [], [], POLL)[0]:  # a sampling interval, not a limit
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise RuntimeError(
                        f"the looptap process server ended (exit {self.proc.wait()})"
                    )
                self._buf += chunk
            else:
                watch.check()
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def run(
        self, args: list[str], cwd: Path, out: str, err: str, cpu: float, stall: float
    ) -> tuple[int, int, bool]:
        """(exit, peak RSS KB, hung) of ``looptap ARGS`` forked from the server."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(
            json.dumps({"argv": args, "cwd": str(cwd), "out": out, "err": err}).encode() + b"\n"
        )
        self.proc.stdin.flush()
        pid = int(self._line(Watch(self.proc.pid, what="the looptap process server")).split()[1])
        watch = Watch(pid, stall=stall, cpu=cpu, what=" ".join(args[-2:]))
        hung = False
        try:
            line = self._line(watch)
        except Hung:
            hung = True
            watch.kill()
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            line = self._line(Watch(self.proc.pid, what="the looptap process server"))
        _, code, rss = line.split()
        return int(code), int(rss), hung

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def run_limited(
    argv: list[str],
    cpu: float,
    cwd: Path,
    stdin: bytes | None = None,
    stall: float = STALL,
    zygote: Zygote | None = None,
) -> tuple[int | None, bytes, bytes, float, float, bool]:
    """(exit, stdout, stderr, seconds, peak RSS MB, hung) of one child, its RSS from wait4 in a
    small launcher (see :data:`LAUNCH`). Hung means no progress (CPU time, I/O, processes of its
    tree) for ``stall`` seconds, or more than ``cpu`` seconds of CPU time spent (a runaway loop):
    never a wall-clock limit, so a child slowed by a busy machine is not killed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "160"}
    if zygote is not None and argv[: len(LOOPTAP)] == LOOPTAP:
        with tempfile.NamedTemporaryFile() as zout, tempfile.NamedTemporaryFile() as zerr:
            t0 = time.monotonic()
            code, rss_kb, hung = zygote.run(
                argv[len(LOOPTAP) :], cwd, zout.name, zerr.name, cpu, stall
            )
            return code, zout.read(), zerr.read(), time.monotonic() - t0, rss_kb / 1024, hung
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as rss_file,
    ):
        t0 = time.monotonic()
        argv = [sys.executable, "-S", "-c", LAUNCH, rss_file.name, *argv]
        p = subprocess.Popen(
            argv,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            preexec_fn=_limit,
        )
        watch = Watch(p.pid, stall=stall, cpu=cpu, what=" ".join(argv[-3:]))
        hung = False
        ended = os.pidfd_open(p.pid)  # readable once the child ends: no sleeping past its end
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
            select.select([ended], [], [], POLL)  # a sampling interval, not a limit
        os.close(ended)
        p.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        measured = rss_file.read().strip()
        # killed: the launcher's figure
        rss_kb = int(measured) if measured.isdigit() else usage.ru_maxrss
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
"""  # noqa: E501
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


def warm_argvs(work: Path, clean_file: Path) -> list[tuple[Path, list[str]]]:
    """What a :class:`Zygote` runs once to learn the modules the commands import: every looptap
    command of the matrix on the clean file."""
    return [
        (work, argv_for(c, clean_file, work, clean_file)[len(LOOPTAP) :])
        for c in COMMANDS
        if c not in ("replay", "inspect")
    ]


def run_cell(
    command: str,
    file: Path,
    work: Path,
    clean_file: Path,
    cpu: float = 120,
    stall: float = STALL,
    zygote: Zygote | None = None,
) -> Cell:
    """One command on one file; ``cpu`` is its CPU-time budget in seconds (load does not inflate
    it as it does wall-clock time), ``stall`` how long it may go without any progress; with a
    ``zygote``, a looptap command is forked from it rather than started afresh."""
    argv = argv_for(command, file, work, clean_file)
    code, out, err, seconds, rss, hung = run_limited(argv, cpu, work, stall=stall, zygote=zygote)
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
        verdict=tuple(
            line for line in texts[0].splitlines() if line.startswith(("PROBLEM:", "inspect "))
        )
        if command == "inspect"
        else (),
    )
