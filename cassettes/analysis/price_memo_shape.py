"""The shapes a sound price memo has (:mod:`cassettes.analysis.price_memo`): a memo read back from
its file is used only when every value is what the memo writes, so computing from it never meets a
type it does not expect (it is signed, but a check of its shape costs little and keeps a bug of
another looptap release from reaching the arithmetic)."""

from __future__ import annotations

import re
from datetime import date, time
from typing import Any

__all__ = ["MAX", "empty", "sound"]

#: At most this many entries per table: the memo holds what a user's runs named, not a copy of the
#: library.
MAX = 4096


def empty() -> dict[str, Any]:
    """A memo holding nothing."""
    return {
        "known": None,
        "providers": None,
        "lookup": {},
        "models": {},
        "plans": {},
        "inferred": {},
    }


_DEC = re.compile(r"-?[0-9]+(\.[0-9]+)?(E[-+]?[0-9]+)?")


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _sound_constraint(c: Any) -> bool:
    if c is None:
        return True
    if not isinstance(c, list) or len(c) < 2 or not all(isinstance(x, str) for x in c):
        return False
    try:
        if c[0] == "date" and len(c) == 2:
            date.fromisoformat(c[1])
            return True
        if c[0] == "tod" and len(c) == 3:
            time.fromisoformat(c[1]), time.fromisoformat(c[2])
            return True
    except ValueError:
        return False
    return False


def _sound_price(p: Any) -> bool:
    if isinstance(p, str):
        return _DEC.fullmatch(p) is not None
    return (
        isinstance(p, dict)
        and set(p) == {"base", "tiers"}
        and _sound_price(p["base"])
        and isinstance(p["tiers"], list)
        and all(
            isinstance(t, list)
            and len(t) == 2
            and type(t[0]) is int
            and isinstance(t[1], str)
            and _DEC.fullmatch(t[1]) is not None
            for t in p["tiers"]
        )
    )


def _sound_resolved(r: Any) -> bool:
    """One ``[unit, per, price]`` of a plan's resolved prices."""
    return (
        isinstance(r, list)
        and len(r) == 3
        and isinstance(r[0], str)
        and type(r[1]) is int
        and r[1] > 0
        and _sound_price(r[2])
    )


def _sound_leaf(leaf: Any) -> bool:
    """One ``[unit, [units it contains]]`` of a plan's leaves."""
    return (
        isinstance(leaf, list)
        and len(leaf) == 2
        and isinstance(leaf[0], str)
        and _is_str_list(leaf[1])
    )


def _leaves_in_order(leaves: list[list[Any]]) -> set[str] | None:
    """The units a plan counts (``requests`` included), when each leaf subtracts only leaves
    computed before it; ``None`` otherwise."""
    seen: set[str] = {"requests"}
    for name, contained in leaves:
        if not set(contained) <= seen:
            return None
        seen.add(name)
    return seen


def _sound_plan(p: Any) -> bool:
    if p is None:
        return True
    if (
        not isinstance(p, dict)
        or set(p) != {"resolved", "leaves", "needed", "tiered"}
        or type(p["tiered"]) is not bool
    ):
        return False
    resolved, leaves = p["resolved"], p["leaves"]
    if not isinstance(resolved, list) or not all(_sound_resolved(r) for r in resolved):
        return False
    if not isinstance(leaves, list) or not all(_sound_leaf(leaf) for leaf in leaves):
        return False
    keys = {leaf[0] for leaf in leaves}
    # every priced unit's count is computed before it is read, and each leaf subtracts only leaves
    # before it
    seen = _leaves_in_order(leaves)
    if seen is None:
        return False
    return (
        _is_str_list(p["needed"])
        and all(r[0] in seen for r in resolved)
        and "requests" not in keys
        and keys <= set(p["needed"])
    )


def _sound_hit(hit: Any) -> bool:
    """One lookup answer: an error text, or ``[provider, model, from the URL, source]``."""
    return isinstance(hit, str) or (
        isinstance(hit, list)
        and len(hit) == 4
        and isinstance(hit[0], str)
        and isinstance(hit[1], str)
        and type(hit[2]) is bool
        and isinstance(hit[3], str)
    )


def _sound_variant(v: Any) -> bool:
    """One ``[constraint, {context key: value}]`` of a model's price variants."""
    return (
        isinstance(v, list)
        and len(v) == 2
        and _sound_constraint(v[0])
        and isinstance(v[1], dict)
        and all(isinstance(x, str) for x in v[1].values())
    )


def _sound_model(m: Any) -> bool:
    """One model's entry: its conditional prices' constraints and its variants."""
    if not (isinstance(m, dict) and set(m) == {"cond", "variants"}):
        return False
    cond = m["cond"]
    if cond is not None and not (
        isinstance(cond, list) and cond and all(_sound_constraint(c) for c in cond)
    ):
        return False
    return isinstance(m["variants"], list) and all(_sound_variant(v) for v in m["variants"])


def _sound_heads(known: Any, providers: Any) -> bool:
    """The memo's list of known models and its provider pairs (each may be absent: ``None``)."""
    if known is not None and not _is_str_list(known):
        return False
    return providers is None or (
        isinstance(providers, list)
        and all(isinstance(p, list) and len(p) == 2 and _is_str_list(p) for p in providers)
    )


def sound(doc: Any) -> bool:
    """Whether a memo read back from its file has every value in the shape
    :mod:`cassettes.analysis.price_memo` writes (it is ignored otherwise)."""
    if (
        not isinstance(doc, dict)
        or set(doc) != set(empty())
        or not _sound_heads(doc["known"], doc["providers"])
    ):
        return False
    lookup, models, plans, inferred = doc["lookup"], doc["models"], doc["plans"], doc["inferred"]
    if not all(isinstance(t, dict) and len(t) <= MAX for t in (lookup, models, plans, inferred)):
        return False
    return (
        all(_sound_hit(hit) for hit in lookup.values())
        and all(_sound_model(m) for m in models.values())
        and all(_sound_plan(p) for p in plans.values())
        and all(v is None or (type(v) is int and v == 0) for v in inferred.values())
    )
