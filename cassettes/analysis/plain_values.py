"""The values an analysis holds between round trips, as JSON and back (the state a grown file is
continued from: :mod:`.continuation`, docs/kept-analysis.md).

A closed set of types: JSON's own, and tuples, sets, frozen sets, dicts of any key, ordered dicts,
decimals, bytes and arrays, each tagged (``{"t": [...]}`` …), and the classes named in the
``classes`` a caller passes (dataclasses, named tuples, classes with ``__slots__``: their fields;
pydantic models: their JSON, validated). Reading runs no code of the data's choosing: a tag or a
class name that is not one of these, or a class's fields that are not exactly its own, is a
``ValueError``."""

from __future__ import annotations

import dataclasses
import functools
import math
from array import array
from collections import OrderedDict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

__all__ = ["dump", "load"]

_TAGS = frozenset("tsfdonbacmF")


@functools.cache
def _fields(cls: type) -> tuple[str, ...]:
    """The fields a class of the state is made of."""
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    named: tuple[str, ...] | None = getattr(cls, "_fields", None)
    if named is not None:
        return named
    return tuple(getattr(cls, "__slots__", ()))


def dump(v: Any, classes: Mapping[str, type]) -> Any:
    """``v`` as JSON-able data (``TypeError`` for a value of no type of the set)."""
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if math.isfinite(v) else {"F": repr(v)}
    if t is list:
        return [dump(x, classes) for x in v]
    if t is tuple:
        return {"t": [dump(x, classes) for x in v]}
    if t is set or t is frozenset:
        return {"s" if t is set else "f": [dump(x, classes) for x in v]}
    if t is dict or t is OrderedDict:
        return {
            "d" if t is dict else "o": [[dump(k, classes), dump(x, classes)] for k, x in v.items()]
        }
    if t is Decimal:
        return {"n": str(v)}
    if t is bytes:
        return {"b": v.hex()}
    if t is array:
        return {"a": [v.typecode, v.tolist()]}
    name = t.__qualname__
    if classes.get(name) is not t:
        raise TypeError(f"a value of the analysis' state of an unknown type: {name}")
    if isinstance(v, BaseModel):
        return {"m": name, "v": v.model_dump(mode="json", exclude_unset=True)}
    fields: tuple[str, ...] = _fields(t)  # type: ignore[arg-type]  # (a class is hashable)
    return {"c": name, "v": {f: dump(getattr(v, f), classes) for f in fields}}


def load(v: Any, classes: Mapping[str, type]) -> Any:
    """The value :func:`dump` gave ``v`` for (``ValueError`` when ``v`` is not one)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [load(x, classes) for x in v]
    if not isinstance(v, dict) or len(v) not in (1, 2):
        raise ValueError("not a value of the analysis' state")
    if len(v) == 2:
        return _instance(v, classes)
    ((tag, x),) = v.items()
    if tag not in _TAGS:
        raise ValueError(f"not a value of the analysis' state: {tag!r}")
    if tag in "tsf":
        items = [load(y, classes) for y in _list(x)]
        return tuple(items) if tag == "t" else set(items) if tag == "s" else frozenset(items)
    if tag in "do":
        pairs = [(load(k, classes), load(y, classes)) for k, y in (_pair(p) for p in _list(x))]
        return dict(pairs) if tag == "d" else OrderedDict(pairs)
    if tag == "n" and isinstance(x, str):
        return Decimal(x)
    if tag == "b" and isinstance(x, str):
        return bytes.fromhex(x)
    if tag == "F" and x in ("nan", "inf", "-inf"):
        return float(x)
    if tag == "a":
        code, items = _pair(x)
        if code not in ("q", "i", "B") or not all(type(i) is int for i in _list(items)):
            raise ValueError("not an array of the analysis' state")
        return array(code, items)
    raise ValueError(f"not a value of the analysis' state: {tag!r}")


def _list(x: Any) -> list[Any]:
    if not isinstance(x, list):
        raise ValueError("not a value of the analysis' state")
    return x


def _pair(x: Any) -> tuple[Any, Any]:
    if not isinstance(x, list) or len(x) != 2:
        raise ValueError("not a value of the analysis' state")
    return x[0], x[1]


def _instance(v: dict[str, Any], classes: Mapping[str, type]) -> Any:
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
