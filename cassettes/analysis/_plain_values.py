"""The values an analysis holds between round trips, as JSON and back (the state a grown file is
continued from: :mod:`._continuation`, docs/kept-analysis.md).

A closed set of types: JSON's own, and tuples, sets, frozen sets, dicts of any key, ordered dicts,
decimals and bytes, each tagged (``{"t": [...]}`` …), and the classes named in the
``classes`` a caller passes (dataclasses, named tuples, classes with ``__slots__``: their fields;
pydantic models: their JSON, validated). Reading runs no code of the data's choosing: a tag or a
class name that is not one of these, or a class's fields that are not exactly its own, is a
``ValueError``."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any

import orjson
from pydantic import BaseModel

__all__ = ["dump", "lines", "load", "sections"]

Classes = Mapping[str, type]


@functools.cache
def _fields(cls: type) -> tuple[str, ...]:
    """The fields a class of the state is made of."""
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    named: tuple[str, ...] | None = getattr(cls, "_fields", None)
    if named is not None:
        return named
    return tuple(getattr(cls, "__slots__", ()))


def _bad(what: str = "a value") -> ValueError:
    return ValueError(f"not {what} of the analysis' state")


def _items(v: Any, classes: Classes) -> list[Any]:
    return [dump(x, classes) for x in v]


def _entries(v: Any, classes: Classes) -> list[list[Any]]:
    return [[dump(k, classes), dump(x, classes)] for k, x in v.items()]


#: Each type of the set but JSON's own and the classes: how it is written.
_OUT: dict[type, Callable[[Any, Classes], Any]] = {
    float: lambda v, _: v if math.isfinite(v) else {"F": repr(v)},
    list: _items,
    tuple: lambda v, c: {"t": _items(v, c)},
    set: lambda v, c: {"s": _items(v, c)},
    frozenset: lambda v, c: {"f": _items(v, c)},
    dict: lambda v, c: {"d": _entries(v, c)},
    OrderedDict: lambda v, c: {"o": _entries(v, c)},
    Decimal: lambda v, _: {"n": str(v)},
    bytes: lambda v, _: {"b": v.hex()},
}


def dump(v: Any, classes: Classes) -> Any:
    """``v`` as JSON-able data (``TypeError`` for a value of no type of the set)."""
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    out = _OUT.get(t)
    if out is not None:
        return out(v, classes)
    name = t.__qualname__
    if classes.get(name) is not t:
        raise TypeError(f"a value of the analysis' state of an unknown type: {name}")
    if isinstance(v, BaseModel):
        return {"m": name, "v": v.model_dump(mode="json", exclude_unset=True)}
    fields: tuple[str, ...] = _fields(t)  # type: ignore[arg-type]  # (a class is hashable)
    return {"c": name, "v": {f: dump(getattr(v, f), classes) for f in fields}}


def _list(x: Any, classes: Classes) -> list[Any]:
    if not isinstance(x, list):
        raise _bad()
    return [load(y, classes) for y in x]


def _pairs(x: Any, classes: Classes) -> list[tuple[Any, Any]]:
    return [(k, y) for k, y in (_pair(p) for p in _list(x, classes))]


def _pair(x: Any) -> tuple[Any, Any]:
    if not isinstance(x, list) or len(x) != 2:
        raise _bad()
    return x[0], x[1]


def _text(x: Any) -> str:
    if not isinstance(x, str):
        raise _bad()
    return x


def _special(x: Any) -> float:
    if x not in ("nan", "inf", "-inf"):
        raise _bad("a number")
    return float(x)


#: Each tag: how its value is read.
_IN: dict[str, Callable[[Any, Classes], Any]] = {
    "t": lambda x, c: tuple(_list(x, c)),
    "s": lambda x, c: set(_list(x, c)),
    "f": lambda x, c: frozenset(_list(x, c)),
    "d": lambda x, c: dict(_pairs(x, c)),
    "o": lambda x, c: OrderedDict(_pairs(x, c)),
    "n": lambda x, _: Decimal(_text(x)),
    "b": lambda x, _: bytes.fromhex(_text(x)),
    "F": lambda x, _: _special(x),
}


def load(v: Any, classes: Classes) -> Any:
    """The value :func:`dump` gave ``v`` for (``ValueError`` when ``v`` is not one)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [load(x, classes) for x in v]
    if not isinstance(v, dict) or len(v) not in (1, 2):
        raise _bad()
    if len(v) == 2:
        return _instance(v, classes)
    ((tag, x),) = v.items()
    read = _IN.get(tag)
    if read is None:
        raise _bad(f"a tag ({tag!r})")
    return read(x, classes)


