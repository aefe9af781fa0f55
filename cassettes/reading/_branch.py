"""A branch (``looptap run --from``) and its origin, for every reader: the one place that says how a
branch's turns are numbered, where its origin is, and whether that origin is still the run it was
forked from (docs/fork.md, "The branch").

**Numbering.** A branch holds only the turns sent live, from the cursor on; its first turn in each
conversation is the origin's turn at the cursor, and it keeps that number everywhere (``show``,
``--turn``, ``show --json``, the inspector, ``diff``, the Fork tab, MCP, HTML): the analysis numbers
a conversation's first turn :func:`first_turn` (:class:`cassettes.analysis._analyser.RunAnalyser`,
``first_index``), read from the branch header's ``meta.origin.turn``: the origin's turn index at the
cursor, which is the same in every conversation that went live (``turn=N``: N in each;
``conversation=ID[:turn=N]`` and ``seq=N``: one conversation). A conversation the branch started on
its own past the cursor (a sub-agent, a side call: its parent turn is in the branch) starts at 0.

**Origin.** The header names the run as typed, absolutely, relative to the branch, and its sha256
as it was at the fork (:func:`origin_fields`). :func:`locate` finds it (as typed, at its absolute
path, relative to the branch, beside the branch by name) and checks the digest: a changed origin is
one line (:func:`changed_line`), never compared turn by turn as if it were the one forked.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .. import bounds
from ..storage import open_regular
from ..untrusted import clean_line

__all__ = [
    "Relation",
    "branch_line",
    "branch_origin",
    "first_turn",
    "fork_notes",
    "locate",
    "origin_fields",
    "origin_in",
    "origin_of",
    "read_entries",
    "relate",
    "tolerated_by_conversation",
    "with_notes",
]


def file_digest(path: str | Path) -> str | None:
    """sha256 of the file's bytes (``None``: it cannot be read, or is not a regular file)."""
    h = hashlib.sha256()
    try:
        if not Path(path).is_file():
            return None
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def origin_fields(run: Path, branch: Path | None) -> dict[str, Any]:
    """What a branch header keeps of its origin besides the name typed: the absolute path, the
    path relative to the branch's folder, and the sha256 of its bytes now (at the fork)."""
    out: dict[str, Any] = {"path": str(Path(os.path.abspath(run)))}
    if branch is not None:
        try:
            out["relative"] = os.path.relpath(
                os.path.abspath(run), os.path.dirname(os.path.abspath(branch))
            )
        except ValueError:  # another drive (Windows)
            pass
    out["sha256"] = file_digest(run)
    return out


