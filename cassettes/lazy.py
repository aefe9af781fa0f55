"""What start-up defers to first use: a package façade's names (PEP 562), so that start-up loads a
package for the one or two names a path needs, not every private module behind it; another
library's package ``__init__`` (:func:`init_on_first_use`), where its submodules are all a path
needs; and a module's regular expressions (:func:`pattern`), so that importing it compiles none a
run does not use."""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, AnyStr, cast

__all__ = ["init_on_first_use", "on_first_use", "pattern"]

_INIT_LOCK = threading.Lock()


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


def init_on_first_use(package: str) -> bool:
    """``package`` (a library's, top level or not) in ``sys.modules`` as a module of its own path
    whose ``__init__`` has not run: its submodules import from it as usual (one asked for as an
    attribute, as ``from . import x`` in another submodule asks, is imported alone), and its first
    other attribute asked for runs the real ``__init__`` in that same module object, so whoever
    asks gets the whole package. ``False`` when it is not a plain package directory (the caller
    imports it as it is, or not at all); ``True`` when it is registered, or was imported already
    (nothing is done then). Used where a library's ``__init__`` imports far more than looptap
    needs of it (genai-prices' network updater, mitmproxy's 31 default addons)."""
    import importlib.util  # (here: on every start-up path, only the recorder's and prices' need it)

    with _INIT_LOCK:
        if package in sys.modules:
            return True
        try:
            spec = importlib.util.find_spec(package)
        except ImportError:  # (its parent package is not installed)
            return False
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return False
        shell = importlib.util.module_from_spec(spec)
        loader = spec.loader
        where = list(spec.submodule_search_locations)
        done = threading.Lock()

        def __getattr__(name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            if any(
                os.path.isfile(os.path.join(d, f"{name}.py"))
                or os.path.isfile(os.path.join(d, name, "__init__.py"))
                for d in where
            ):
                return importlib.import_module(f"{package}.{name}")  # a submodule: itself
            with done:  # the __init__ runs once, whichever thread asks first
                if shell.__dict__.pop("__getattr__", None) is not None:
                    loader.exec_module(shell)
            if name in shell.__dict__:
                return shell.__dict__[name]
            raise AttributeError(f"module {package!r} has no attribute {name!r}")

        shell.__dict__["__getattr__"] = __getattr__
        sys.modules[package] = shell
        parent, _, child = package.rpartition(".")
        if parent:  # (as the import system binds a submodule in its parent)
            setattr(sys.modules[parent], child, shell)
        return True


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
