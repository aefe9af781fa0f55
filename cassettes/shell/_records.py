"""The ``process`` records of a cassette, checked and bounded (a record that is not of the form
proxy/shell_trace.py writes is skipped and counted, never raised)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..analysis import RunAnalysis
    from ..parsing import RoundTrip
    from ..wire import Exchange

#: Characters kept of an argv word, of an output's start, of a path; words and files per process.
WORD, HEAD, PATH, WORDS, FILES = 131072, 2048, 4096, 256, 64
#: Runs of the order of a process's writes across stdout and stderr (proxy/shell_trace.py's).
ORDER = 64


@dataclass(frozen=True)
class Process:
    """One program the agent's process tree ran."""

    pid: int
    parent: int | None
    argv: tuple[str, ...]
    cwd: str
    started: float
    ended: float | None
    exit: int | None
    signal: str | None
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    #: (``write`` or ``remove``, absolute path) of each file it or its children opened for
    #: writing, renamed or removed.
    files: tuple[tuple[str, str], ...]
    #: The program the same process ran next (``exec``), when it did.
    then: tuple[str, ...] = ()
    #: The agent itself (the command ``looptap run`` ran).
    agent: bool = False
    cut: bool = False
    files_cut: bool = False
    #: Whether its output and files were traced (``--shell-trace``); ``False``: the default
    #: tracer saw its program and end only (``stdout``, ``stderr``, ``files`` are then empty).
    output: bool = True
    #: The order of its writes across the kept ``stdout`` and ``stderr``: runs of (stream 1 or
    #: 2, end), each the stream's kept text from its previous run's end to ``end``; ``order_cut``
    #: when writes were past the runs kept, or the record's runs did not fit its texts.
    order: tuple[tuple[int, int], ...] = ()
    order_cut: bool = False

    def pieces(self) -> list[tuple[int, str]] | None:
        """The kept output as written, piece by piece ``(stream, text)`` in the order of the
        writes; ``None`` when the order is not wholly known (cut, or no runs)."""
        if self.order_cut or not self.order:
            return None
        texts, at, out = {1: self.stdout, 2: self.stderr}, {1: 0, 2: 0}, []
        for stream, end in self.order:
            out.append((stream, texts[stream][at[stream] : end]))
            at[stream] = end
        return out if at == {1: len(self.stdout), 2: len(self.stderr)} else None

    @property
    def failed(self) -> bool:
        return (self.exit is not None and self.exit != 0) or self.signal is not None

    @property
    def status(self) -> str:
        if self.signal is not None:
            return f"killed by {self.signal}"
        if self.exit is not None:
            return f"exit {self.exit}"
        return "end not seen"


def _str(v: Any, limit: int) -> str | None:
    return v[:limit] if isinstance(v, str) else None


def _words(v: Any) -> tuple[str, ...] | None:
    if not isinstance(v, list):
        return None
    out = [w[:WORD] for w in v[:WORDS] if isinstance(w, str)]
    return tuple(out) if len(out) == len(v[:WORDS]) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def process(rec: dict[str, Any]) -> Process | None:
    """A ``process`` record as a :class:`Process`, or ``None`` when it is not of that form."""
    argv, pid, started = _words(rec.get("argv")), _int(rec.get("pid")), _num(rec.get("started"))
    if not argv or pid is None or started is None:
        return None
    files: list[tuple[str, str]] = []
    for f in rec.get("files") or [] if isinstance(rec.get("files"), list) else []:
        if (
            isinstance(f, list)
            and len(f) == 2
            and f[0] in ("write", "remove")
            and isinstance(f[1], str)
        ):
            files.append((f[0], f[1][:PATH]))
        if len(files) >= FILES:
            break
    order, order_cut = _order(rec)
    return Process(
        pid=pid,
        parent=_int(rec.get("parent")),
        argv=argv,
        cwd=_str(rec.get("cwd"), PATH) or "",
        started=started,
        ended=_num(rec.get("ended")),
        exit=_int(rec.get("exit")),
        signal=_str(rec.get("signal"), 32),
        stdout=_str(rec.get("stdout"), HEAD) or "",
        stderr=_str(rec.get("stderr"), HEAD) or "",
        stdout_bytes=_int(rec.get("stdout_bytes")) or 0,
        stderr_bytes=_int(rec.get("stderr_bytes")) or 0,
        files=tuple(files),
        then=_words(rec.get("then")) or (),
        agent=rec.get("agent") is True,
        cut=rec.get("cut") is True,
        files_cut=rec.get("files_cut") is True,
        output=rec.get("output") is not False,
        order=order,
        order_cut=order_cut,
    )