def origin_in(header: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``meta.origin`` of a cassette header (``None``: not a branch)."""
    meta = header.get("meta") if isinstance(header, dict) else None
    origin = meta.get("origin") if isinstance(meta, dict) else None
    return origin if isinstance(origin, dict) else None


def first_turn(origin: dict[str, Any] | None) -> int:
    """The number of a branch's first turn in each conversation that continues one of its origin's
    (0 for a run that is not a branch). Branches written before ``meta.origin.turn`` existed: the
    cursor's ``turn=`` (a ``seq=`` cursor's turn is not known without the origin: 0)."""
    if origin is None:
        return 0
    turn = origin.get("turn")
    if isinstance(turn, int) and not isinstance(turn, bool) and 0 <= turn < 1 << 31:
        return turn
    cursor = origin.get("cursor")
    t = cursor.get("turn") if isinstance(cursor, dict) else None
    return t if isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 1 << 31 else 0


def _cursor_text(origin: dict[str, Any]) -> str:
    cursor = origin.get("cursor")
    text = cursor.get("text") if isinstance(cursor, dict) else None
    return str(text) if text else "?"


def branch_line(origin: dict[str, Any]) -> str:
    """``branch of run.jsonl at turn=2 (model gpt-4o-mini; edited tool_result[call_1])``: what a
    reader says first of a branch (recorded text: the caller cleans it)."""
    said = []
    if isinstance(origin.get("model"), str):
        said.append(f"model {origin['model']}")
    edits = [str(e) for e in origin.get("edits") or [] if isinstance(e, str)]
    if edits:
        said.append(
            "edited "
            + ", ".join(edits[:5])
            + (f", … {len(edits) - 5} more" if len(edits) > 5 else "")
        )
    more = f" ({'; '.join(said)})" if said else ""
    return (
        f"branch of {origin.get('run') or '?'} at {_cursor_text(origin)}{more}: its turns keep the "
        f"origin's numbers, the first live one is turn {first_turn(origin)}"
    )


def changed_line(origin: dict[str, Any], found: Path, digest: str | None) -> str:
    """The one line a reader gives for an origin that is not the run the branch was forked from."""
    was = str(origin.get("sha256") or "")[:12]
    now = (digest or "unreadable")[:12]
    return (
        f"the origin {found} changed since the fork (digest {was}… at the fork, {now}… now): the "
        "prefix cannot be compared"
    )


@dataclass
class Located:
    """Where a branch's origin is: ``path`` (``None``: not found), and ``changed`` (the line saying
    the file found is not the run forked, or ``None``)."""

    origin: dict[str, Any]
    path: Path | None
    changed: str | None = None

    @property
    def usable(self) -> bool:
        return self.path is not None and self.changed is None


def _candidates(branch: Path, origin: dict[str, Any]) -> list[Path]:
    name = str(origin.get("run") or "")
    out: list[Path] = []
    if name:
        out.append(Path(name))
    for key in ("path", "relative"):
        v = origin.get(key)
        if isinstance(v, str) and v:
            out.append(Path(v) if key == "path" else branch.parent / v)
    if name:
        out += [branch.parent / name, branch.parent / Path(name).name]
    return out


def locate(
    branch: str | Path,
    origin: dict[str, Any],
    run: str | Path | None = None,
    allowed: Callable[[Path], bool] | None = None,
) -> Located:
    """Find the origin of ``branch`` (or take ``run``, the file the user named as the origin) and
    check it against the digest the branch keeps. Among the places looked at, the first file
    whose digest is the one kept wins; when only other files are there, the first of them is
    returned with the line saying it changed. A branch without a digest (written before it was
    kept) takes the first file found, unchecked. ``allowed``: the places a reader may look (the
    MCP server: under its roots); others are passed over."""
    b = Path(branch)
    want = origin.get("sha256") if isinstance(origin.get("sha256"), str) else None
    seen: set[Path] = set()
    first: tuple[Path, str | None] | None = None
    for p in [Path(run)] if run is not None else _candidates(b, origin):
        try:
            if not p.is_file():
                continue
            real = p.resolve()
            if real == b.resolve() or real in seen or (allowed is not None and not allowed(real)):
                continue
        except OSError:
            continue
        seen.add(real)
        if want is None:
            return Located(origin, p)
        digest = file_digest(p)
        if digest == want:
            return Located(origin, p)
        if first is None:
            first = (p, digest)
    if first is None:
        return Located(origin, None)
    return Located(origin, first[0], changed_line(origin, first[0], first[1]))


@dataclass
class Relation:
    """Two runs named to ``diff``, one the other's branch: ``origin``/``branch`` (the paths, in that
    order whichever order they were named in; ``swapped``: the branch was named first), the
    branch's ``meta.origin`` and ``changed`` (the origin file is not the run forked: one line)."""

    origin: Path
    branch: Path
    meta: dict[str, Any]
    swapped: bool
    changed: str | None = None


def _names(path: Path, meta: dict[str, Any]) -> bool:
    """Whether ``meta`` (a branch's origin) names ``path``: by its absolute path, or (when nothing
    is at that path any more: the files were moved or sent on) by its file name."""
    kept = meta.get("path")
    if isinstance(kept, str) and kept:
        try:
            if Path(kept).resolve() == path.resolve():
                return True
            if Path(kept).is_file():
                return False  # the origin is still where it was: this is another file of that name
        except OSError:
            pass
    return Path(str(meta.get("run") or "")).name == path.name


def relate(path_a: str | Path, path_b: str | Path) -> Relation | None:
    """Whether one of two runs is the other's branch, in either order: B (or A) names the other as
    its origin, by the digest kept at the fork (a renamed origin is still found) or, for a branch
    without one, by name. A file the branch names whose digest is not the one kept is the origin
    changed since the fork (:attr:`Relation.changed`). ``None``: neither is the other's branch."""
    a, b = Path(path_a), Path(path_b)
    try:
        # a FIFO, a device, a folder: nothing to read here (the reader says what it is)
        if not (a.is_file() and b.is_file()):
            return None
    except OSError:
        return None
    for origin, branch, swapped in ((a, b, False), (b, a, True)):
        meta = origin_of(branch)
        if meta is None:
            continue
        want = meta.get("sha256") if isinstance(meta.get("sha256"), str) else None
        if want is None:
            if _names(origin, meta):
                return Relation(origin, branch, meta, swapped)
            continue
        digest = file_digest(origin)
        if digest == want:
            return Relation(origin, branch, meta, swapped)
        if _names(origin, meta):
            return Relation(origin, branch, meta, swapped, changed_line(meta, origin, digest))
    return None


