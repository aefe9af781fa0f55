"""Processes linked to the model's tool calls, and the C check against the results (the rules:
the package's docstring)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ..analysis import Finding
from ..errors import CassetteError
from ..storage import BLOCK, open_regular, shell_line
from ._judge import hidden, judge, short
from ._records import Process, Processes, RunView, ShellCall, file_changes, process

__all__ = ["ShellRun", "link_run", "read_processes", "shell_lines"]

#: Process records read per cassette; model calls considered per run.
_PROCESSES, _CALLS = 20000, 20000
#: Argument keys that carry a command, in the agents' tools (Claude Code ``Bash.command``, Codex
#: ``shell.command`` (argv) / ``exec_command.cmd``, Gemini CLI ``run_shell_command.command``,
#: opencode ``bash.command``).
_KEYS = ("command", "cmd", "script")
#: A shell's flag that takes a script: ``-c``, ``-lc``, ``-ic``, ``/c`` …
_SCRIPT_FLAG = re.compile(r"^-[a-z]*c$")


def read_processes(path: str | Path, at: Sequence[tuple[int, int]] | None = None) -> Processes:
    """The ``process`` records of the looptap cassette at ``path`` (bounded; damage counted):
    the lines at ``at`` (offset and length of each: a reader's index,
    :attr:`~cassettes.storage.RecordIndex.shell`), else those the file holds, a line at a time."""
    out = Processes()
    try:
        with open_regular(path) as f:
            lines = _placed(f, at) if at is not None else _lines(f)
            if lines is None:
                return out  # (most cassettes: none of the tracer's records)
            for raw in lines:
                _add(out, raw)
    except (OSError, CassetteError):
        pass  # the cassette's own reader says what is wrong with the file
    out.processes.sort(key=lambda p: p.started)
    return out


#: How a tracer's record starts (the type first, as the writer writes it): a cassette holding
#: none of these holds no processes and no working tree.
_MARKS = (b'{"type":"process"', b'{"type":"files"')


def _placed(f: BinaryIO, at: Sequence[tuple[int, int]]) -> Iterator[bytes] | None:
    """The lines at ``at``, read one at a time; ``None`` when none starts as a tracer's record
    (their first bytes read first)."""
    head = max(map(len, _MARKS))
    if not any(_read_at(f, offset, head).startswith(_MARKS) for offset, _ in at):
        return None
    return (_read_at(f, offset, length) for offset, length in at)


def _read_at(f: BinaryIO, offset: int, length: int) -> bytes:
    f.seek(offset)
    return f.read(length)


def _lines(f: BinaryIO) -> Iterator[bytes] | None:
    """The file's lines that may be tracer records, a line at a time (after a scan in blocks
    for their mark: ``None`` when it holds none)."""
    keep = max(map(len, _MARKS)) - 1
    tail = b""
    for block in iter(lambda: f.read(BLOCK), b""):
        data = tail + block
        if any(m in data for m in _MARKS):
            break
        tail = data[-keep:]
    else:
        return None
    f.seek(0)
    lines = iter(f)
    next(lines, None)  # the header
    return (raw for raw in lines if raw.startswith(b"{") and shell_line(raw))


def _add(out: Processes, raw: bytes) -> None:
    """One line that may be a tracer record, read into ``out``."""
    try:
        rec = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    if not isinstance(rec, dict):
        return
    if rec.get("type") == "files":
        if rec.get("start") is True and out.start is None:
            out.start = {k: v for k, v in rec.items() if not isinstance(v, dict | list)}
            own = rec.get("own")  # (looptap's outputs the walk left out: a few paths)
            if isinstance(own, list):
                out.start["own"] = [p for p in own[:8] if isinstance(p, str)]
        elif (fc := file_changes(rec)) is not None and len(out.changes) < _PROCESSES:
            out.changes.append(fc)
        return
    if rec.get("type") == "note" and rec.get("note") == "processes":
        out.traced = True
        d = rec.get("dropped")
        out.dropped += d if isinstance(d, int) and not isinstance(d, bool) else 0
        return
    if rec.get("type") != "process":
        return
    if len(out.processes) >= _PROCESSES:
        out.dropped += 1
        return
    p = process(rec)
    if p is None:
        out.malformed += 1
    else:
        out.processes.append(p)


@dataclass
class ShellRun:
    """A run's shell commands: linked to calls, the agent's own, and the findings."""

    traced: bool = False
    calls: list[ShellCall] = field(default_factory=list)
    #: Processes linked to no call (the agent's own, and their children), counted by program.
    own: int = 0
    processes: int = 0
    dropped: int = 0
    malformed: int = 0
    findings: list[Finding] = field(default_factory=list)
    #: The working tree at the start (``files``, ``digest``, ``root`` …), when it was taken.
    start: dict[str, Any] | None = None
    #: What changed in it before each model request: the request's seq (``None``: after the
    #: last), and each change with the calls that made it (:func:`_tree_changes`).
    tree: list[dict[str, Any]] = field(default_factory=list)
    #: Linked commands whose output the cut check could not judge, by why (_judge.py).
    not_judged: dict[str, int] = field(default_factory=dict)
    #: Linked commands that wrote on both streams whose order could not be judged, by why.
    order_not_judged: dict[str, int] = field(default_factory=dict)

    @property
    def linked(self) -> int:
        return sum(1 for c in self.calls if c.process is not None)

    def as_json(self) -> dict[str, Any]:
        return {
            "traced": self.traced,
            "processes": self.processes,
            "calls": [c.as_json() for c in self.calls],
            "linked": self.linked,
            "agent_own": self.own,
            "dropped": self.dropped,
            "malformed": self.malformed,
            "start": self.start,
            "tree": self.tree,
            "cut_not_judged": self.not_judged,
            "order_not_judged": self.order_not_judged,
        }


def _command(arguments: Any) -> tuple[str, tuple[str, ...]] | None:
    """The command a call's arguments carry: its text, and the texts a shell's script holds."""
    if not isinstance(arguments, dict):
        return None
    for k in _KEYS:
        v = arguments.get(k)
        if isinstance(v, str) and v.strip():
            text = v.strip()
            return text, (text, shlex.quote(text))
        if isinstance(v, list) and v and all(isinstance(w, str) for w in v[:64]):
            words = [str(w) for w in v[:64]]
            return " ".join(words), (words[-1].strip(),) if words[-1].strip() else ()
    return None


def _fits(p: Process, texts: tuple[str, ...], argv: tuple[str, ...] | None) -> bool:
    for run in (p.argv, p.then):
        if argv is not None and run == argv:
            return True
        for i in range(1, len(run)):
            if _SCRIPT_FLAG.match(run[i - 1]) and any(t and t in run[i] for t in texts):
                return True
    return False


@dataclass
class _Call:
    call_id: str
    name: str
    command: str
    texts: tuple[str, ...]
    argv: tuple[str, ...] | None
    seq: int
    start: float
    conversation: str | None
    turn: int | None
    end: float | None = None
    result_seq: int | None = None
    result_turn: int | None = None
    result: str | None = None
    error: bool | None = None


def _calls(run: RunView) -> list[_Call]:
    """The model's client tool calls that carry a command, each with its wait and its result."""
    where: dict[int, tuple[str, int]] = {}
    #: Each turn's next turn in its conversation (where a call without an id gets its result).
    after: dict[int, int] = {}
    for c in run.analysis.conversations:
        for i, s in enumerate(c.turns):
            where[s] = (c.id, i)
            if i + 1 < len(c.turns):
                after[s] = c.turns[i + 1]
    calls: dict[str, _Call] = {}
    #: Calls without an id (Gemini's): by the turn whose request sends their results back.
    unnamed: dict[int, list[_Call]] = {}
    for ex, rt in run.pairs:
        if getattr(ex, "tool", False) or ex.seq is None or ex.started is None:
            continue
        req = rt.request
        if req is not None:
            for m in req.messages:
                for part in m.parts:
                    tr = part.tool_result
                    w = calls.get(tr.call_id or "") if tr is not None else None
                    if tr is not None and w is not None and w.end is None and ex.seq > w.seq:
                        w.end, w.result_seq = ex.started, ex.seq
                        w.result_turn = where.get(ex.seq, (None, None))[1]
                        w.result, w.error = tr.content, tr.is_error
            _by_name(unnamed.pop(ex.seq, []), req, ex.seq, ex.started, where)
        resp = rt.response
        for k, tc in enumerate(resp.tool_calls if resp is not None else []):
            key = tc.id or f"#{ex.seq}.{k}"
            if tc.kind != "function" or key in calls or len(calls) >= _CALLS:
                continue
            got = _command(tc.arguments)
            if got is None:
                continue
            raw = tc.arguments.get(next(k for k in _KEYS if k in tc.arguments))
            cid, turn = where.get(ex.seq, (None, None))
            calls[key] = made = _Call(
                key,
                tc.name or "?",
                got[0][:4096],
                got[1],
                tuple(raw) if isinstance(raw, list) else None,
                ex.seq,
                ex.started,
                cid,
                turn,
            )
            if not tc.id and ex.seq in after:
                unnamed.setdefault(after[ex.seq], []).append(made)
    return list(calls.values())


