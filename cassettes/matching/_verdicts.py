"""Layer attribution of a diff: what a group of differences between a recorded request key and a
live one means (:class:`Verdict`: its layer, a sentence, the JSON path), for the replay matcher's
misses and the run diff.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._jsondiff import Change, format_path, short
from ._requestkey import RequestKey

__all__ = ["Verdict", "attribute"]


@dataclass(frozen=True)
class Verdict:
    """What a group of differences means: its layer, a sentence, and the JSON path it is at."""

    layer: str
    message: str
    path: str

    def __str__(self) -> str:
        return f"{self.layer}: {self.message}"


def item_results(
    key: RequestKey, hkey: str, item: Any
) -> tuple[str, list[tuple[str, tuple[str, bool | None]]], bool]:
    """(role, [(call id, (content, is_error)) of each tool result in it], whether it holds tool
    results only) of one raw history item, as the adapter reads it."""
    req = key.parsed(hkey, item)
    if req is None or not req.messages:
        return "?", [], False
    parts = [p for m in req.messages for p in m.parts]
    results = [
        (
            p.tool_result.call_id or p.tool_result.name or "?",
            (p.tool_result.content, p.tool_result.is_error),
        )
        for p in parts
        if p.tool_result is not None
    ]
    only = all(p.tool_result is not None or p.kind == "tool_result" for p in parts)
    return ("tool" if results else req.messages[0].role), results, only


def _system_text(key: RequestKey) -> str | None:
    req = key.parsed()
    return None if req is None else "".join(p.text or "" for p in req.system)


def attribute(recorded: RequestKey, live: RequestKey, changes: Sequence[Change]) -> list[Verdict]:
    """Turn a request diff into sentences by layer. Everything a client sends is its dispatch, so
    request differences are layer C; the wording says which part of the dispatch changed."""
    out = _url_verdicts(recorded, live)
    if not recorded.is_json or not live.is_json:
        if recorded.body != live.body:
            out.append(
                Verdict(
                    "C", "the request body changed (not JSON, compared byte for byte)", "(body)"
                )
            )
        return out
    hkey = recorded.history_key() or live.history_key()
    added_tail: list[int] = []
    removed_tail: list[int] = []
    out += _change_verdicts(recorded, live, hkey, changes, added_tail, removed_tail)
    if added_tail:
        out.append(_added_verdict(live, hkey, added_tail))
    if removed_tail:
        first = min(removed_tail)
        n = len(removed_tail)
        out.append(
            Verdict(
                "C",
                f"the history is {n} item{'s' if n > 1 else ''} shorter than recorded, from "
                f"{format_path((hkey or '', first))} (dropped or trimmed)",
                format_path((hkey or "", first)),
            )
        )
    return out


def _url_verdicts(recorded: RequestKey, live: RequestKey) -> list[Verdict]:
    out: list[Verdict] = []
    if (recorded.method, recorded.path) != (live.method, live.path):
        out.append(
            Verdict(
                "C",
                f"the agent called {live.method} {live.path}; the recorded turn is "
                f"{recorded.method} {recorded.path}",
                "(url)",
            )
        )
    if recorded.query != live.query:
        out.append(
            Verdict(
                "C",
                f"the query string changed (recorded {recorded.target}, got {live.target})",
                "(url)",
            )
        )
    return out


def _change_verdicts(
    recorded: RequestKey,
    live: RequestKey,
    hkey: str | None,
    changes: Sequence[Change],
    added_tail: list[int],
    removed_tail: list[int],
) -> list[Verdict]:
    """One verdict per changed history item and per changed top-level field; history items added
    or removed at the end are collected in ``added_tail`` / ``removed_tail`` (said once, after)."""
    out: list[Verdict] = []
    seen_items: set[int] = set()
    seen_keys: set[str] = set()
    for ch in changes:
        top = ch.path[0] if ch.path else None
        if hkey is not None and top == hkey and len(ch.path) >= 2 and isinstance(ch.path[1], int):
            i = ch.path[1]
            if len(ch.path) == 2 and ch.kind in ("added", "removed"):
                (added_tail if ch.kind == "added" else removed_tail).append(i)
            elif i not in seen_items:
                seen_items.add(i)
                out.append(_item_verdict(recorded, live, hkey, i, ch))
        elif isinstance(top, str):
            if top not in seen_keys:
                seen_keys.add(top)
                out.append(_field_verdict(recorded, live, top, ch))
        else:
            out.append(Verdict("C", f"the request body changed: {ch.describe()}", ch.where))
    return out


def _added_verdict(live: RequestKey, hkey: str | None, added_tail: list[int]) -> Verdict:
    first = min(added_tail)
    role, results, _ = item_results(live, hkey, live.raw[hkey][first]) if hkey else ("?", [], False)
    what = (
        f"the tool result for {_orig(live, results[0][0])}"
        if results
        else f"{'an' if role[:1] in 'aeiou' else 'a'} {role} message"
    )
    n = len(added_tail)
    return Verdict(
        "C",
        f"the agent sent a turn the recording never had: {n} more history "
        f"item{'s' if n > 1 else ''} than recorded, starting with {what} at "
        f"{format_path((hkey or '', first))}",
        format_path((hkey or "", first)),
    )


def _orig(key: RequestKey, ident: str) -> str:
    return key.ids.get(ident, ident)


def _item_verdict(recorded: RequestKey, live: RequestKey, hkey: str, i: int, ch: Change) -> Verdict:
    role, results, _ = item_results(recorded, hkey, recorded.raw[hkey][i])
    where = ch.where
    if results:
        _, lresults, _ = (
            item_results(live, hkey, live.raw[hkey][i])
            if i < len(live.raw.get(hkey, []))
            else ("?", [], False)
        )
        # the results that differ, paired by call id (parallel results: not by position)
        was = dict(results)
        changed = [cid for cid, v in lresults if was.get(cid) != v] if lresults else []
        ids = changed or [cid for cid, _ in lresults] or [cid for cid, _ in results]
        key = live if lresults else recorded
        names = ", ".join(_orig(key, c) for c in ids[:3]) + (
            f" and {len(ids) - 3} more" if len(ids) > 3 else ""
        )
        return Verdict(
            "C",
            f"the tool result{'s' if len(ids) > 1 else ''} for {names} changed ({where})",
            where,
        )
    if role == "assistant":
        return Verdict(
            "C",
            f"the assistant turn at {format_path((hkey, i))} "
            f"was not sent back as recorded ({where})",
            where,
        )
    if role in ("system", "developer"):
        return Verdict("C", f"the system prompt changed ({where})", where)
    if role == "user":
        return Verdict("C", f"the user input at {format_path((hkey, i))} changed ({where})", where)
    return Verdict("C", f"history item {format_path((hkey, i))} ({role}) changed ({where})", where)


def _field_verdict(recorded: RequestKey, live: RequestKey, top: str, ch: Change) -> Verdict:
    where = ch.where
    low = top.lower()
    if low == "model":
        return Verdict(
            "C",
            f"the model requested changed: recorded {short(ch.expected)}, got {short(ch.actual)}",
            where,
        )
    if low == "stream":
        return Verdict(
            "C", f"streaming changed: recorded {short(ch.expected)}, got {short(ch.actual)}", where
        )
    if "tool_choice" in low or low == "toolconfig":
        return Verdict("C", f"the tool choice changed ({where})", where)
    if "tool" in low or "function" in low:
        return Verdict("C", f"the tools offered changed ({where})", where)
    if _system_text(recorded) != _system_text(live):
        return Verdict("C", f"the system prompt changed ({where})", where)
    return Verdict(
        "C",
        f"request parameter {top} changed ({where}: recorded "
        f"{short(ch.expected)}, got {short(ch.actual)})",
        where,
    )
