"""Where a request body holds each tool result's content: the reading behind
:meth:`~cassettes.providers._base.Provider.tool_result_paths`, a bounded walk over an untrusted
body."""

from __future__ import annotations

from typing import Any

from cassettes.providers._values import compact_json, text_of

__all__ = ["locate_results"]


#: Keys of a tool *call*'s object (its arguments): an object with one is never a result's.
_CALL_KEYS = frozenset({"input", "arguments", "args", "function"})
#: How deep and how many objects :func:`locate_results` looks at (a body is untrusted).
_LOCATE_DEPTH = 16
_LOCATE_NODES = 200_000


def locate_results(
    body: Any, results: list[tuple[str | None, str | None, str]]
) -> list[tuple[tuple[str | int, ...], str | None]]:
    """For :meth:`Provider.tool_result_paths`: each result's content path, found in body order."""
    out: list[tuple[tuple[str | int, ...], str | None]] = []
    pending = [r for r in results if r[2] and (r[0] or r[1])]
    for node, path in _objects_in_order(body):
        if not pending:
            break
        if _CALL_KEYS & node.keys():
            continue
        found = _result_in(node, pending)
        if found is not None:
            j, key = found
            out.append(((*path, key), pending[j][1]))
            del pending[j]
    return out


def _objects_in_order(body: Any) -> list[tuple[dict[str, Any], tuple[str | int, ...]]]:
    """The objects of ``body`` with their paths, in document order (a pre-order walk), no deeper
    than ``_LOCATE_DEPTH`` and within ``_LOCATE_NODES`` nodes visited."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(body, ())]
    seen = 0
    order: list[tuple[dict[str, Any], tuple[str | int, ...]]] = []
    while stack and seen < _LOCATE_NODES:
        node, path = stack.pop()
        seen += 1
        if len(path) > _LOCATE_DEPTH:
            continue
        if isinstance(node, dict):
            order.append((node, path))
            stack.extend(
                (v, (*path, k))
                for k, v in reversed(list(node.items()))
                if isinstance(v, (dict, list))
            )
        elif isinstance(node, list):
            stack.extend(
                (v, (*path, i))
                for i, v in reversed(list(enumerate(node)))
                if isinstance(v, (dict, list))
            )
    return order


def _result_in(
    node: dict[str, Any], pending: list[tuple[str | None, str | None, str]]
) -> tuple[int, str] | None:
    """The first pending result ``node`` holds — it carries the result's call id (or, without one,
    its name) and a value that flattens to its content — as (its index in ``pending``, the key
    of that value); ``None`` when it holds none."""
    values = {v for v in node.values() if isinstance(v, str)}
    for j, (call_id, name, content) in enumerate(pending):
        ident = call_id or name
        if ident not in values:
            continue
        key = next(
            (
                k
                for k, v in node.items()
                if not (isinstance(v, str) and v in (call_id, name)) and _flattens_to(v, content)
            ),
            None,
        )
        if key is not None:
            return j, key
    return None


def _flattens_to(value: Any, content: str) -> bool:
    """Whether ``value`` is what an adapter flattened to ``content`` (its text, or its JSON)."""
    if isinstance(value, str):
        return value == content
    try:
        return text_of(value) == content or compact_json(value) == content or (
            isinstance(value, dict) and len(value) == 1 and next(iter(value.values())) == content
        )
    except Exception:
        return False