def _order(rec: dict[str, Any]) -> tuple[tuple[tuple[int, int], ...], bool]:
    """A record's ``order`` runs, checked (streams 1 and 2, ends rising within each stream and
    within its kept text, at most :data:`ORDER`), and whether it is cut (or not of that form)."""
    v, cut = rec.get("order"), rec.get("order_cut") is True
    if v is None:
        return (), cut
    if not isinstance(v, list) or len(v) > ORDER:
        return (), True
    sizes = {
        1: len(_str(rec.get("stdout"), HEAD) or ""),
        2: len(_str(rec.get("stderr"), HEAD) or ""),
    }
    at = {1: 0, 2: 0}
    out: list[tuple[int, int]] = []
    for r in v:
        if not (isinstance(r, list) and len(r) == 2 and type(r[0]) is int and r[0] in (1, 2)):
            return (), True
        end = _int(r[1])
        if end is None or not at[r[0]] < end <= sizes[r[0]]:
            return (), True
        at[r[0]] = end
        out.append((r[0], end))
    return tuple(out), cut


@dataclass
class Processes:
    """A cassette's processes, and what of its records could not be read."""

    processes: list[Process] = field(default_factory=list)
    #: Records skipped (not of the form), and processes the tracer did not record (its bound).
    malformed: int = 0
    dropped: int = 0
    #: Whether the tracer's closing note was read (its absence: a run whose tracer did not end).
    traced: bool = False
    #: The working tree at the start (its ``files`` record), and each change seen after, in order.
    start: dict[str, Any] | None = None
    changes: list[FileChanges] = field(default_factory=list)


@dataclass(frozen=True)
class FileChange:
    """A file created (``before`` None), changed, or removed (``after`` None): sha256s."""

    path: str
    before: str | None
    after: str | None
    size: int
    #: Why its contents were not kept beside the cassette, when they were not.
    unkept: str | None = None
    #: Why its contents at the start were not read, when they were not (an ignored file of a tree
    #: in git): it was there (``before`` None does not mean created); a fork leaves it as it is.
    unread: str | None = None


@dataclass(frozen=True)
class FileChanges:
    """What changed in the working tree up to a model request (``at``: its start)."""

    at: float
    changes: tuple[FileChange, ...]
    last: bool = False


_SHA = frozenset("0123456789abcdef")


def _sha(v: Any) -> str | None:
    return v if isinstance(v, str) and len(v) == 64 and set(v) <= _SHA else None


def file_changes(rec: dict[str, Any]) -> FileChanges | None:
    """A ``files`` record of changes as :class:`FileChanges`, or ``None`` when not of that form."""
    at = _num(rec.get("at"))
    raw = rec.get("changes")
    if at is None or not isinstance(raw, list):
        return None
    out: list[FileChange] = []
    for c in raw[:20000]:
        if not isinstance(c, dict) or not isinstance(c.get("path"), str):
            continue
        out.append(
            FileChange(
                c["path"][:PATH],
                _sha(c.get("before")),
                _sha(c.get("after")),
                _int(c.get("size")) or 0,
                _str(c.get("unkept"), 200),
                (_str(c.get("unread"), 200) or "not read") if c.get("before") == "unread" else None,
            )
        )
    return FileChanges(at, tuple(out), rec.get("last") is True)


class RunView(Protocol):
    """What linking and judging read of a run (:class:`cassettes.reading.Run` is one): its round
    trips and their analysis. A protocol, so that the shell's records sit below the reading
    that links them (``Run.shell``)."""

    @property
    def pairs(self) -> Iterable[tuple[Exchange, RoundTrip]]: ...

    @property
    def analysis(self) -> RunAnalysis: ...


@dataclass
class ShellCall:
    """A model's tool call that carried a command, and the process that ran it (if linked)."""

    call_id: str
    name: str
    #: The command as the call's arguments carry it (a string, or an argv joined by spaces).
    command: str
    #: The round trip whose answer made the call, and the one that sent its result back.
    seq: int
    conversation: str | None
    turn: int | None
    result_seq: int | None = None
    result: str | None = None
    result_error: bool | None = None
    result_turn: int | None = None
    process: Process | None = None
    #: Processes that fit when it was not linked (ambiguous), else 0.
    candidates: int = 0
    #: Descendants of the linked process (its children's programs), counted.
    children: int = 0
    #: The files the command and its children wrote, renamed or removed.
    files: tuple[tuple[str, str], ...] = ()

    def as_json(self) -> dict[str, Any]:
        p = self.process
        return {
            "call_id": self.call_id,
            "tool": self.name,
            "command": self.command,
            "seq": self.seq,
            "conversation": self.conversation,
            "turn": self.turn,
            "result_seq": self.result_seq,
            "linked": p is not None,
            "candidates": self.candidates,
            "process": None
            if p is None
            else {
                "pid": p.pid,
                "argv": list(p.argv),
                "cwd": p.cwd,
                "started": p.started,
                "ended": p.ended,
                "exit": p.exit,
                "signal": p.signal,
                "stdout": p.stdout,
                "stderr": p.stderr,
                "stdout_bytes": p.stdout_bytes,
                "stderr_bytes": p.stderr_bytes,
                "output": p.output,
                "children": self.children,
            },
            "files": [{"op": op, "path": path} for op, path in self.files],
        }
