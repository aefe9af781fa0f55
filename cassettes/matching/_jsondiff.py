"""A structural diff of two JSON values, addressed by JSON paths
(``messages[4].content[0].content``).

Objects are compared by key (key order never matters); arrays index by index (order matters: a
message moved is a message changed), with the surplus of the longer one reported as added or
removed items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from ..jsonpath import PathItem, format_path
from ..recording import REDACTED, default_detector

__all__ = ["Change", "format_path", "json_diff", "short", "window"]

ChangeKind = Literal["changed", "added", "removed"]


class Shown(str):
    """A value already shown by :func:`short`: what a kept :class:`Change` holds in place of a
    large value (a miss kept for the report must not keep the request's 100 MB string)."""


def short(value: Any, limit: int = 80) -> str:
    """A value as compact JSON, clipped to ``limit`` characters."""
    text = _json_text(value)
    return text if len(text) <= limit else _whole_tokens(text[: limit - 1], end=True) + "…"


#: What a token (a key, an id, a word) is made of: a cut never leaves part of one on show.
_TOKEN = re.compile(r"[A-Za-z0-9_+/=-]+")


def _whole_tokens(text: str, *, start: bool = False, end: bool = False) -> str:
    """``text`` cut out of a longer one, without the part-token at a cut edge: a secret cut in
    the middle no longer reads as one (no redactor would find it) and its first characters would
    be printed. A cut edge inside a token drops that token's piece."""
    if end:
        m = _TOKEN.search(text[::-1])
        if m is not None and m.start() == 0:
            text = text[: len(text) - m.end()]
    if start:
        m = _TOKEN.match(text)
        if m is not None:
            text = text[m.end() :]
    return text


def _json_text(value: Any) -> str:
    if isinstance(value, Shown):
        return str(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def window(a: Any, b: Any, limit: int = 80) -> tuple[str, str]:
    """Two values that differ, each as compact JSON clipped to ``limit`` characters around the first
    character where they differ (the same window in both, ``…`` where cut): a long prompt that
    differs at its end shows its end, not twice the same beginning."""
    ta, tb = _json_text(a), _json_text(b)
    if len(ta) <= limit and len(tb) <= limit:
        return ta, tb
    i = 0
    n = min(len(ta), len(tb))
    while i < n and ta[i] == tb[i]:
        i += 1
    start = max(0, i - limit // 3)
    return _cut(ta, start, limit), _cut(tb, start, limit)


def _cut(text: str, start: int, limit: int) -> str:
    if start >= len(text):  # the other value goes on past this one's end: show this one's end
        start = max(0, len(text) - limit // 3)
    body = limit - (1 if start else 0)
    end = start + body
    if end < len(text):
        return (
            ("…" if start else "")
            + _whole_tokens(text[start : end - 1], start=start > 0, end=True)
            + "…"
        )
    return ("…" if start else "") + _whole_tokens(text[start:], start=start > 0)


#: The longest request target, path or value a miss message repeats (longer: cut, with a marker).
ECHO = 2000


def clip(text: str, n: int = ECHO) -> str:
    """``text`` cut to ``n`` characters, with a marker saying how long it was; a key the cut
    falls in is masked from where it begins (the recorder's rule for a text a bound cut:
    ``Detector.cut_at``), so its first characters are never printed."""
    if len(text) <= n:
        return text
    head = text[:n]
    at = default_detector().cut_at(head)
    head = head if at is None else head[:at] + REDACTED
    return f"{head}… [cut: {len(text):,} characters]"


@dataclass(frozen=True)
class Change:
    """One difference: at ``path`` the recording has ``expected`` and the request has ``actual``."""

    path: tuple[PathItem, ...]
    kind: ChangeKind
    expected: Any = None
    actual: Any = None

    @property
    def where(self) -> str:
        return format_path(self.path)

    def compact(self) -> Change:
        """This change with each value too long to show whole replaced by how it is shown (two
        changed values: the window around where they differ, :func:`window`)."""
        if self.kind == "changed":
            a, b = window(self.expected, self.actual)
            return replace(
                self, expected=_compact(self.expected, a), actual=_compact(self.actual, b)
            )
        return replace(self, expected=_compact(self.expected), actual=_compact(self.actual))

    def shown(self) -> tuple[str, str]:
        """(recorded, got) as shown: for a changed value, the window around the first difference."""
        if self.kind == "changed":
            return window(self.expected, self.actual)
        return short(self.expected), short(self.actual)

    def describe(self) -> str:
        if self.kind == "added":
            return f"{self.where}: added {short(self.actual)}"
        if self.kind == "removed":
            return f"{self.where}: missing (recorded {short(self.expected)})"
        a, b = self.shown()
        return f"{self.where}: recorded {a}, got {b}"


def _compact(value: Any, shown: str | None = None) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    shown = short(value) if shown is None else shown
    return Shown(shown) if shown.endswith("…") or shown.startswith("…") else value


def json_diff(
    expected: Any, actual: Any, path: tuple[PathItem, ...] = (), limit: int = 1000
) -> list[Change]:
    """Every difference between ``expected`` (the recording) and ``actual`` (at most ``limit``)."""
    out: list[Change] = []
    _diff(expected, actual, path, out, limit)
    return out


def _same_kind(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return True
    return type(a) is type(b)


def _diff(a: Any, b: Any, path: tuple[PathItem, ...], out: list[Change], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                out.append(Change((*path, k), "removed", expected=a[k]))
            else:
                _diff(a[k], b[k], (*path, k), out, limit)
        for k in b:
            if k not in a:
                out.append(Change((*path, k), "added", actual=b[k]))
        return
    if isinstance(a, list) and isinstance(b, list):
        for i in range(min(len(a), len(b))):
            _diff(a[i], b[i], (*path, i), out, limit)
        for i in range(len(b), len(a)):
            out.append(Change((*path, i), "removed", expected=a[i]))
        for i in range(len(a), len(b)):
            out.append(Change((*path, i), "added", actual=b[i]))
        return
    if not _same_kind(a, b) or a != b:
        out.append(Change(path, "changed", expected=a, actual=b))
