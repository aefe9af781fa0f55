"""A place in a JSON body, said one way: the path syntax users write in ignore rules
(docs/testing.md) and looptap prints wherever it names a place (a diff, a tolerated change, a
proposed rule, an edit mark's item), read by :func:`parse_path` and written by
:func:`format_path`; and one bounded walk over a body (:func:`walk`) with its one copying write
(:func:`put`).

The syntax: keys as ``a.b``, indexes as ``[0]``, other keys as ``["a b"]`` (a JSON string), a
leading ``$.`` allowed; in a rule, ``*`` and ``[*]`` for any key and any index
(:data:`ANY_KEY`, :data:`ANY_INDEX`). A path is a tuple of keys (``str``) and indexes (``int``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import orjson

from .lazy import pattern
from .project import RuleError

__all__ = [
    "ANY_INDEX",
    "ANY_KEY",
    "MAX_SEGMENTS",
    "PathItem",
    "Segment",
    "format_path",
    "parse_path",
    "put",
    "walk",
]

PathItem = str | int

#: Bounds on a path a user writes: its length and segments.
MAX_PATH_TEXT = 1000
MAX_SEGMENTS = 64


class _Any:
    """A wildcard segment of a rule's path: any key (``*``) or any index (``[*]``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


ANY_KEY: Final = _Any("*")
ANY_INDEX: Final = _Any("[*]")
Segment = str | int | _Any

_SEGMENT = pattern(
    r"""(?P<dot>\.)?(?:
        (?P<key>\*|[A-Za-z_$@][A-Za-z0-9_$@\-]*)
      | \[(?P<index>\*|\d{1,9})\]
      | \[(?P<quoted>"(?:[^"\\]|\\.){0,200}")\]
    )""",
    re.X,
)
#: A key written bare (else as a JSON string in brackets).
_IDENT = pattern(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def parse_path(text: str) -> tuple[Segment, ...]:
    """``messages[*].content[*].cache_control`` → ``("messages", ANY_INDEX, "content", ANY_INDEX,
    "cache_control")``. Raises :class:`~cassettes.project.RuleError` (one line)."""
    src = text.strip()
    if src.startswith("$"):
        src = src[1:].lstrip(".")
    if not src:
        raise RuleError(
            f"ignore path {text[:80]!r}: empty (write a path such as metadata.user_id or "
            "messages[*].content[*].cache_control)"
        )
    if len(src) > MAX_PATH_TEXT:
        raise RuleError(f"ignore path {text[:80]!r}…: longer than {MAX_PATH_TEXT} characters")
    out: list[Segment] = []
    at = 0
    while at < len(src):
        m = _SEGMENT.match(src, at)
        dotted = m is not None and m.group("dot") is not None
        if (
            m is None
            or (dotted != bool(out) and m.group("key") is not None)
            or (dotted and m.group("key") is None)
            or m.end() == at
        ):
            raise RuleError(
                f"ignore path {text[:80]!r}: cannot read it at character {at + 1} "
                f"({src[at : at + 20]!r}); write keys as a.b, indexes as [0] or [*], other keys as "
                '["a b"]'
            )
        if m.group("key") is not None:
            out.append(ANY_KEY if m.group("key") == "*" else m.group("key"))
        elif m.group("index") is not None:
            out.append(ANY_INDEX if m.group("index") == "*" else int(m.group("index")))
        else:
            out.append(orjson.loads(m.group("quoted")))
        at = m.end()
    if len(out) > MAX_SEGMENTS:
        raise RuleError(f"ignore path {text[:80]!r}: more than {MAX_SEGMENTS} segments")
    return tuple(out)


def format_path(path: Sequence[object], empty: str = "(body)") -> str:
    """``("messages", 4, "content")`` → ``messages[4].content``, as :func:`parse_path` reads it:
    odd keys as ``["a b"]``, the wildcards as ``*`` and ``[*]``; ``empty`` for the whole body."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and not _IDENT.match(p):
            out += "[" + orjson.dumps(p).decode() + "]"
        else:
            t = p if isinstance(p, str) else repr(p)
            out += t if t.startswith("[") or not out else f".{t}"
    return out or empty


def walk(
    doc: Any, depth: int = 64, leaf: Callable[[Any], bool] | None = None
) -> Iterator[tuple[Any, tuple[PathItem, ...], Any, PathItem | None]]:
    """``doc`` and every value in it, each with its path, the object or list holding it and its
    key there, in document order: a value before what it holds, which is read after the caller
    had the value (what the caller put there is walked instead; what it took away is not).
    Values more than ``depth`` steps down are not reached; nor is what a value ``leaf`` says is
    one holds. Not recursive: a body nested past the interpreter's limit is walked as well."""
    stack: list[tuple[Any, tuple[PathItem, ...], Any, PathItem | None]] = [(doc, (), None, None)]
    while stack:
        value, path, holder, key = stack.pop()
        if holder is not None:
            value = _at(holder, key)  # as the caller left it
            if value is _MISSING:
                continue
        yield value, path, holder, key
        if holder is not None:
            value = _at(holder, key)
        if len(path) >= depth or (leaf is not None and leaf(value)):
            continue
        if isinstance(value, dict):
            keys: Sequence[PathItem] = list(value)
        elif isinstance(value, list):
            keys = range(len(value))
        else:
            continue
        stack.extend((None, (*path, k), value, k) for k in reversed(keys))


_MISSING: Any = object()


def _at(holder: Any, key: Any) -> Any:
    """``holder[key]``, or :data:`_MISSING` when the caller took it away."""
    try:
        return holder[key]
    except (KeyError, IndexError):
        return _MISSING


def put(node: Any, path: Sequence[PathItem], value: Any) -> Any:
    """``node`` with ``value`` at ``path``, the containers along it copied (``node`` is not
    changed); ``None`` when the path is not in ``node``."""
    out = _put(node, path, value)
    return None if out is _MISSING else out


def _put(node: Any, path: Sequence[PathItem], value: Any) -> Any:
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(node, dict) and isinstance(step, str) and step in node:
        inner = _put(node[step], rest, value)
        return _MISSING if inner is _MISSING else {**node, step: inner}
    if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
        inner = _put(node[step], rest, value)
        if inner is _MISSING:
            return _MISSING
        copy = list(node)
        copy[step] = inner
        return copy
    return _MISSING
