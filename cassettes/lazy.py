"""A package façade's names loaded on first use (PEP 562): start-up loads a package for the one or
two names a path needs, not every private module behind it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["on_first_use"]


def on_first_use(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The package's ``__getattr__``: each name of ``exports`` taken from its module (a private
    module's name, under ``package``, or a whole dotted path) when first asked for, and kept in
    the package's namespace; any other name is an ``AttributeError``."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = module if "." in module else f"{package}.{module}"
        namespace[name] = value = getattr(importlib.import_module(where), name)
        return value

    return __getattr__
