"""Bounds on every parse and walk of untrusted data (wire bodies, cassettes, imported files).

A model controls how deep its tool-call arguments nest, and a shared file controls everything in it.
Python recursion ends in ``RecursionError`` near 1,000 frames (or a C-stack crash in C parsers), and
orjson refuses to *write* JSON nested 255 levels or more, so every recursive walk over such data
is bounded here, once, with named limits:

- :data:`STORE_DEPTH` — the deepest JSON value a record stores as JSON. Deeper bodies are stored as
  their raw text and labelled (the record around a body adds a few levels below orjson's 254).
- :data:`WALK_DEPTH` — how deep analysis, verification, views and the inspector descend. A deeper
  subtree is treated as opaque (and labelled where it matters), never recursed into.

:func:`json_depth` measures nesting iteratively (no recursion), stopping as soon as a limit is passed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["STORE_DEPTH", "WALK_DEPTH", "json_depth", "too_deep"]

#: Deepest JSON stored as JSON inside a cassette record (orjson writes at most 254 levels; the
#: record, its request/response and the body form take the rest).
STORE_DEPTH = 240
#: Deepest level any recursive walk over untrusted data descends to.
WALK_DEPTH = 200


def json_depth(value: Any, limit: int = STORE_DEPTH) -> int:
    """Nesting depth of a JSON-like value (a scalar is 0, ``[]`` is 1, ``[[1]]`` is 2), computed
    without recursion. Stops early and returns ``limit + 1`` once the value is deeper than ``limit``."""
    if not isinstance(value, dict | list | tuple):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return limit + 1
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list | tuple):
                stack.append((child, depth + 1))
    return deepest


def too_deep(value: Any, limit: int = WALK_DEPTH) -> bool:
    """Whether ``value`` nests deeper than ``limit``."""
    return json_depth(value, limit) > limit
