"""The shell and file tools of a coding agent on the timeline (docs/shell-file-tools.md): ``looptap
run --shell-trace`` (or ``LOOPTAP_SHELL_TRACE=processes``; never by default: ptrace taken from the
agent would fail its own debugger, strace or profiler and strip a setuid program's privilege)
starts the agent under a process tracer (``strace -f --seccomp-bpf``, Linux, ptrace) whose
output reaches this process through a pipe (never a file: it carries what the processes wrote),
read here line by line into one ``process`` record per program the agent's tree started: its argv,
working directory, start and end, exit status or signal, the first bytes it and its children wrote
to stdout and stderr, and the files it and its children opened for writing, renamed or removed.
Each record goes to the writer when its process ends (redacted there as bodies are).

Where the tracer cannot run (no ``strace``, ptrace refused, not Linux) :func:`probe` says why in one
line, and the run is recorded without it: its commands and their files are then not seen.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HEAD", "PROCESSES_ONLY", "TRACED", "TRACING", "Tracer", "probe"]

#: The levels of ``looptap run`` that start this tracer (``config.shell_trace``); the default,
#: ``"tree"``, takes the working tree only (proxy/workspace.py), without ptrace.
TRACING = ("processes", "full")
#: The system calls traced at ``processes``: program starts, working directories, new processes and
#: threads (to know whose child a process is). A process's end is ptrace's own event (no system
#: call stop). Rare calls: within the noise of a test suite's CPU time (bench/shell_overhead.py).
PROCESSES_ONLY = "execve,execveat,chdir,clone,clone3,fork,vfork"
#: ``--shell-trace`` adds files opened for writing, renamed and removed, and ``write`` (what a
#: command printed on its stdout and stderr): frequent calls, 1.5x CPU on a test suite.
TRACED = (
    PROCESSES_ONLY + ",exit_group,open,openat,creat,rename,renameat,renameat2,unlink,unlinkat,"
    "rmdir,write"
)
#: Bytes of a string strace prints (an argv word; with ``--shell-trace``, a write's data too): a
#: longer one is cut. Codex 0.169 runs each command at the end of a ``bash -c`` script of its
#: environment snapshot and proxy settings (10-40 KiB), so by default (no write traced) an argv
#: word is read up to 128 KiB; with ``--shell-trace`` 4 KiB, as strace then prints every write's
#: data that long (a ``pip install`` writes megabytes).
STRING, STRING_FULL = 131072, 4096
#: Bytes of stdout and of stderr kept per process (of its own and its children's writes), and
#: runs of the order of its writes across the two kept (``order``: :func:`_order`).
HEAD, ORDER = 2048, 64
#: Files kept per process, argv words per process, processes recorded per run.
FILES, WORDS, PROCESSES = 64, 256, 5000
#: Characters of the argv kept per process (all words together).
ARGV_CHARS = 131072

_LINE = re.compile(r"^(\d+) +(\d+\.\d+) (.*)$")
_CALL = re.compile(r"^(\w+)\((.*)$", re.S)
_RESULT = re.compile(r"\) += (-?\d+|\?)(?: (\w+))?")
#: A pid a process in another PID namespace got (bubblewrap's ``--unshare-pid``: Codex's
#: sandbox), as ``--pidns-translation`` says it in the tracer's namespace.
_NS_PID = re.compile(r"= \d+ /\* (\d+) in strace's PID NS \*/")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$", re.S)
_EXITED = re.compile(r"^\+\+\+ exited with (\d+) \+\+\+$")
_KILLED = re.compile(r"^\+\+\+ killed by (SIG\w+)")
_STR = re.compile(r'"((?:[^"\\]|\\.)*)"(\.\.\.)?')
_ESC = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "\\": "\\", '"': '"'}


def probe() -> str | None:
    """``None`` when the tracer can run here, else the one line saying why not (what is then not
    seen is said by the caller)."""
    if not sys.platform.startswith("linux"):
        return f"the process tracer needs Linux (this is {sys.platform})"
    exe = shutil.which("strace")
    if exe is None:
        return "no strace on PATH (Debian/Ubuntu: apt-get install strace)"
    try:
        done = subprocess.run(
            [
                exe,
                "-f",
                "-qq",
                "--seccomp-bpf",
                "--pidns-translation",
                "-e",
                "trace=execve",
                "-o",
                os.devnull,
                "true",
            ],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"strace could not run ({exc})"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return "strace cannot trace here (ptrace refused: " + (why[-1][:200] if why else "?") + ")"
    return None


def _unescape(text: str) -> str:
    """A string as strace printed it (C escapes), back to text (bytes not UTF-8 replaced)."""
    if "\\" not in text:
        return text
    out = bytearray()
    pos = 0
    for m in _ESC.finditer(text):
        out += text[pos : m.start()].encode()
        e = m.group(1)
        if e in _SIMPLE:
            out += _SIMPLE[e].encode()
        elif e[0] == "x" and len(e) == 3:
            out.append(int(e[1:], 16))
        elif e.isdigit():
            out.append(int(e, 8) & 0xFF)
        else:
            out += e.encode()
        pos = m.end()
    out += text[pos:].encode()
    return out.decode("utf-8", "replace")


def _strings(text: str) -> list[tuple[str, bool]]:
    """Each quoted string of a call's arguments, unescaped, with whether strace cut it."""
    return [(_unescape(m.group(1)), bool(m.group(2))) for m in _STR.finditer(text)]