def _instance(v: dict[str, Any], classes: Classes) -> Any:
    """A class of ``classes`` from its fields (a dataclass, a named tuple, a class with slots)
    or, for a pydantic model, its validated JSON."""
    kind = "m" if "m" in v else "c"
    name, data = v.get(kind), v.get("v")
    cls = classes.get(name) if isinstance(name, str) else None
    if cls is None or not isinstance(data, dict):
        raise ValueError(f"not a class of the analysis' state: {name!r}")
    if kind == "m":
        if not issubclass(cls, BaseModel):
            raise ValueError(f"not a model of the analysis' state: {name!r}")
        try:
            return cls.model_validate(data)
        except Exception as exc:  # (pydantic's ValidationError is a ValueError; any else too)
            raise ValueError(str(exc)) from None
    fields = _fields(cls)
    if issubclass(cls, BaseModel) or set(data) != set(fields) or len(data) != len(fields):
        raise ValueError(f"the fields of {name} are not its own")
    values = {f: load(data[f], classes) for f in fields}
    if getattr(cls, "_fields", None) is not None:  # a named tuple
        return cls(**values)
    obj = object.__new__(cls)
    for f, x in values.items():
        object.__setattr__(obj, f, x)  # (a frozen dataclass too)
    return obj


def lines(state: dict[str, Any], write: Callable[[bytes], Any]) -> None:
    """``state`` (JSON-able, its long tables iterators, at its top level or one level down) as
    JSON lines handed to ``write`` as they come: each table's entries, one a line, then the head
    line (the rest, and each table's place and length), last, since only then are the tables'
    lengths known. Memory holds one entry's text at a time, never the tables' (a compressor as
    ``write``: never their text either); :func:`sections` reads them back."""
    places: list[list[Any]] = []

    def flat(d: dict[str, Any], where: list[str]) -> dict[str, Any]:
        head: dict[str, Any] = {}
        for k, v in d.items():
            if isinstance(v, Iterator):
                n = 0
                for n, e in enumerate(v, 1):  # noqa: B007 - (the count of lines written)
                    write(orjson.dumps(e, option=orjson.OPT_APPEND_NEWLINE))
                places.append([*where, k, n])
            else:
                head[k] = flat(v, [*where, k]) if isinstance(v, dict) and not where else v
        return head

    head = flat(state, [])
    write(orjson.dumps({"head": head, "tables": places}))


def sections(data: bytes) -> dict[str, Any]:
    """What :func:`lines` wrote, each table an iterator reading its lines as it goes
    (``ValueError`` when ``data`` is not that)."""
    rows = data.split(b"\n")
    first = orjson.loads(rows.pop())
    if not isinstance(first, dict) or set(first) != {"head", "tables"}:
        raise _bad("a head")
    head, at = first["head"], 0
    for *where, n in first["tables"] if isinstance(first["tables"], list) else ():
        into = head if len(where) == 1 else head.get(where[0])
        if type(n) is not int or n < 0 or not isinstance(into, dict) or len(where) > 2:
            raise _bad("a table")
        into[where[-1]] = (orjson.loads(r) for r in rows[at : at + n])
        at += n
    if at != len(rows) or not isinstance(head, dict):
        raise _bad("its lines")
    return head