def _by_name(
    waiting: list[_Call],
    req: Any,
    seq: int,
    started: float,
    where: dict[int, tuple[str, int]],
) -> None:
    """Calls without an id get their results from the next turn's request: the tool results of
    its last message that holds any, the k-th of a name for the k-th call of that name."""
    if not waiting:
        return
    last: list[Any] = []
    for m in reversed(req.messages):
        last = [p.tool_result for p in m.parts if p.tool_result is not None]
        if last:
            break
    taken: dict[str, int] = {}
    for w in waiting:
        w.end, w.result_seq, w.result_turn = started, seq, where.get(seq, (None, None))[1]
        named = [tr for tr in last if tr.name == w.name]
        k = taken.get(w.name, 0)
        taken[w.name] = k + 1
        if k < len(named) and len(named) == sum(1 for x in waiting if x.name == w.name):
            w.result, w.error = named[k].content, named[k].is_error


def link_run(run: RunView, found: Processes) -> ShellRun:
    """The run's shell commands linked to its model calls, and ``C.shell_failure_hidden``."""
    out = ShellRun(
        traced=found.traced or bool(found.processes),
        processes=len(found.processes),
        dropped=found.dropped,
        malformed=found.malformed,
    )
    out.start = found.start
    if not found.processes and not found.changes:
        return out
    procs = found.processes
    by_pid = {p.pid: p for p in procs}
    calls = _calls(run)
    fits = {c.call_id: _innermost(c, procs, by_pid) for c in calls}
    taken: dict[int, list[str]] = {}
    for cid, inner in fits.items():
        if len(inner) == 1:
            taken.setdefault(inner[0].pid, []).append(cid)
    linked: set[int] = set()
    for c in calls:
        inner = fits[c.call_id]
        sc = ShellCall(
            c.call_id, c.name, c.command, c.seq, c.conversation, c.turn, c.result_seq, c.result,
            c.error, c.result_turn,
        )  # fmt: skip
        if len(inner) == 1 and len(taken[inner[0].pid]) == 1:
            linked.update(_take(sc, inner[0], procs, by_pid))
        else:
            sc.candidates = len(inner)
        out.calls.append(sc)
    out.own = sum(1 for p in procs if p.pid not in linked and not p.agent)
    out.findings = [w for sc in out.calls if (w := hidden(sc)) is not None]
    judged = judge(run, out.calls, procs, out.findings)  # the cut and E checks (_judge.py)
    out.findings += judged.findings
    out.not_judged = judged.undetermined
    out.order_not_judged = judged.order_undetermined
    out.tree = _tree_changes(run, found, out.calls)
    return out