@dataclass
class _Proc:
    """A process of the traced tree (threads are folded into their process)."""

    pid: int
    parent: int | None
    cwd: str
    #: The record its program starts fill (itself once it ran a program; else its parent's).
    owner: dict[str, Any] | None = None
    own: bool = False


@dataclass
class _State:
    procs: dict[int, _Proc] = field(default_factory=dict)
    #: Thread id → its process id.
    threads: dict[int, int] = field(default_factory=dict)
    #: A call strace printed as unfinished, by thread: its start (time, name, arguments so far).
    pending: dict[int, tuple[float, str, str]] = field(default_factory=dict)
    recorded: int = 0
    dropped: int = 0
    root: int | None = None


class Tracer:
    """The tracer of one run: :meth:`argv` wraps the agent's command line, :meth:`start` reads
    what strace says (a thread) and hands each finished process's record to ``emit`` (called on
    that thread: the caller moves it to its own loop), :meth:`finish` waits for the end.

    ``full`` (``--shell-trace``) traces each process's output and files too; without it only the
    programs, their working directories and their ends are traced, and each ``process`` record
    says ``"output": false`` (its ``stdout``, ``stderr`` and ``files`` were not seen)."""

    def __init__(
        self,
        cwd: str,
        emit: Callable[[dict[str, Any]], None],
        on_root_end: Callable[[], None] | None = None,
        full: bool = False,
    ) -> None:
        self.cwd = cwd
        self.full = full
        self.emit = emit
        self.on_root_end = on_root_end
        #: The agent's own exit status (128 + the signal's number when a signal ended it), once
        #: its end is read.
        self.root_status: int | None = None
        #: Set (by the caller) when the agent's own end is read.
        self.root_ended: Any = None
        self.state = _State()
        # A FIFO in a private directory: strace opens it by name (close-on-exec, so no process
        # of the agent's holds it open past strace), and nothing written to it reaches a disk.
        self._dir = tempfile.mkdtemp(prefix="looptap-trace-")
        self.fifo = os.path.join(self._dir, "trace")
        os.mkfifo(self.fifo, 0o600)
        self._opened = threading.Event()
        self._thread: threading.Thread | None = None
        self.exe = shutil.which("strace") or "strace"

    def argv(self, argv: Sequence[str]) -> list[str]:
        """The agent's command line run under strace, its output into this tracer's pipe."""
        return [
            self.exe,
            "-f",
            "-q",
            "-I2",  # a Ctrl-C (the terminal's SIGINT) lets the agent handle it
            "--seccomp-bpf",
            "--pidns-translation",  # a sandbox's own PID namespace: its children's real pids
            "-ttt",
            "-s",
            str(STRING_FULL if self.full else STRING),
            "-e",
            f"trace={TRACED if self.full else PROCESSES_ONLY}",
            "-o",
            self.fifo,
            "--",
            *argv,
        ]

    @property
    def root(self) -> int | None:
        """The agent's own process id (strace's child), once its first line is read."""
        return self.state.root

    def start(self) -> None:
        """Read the FIFO on a thread (its end: strace's exit)."""
        self._thread = threading.Thread(target=self._run, name="looptap-shell-trace", daemon=True)
        self._thread.start()

    def finish(self) -> None:
        """Once strace has exited: the rest of what it wrote read, the FIFO removed. (strace that
        never opened the FIFO, because it did not start, is stood in for: the reader ends.)"""
        if not self._opened.is_set():
            with contextlib.suppress(OSError):
                os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
        if self._thread is not None:
            self._thread.join()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _run(self) -> None:
        try:
            fd = os.open(self.fifo, os.O_RDONLY)
            self._opened.set()
            with os.fdopen(fd, "rb", buffering=1 << 16) as f:
                for raw in f:
                    if _skipped(raw):
                        continue
                    try:
                        self.line(raw.decode("utf-8", "replace").rstrip("\n"))
                    except Exception:  # one line we cannot read never stops the reading
                        continue
        finally:
            self._end_all()

    # -- reading strace's lines ------------------------------------------------------------------
    def line(self, raw: str) -> None:
        m = _LINE.match(raw)
        if m is None:
            return
        tid, t, rest = int(m.group(1)), float(m.group(2)), m.group(3)
        st = self.state
        if st.root is None:
            st.root = tid
            st.procs[tid] = _Proc(tid, None, self.cwd)
        if rest.startswith("+++ "):
            self._ended(tid, t, rest)
            return
        if rest.startswith("---"):
            return
        if rest.endswith("<unfinished ...>"):
            c = _CALL.match(rest[: -len("<unfinished ...>")])
            if c is not None:
                st.pending[tid] = (t, c.group(1), c.group(2))
            return
        r = _RESUMED.match(rest)
        if r is not None:
            began = st.pending.pop(tid, None)
            if began is None:
                return
            self._call(tid, began[0], began[1], began[2] + r.group(2))
            return
        c = _CALL.match(rest)
        if c is not None:
            self._call(tid, t, c.group(1), c.group(2))

    def _proc(self, tid: int) -> _Proc:
        st = self.state
        pid = st.threads.get(tid, tid)
        p = st.procs.get(pid)
        if p is None:  # a process whose start was not seen (its parent's line came later)
            p = st.procs[pid] = _Proc(pid, None, self.cwd)
        return p

    def _call(self, tid: int, t: float, name: str, args: str) -> None:
        res = _RESULT.search(args)
        if res is None or res.group(2) is not None or res.group(1).startswith("-"):
            return  # failed (an errno), or no result: nothing happened
        value = res.group(1)
        p = self._proc(tid)
        if name in ("clone", "clone3", "fork", "vfork"):
            ns = _NS_PID.search(args)
            child = int(ns.group(1)) if ns is not None else int(value) if value.isdigit() else 0
            if child <= 0:
                return
            st = self.state
            if "CLONE_THREAD" in args:
                st.threads[child] = p.pid
                return
            st.threads.pop(child, None)  # (an id an ended thread had)
            seen = st.procs.get(child)
            if seen is None:
                st.procs[child] = _Proc(child, p.pid, p.cwd, owner=p.owner)
                return
            # A child seen before its parent's clone returned (vfork, posix_spawn: it ran first)
            seen.parent = p.pid
            if seen.own and seen.owner is not None and seen.owner.get("_up") is None:
                seen.owner["_up"] = p.owner
                seen.owner["parent"] = p.owner.get("pid") if p.owner is not None else None
            elif not seen.own:
                seen.owner = p.owner
        elif name in ("execve", "execveat"):
            self._exec(p, t, args)
        elif name == "chdir":
            s = _strings(args)
            if s:
                p.cwd = os.path.normpath(os.path.join(p.cwd, s[0][0]))
        elif name == "write":
            self._wrote(p, args)
        else:
            self._file(p, name, args)

    def _exec(self, p: _Proc, t: float, args: str) -> None:
        words = _strings(args.split("], ", 1)[0])
        argv: list[str] = []
        cut_words: list[int] = []  # (the words a cap cut: the writer masks a key's piece there)
        size = 0
        for i, (w, cut) in enumerate(words[1 : 1 + WORDS]):
            argv.append(w[: max(0, ARGV_CHARS - size)])
            if cut or len(argv[-1]) < len(w):
                cut_words.append(i)
            size += len(w)
        if p.own and p.owner is not None:
            p.owner["then"] = argv  # the program the same process ran next (exec)
            if cut_words:
                p.owner["then_cut_words"] = cut_words
            return
        st = self.state
        if st.recorded >= PROCESSES:
            st.dropped += 1
            return
        st.recorded += 1
        parent = p.owner
        p.owner = {
            "type": "process",
            "pid": p.pid,
            "parent": parent.get("pid") if parent is not None else None,
            "argv": argv,
            "cut": any(c for _w, c in words) or size > ARGV_CHARS or len(words) > WORDS + 1,
            "cwd": p.cwd,
            "started": t,
            "ended": None,
            "exit": None,
            "signal": None,
            "stdout": "",
            "stderr": "",
            "stdout_bytes": 0,
            "stderr_bytes": 0,
            "files": [],
            "_up": parent,
        }
        if cut_words:
            p.owner["cut_words"] = cut_words
        if not self.full:
            p.owner["output"] = False
        if p.pid == st.root:
            p.owner["agent"] = True
        p.own = True

    def _up(self, p: _Proc) -> list[dict[str, Any]]:
        """The records a process's writes count in: its own program's and every program above."""
        out: list[dict[str, Any]] = []
        rec = p.owner
        while rec is not None and len(out) < 64:
            out.append(rec)
            rec = rec.get("_up")
        return out

    def _wrote(self, p: _Proc, args: str) -> None:
        fd = args.split(",", 1)[0].strip()
        if fd not in ("1", "2"):
            return
        res = _RESULT.search(args)
        n = int(res.group(1)) if res is not None and res.group(1).isdigit() else 0
        s = _strings(args)
        data = s[0][0] if s else ""
        key = "stdout" if fd == "1" else "stderr"
        stream = 1 if fd == "1" else 2
        for rec in self._up(p):
            rec[key + "_bytes"] += n
            have = rec[key]
            if len(have) < HEAD:
                rec[key] = have + data[: HEAD - len(have)]
            if data:
                _order(rec, stream, len(rec[key]))

    def _file(self, p: _Proc, name: str, args: str) -> None:
        s = _strings(args)
        if not s:
            return
        if name in ("open", "openat", "creat"):
            if name != "creat" and not re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", args):
                return
            if s[0][0].startswith(("/dev/", "/proc/")):
                return
            ops = [("write", s[0][0])]
        elif name.startswith("rename"):
            if len(s) < 2:
                return
            ops = [("remove", s[0][0]), ("write", s[1][0])]
        else:
            ops = [("remove", s[0][0])]
        for op, path in ops:
            where = os.path.normpath(os.path.join(p.cwd, path))
            for rec in self._up(p):
                files = rec["files"]
                entry = [op, where]
                if len(files) < FILES and entry not in files:
                    files.append(entry)
                elif len(files) >= FILES:
                    rec["files_cut"] = True

    def _ended(self, tid: int, t: float, rest: str) -> None:
        st = self.state
        if tid in st.threads:  # a thread ended, its process goes on (the kernel says the
            del st.threads[tid]  # leader's end once every thread of it has ended)
            return
        pid = tid
        p = st.procs.pop(pid, None)
        if p is None:
            return
        m, k = _EXITED.match(rest), _KILLED.match(rest)
        if pid == st.root:
            self.root_status = (
                int(m.group(1)) if m is not None else 128 + _signum(k.group(1)) if k else None
            )
            if self.on_root_end is not None:
                self.on_root_end()
        rec = p.owner if p.own else None
        if rec is None:
            return
        rec["ended"] = t
        if m is not None:
            rec["exit"] = int(m.group(1))
        elif k is not None:
            rec["signal"] = k.group(1)
        self._emit(rec)

    def _emit(self, rec: dict[str, Any]) -> None:
        out = {k: v for k, v in rec.items() if not k.startswith("_")}
        if "order" in out:  # (a child still running may add to its parents' runs)
            out["order"] = [list(r) for r in out["order"]]
        try:
            self.emit(out)
        except Exception:
            pass  # the recorder is stopping: the record is lost, the agent goes on

    def _end_all(self) -> None:
        """The end of the trace: a process still open (strace gone first) is said without an
        end; then one ``note`` record with the counts."""
        st = self.state
        for p in list(st.procs.values()):
            if p.own and p.owner is not None:
                self._emit(p.owner)
        st.procs.clear()
        try:
            self.emit(
                {
                    "type": "note",
                    "note": "processes",
                    "tracer": "strace",
                    "traced": "full" if self.full else "processes",
                    "recorded": st.recorded,
                    "dropped": st.dropped,
                }
            )
        except Exception:
            pass


