"""What threading knows (:class:`~._data.Threads`) as plain data and back: the part of the state
a grown file is continued from (:mod:`cassettes.analysis._continuation`). Every turn threaded and
every index, spilled entries included; read back only into threading's own classes, checked."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ...models import Message
from .._plain_values import dump, load
from ..spill import SpillMap
from ._data import CLASSES as _CLASSES
from ._data import TABLES, Link, Registered, Threads, TurnInfo
from ._driver import Threader
from ._evidence import TWICE
from ._words import RECENT, RENDERED_MESSAGES, RENDERED_TEXT, SCAN_PROMPTS, Rendered, rendered_texts

__all__ = ["restore_threads", "threads_state"]


def threads_state(threader: Threader) -> dict[str, Any]:
    """What ``threader`` knows, as JSON-able data (``TypeError``: a value it cannot be); its
    turns and indexes as iterators, to be written as they come
    (:func:`~cassettes.analysis._plain_values.lines`)."""
    s = threader.threads
    out: dict[str, Any] = {
        "turns": s.turns.dumped(),
        "by_label": dict(s.by_label), "prompts": list(s.prompts.items()),
        "quotes": list(s.quotes.items()), "summaries": list(s.summaries.items()),
        "count": s.count, "families": dict(s.families), "overflows": list(s.overflows),
        "recent": [[conv, tid, _texts(m)] for conv, (tid, m) in s.recent.items()],
        "seen": list(s.seen.items()),
        "in_place": [[tid, dump(link, _CLASSES)] for tid, link in s.in_place.items()],
    }  # fmt: skip
    for name in TABLES:
        table: SpillMap[Any, Any] = getattr(s, name)
        out[name] = ([k, data] for k, data in table.dumped())
    return out


def _texts(messages: list[Message] | Rendered) -> list[Any]:
    """A recent request's texts a rendered history carries, as plain data."""
    texts = messages if isinstance(messages, tuple) else rendered_texts(messages)
    return [[user, list(said)] for user, said in texts]


def _recent(data: Any, n: int) -> OrderedDict[str, tuple[int, list[Message] | Rendered]]:
    """The recent requests' texts :func:`threads_state` gave (``ValueError``: not those)."""
    out: OrderedDict[str, tuple[int, list[Message] | Rendered]] = OrderedDict()
    if not isinstance(data, list) or len(data) > RECENT:
        raise _bad("recent requests")
    for item in data:
        if not (isinstance(item, list) and len(item) == 3 and type(item[0]) is str
                and type(item[1]) is int and 0 <= item[1] < n
                and isinstance(item[2], list)):  # fmt: skip
            raise _bad("recent requests")
        texts: list[tuple[bool, tuple[str, ...]]] = []
        for m in item[2][-RENDERED_MESSAGES:]:
            if not (isinstance(m, list) and len(m) == 2 and type(m[0]) is bool
                    and isinstance(m[1], list) and all(type(t) is str for t in m[1])):  # fmt: skip
                raise _bad("recent requests")
            texts.append((m[0], tuple(t[:RENDERED_TEXT] for t in m[1])))
        out[item[0]] = (item[1], tuple(texts))
    return out


def _seen(data: Any, n: int) -> OrderedDict[int, str]:
    """What the recent side calls were given, as :func:`threads_state` gave it."""
    if not isinstance(data, list) or not all(
        isinstance(x, list) and len(x) == 2 and type(x[0]) is int and 0 <= x[0] < n
        and type(x[1]) is str for x in data
    ):  # fmt: skip
        raise _bad("side calls' texts")
    return OrderedDict((t, text) for t, text in data[-SCAN_PROMPTS:])


def _in_place(data: Any, n: int) -> OrderedDict[int, Link]:
    """The recent side calls asked in place and their links, as :func:`threads_state` gave
    them."""
    out: OrderedDict[int, Link] = OrderedDict()
    if not isinstance(data, list) or len(data) > RECENT:
        raise _bad("side calls asked in place")
    for item in data:
        link = load(item[1], _CLASSES) if isinstance(item, list) and len(item) == 2 else None
        if type(link) is not Link or not (type(item[0]) is int and 0 <= item[0] < n
                                          and type(link.previous) is int
                                          and 0 <= link.previous < n):  # fmt: skip
            raise _bad("side calls asked in place")
        out[item[0]] = link
    return out


def _bad(what: str) -> ValueError:
    return ValueError(f"the threads' {what} are not what threading keeps")


def restore_threads(data: Any, keep: int) -> Threader:
    """A threader knowing what :func:`threads_state` gave ``data`` for (``ValueError`` when
    ``data`` does not check out)."""
    if not isinstance(data, dict) or set(data) != {*TABLES, "turns", "by_label", "prompts",
                                                   "quotes", "summaries", "count",
                                                   "families", "overflows", "recent",
                                                   "seen", "in_place"}:  # fmt: skip
        raise _bad("tables")
    threader = Threader(keep=keep)
    s: Threads = threader.threads
    for i, raw in enumerate(data["turns"]):
        info = load(raw, _CLASSES)
        if type(info) is not TurnInfo:
            raise _bad("turns")
        s.turns.append(info)
        if i % keep == keep - 1:
            s.turns.trim()
    n = len(s.turns)
    for name, key_type in TABLES.items():
        table: SpillMap[Any, Any] = getattr(s, name)
        for k, raw in data[name]:
            value = load(raw, _CLASSES)
            if type(k) is not key_type or not _fits(name, value, n):
                raise _bad(name)
            table[k] = value
            table.trim()
    s.by_label = _str_map(data["by_label"], str)
    s.prompts = OrderedDict(_str_map(dict(data["prompts"]), int))
    s.quotes = OrderedDict(_str_map(dict(data["quotes"]), int))
    s.summaries = OrderedDict(_str_map(dict(data["summaries"]), list))
    if not all(
        len(v) == 2 and all(type(t) is int and 0 <= t < n for t in v) for v in s.summaries.values()
    ):
        raise _bad("summaries")
    s.families = _str_map(data["families"], int)
    overflows = data["overflows"]
    if not isinstance(overflows, list) or not all(type(t) is int and 0 <= t < n for t in overflows):
        raise _bad("overflows")
    s.overflows = OrderedDict.fromkeys(overflows[-64:])
    s.recent, s.seen = _recent(data["recent"], n), _seen(data["seen"], n)
    s.in_place = _in_place(data["in_place"], n)
    if type(data["count"]) is not int or any(
        not 0 <= t < n for t in [*s.prompts.values(), *s.quotes.values()]
    ):
        raise _bad("counts")
    s.count = data["count"]
    s.trim()
    return threader


def _fits(name: str, value: Any, n: int) -> bool:
    """A value of the table ``name`` that names only turns among the ``n`` threaded."""
    if name == "prefix":
        return isinstance(value, list) and all(
            type(r) is Registered and 0 <= r.turn < n for r in value
        )
    if name == "by_start":
        return isinstance(value, list) and all(type(t) is int and 0 <= t < n for t in value)
    if name == "moved":  # (a turn moved out → the conversation it went to)
        return type(value) is str
    if name == "by_token":  # (or TWICE, -1: a token two turns produced names none)
        return type(value) is int and TWICE <= value < n
    return type(value) is int and 0 <= value < n


def _str_map(data: Any, value_type: type) -> dict[str, Any]:
    if not isinstance(data, dict) or not all(
        type(k) is str and type(v) is value_type for k, v in data.items()
    ):
        raise _bad("names")
    return dict(data)
