"""Bounds on every parse and walk of untrusted data (wire bodies, cassettes, imported files).

A model controls how deep its tool-call arguments nest, and a shared file controls everything in it.
Python recursion ends in ``RecursionError`` near 1,000 frames (or a C-stack crash in C parsers), and
orjson refuses to *write* JSON nested 255 levels or more, so every recursive walk over such data
is bounded here, once, with named limits:

- :data:`STORE_DEPTH` — the deepest JSON value a record stores as JSON. Deeper bodies are stored as
  their raw text and labelled (the record around a body adds a few levels below orjson's 254).
- :data:`WALK_DEPTH` — how deep analysis, verification, views and the inspector descend. A deeper
  subtree is treated as opaque (and labelled where it matters), never recursed into.

:func:`too_deep` tests nesting without recursion in Python (orjson's own bound on what it writes).
:func:`parse_toml` reads a TOML file looptap finds on its own (a project's ``looptap.toml`` or
``pyproject.toml``, the agent's ``looptap-rules.toml``) nested at most :data:`TOML_DEPTH` levels:
the standard library's reader recurses once a level, and a file nested ~1,000 deep ended a command
in a ``RecursionError`` traceback.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import orjson

from .lazy import pattern

__all__ = [
    "MARKER",
    "MAX_DECODED_BYTES",
    "MAX_LIST",
    "RECORD_DEPTH",
    "STORE_DEPTH",
    "TOML_DEPTH",
    "WALK_DEPTH",
    "cap_lists",
    "cut_reason",
    "loads",
    "parse",
    "parse_toml",
    "record_fits",
    "too_deep",
]

#: Deepest JSON stored as JSON inside a cassette record (orjson writes at most 254 levels; the
#: record, its request/response and the body form take the rest).
STORE_DEPTH = 240
#: Deepest level any recursive walk over untrusted data descends to.
WALK_DEPTH = 128  # under pydantic-core's JSON recursion limit (the inspector stores turns as JSON)
#: orjson writes at most this many levels; a record deeper than this was not written by looptap.
RECORD_DEPTH = 254
#: What stands in for a subtree cut at a depth bound.
MARKER = "[looptap: nested too deep; cut here]"
#: The decompression budget: the most one body may decompress to, per Content-Encoding layer
#: (``cassettes/wire/_decoding.py``), in the recorder, the importers, the readers and the replay
#: server alike. Above the analysis bound on a body (50 MB, ``parsing.MAX_PARSE_BYTES``): any body
#: looptap would read fits; one that decompresses further is kept compressed, as received, and
#: labelled.
MAX_DECODED_BYTES = 64 << 20
#: Deepest nesting (arrays, inline tables, a table header's brackets) of a TOML file looptap reads
#: on its own; a configuration nests a few levels, the reader's recursion ends near 300.
TOML_DEPTH = 64
#: What can hold a bracket that does not nest: strings (basic, literal, multi-line) and comments.
_TOML_TOKENS = pattern(
    r'"""(?:[^"\\]|\\[\s\S]|"(?!""))*"""'
    r"|'''[\s\S]*?'''"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*'|#[^\n]*|[\[\]{}]"
)


def parse_toml(text: str) -> dict[str, Any]:
    """``text`` read by :mod:`tomllib`, refused (a :class:`tomllib.TOMLDecodeError`, as a syntax
    error is, naming the line) when it nests deeper than :data:`TOML_DEPTH`: its brackets counted
    outside strings and comments first, in one pass; the reader's own ``RecursionError`` said
    so too, should a text the count misjudged still reach it."""
    depth = deepest = 0
    for m in _TOML_TOKENS.finditer(text):
        ch = m.group()
        if ch in "[{":
            depth += 1
            if depth > TOML_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                raise tomllib.TOMLDecodeError(
                    f"nested deeper than {TOML_DEPTH} levels (at line {line}): not read"
                )
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(
            f"nested too deep (over {deepest} levels): not read"
        ) from None


def too_deep(value: Any, limit: int = WALK_DEPTH) -> bool:
    """Whether ``value`` (JSON values) nests deeper than ``limit`` (≤ :data:`RECORD_DEPTH`), tested
    at C speed: orjson refuses to write more than 254 levels, so ``value`` wrapped in ``254 -
    limit`` lists fails to serialise exactly when it is deeper than ``limit``."""
    wrapped = value
    for _ in range(RECORD_DEPTH - limit):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        return "Recursion" in str(exc)
    return False


def shallow(value: Any, limit: int = WALK_DEPTH) -> Any:
    """A copy of ``value`` with every container below ``limit`` levels replaced by :data:`MARKER`
    (recursion ``limit`` deep at most)."""
    if isinstance(value, dict):
        if limit <= 0:
            return MARKER
        return {k: shallow(v, limit - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if limit <= 0:
            return MARKER
        return [shallow(v, limit - 1) for v in value]
    return value


def _few_brackets(raw: bytes | str | None, limit: int) -> bool:
    if raw is None:
        return False
    if len(raw) <= limit:  # (no more brackets than characters)
        return True
    # braces first: a record of stream events holds more than the limit of them, and then the
    # brackets need no pass of their own
    if isinstance(raw, str):
        n = raw.count("{")
        return n <= limit and n + raw.count("[") <= limit
    n = raw.count(b"{")
    return n <= limit and n + raw.count(b"[") <= limit


#: Longest list kept whole for analysis (no real request holds 100,000 messages; a 4 MB body can
#: hold two million tiny items, and two million parsed messages took gigabytes).
MAX_LIST = 100_000


def _cut_long(value: Any) -> Any:
    """``value`` with every list longer than :data:`MAX_LIST` cut there and marked (value is
    already depth-bounded, so the recursion is too)."""
    if isinstance(value, dict):
        return {k: _cut_long(v) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > MAX_LIST:
            return [_cut_long(v) for v in value[:MAX_LIST]] + [MARKER]
        return [_cut_long(v) for v in value]
    return value


def _has_long(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            if len(node) > MAX_LIST:
                return True
            stack.extend(v for v in node if isinstance(v, dict | list))
        elif isinstance(node, dict):
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
    return False


def _bound(value: Any, raw: bytes | str | None) -> tuple[Any, str | None]:
    """``value`` (parsed JSON) if it nests at most :data:`WALK_DEPTH` levels and holds no list
    longer than :data:`MAX_LIST`, else a copy cut there and marked (:func:`shallow`), so every
    later walk of it is bounded; and why it cut (``None`` when it did not). ``raw``, the text it
    was parsed from, makes the common case free: fewer brackets than the depth limit cannot nest
    deeper, fewer commas cannot make a long list."""
    if not isinstance(value, dict | list):
        return value, None
    why = None
    if not _few_brackets(raw, WALK_DEPTH) and too_deep(value, WALK_DEPTH):
        value, why = shallow(value, WALK_DEPTH), cut_reason()
    many = raw is None or (
        len(raw) > MAX_LIST  # (no more commas than characters)
        and (raw.count(b",") if isinstance(raw, bytes) else raw.count(",")) > MAX_LIST
    )
    if many and _has_long(value):
        value = _cut_long(value)
        why = (
            f"{why}, and holds a list over {MAX_LIST:,} items"
            if why
            else f"holds a list over {MAX_LIST:,} items"
        )
    return value, why


def cut_reason(limit: int = WALK_DEPTH) -> str:
    """How a value cut at the depth bound is labelled, everywhere."""
    return f"nested deeper than {limit} levels"


#: A JSON string (escapes included) or one bracket: all that decides nesting.
_TOKENS = pattern(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def _cut_text(data: bytes, limit: int) -> bytes:
    """``data`` (JSON text) with every container that opens below ``limit`` levels replaced by
    :data:`MARKER` as a JSON string, scanned without recursion: text orjson refuses to parse for
    its depth (over 1,024 levels) becomes text it parses, cut where :func:`shallow` would cut."""
    out: list[bytes] = []
    depth = 0
    start = 0  # where the text not yet copied begins
    skipping_from = -1
    for m in _TOKENS.finditer(data):
        tok = m.group()
        if tok[:1] == b'"':
            continue
        if tok in (b"[", b"{"):
            depth += 1
            if depth == limit + 1 and skipping_from < 0:
                out.append(data[start : m.start()])
                skipping_from = m.start()
        else:
            depth -= 1
            if depth == limit and skipping_from >= 0:
                out.append(orjson.dumps(MARKER))
                start, skipping_from = m.end(), -1
    if skipping_from >= 0:
        # unbalanced: what orjson then says of it
        return data[:skipping_from] + orjson.dumps(MARKER)
    out.append(data[start:])
    return b"".join(out)


def parse(data: bytes | str) -> tuple[Any, str | None]:
    """Untrusted JSON text parsed and bounded like :func:`loads`, with why it was cut (``None``
    when it was not), so a reader can say so ("nested deeper than 128 levels"). JSON nested deeper
    than orjson parses (1,024 levels) is read too, cut at :data:`WALK_DEPTH`: it is valid, only
    deep (what lies below the cut is not checked for syntax). Raises ``orjson.JSONDecodeError``
    for text that is not JSON."""
    try:
        return _bound(orjson.loads(data), data)
    except orjson.JSONDecodeError as exc:
        if not str(exc).startswith("depth limit exceeded"):
            raise
    text = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    value, why = _bound(orjson.loads(_cut_text(text, WALK_DEPTH)), None)
    return value, why or cut_reason()


def loads(data: bytes | str) -> Any:
    """``orjson.loads`` for untrusted text, bounded: the result nests at most :data:`WALK_DEPTH`
    levels (deeper subtrees are cut and marked, however deep: see :func:`parse`). Raises
    ``orjson.JSONDecodeError`` as orjson does for text that is not JSON."""
    n = len(data)
    if n <= WALK_DEPTH or (
        n <= MAX_LIST
        and (
            data.count("[") + data.count("{")
            if isinstance(data, str)
            else data.count(b"[") + data.count(b"{")
        )
        <= WALK_DEPTH
    ):
        # (a stream's event, a tool call's arguments) too few brackets to nest past the bound,
        # too short to hold a list past MAX_LIST: what parse() would return, orjson's value as
        # it is, without its three calls
        return orjson.loads(data)
    return parse(data)[0]


def loads_or_none(data: bytes | str | None) -> Any:
    """:func:`loads`, or ``None`` for no data or data that is not JSON."""
    try:
        return loads(data) if data else None
    except ValueError:  # (orjson.JSONDecodeError is one)
        return None


def record_fits(rec: Any, raw: bytes | None = None, limit: int = RECORD_DEPTH) -> bool:
    """Whether a cassette record nests no deeper than ``limit`` levels (by default, the most
    looptap writes: :data:`RECORD_DEPTH`)."""
    if not isinstance(rec, dict | list) or _few_brackets(raw, limit):
        return True
    return not too_deep(rec, limit)


def cap_lists(value: Any) -> Any:
    """``value`` (a parsed request body) with its top-level lists — the history a provider
    normalises item by item — cut at :data:`MAX_LIST` and marked; the same object when none is
    that long (a check of a few keys: for bodies read back from a cassette, whose depth the record
    check already bounded)."""
    if isinstance(value, dict) and any(
        isinstance(v, list) and len(v) > MAX_LIST for v in value.values()
    ):
        return {
            k: (v[:MAX_LIST] + [MARKER] if isinstance(v, list) and len(v) > MAX_LIST else v)
            for k, v in value.items()
        }
    if isinstance(value, list) and len(value) > MAX_LIST:
        return value[:MAX_LIST] + [MARKER]
    return value