def _order(rec: dict[str, Any], stream: int, end: int) -> None:
    """The order of a record's writes across its stdout and stderr (``order``: runs of
    ``[stream, end]``, each run the kept text of that stream up to ``end`` from where its last run
    ended: offsets into ``stdout``/``stderr``, no copy), up to :data:`ORDER` runs; a write past
    them, or past the kept start of its stream, sets ``order_cut``."""
    runs = rec.setdefault("order", [])
    if runs and runs[-1][0] == stream:
        if end > runs[-1][1]:
            runs[-1][1] = end
        else:
            rec["order_cut"] = True  # (nothing of this write kept)
    elif len(runs) < ORDER and end > max((e for s, e in runs if s == stream), default=0):
        runs.append([stream, end])
    else:
        rec["order_cut"] = True


#: Lines read and dropped at once (the frequent ones): a file opened only to be read, a write to
#: a descriptor other than stdout and stderr.
_READ_ONLY = re.compile(rb'^\d+ +[\d.]+ open(?:at)?\([^)]*", O_RDONLY(?!\|O_(?:CREAT|TRUNC))')
_OTHER_WRITE = re.compile(rb"^\d+ +[\d.]+ write\((?![12],)")


def _skipped(raw: bytes) -> bool:
    return bool(_READ_ONLY.match(raw) or _OTHER_WRITE.match(raw))


def _signum(name: str) -> int:
    import signal

    try:
        return int(signal.Signals[name])
    except KeyError:
        return 0
