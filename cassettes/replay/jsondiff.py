"""A structural diff of two JSON values, addressed by JSON paths (``messages[4].content[0].content``).

Objects are compared by key (key order never matters); arrays index by index (order matters: a
message moved is a message changed), with the surplus of the longer one reported as added or
removed items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

__all__ = ["Change", "format_path", "json_diff", "short"]

PathItem = str | int
ChangeKind = Literal["changed", "added", "removed"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def format_path(path: tuple[PathItem, ...]) -> str:
    """``("messages", 4, "content")`` → ``messages[4].content``; odd keys as ``["a b"]``."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _IDENT.match(p):
            out += f".{p}" if out else p
        else:
            out += "[" + orjson.dumps(p).decode() + "]"
    return out or "(body)"


class Shown(str):
    """A value already shown by :func:`short`: what a kept :class:`Change` holds in place of a
    large value (a miss kept for the report must not keep the request's 100 MB string)."""


def short(value: Any, limit: int = 80) -> str:
    """A value as compact JSON, clipped to ``limit`` characters."""
    if isinstance(value, Shown):
        return str(value)
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: The longest request target, path or value a miss message repeats (longer: cut, with a marker).
ECHO = 2000


def clip(text: str, n: int = ECHO) -> str:
    """``text`` cut to ``n`` characters, with a marker saying how long it was."""
    return text if len(text) <= n else f"{text[:n]}… [cut: {len(text):,} characters]"


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
        """This change with each value too long to show whole replaced by how it is shown."""
        return replace(self, expected=_compact(self.expected), actual=_compact(self.actual))

    def describe(self) -> str:
        if self.kind == "added":
            return f"{self.where}: added {short(self.actual)}"
        if self.kind == "removed":
            return f"{self.where}: missing (recorded {short(self.expected)})"
        return f"{self.where}: recorded {short(self.expected)}, got {short(self.actual)}"


def _compact(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    shown = short(value)
    return Shown(shown) if shown.endswith("…") else value


def json_diff(expected: Any, actual: Any, path: tuple[PathItem, ...] = (), limit: int = 1000) -> list[Change]:
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