def origin_of(path: str | Path) -> dict[str, Any] | None:
    """The origin a branch cassette names in its header (``meta.origin``), or ``None`` (not a
    branch, or not a looptap cassette: older files have no such field). Only the first line is
    read (at most 1 MiB)."""
    try:  # never blocks on a FIFO, never reads a device: a regular file's first line only
        with open_regular(path) as f:
            first = f.readline(1 << 20)
        doc = bounds.loads(first)
    except (OSError, ValueError, orjson.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("type") != "header":
        return None
    return origin_in(doc)


#: Bytes at the end of a branch read for the fork's note record (written last, after the recorder
#: stopped).
NOTES_TAIL = 16 << 20


def fork_notes(path: str | Path) -> dict[str, Any]:
    """What a fork appended to its branch after the run (``looptap run --from``: a ``note`` record,
    :meth:`cassettes.replay.forking.fork.ForkReplay.finish`): ``tolerated``, per recorded turn of
    the prefix, what was tolerated there (:mod:`cassettes.matching`), and
    ``starts``, where each conversation went live that the cursor did not place (an
    ``@divergence`` fork's every one; a conversation a change past the cursor reached):
    conversation → [seq, turn]; ``failed``, why the fork failed, one line each (a request before
    the cursor that matched no recorded turn, an edit never applied); ``lived``, each request
    answered in order, the origin's seq served or ``None`` (sent live): the run as the agent
    lived it (``None``: not noted, a branch from before it); ``stopped``, the fork stopped at its
    limit of live requests (:func:`_stopped`; ``None``: it did not); ``verified``, the
    ``--verify`` command's outcome in the branch's tree (:func:`_verified`). Empty when the
    branch has none.
    Only the file's last :data:`NOTES_TAIL` bytes are read."""
    out: dict[str, Any] = {
        "tolerated": [],
        "starts": {},
        "failed": [],
        "lived": None,
        "stopped": None,
        "verified": None,
    }
    try:  # a regular file only (open_regular): never blocks on a FIFO, never reads a device
        with open_regular(path) as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - NOTES_TAIL))
            tail = f.read(NOTES_TAIL)
    except OSError:
        return out
    for line in tail.splitlines():
        if not line.startswith(b'{"type":"note"'):
            continue
        try:
            doc = bounds.loads(line)
        except (ValueError, orjson.JSONDecodeError):
            continue
        if not isinstance(doc, dict) or doc.get("note") != "fork":
            continue
        out["tolerated"] += read_entries(doc.get("tolerated"))
        starts = doc.get("starts")
        if isinstance(starts, dict):
            out["starts"].update(
                {str(k): v for k, v in starts.items() if isinstance(v, list) and len(v) == 2}
            )
        failed = doc.get("failed")
        if isinstance(failed, list):
            out["failed"] += [clean_line(x)[:2000] for x in failed[:20] if isinstance(x, str)]
        out["lived"] = _lived(doc.get("lived"))
        out["stopped"] = _stopped(doc.get("stopped")) or out["stopped"]
        out["verified"] = _verified(doc.get("verified")) or out["verified"]
    return out


def _verified(value: Any) -> dict[str, Any] | None:
    """A fork note's ``verified``: what ``looptap run --from … --verify CMD`` found when it ran CMD
    in the branch's tree after the agent ended: ``exit`` (its status; ``None`` when it timed out
    or could not start), ``timed_out``, ``seconds`` (its limit, when it timed out) and ``error``
    (why it could not start); ``None`` when the branch was not verified."""
    if not isinstance(value, dict):
        return None
    code, limit, error = value.get("exit"), value.get("seconds"), value.get("error")
    return {
        "exit": code if type(code) is int else None,
        "timed_out": value.get("timed_out") is True,
        "seconds": limit if isinstance(limit, (int, float)) else None,
        "error": clean_line(error)[:300] if isinstance(error, str) else None,
    }


