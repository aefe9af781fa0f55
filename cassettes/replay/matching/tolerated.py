"""Every tolerated difference on the record: what a replay or a fork's prefix tolerated (a volatile
span, a user's rule, a changed tool result in the tolerant prefix), per recorded turn, in one
shape that the replay log, the branch cassette, ``show``, ``diff``, the inspector and the pytest
report all read (docs/fork.md, "What is tolerated is on the record").

An entry keeps the JSON path, what tolerated it (the rule, else the detector: ``date``,
``tool_result`` …) and the two values, redacted and cut around where they differ (a value is
wire text: never a secret, never a megabyte). Shown with :func:`entry_line`, the window of
:func:`cassettes.replay.matching.jsondiff.window` as every diff shows a changed value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cassettes.matching.volatile import Tolerated
from cassettes.reading.branch import read_entries
from cassettes.replay.matching.jsondiff import format_path, window

if TYPE_CHECKING:
    from cassettes.replay.matching.matcher import Matcher

__all__ = [
    "KEPT",
    "by_of",
    "entries_of",
    "entry_line",
    "read_entries",
    "report_lines",
    "turn_entries",
    "turn_label",
]

#: Characters of each value kept around where the two differ (before, after).
KEPT = (400, 1600)
#: Turns listed (a bounded walk) and entries listed in a report.
MAX_TURNS = 10_000
MAX_ENTRIES = 200


def by_of(t: Tolerated) -> str:
    """What tolerated ``t``: the user's rule when one did (its name), else the built-in detector."""
    rule = getattr(t, "rule", None)
    return str(rule) if rule else t.detector


def _kept(a: str, b: str) -> tuple[str, str]:
    """The two values cut to :data:`KEPT` around their first differing character."""
    d = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, d - KEPT[0])
    hi = d + KEPT[1]

    def cut(s: str) -> str:
        return ("…" if lo else "") + s[lo:hi] + ("…" if len(s) > hi else "")

    return cut(a), cut(b)


def _entry(t: Tolerated) -> dict[str, Any]:
    from cassettes.recording.redact import Redactor

    r = Redactor()
    a, b = _kept(t.recorded, t.live)
    return {"path": format_path(t.path), "by": by_of(t), "recorded": r.scrub(a), "live": r.scrub(b)}


def entries_of(found: Iterable[Tolerated]) -> list[dict[str, Any]]:
    """The tolerated differences of one request, as entries (redacted, cut), each once: the same
    span at the same path several times (an id said three times in one text) is one entry with
    ``times``."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for t in found:
        e = _entry(t)
        key = (e["path"], e["by"], e["recorded"], e["live"])
        if key in out:
            out[key]["times"] = out[key].get("times", 1) + 1
        else:
            out[key] = e
    return list(out.values())


def turn_entries(matcher: Matcher) -> list[dict[str, Any]]:
    """Per recorded round trip that answered a request with tolerated differences, in recording
    order: its conversation, turn and seq, and the entries."""
    if not matcher.tolerated:
        return []
    matcher.label()
    out = []
    for i in sorted(matcher.tolerated)[:MAX_TURNS]:
        rec = matcher.recorded[i]
        out.append(
            {
                "conversation": rec.conversation,
                "turn": rec.turn,
                "seq": rec.seq,
                "tolerated": entries_of(matcher.tolerated[i]),
            }
        )
    return out


def entry_line(e: Mapping[str, Any]) -> str:
    """``messages[3].content: recorded "…a.txt\\nb.txt", live "…a.txt\\nb.txt\\nc.txt" (by
    tool_result)`` (recorded text: the caller cleans it for a terminal)."""
    a, b = window(str(e.get("recorded", "")), str(e.get("live", "")))
    times = e.get("times")
    said = f", {times} times" if isinstance(times, int) and times > 1 else ""
    return f"{e.get('path', '?')}: recorded {a}, live {b} (by {e.get('by', '?')}{said})"


def turn_label(t: Mapping[str, Any]) -> str:
    conv, turn, seq = t.get("conversation"), t.get("turn"), t.get("seq")
    where = f"{conv}/turn {turn}" if conv is not None and turn is not None else "round trip"
    return f"{where} (seq {seq})"


def report_lines(turns: Sequence[Mapping[str, Any]], indent: str = "  ") -> list[str]:
    """Every tolerated difference, one line each, by turn (at most :data:`MAX_ENTRIES`)."""
    out: list[str] = []
    n = 0
    total = sum(len(t.get("tolerated") or []) for t in turns)
    for t in turns:
        for e in t.get("tolerated") or []:
            if n == MAX_ENTRIES:
                out.append(f"{indent}… and {total - n} more tolerated differences")
                return out
            out.append(f"{indent}tolerated at {turn_label(t)}: {entry_line(e)}")
            n += 1
    return out
