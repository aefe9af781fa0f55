"""Every tolerated difference on the record: what a replay or a fork's prefix tolerated (a volatile
span, a user's rule, a changed tool result in the tolerant prefix), per recorded turn, in one
shape that the replay log, the branch cassette, ``show``, ``diff``, the inspector and the pytest
report all read (docs/fork.md, "What is tolerated is on the record").

An entry keeps the JSON path, what tolerated it (the rule, else the detector: ``date``,
``tool_result`` …) and the two values, redacted and cut around where they differ (a value is
wire text: never a secret, never a megabyte). Shown with :func:`entry_line`, in the window
of :func:`window`, as every diff shows a changed value.

Beside the volatile spans and the rules, a fork's prefix in the tolerant mode tolerates a changed
tool result: a request that differs from its recorded turn only in what the client's tools returned
(the world changed between the recording and the fork: a file listing, a search, a clock) is that
turn all the same, and the difference is kept as tolerated (:func:`tool_result_changes`).

What counts as a tool result is the API adapter's to say (its parse of the request,
:mod:`cassettes.parsing`): a history item differs only in a tool result when both sides parse to
tool results for the same calls, and every value that differs inside it (compared as sent) is text
of those results' content. Anything else in the request — the system prompt, a user message, an
assistant turn, a tool schema, the model, a tool result's call id or error flag, an item added or
dropped — is a divergence as before (docs/fork.md, "Prefix modes").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..recording import Redactor
from ._jsondiff import Change, format_path, json_diff, window
from ._verdicts import item_results
from ._volatile import TOOL_RESULT, Tolerated

if TYPE_CHECKING:
    from ._recording import Recorded
    from ._requestkey import RequestKey

__all__ = [
    "entries_of",
    "entry_line",
    "report_lines",
    "tool_result_changes",
    "turn_entries",
]

#: Characters of each value kept around where the two differ (before, after).
KEPT = (400, 1600)
#: Turns listed (a bounded walk) and entries listed in a report.
MAX_TURNS = 10_000
MAX_ENTRIES = 200
#: History items compared per request (a bounded walk: past it, fail closed).
MAX_ITEMS = 10_000


def _kept(a: str, b: str) -> tuple[str, str]:
    """The two values cut to :data:`KEPT` around their first differing character."""
    d = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, d - KEPT[0])
    hi = d + KEPT[1]

    def cut(s: str) -> str:
        return ("…" if lo else "") + s[lo:hi] + ("…" if len(s) > hi else "")

    return cut(a), cut(b)


def _entry(t: Tolerated) -> dict[str, Any]:
    r = Redactor()
    a, b = _kept(t.recorded, t.live)
    # by: the user's rule that tolerated it, else the built-in detector
    by = t.rule or t.detector
    return {"path": format_path(t.path), "by": by, "recorded": r.scrub(a), "live": r.scrub(b)}


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


class Served(Protocol):
    """What :func:`turn_entries` reads of a :class:`~cassettes.matching.Matcher` (named by what
    it reads, so that this module needs not import the matcher's, which imports it)."""

    tolerated: dict[int, list[Tolerated]]
    recorded: Sequence[Recorded]

    def label(self) -> None: ...


def turn_entries(matcher: Served) -> list[dict[str, Any]]:
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


def tool_result_changes(
    recorded: RequestKey, live: RequestKey, changes: Sequence[Change]
) -> list[Tolerated] | None:
    """What the two requests' differences (``changes``: the compared bodies' diff) are, when every
    one lies in a tool result's content: one :class:`Tolerated` per changed value (its JSON path,
    the recorded text and this request's). ``None`` when any difference lies elsewhere, or when the
    adapter cannot read the items (fail closed)."""
    if (
        not changes
        or not recorded.is_json
        or not live.is_json
        or (recorded.method, recorded.path, recorded.query) != (live.method, live.path, live.query)
    ):
        return None
    hkey = recorded.history_key()
    if (
        hkey is None
        or hkey != live.history_key()
        or not isinstance(recorded.raw, dict)
        or not isinstance(live.raw, dict)
    ):
        return None
    ra, la = recorded.raw.get(hkey), live.raw.get(hkey)
    if (
        not isinstance(ra, list)
        or not isinstance(la, list)
        or len(ra) != len(la)
        or len(ra) > MAX_ITEMS
    ):
        return None
    items: set[int] = set()
    for ch in changes:
        if len(ch.path) < 3 or ch.path[0] != hkey or not isinstance(ch.path[1], int):
            return None  # not inside one history item (a field, an item added or dropped)
        items.add(ch.path[1])
    out: list[Tolerated] = []
    for i in sorted(items):
        found = _item_changes(recorded, live, hkey, i)
        if found is None:
            return None
        out += found
    return out or None


def _item_changes(
    recorded: RequestKey, live: RequestKey, hkey: str, i: int
) -> list[Tolerated] | None:
    """The changed values of history item ``i`` when they are all tool-result text: the same calls
    in the same order (ids as sent: a fork serves the recorded ids), the same error flags, and each
    value that differs (compared as sent) a string found in that side's result content."""
    rec_item, live_item = recorded.raw[hkey][i], live.raw[hkey][i]
    # only tool results on both sides (text or a call beside them: not only what a tool returned)
    _, rr, r_only = item_results(recorded, hkey, rec_item)
    _, lr, l_only = item_results(live, hkey, live_item)
    if not (rr and lr and r_only and l_only) or [(c, e) for c, (_, e) in rr] != [
        (c, e) for c, (_, e) in lr
    ]:
        return None
    rtext, ltext = "\n".join(t for _, (t, _) in rr), "\n".join(t for _, (t, _) in lr)
    out: list[Tolerated] = []
    for ch in json_diff(rec_item, live_item, (hkey, i)):
        if (
            ch.kind != "changed"
            or not isinstance(ch.expected, str)
            or not isinstance(ch.actual, str)
        ):
            return None  # a part added or dropped, a flag, a number: not a result's text
        if ch.expected not in rtext or ch.actual not in ltext or _names_an_id(ch.path):
            return None
        out.append(Tolerated(ch.path, TOOL_RESULT, ch.expected, ch.actual))
    return out or None


def _names_an_id(path: tuple[str | int, ...]) -> bool:
    """A field that says which call or what kind a part is, never a result's text."""
    last = path[-1] if path else None
    return isinstance(last, str) and (
        last.lower().endswith("id") or last in ("type", "role", "name")
    )
