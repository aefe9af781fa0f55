"""The marks of a what-if edit (docs/fork.md): which item of a request a fork's edit rewrote, and
what the client had sent there.

A fork's replay server rewrites an item in every request it sends live (``--edit``); the request
the upstream received is the record's ``request``, and the record's ``edits`` list says, per
rewritten item::

    {"edit": "tool_result[call_A1]",          # the --edit target
     "selector": "turn=1",                    # where the edit applies from (the fork's cursor)
     "path": ["messages", 3, "content"],      # the item in the request body (JSON path)
     "before": "sunny in Paris",              # what the client sent there
     "before_sha256": "…", "after_sha256": "…"}   # digests of the two values (orjson bytes)

so the client's own request is the recorded one with each ``before`` put back
(:func:`client_body`). The replay server hands the marks to the recorder in the :data:`HEADER`
request header (base64url JSON), which the recorder removes before the request goes upstream.

Everything here reads untrusted text (a header, a cassette): bounded and checked, never trusted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, TypeGuard

import orjson

from cassettes import bounds

__all__ = ["HEADER", "MAX_HEADER", "MAX_MARKS", "checked", "client_body", "digest", "from_header", "item_of", "mark", "to_header"]

#: The request header carrying the marks from a fork's replay server to the recorder (stripped there).
HEADER = "x-looptap-edit"
#: The longest header value sent; past it the ``before`` values stay behind (their digests travel).
MAX_HEADER = 1 << 20
#: Marks per request.
MAX_MARKS = 256
_LABEL = re.compile(r"(tool_result\[[^\]\r\n]{1,200}\]|user\[[0-9]{1,6}\]|system)")
_SHA = re.compile(r"[0-9a-f]{64}")
_PATH_LEN = 64
_KEY_LEN = 200


def digest(value: Any) -> str:
    """The sha256 of a JSON value as orjson writes it."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def mark(label: str, selector: str | None, path: list[str | int], before: Any, after: Any) -> dict[str, Any]:
    return {"edit": label, "selector": selector, "path": list(path), "before": before, "before_sha256": digest(before), "after_sha256": digest(after)}


def item_of(m: dict[str, Any]) -> str:
    """The edited item, as a reader names it: ``messages[3]`` (the path's first two steps)."""
    path = m.get("path") or []
    if len(path) >= 2 and isinstance(path[1], int):
        return f"{path[0]}[{path[1]}]"
    return ".".join(str(p) for p in path[:2]) or "?"


def to_header(marks: list[dict[str, Any]]) -> str:
    """The marks as the :data:`HEADER` value; over :data:`MAX_HEADER`, without their ``before``
    values (``before_omitted``: the client's text is then known by its digest only)."""
    value = base64.urlsafe_b64encode(orjson.dumps(marks)).decode("ascii")
    if len(value) <= MAX_HEADER:
        return value
    light = [{k: v for k, v in m.items() if k != "before"} | {"before_omitted": True} for m in marks]
    return base64.urlsafe_b64encode(orjson.dumps(light)).decode("ascii")


def from_header(value: str) -> list[dict[str, Any]] | None:
    """The marks a :data:`HEADER` value carries, or ``None`` when it is not such a value."""
    if len(value) > MAX_HEADER + 16:
        return None
    try:
        raw = base64.urlsafe_b64decode(value.strip().encode("ascii"))
        doc = bounds.loads(raw)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return checked(doc)


def checked(value: Any) -> list[dict[str, Any]] | None:
    """``value`` when it is a list of marks in the shape above (unknown keys dropped), else
    ``None``. Bounded: at most :data:`MAX_MARKS` marks, paths of :data:`_PATH_LEN` steps, values
    no deeper than the walk bound."""
    if not isinstance(value, list) or not 0 < len(value) <= MAX_MARKS:
        return None
    out: list[dict[str, Any]] = []
    for m in value:
        one = _checked_mark(m)
        if one is None:
            return None
        out.append(one)
    return out


def _checked_mark(m: Any) -> dict[str, Any] | None:
    """One mark in the shape above (unknown keys dropped), or ``None``: a label of the known
    form, a short selector or none, a bounded path, both digests, and the client's value (or
    word that it was omitted, also when it is too deep to keep)."""
    if not isinstance(m, dict):
        return None
    label, sel, path = m.get("edit"), m.get("selector"), m.get("path")
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        return None
    if sel is not None and not (isinstance(sel, str) and len(sel) <= _KEY_LEN):
        return None
    if not _checked_path(path):
        return None
    one: dict[str, Any] = {"edit": label, "selector": sel, "path": list(path)}
    for k in ("before_sha256", "after_sha256"):
        if not (isinstance(m.get(k), str) and _SHA.fullmatch(m[k])):
            return None
        one[k] = m[k]
    if "before" in m and not bounds.too_deep(m["before"]):
        one["before"] = m["before"]
    elif m.get("before_omitted") is True or "before" in m:
        one["before_omitted"] = True
    else:
        return None
    return one


def _checked_path(path: Any) -> TypeGuard[list[Any]]:
    """A path of 1 to :data:`_PATH_LEN` steps, each a short key or a non-negative 31-bit index."""
    if not isinstance(path, list) or not 0 < len(path) <= _PATH_LEN:
        return False
    return all((isinstance(p, str) and len(p) <= _KEY_LEN) or (isinstance(p, int) and not isinstance(p, bool) and 0 <= p < 1 << 31) for p in path)


def client_body(doc: Any, marks: list[dict[str, Any]]) -> Any:
    """The request body the client sent: ``doc`` (what the upstream received) with each mark's
    ``before`` put back where it was. ``doc`` is not changed (the containers along each path are
    copied). ``None`` when a mark's value was not carried or its path is not in ``doc``."""
    out = doc
    for m in marks:
        if "before" not in m:
            return None
        out = _put(out, m["path"], m["before"])
        if out is _MISSING:
            return None
    return out


_MISSING: Any = object()


def _put(node: Any, path: list[str | int], value: Any) -> Any:
    """``node`` with ``value`` at ``path`` (copied along it), or :data:`_MISSING`."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(node, dict) and isinstance(step, str) and step in node:
        inner = _put(node[step], rest, value)
        return _MISSING if inner is _MISSING else {**node, step: inner}
    if isinstance(node, list) and isinstance(step, int) and step < len(node):
        inner = _put(node[step], rest, value)
        if inner is _MISSING:
            return _MISSING
        copy = list(node)
        copy[step] = inner
        return copy
    return _MISSING
