"""One run as the fleet's rows (:data:`cassettes.fleet.schema.TABLES`), taken from its ``show
--json`` objects: the same code, so the fleet's numbers are ``show``'s. Pure Python, no DuckDB: it
runs in ``looptap index --jobs`` worker processes, which hand back plain rows.

A run that cannot be read is one ``runs`` row with ``error`` set (and the line the index prints),
never an exception out of here: one bad file never stops an index.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import CassetteError
from ._agent import agent_of, command_text

__all__ = ["STAMP_COLUMNS", "RunRows", "Stamp", "run_rows", "stamp_of", "stat_key"]

#: How much of each end of a file the change check reads.
EDGE = 64 * 1024
_RANK = {"info": 0, "warning": 1, "error": 2}


#: What ``stat`` tells of a file, as git's index keeps it: size, mtime, ctime, inode, device.
StatKey = tuple[int, int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    """The file's :data:`StatKey`: any write changes its ctime, a replacement its inode."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


@dataclass(frozen=True)
class Stamp:
    """What tells a run's rows unchanged: its file's :data:`StatKey` and a digest of its two ends
    and of the agent rules in force (docs/rules.md: they decide its findings)."""

    stat: StatKey
    digest: str

    @property
    def size(self) -> int:
        return self.stat[0]

    @property
    def mtime_ns(self) -> int:
        return self.stat[1]

    def columns(self) -> dict[str, int | str]:
        """The ``runs`` columns that keep it."""
        return dict(zip(STAMP_COLUMNS, (*self.stat, self.digest), strict=True))


#: The ``runs`` columns of a :class:`Stamp`.
STAMP_COLUMNS = ("size", "mtime_ns", "ctime_ns", "inode", "device", "digest")


def stamp_of(path: Path) -> Stamp:
    """The file's :class:`Stamp` (its ``stat`` taken first, then both ends read: a file written
    meanwhile differs from it next time; an ``OSError`` when it cannot be read;
    :class:`~cassettes.analysis._rules.RulesError` when the rules file is wrong)."""

    from ..analysis import active_text  # (here: the questions never load the analysis)

    agent_rules = active_text()
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        h = hashlib.sha256(str(st.st_size).encode())
        if agent_rules:  # (none: the digest runs were indexed with before rules existed)
            h.update(b"\0rules\0" + agent_rules.encode())
        h.update(f.read(EDGE))
        if st.st_size > EDGE:
            f.seek(max(EDGE, st.st_size - EDGE))
            h.update(f.read(EDGE))
    return Stamp(stat_key(st), h.hexdigest())


@dataclass
class RunRows:
    """A run's rows by table, and the line to print when it was skipped."""

    path: str
    stamp: Stamp | None
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    skipped: str | None = None
    round_trips: int = 0


def run_rows(path: str) -> RunRows:
    """``path``'s rows (the stamp is taken before reading: a file written meanwhile is read again
    by the next index). Never raises for the run's content; a run that cannot be read, or that
    failed in the reader, is a ``runs`` row with ``error`` and :attr:`RunRows.skipped` set."""
    p = Path(path)
    try:
        stamp = stamp_of(p)
    except OSError as exc:
        return RunRows(path, None, skipped=f"cannot read: {exc.strerror or exc}")
    base = {"run": path, "day": None, "recorded": None}
    # the directory names the agent until the header is read (a run that cannot be read keeps it)
    base.update(zip(("agent", "agent_source"), agent_of({}, p), strict=True))
    when = datetime.fromtimestamp(stamp.mtime_ns / 1e9, UTC)
    run_row: dict[str, Any] = {**base, **stamp.columns()}
    out = RunRows(path, stamp, {"runs": [run_row]})
    try:
        _read(p, out, run_row, when)
    except (CassetteError, OSError, ValueError, MemoryError) as exc:
        _failed(out, run_row, when, str(exc) or type(exc).__name__)
    except Exception as exc:  # a reader's bug on one run never stops the index
        _failed(out, run_row, when, f"looptap failed on this run ({type(exc).__name__}: {exc})")
    return out


