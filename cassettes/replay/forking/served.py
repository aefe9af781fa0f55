"""The tools' HTTP calls a fork served from the recording, written into its branch (issue 91).

A branch cassette is written by the fork's recorder: its live round trips, the live tool calls
that went through it. The tool calls the replay server answered from the recording (or with an
edited answer, ``tool_answer[SEQ]``) never pass the recorder: the replay server keeps them
(:attr:`cassettes.replay.serving._sender.ServedLog.tool_origins`) and writes them, redacted, into
the fork's private directory; once the recorder has stopped, :func:`merge_served` puts each one
that started once the branch had begun (at or after its first live round trip: the prefix's
belong to the origin's turns, as the prefix's model turns do) into the branch where it started,
so the branch's analysis links it to the live turn's call it served and judges the result sent
back against it, as ``looptap run`` would have. Each is noted ``served from the recording (the
origin's seq N)``. The branch's exchanges are renumbered in that order (a history delta's base
with them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ... import bounds
from ...recording import seal
from ...recording.pipeline import CassetteWriter
from ...storage import (
    check_target,
    dumps_record,
    exchange_to_record,
    read_records,
    staged,
)
from ...wire import Exchange

__all__ = ["SERVED_NOTE", "keep_served", "merge_served"]

#: The note each served copy carries (``{seq}``: the origin's).
SERVED_NOTE = "served from the recording (the origin's seq {seq})"


def keep_served(path: str | Path, served: list[Exchange], origins: dict[int, int]) -> int:
    """The replay server's side: the tool calls of ``served`` answered from the recording
    (``origins``: served seq → the origin's seq), redacted, as a cassette at ``path`` (a file in
    the fork's private directory). Returns how many."""
    kept = 0
    with CassetteWriter(path) as w:
        for ex in served:
            seq = origins.get(ex.seq if ex.seq is not None else -1)
            if seq is None:
                continue
            ex.notes.append(SERVED_NOTE.format(seq=seq))
            w.append(ex)
            kept += 1
    return kept


def _exchange(raw: bytes) -> dict[str, Any] | None:
    """``raw``'s record when it is an exchange record, else ``None`` (a note, a process record,
    a line that does not parse: kept as it is)."""
    try:
        rec = bounds.loads(raw)
    except (orjson.JSONDecodeError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("type") == "exchange" else None


def _started(rec: dict[str, Any] | None) -> float | None:
    v = rec.get("started") if rec is not None else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def merge_served(branch: Path, served_file: Path) -> int:
    """Put the served tool calls of ``served_file`` (:func:`keep_served`'s) that started once the
    branch had begun into ``branch``, each before the first round trip of the branch that started
    after it; returns how many. The branch is rewritten whole (staged, then put in place)."""
    served = [ex for ex in read_records(served_file).exchanges if ex.started is not None]
    if not served:
        return 0
    lines = branch.read_bytes().splitlines(keepends=True)
    if not lines:
        return 0
    body = [(raw, _exchange(raw)) for raw in lines[1:]]
    starts = [t for _, rec in body if (t := _started(rec)) is not None]
    if not starts:
        return 0
    first = min(starts)
    todo = sorted((ex for ex in served if ex.started is not None and ex.started >= first),
                  key=lambda ex: ex.started or 0.0)  # fmt: skip
    if not todo:
        return 0
    merged = len(todo)
    out = [lines[0]]
    renumbered: dict[int, int] = {}
    n = 0

    def put(ex: Exchange) -> None:
        nonlocal n
        ex.seq = n
        out.append(dumps_record(exchange_to_record(ex, n)))
        n += 1

    for raw, rec in body:
        at = _started(rec)
        while rec is not None and at is not None and todo and (todo[0].started or 0.0) < at:
            put(todo.pop(0))
        if rec is None:
            out.append(raw if raw.endswith(b"\n") else raw + b"\n")
            continue
        old = rec.get("seq")
        if isinstance(old, int):
            renumbered[old] = n
        rec["seq"] = n
        n += 1
        req = rec.get("request")
        form = req.get("body") if isinstance(req, dict) else None
        delta = form.get("delta") if isinstance(form, dict) else None
        if isinstance(delta, dict) and isinstance(delta.get("base"), int):
            delta["base"] = renumbered.get(delta["base"], delta["base"])
        out.append(dumps_record(rec))
    for ex in todo:  # (started after the branch's last round trip)
        put(ex)
    with staged(check_target(branch, "the branch cassette", force=True)) as s:
        s.write(seal(b"".join(out)))
    return merged