def _stopped(value: Any) -> dict[str, Any] | None:
    """A fork note's ``stopped``: the fork stopped at its limit of live requests (``looptap run
    --from … --max-requests``, :mod:`cassettes.replay.forking.limit`): ``limit``, ``sent``,
    ``refused`` (requests not sent past it) and the ``first`` of them; ``None`` when it did not."""
    if not isinstance(value, dict) or type(value.get("refused")) is not int:
        return None
    most, sent, first = value.get("limit"), value.get("sent"), value.get("first")
    return {
        "limit": most if type(most) is int else None,
        "sent": sent if type(sent) is int else None,
        "refused": value["refused"],
        "first": clean_line(first)[:200] if isinstance(first, str) else None,
    }


def _lived(value: Any) -> list[int | None] | None:
    """A fork note's ``lived``: per request the fork answered, in order, the origin's seq it served
    (an int) or ``None`` (sent live, in the branch); ``None`` when not noted or not read."""
    if not isinstance(value, list):
        return None
    ok = all(x is None or (type(x) is int and x >= 0) for x in value)
    return list(value) if ok else None


def with_notes(path: str | Path, origin: dict[str, Any]) -> dict[str, Any]:
    """``origin`` (a branch's ``meta.origin``) with what the fork noted after the run: where each
    conversation of an ``@divergence`` fork went live (``starts``, ``turns``, ``turn``, ``seq``:
    not known when the header was written), and ``tolerated``."""
    notes = fork_notes(path)
    out = dict(origin, tolerated=notes["tolerated"])
    given, named = origin.get("starts"), origin.get("turns")
    placed: dict[str, Any] = given if isinstance(given, dict) else {}
    # the conversations the cursor did not place: each where it went live (a change past the
    # cursor reached it), added to those it did
    starts = {c: v for c, v in notes["starts"].items() if isinstance(v[0], int) and c not in placed}
    if starts:
        known: dict[str, Any] = named if isinstance(named, dict) else {}
        out["starts"] = {**placed, **{c: v[0] for c, v in starts.items()}}
        out["turns"] = {**known, **{c: v[1] for c, v in starts.items()}}
        if not placed:  # @divergence: the turn a view numbers the branch's first one from
            out["seq"] = min(v[0] for v in starts.values())
            turns = [v[1] for v in starts.values() if isinstance(v[1], int)]
            if turns:
                out["turn"] = min(turns)
    return out


def tolerated_by_conversation(
    notes: list[dict[str, Any]], conversations: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """The prefix's tolerated differences (:func:`fork_notes`' ``tolerated``, by the origin's
    conversation) for each conversation of the branch that continues one: the origin's
    conversation of the same id, or, when each has one conversation, that one."""
    by: dict[str, list[dict[str, Any]]] = {}
    for t in notes:
        by.setdefault(str(t.get("conversation")), []).append(t)
    if len(by) == 1 and len(conversations) == 1:
        return {conversations[0]: next(iter(by.values()))}
    return {c: by[c] for c in conversations if c in by}


def branch_origin(
    header: dict[str, Any] | None, path: str | Path | None = None
) -> dict[str, Any] | None:
    """:func:`origin_in`, and for an ``@divergence`` fork's branch at ``path`` what its fork noted
    after the run (where each conversation went live: :func:`with_notes`), so its turns keep the
    origin's numbers as every branch's do."""
    origin = origin_in(header)
    cursor = origin.get("cursor") if origin is not None else None
    if (
        origin is None
        or path is None
        or not isinstance(cursor, dict)
        or not cursor.get("divergence")
    ):
        return origin
    return with_notes(path, origin)


#: Turns, and entries per turn, read back from a fork's note record (a bounded walk).
NOTED_TURNS = 10_000
NOTED_ENTRIES = 1_000


def read_entries(value: Any) -> list[dict[str, Any]]:
    """What a fork noted as tolerated, per recorded turn (:mod:`cassettes.matching`
    writes it), read back from a file (a branch's note record): only well-formed entries,
    bounded."""
    out: list[dict[str, Any]] = []
    if not isinstance(value, list):
        return out
    for t in value[:NOTED_TURNS]:
        if not isinstance(t, dict) or not isinstance(t.get("tolerated"), list):
            continue
        entries = [
            {k: str(e.get(k, "")) for k in ("path", "by", "recorded", "live")}
            | ({"times": e["times"]} if type(e.get("times")) is int and e["times"] > 1 else {})
            for e in t["tolerated"][:NOTED_ENTRIES]
            if isinstance(e, dict)
        ]
        conv = t.get("conversation")
        turn, seq = t.get("turn"), t.get("seq")
        out.append(
            {
                "conversation": str(conv) if conv is not None else None,
                "turn": turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
                "seq": seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
                "tolerated": entries,
            }
        )
    return out