def _innermost(c: _Call, procs: list[Process], by_pid: dict[int, Process]) -> list[Process]:
    """The processes started while ``c`` awaited that ran its command, none of them above
    another (a wrapper's shell holds the same text: the innermost is the command's)."""
    window = [p for p in procs if c.start <= p.started and (c.end is None or p.started < c.end)]
    hits = [p for p in window if not p.agent and _fits(p, c.texts, c.argv)]
    return [p for p in hits if not any(_under(q, p, by_pid) for q in hits if q is not p)]


def _take(sc: ShellCall, p: Process, procs: list[Process], by_pid: dict[int, Process]) -> set[int]:
    """``p`` linked to ``sc``, with what its tree of processes wrote; the tree's pids."""
    sc.process = p
    tree = [q for q in procs if q is p or _under(q, p, by_pid)]
    sc.children = len(tree) - 1
    seen: dict[tuple[str, str], None] = {}
    for q in tree:
        for f in q.files:
            seen.setdefault(f, None)
    sc.files = tuple(seen)[:64]
    return {q.pid for q in tree}


def _made_by(
    full: str,
    rel: str,
    seq: int | None,
    calls: list[ShellCall],
    named: list[tuple[str, str, int]],
) -> list[str]:
    """The calls that made a change to ``full`` seen at the request ``seq``: the linked commands
    awaiting then that wrote or removed it, else the last call before whose arguments name it."""
    by = [
        sc.call_id
        for sc in calls
        if (seq is None or sc.seq < seq)
        and (sc.result_seq is None or seq is None or sc.result_seq >= seq)
        and any(p == full for _op, p in sc.files)
    ]
    if by:
        return by
    return [
        cid
        for cid, text, s in named
        if (seq is None or s < seq) and (f'"{full}"' in text or f'"{rel}"' in text)
    ][-1:]