def _failed(out: RunRows, run_row: dict[str, Any], when: datetime, why: str) -> None:
    out.tables = {"runs": [run_row]}
    why = why.removeprefix(f"{out.path}: ")  # the line names the file already
    run_row.update(day=when.date().isoformat(), recorded=when.isoformat(), error=why[:500])
    out.skipped = why.splitlines()[0][:300] if why else "unreadable"


def _read(p: Path, out: RunRows, run_row: dict[str, Any], when: datetime) -> None:
    from ..reading import origin_in, show_objects  # (as open_run, below)

    run = open_run(p, views=True)  # (show_objects' parts: made as the analysis parses)
    try:
        # filed under when its first round trip started: an imported trace's header was made
        # when it was imported, its round trips keep when they ran
        first = _first_start(run)
        if first is not None:
            when = datetime.fromtimestamp(first, UTC)
        elif run.epoch is not None:
            when = datetime.fromtimestamp(run.epoch, UTC)
        day = when.date().isoformat()
        meta = _dict(run.header.get("meta"))
        run_row.update(zip(("agent", "agent_source"), agent_of(meta, p), strict=True))
        origin = origin_in(run.header)
        client = _client(run)
        run_row.update(
            day=day,
            recorded=when.isoformat(),
            format=run.kind,
            command=command_text(meta.get("command")),
            client=client,
            branch_origin=_str(origin.get("path") or origin.get("run")) if origin else None,
            problems=len(run.problems),
        )
        turns: list[dict[str, Any]] = []
        findings: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        convs: dict[str, dict[str, Any]] = {}
        n = 0
        last: dict[str, Any] | None = None
        for v in show_objects(run, p):
            n += 1
            last = v
            key = {"run": out.path, "day": day, "seq": v["seq"]}
            for i, tc in enumerate(v.get("tool_calls") or []):
                calls.append(_call(key, i, tc))
            if v.get("conversation") is None:
                continue
            turns.append(_turn(key, v))
            for i, f in enumerate(v.get("findings") or []):
                findings.append(_finding(out.path, day, i, f))
            c = convs.setdefault(
                v["conversation"],
                {
                    "run": out.path,
                    "day": day,
                    "conversation": v["conversation"],
                    "kind": v.get("conversation_kind"),
                    "parent_seq": v.get("conversation_parent_seq"),
                    "turns": 0,
                    "first_seq": v["seq"],
                },
            )
            c["turns"] += 1
        run_row["round_trips"] = out.round_trips = n
        run_row["ended_on"] = _ended_on(last)
        out.tables.update(
            conversations=list(convs.values()), turns=turns, findings=findings, tool_calls=calls
        )
    finally:
        run.close()


def open_run(path: Path, **kw: Any) -> Any:
    """:func:`cassettes.reading.open_run`, loaded when a run is read: the questions and
    ``query``, which read no run, never load the reader and the analysis (0.8 s of start-up)."""
    from ..reading import open_run as reader

    return reader(path, **kw)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any, limit: int = 300) -> str | None:
    return str(value)[:limit] if isinstance(value, str | int | float) and value != "" else None


def _first_start(run: Any) -> float | None:
    """When the run's first round trip started, if it was recorded (an import's round trips
    without times: none)."""
    for ex in run.exchanges:
        if ex.started is not None:
            return float(ex.started)
    return None


def _ended_on(v: dict[str, Any] | None) -> str | None:
    """The API error the run's last round trip (its ``show --json`` object) ended on: an HTTP
    error status, an error event in a stream, a transport error; ``None`` for an answer."""
    if v is None:
        return None
    if v.get("transport_error"):
        return "transport error"
    err = v.get("error") if isinstance(v.get("error"), dict) else None
    status = v.get("status")
    if isinstance(status, int) and status >= 400:
        return f"HTTP {status}"
    if err is not None:
        return "error event in the stream" if err.get("in_stream") else "API error"
    return None


