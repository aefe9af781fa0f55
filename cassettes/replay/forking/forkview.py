"""A branch beside its origin, for the inspector's Fork tab (docs/inspector.md): per conversation,
the origin's turns before the cursor (served from it), the fork point, then each turn past the
cursor as the origin had it and as the branch has it, the items a what-if edit rewrote and the
divergences :func:`cassettes.replay.forking.rundiff.branch_diff` finds there, as ``looptap diff``
does.

Computed here (the core); the inspector only draws :class:`ForkComparison`. The origin is found from
the branch's header (``meta.origin.run``): as written, then beside the branch; when it is in neither
place the view says so and lists the branch's turns alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...hints import count
from ...matching import entry_line
from ...reading import locate, open_run, origin_of
from ..live.edits import edit_notes
from .rundiff import branch_diff, comparing_files

__all__ = ["ForkComparison", "ForkRow", "fork_view"]

#: Turns listed per conversation before the cursor (the older ones are counted).
PREFIX_ROWS = 50
#: Turns past the cursor listed per conversation.
PAST_ROWS = 500


@dataclass
class ForkRow:
    """One turn: ``part`` is ``prefix`` (before the cursor: the origin's, served from it),
    ``fork`` (the fork point's line), or ``past`` (at or past the cursor: both sides)."""

    conversation: str
    part: str
    turn: int | None = None
    origin_seq: int | None = None
    branch_seq: int | None = None
    #: One line each: what the model emitted at this turn (tool calls, text), the finish.
    origin: str | None = None
    branch: str | None = None
    #: The items a what-if edit rewrote in the branch's request (``tool_result[ID] at
    #: messages[3]``).
    edited: list[str] = field(default_factory=list)
    #: What branch_diff says differs at this turn (``C: …``, ``E: …``).
    divergences: list[str] = field(default_factory=list)
    #: What was tolerated at this turn (the fork's prefix mode), one line each:
    #: ``messages[3].content: recorded "…", live "…" (by tool_result)``
    #: (:mod:`cassettes.matching`).
    tolerated: list[str] = field(default_factory=list)


@dataclass
class ForkComparison:
    branch: str
    #: The origin as the branch's header names it, and where it was found (``None``: not found).
    origin_name: str
    origin_path: str | None
    cursor: str
    model: str | None
    edits: list[str]
    rows: list[ForkRow]
    #: Lines that say how the two were lined up, or why they could not be.
    notes: list[str]


def _emitted(turn: Any) -> str:
    """What a turn's model emitted, in one line (recorded text: the caller cleans it)."""
    if turn is None:
        return "-"
    e = turn.e
    bits = [f"{c.name}({c.arguments_raw or ''})" for c in e.tool_calls[:4]]
    if len(e.tool_calls) > 4:
        bits.append(f"… {count(len(e.tool_calls) - 4, 'more call')}")
    if e.text:
        bits.append(repr(" ".join(e.text.split())[:120]))
    if e.refusal:
        bits.append("refusal")
    fin = turn.a.finish_reason_raw
    text = ", ".join(bits) or "(nothing emitted)"
    return f"{text}  [{fin}]" if fin else text


def fork_view(branch: str | Path) -> ForkComparison | None:
    """The view of ``branch`` beside its origin, or ``None`` when its header names no origin."""
    path = Path(branch)
    origin = origin_of(path)
    if origin is None:
        return None
    located = locate(path, origin)
    found = located.path if located.usable else None
    rb = open_run(path, whole=True)
    view = _header(path, origin, found)
    if found is None:
        _branch_only(view, rb, located.changed)
        return view
    ra = open_run(found, whole=True)
    compare = comparing_files(found, ra.header, rb.header)  # as `looptap diff` compares them
    lined = branch_diff(ra, rb, path, origin, compare=compare)
    view.notes += lined.said
    by_turn = _divergences_by_turn(lined.divergences)
    tolerated = _tolerated_by_turn(lined.divergences.tolerated)
    convs = {str(c.id): c for c in ra.analysis.conversations}
    done: set[str] = set()
    for cid, k, sa, sb in lined.turns:
        if cid not in done:
            done.add(cid)
            _prefix_rows(view, ra, cid, k, convs[cid].turns if cid in convs else [], tolerated)
        if sum(1 for r in view.rows if r.conversation == cid and r.part == "past") >= PAST_ROWS:
            continue
        origin_said = (
            _emitted(ra.analysis.turns.get(sa))
            if sa is not None
            else "(the origin stopped before this turn)"
        )
        past = _past(rb, cid, k, sa, sb, origin_said)
        past.divergences = by_turn.get((sa, sb), [])
        past.tolerated = tolerated.get(("", sa, sb), [])
        view.rows.append(past)
    return view


def _header(path: Path, origin: dict[str, Any], found: Path | None) -> ForkComparison:
    """The view with no rows yet: what the branch's header says of its origin (cursor, edits,
    model) and where the origin was found."""
    cursor = origin.get("cursor")
    where = str(cursor.get("text")) if isinstance(cursor, dict) else "?"
    edits = [str(e) for e in origin.get("edits") or [] if isinstance(e, str)]
    model = origin.get("model") if isinstance(origin.get("model"), str) else None
    name = str(origin.get("run") or "?")
    return ForkComparison(
        str(path), name, str(found) if found is not None else None, where, model, edits, [], []
    )


def _branch_only(view: ForkComparison, rb: Any, changed: str | None = None) -> None:
    """The rows when the origin is not here (or ``changed``: the file there is not the run forked):
    a note saying so, then each branch conversation's first turns on their own."""
    view.notes.append(
        changed
        if changed is not None
        else f"the origin {view.origin_name} is not here (looked as written, at its absolute path "
        "and beside the branch): the turns before the cursor cannot be shown, only the branch's"
    )
    for conv in rb.analysis.conversations:
        view.rows.append(ForkRow(str(conv.id), "fork", None))
        for sb in conv.turns[:PAST_ROWS]:
            t = rb.analysis.turns.get(sb)
            view.rows.append(_past(rb, str(conv.id), t.index if t else None, None, sb, None))


def _past(rb: Any, cid: str, k: int | None, sa: int | None, sb: int, origin: str | None) -> ForkRow:
    """A turn past the cursor: the branch's (``rb``, its seq ``sb``) beside what the origin had."""
    said, xb = _emitted(rb.analysis.turns.get(sb)), rb.exchange_by_seq(sb)
    return ForkRow(cid, "past", k, sa, sb, origin, said, edit_notes(xb.edits or []))


def _divergences_by_turn(divs: list[Any]) -> dict[tuple[int | None, int | None], list[str]]:
    """The divergences as lines, by the pair of seqs (origin, branch) of their turn."""
    by_turn: dict[tuple[int | None, int | None], list[str]] = {}
    for d in divs:
        by_turn.setdefault((d.seq_a, d.seq_b), []).append(f"{d.layer}: {d.message}")
        for f in d.folded:  # shown at its own turn, saying what it follows from
            by_turn.setdefault((f.seq_a, f.seq_b), []).append(
                f"↳ {f.layer}: {f.message} (follows from turn {d.turn}: {d.layer}: {d.message})"
            )
    return by_turn


def _tolerated_by_turn(
    turns: list[dict[str, Any]],
) -> dict[tuple[str, int | None, int | None], list[str]]:
    """What was tolerated, as lines, by turn: a prefix turn by (its conversation, its origin seq,
    ``None``), a turn past the cursor by (``""``, origin seq, branch seq)."""
    out: dict[tuple[str, int | None, int | None], list[str]] = {}
    for t in turns:
        where = (
            ("", t.get("seq"), t["seq_b"])
            if "seq_b" in t
            else (str(t.get("conversation")), t.get("seq"), None)
        )
        out.setdefault(where, []).extend(entry_line(e) for e in t.get("tolerated") or [])
    return out


def _prefix_rows(
    view: ForkComparison,
    ra: Any,
    cid: str,
    k: int,
    seqs: list[int],
    tolerated: dict[tuple[str, int | None, int | None], list[str]],
) -> None:
    """The origin's turns before the cursor (turn ``k``) of conversation ``cid``: the last
    :data:`PREFIX_ROWS` of them (a line counting the earlier ones), then the fork row."""
    prefix = seqs[:k]
    if len(prefix) > PREFIX_ROWS:
        view.rows.append(
            ForkRow(
                cid, "prefix", None, origin=f"… {count(len(prefix) - PREFIX_ROWS, 'earlier turn')}"
            )
        )
    for i, s in enumerate(prefix[-PREFIX_ROWS:], start=max(0, len(prefix) - PREFIX_ROWS)):
        view.rows.append(
            ForkRow(
                cid,
                "prefix",
                i,
                s,
                None,
                _emitted(ra.analysis.turns.get(s)),
                tolerated=tolerated.get((cid, s, None), []),
            )
        )
    view.rows.append(ForkRow(cid, "fork", k))