def _tree_changes(run: RunView, found: Processes, calls: list[ShellCall]) -> list[dict[str, Any]]:
    """Each scan's changes placed before the model request it was taken at (its start time is
    the request's), each change with the calls that made it: a linked command that wrote or
    removed the path, else a call awaiting then whose arguments name the path (the agent's own
    file tool: an in-process write no command made)."""
    root = str((found.start or {}).get("root") or "")
    starts: dict[float, int] = {}
    for ex, rt in run.pairs:
        if ex.started is not None and ex.seq is not None and rt.request is not None:
            starts.setdefault(round(ex.started, 3), ex.seq)
    named: list[tuple[str, str, int]] = []  # (call id, arguments' text, seq)
    for ex, rt in run.pairs:
        resp = rt.response
        for tc in resp.tool_calls if resp is not None and ex.seq is not None else []:
            if tc.id and isinstance(tc.arguments, dict):
                text = orjson.dumps(tc.arguments).decode(errors="replace")[:20000]
                named.append((tc.id, text, ex.seq or 0))
    out: list[dict[str, Any]] = []
    for fc in found.changes:
        seq = None if fc.last else starts.get(round(fc.at, 3))
        rows = []
        for c in fc.changes:
            full = f"{root}/{c.path}" if root else c.path
            by = _made_by(full, c.path, seq, calls, named)
            rows.append(
                {"path": c.path, "before": c.before, "after": c.after, "size": c.size, "by": by}
                | ({"unkept": c.unkept} if c.unkept else {})
                | ({"unread": c.unread} if c.unread else {})
            )
        out.append({"seq": seq, "at": fc.at, "changes": rows})
    return out


def _under(q: Process, p: Process, by_pid: dict[int, Process]) -> bool:
    """Whether ``q`` is a descendant of ``p`` (walked up at most 256 parents)."""
    up = q.parent
    for _ in range(256):
        if up is None:
            return False
        if up == p.pid:
            return True
        nxt = by_pid.get(up)
        up = nxt.parent if nxt is not None else None
    return False


def shell_lines(shell: ShellRun) -> list[str]:
    """``looptap show``'s section for the run's shell commands (recorded text made safe for a
    terminal by the caller's printing: each line passes :func:`cassettes.untrusted.clean_line`)."""
    from ..untrusted import clean_line

    if not shell.traced:
        return []
    cmds = len(shell.calls)
    out = [
        "",
        f"shell commands (traced): {shell.linked} of {cmds} shell tool calls linked to their "
        f"process; {shell.own} processes the agent's own; {shell.processes} traced"
        + (f", {shell.dropped} past the bound" if shell.dropped else ""),
    ]
    for c in shell.calls[:200]:
        p = c.process
        if p is None:
            what = (
                f"not linked ({c.candidates} processes fit)" if c.candidates else "no process seen"
            )
        else:
            first = (p.stderr if p.failed and p.stderr.strip() else p.stdout).strip()
            what = p.status + (f": “{short(first, 60)}”" if first else "")
            if c.files:
                what += f"; files {len(c.files)}: " + ", ".join(
                    f"{'−' if op == 'remove' else '+'}{short(path, 60)}" for op, path in c.files[:3]
                )
        out.append(clean_line(f"  #{c.seq} {c.name} {c.call_id}: {short(c.command, 70)} → {what}"))
    if cmds > 200:
        out.append(f"  … and {cmds - 200} more")
    return out