def _client(run: Any) -> str | None:
    for ex in run.exchanges:
        return _str(ex.request_header("user-agent"), 120)
    return None


def _turn(key: dict[str, Any], v: dict[str, Any]) -> dict[str, Any]:
    tok = v.get("tokens") or {}
    timing = v.get("timing") or {}
    req = v.get("request") or {}
    fs = v.get("findings") or []
    layers = {f.get("layer") for f in fs}
    worst = max((f.get("severity") for f in fs), key=lambda s: _RANK.get(s, -1), default=None)
    return key | {
        "conversation": v.get("conversation"),
        "turn": v.get("turn"),
        "family": v.get("family"),
        "host": v.get("host"),
        "model_requested": v.get("model_requested"),
        "model_served": v.get("model_served"),
        "status": v.get("status"),
        "finish": (v.get("finish_reason") or {}).get("normalised"),
        "finish_raw": (v.get("finish_reason") or {}).get("raw"),
        "complete": v.get("complete"),
        "read": v.get("read"),
        "layers": "".join(x for x in "EAC" if x in layers) or None,
        "worst": worst,
        "input_tokens": tok.get("input"),
        "output_tokens": tok.get("output"),
        "cache_read_tokens": tok.get("cache_read"),
        "cache_write_tokens": tok.get("cache_write"),
        "reasoning_tokens": tok.get("reasoning"),
        "token_source": tok.get("source"),
        "cost": tok.get("cost"),
        "cost_estimated": tok.get("price_estimated"),
        "cumulative_cost": tok.get("cumulative_cost"),
        "cumulative_estimated": tok.get("cumulative_estimated"),
        "ttfb": timing.get("ttfb"),
        "ttft": timing.get("ttft"),
        "duration": timing.get("duration"),
        "messages": req.get("messages"),
        "tools_offered": len(req.get("tools") or []) if req else None,
        "tool_calls": len(v.get("tool_calls") or []),
    }


def _finding(run: str, day: str, i: int, f: dict[str, Any]) -> dict[str, Any]:
    details = _dict(f.get("details"))
    return {
        "run": run,
        "day": day,
        "code": f.get("code"),
        "layer": f.get("layer"),
        "severity": f.get("severity"),
        "seq": f.get("seq"),
        "conversation": f.get("conversation"),
        "turn": f.get("turn"),
        "position": i,
        "caused_by": _str(details.get("caused_by")),
        "message": f.get("message"),
    }


def _call(key: dict[str, Any], i: int, tc: dict[str, Any]) -> dict[str, Any]:
    raw = tc.get("arguments_raw")
    return key | {
        "position": i,
        "id": tc.get("id"),
        "name": tc.get("name"),
        "ran_by": tc.get("ran_by"),
        "arguments_bytes": len(raw.encode()) if isinstance(raw, str) else None,
        "arguments_error": tc.get("arguments_error"),
        **_shell(tc.get("shell")),
    }


def _shell(sh: Any) -> dict[str, Any]:
    """A tool call's traced shell command (``show --json``'s ``tool_calls[].shell``, cleaned by
    the core) as the table's columns; nulls for a call no process was linked to."""
    if not isinstance(sh, dict) or not sh.get("linked"):
        return {}
    files = [f for f in sh.get("files") or [] if isinstance(f, dict)]
    return {
        "shell_command": sh.get("command"),
        "shell_exit": sh.get("exit"),
        "shell_signal": sh.get("signal"),
        "shell_stdout": sh.get("stdout"),
        "shell_stderr": sh.get("stderr"),
        "shell_written": [f.get("path") for f in files if f.get("op") == "write"],
        "shell_removed": [f.get("path") for f in files if f.get("op") == "remove"],
    }


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
