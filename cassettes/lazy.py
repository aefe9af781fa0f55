"""What start-up defers to first use: a package façade's names (PEP 562), so that start-up loads a
package for the one or two names a path needs, not every private module behind it; and a module's
regular expressions (:func:`pattern`), so that importing it compiles none a run does not use."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, AnyStr, cast

__all__ = ["on_first_use", "pattern"]


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


def pattern(source: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile(source, flags)`` at its first use: a module imported on every start (``show``
    imports the whole analysis) defines its expressions with this, and a run that never needs
    one never compiles it (compiling is most of what such a module's import costs)."""
    return cast("re.Pattern[AnyStr]", _Pattern(source, flags))


class _Pattern:
    """Stands for the compiled expression: its first attribute asked for compiles it; each one
    is then kept here (a bound method of the compiled expression), found without this lookup."""

    def __init__(self, source: Any, flags: int) -> None:  # str or bytes, as re.compile takes
        self._source = (source, flags)

    def __getattr__(self, name: str) -> Any:
        value = getattr(re.compile(*self._source), name)
        self.__dict__[name] = value
        return value
