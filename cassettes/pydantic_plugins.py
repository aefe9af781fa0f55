"""pydantic's plugin discovery, without ``importlib.metadata`` when no installed distribution
declares a plugin.

pydantic looks for plugins (the ``pydantic`` entry-point group) when it builds its first validator:
its loader imports ``importlib.metadata`` (with ``email``, ``zipfile``, ``csv`` … about 40
modules) and reads every installed distribution's metadata, about a twentieth of a small
``looptap show``, nearly always to find none. :func:`discover_lazily` imports that loader with an
``entry_points`` of its own: when pydantic asks for the ``pydantic`` group, it first reads, in
every directory ``importlib.metadata`` would search, each distribution's ``entry_points.txt``,
and answers "none" only when no file there has a ``pydantic`` section. Anything else (a plugin
declared, a path entry that is a zip or an egg, a finder on ``sys.meta_path`` that is not the
standard path finder, a file it cannot read) hands the question to ``importlib.metadata``
itself: a user's plugin is loaded as pydantic loads it. Used by the command line only
(``cli.loading``).

pydantic has no public way to be told so: this is the one use of its internals (its private
``pydantic.plugin._loader``, and ``importlib.metadata`` stood in for while that module is
imported), guarded by version: only the pydantic releases in :data:`CHECKED` (the ones this
project installs, ``pydantic>=2.7,<3``, whose loader binds ``entry_points`` when it is imported).
Any other release discovers its plugins its own way (tests/test_library_private.py).
"""

from __future__ import annotations

import os
import re
import sys
import types
from typing import Any

__all__ = ["CHECKED", "declared_nowhere", "discover_lazily"]

_GROUP = "pydantic"
#: The pydantic releases whose plugin loader was read for this (2.14.4 by the tests).
CHECKED = re.compile(r"2\.\d+\.\d+")


def declared_nowhere() -> bool:
    """True when no distribution ``importlib.metadata`` can see declares a ``pydantic`` entry point
    (False when that cannot be told without it)."""
    from importlib.machinery import PathFinder

    if any(
        f is not PathFinder and getattr(f, "find_distributions", None) is not None
        for f in sys.meta_path
    ):
        return False
    for entry in sys.path:
        if not isinstance(entry, str):
            return False
        root = entry or "."
        if os.path.basename(root).lower().endswith(".egg"):
            return False
        try:
            with os.scandir(root) as it:
                children = [c.name for c in it]
        except FileNotFoundError:
            continue  # importlib.metadata finds nothing there either
        except OSError:
            if os.path.exists(root):
                return False  # a zip (or unreadable): importlib.metadata's own search
            continue
        for child in children:
            if not child.lower().endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(root, child, "entry_points.txt"), "rb") as f:
                    text = f.read()
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                return False
            if any(
                line.strip().strip(b"[]").strip() == _GROUP.encode() for line in text.splitlines()
            ):
                return False
    return True


def _entry_points(**params: Any) -> Any:
    if params == {"group": _GROUP} and declared_nowhere():
        return ()
    import importlib.metadata

    return importlib.metadata.entry_points(**params)


def discover_lazily() -> None:
    """Import pydantic's plugin loader with :func:`_entry_points` in place of
    ``importlib.metadata.entry_points`` (nothing is done when either is imported already)."""
    if "pydantic.plugin._loader" in sys.modules or "importlib.metadata" in sys.modules:
        return
    try:
        import pydantic.plugin  # its own imports outside the window below
        from pydantic.version import VERSION
    except ImportError:
        return
    if not CHECKED.fullmatch(VERSION):
        return
    stand_in = types.ModuleType("importlib.metadata")
    stand_in.entry_points = _entry_points  # type: ignore[attr-defined]
    sys.modules["importlib.metadata"] = stand_in
    try:
        import pydantic.plugin._loader  # noqa: F401 - binds entry_points = _entry_points
    except ImportError:
        pass  # another pydantic: it discovers its own way
    finally:
        if sys.modules.get("importlib.metadata") is stand_in:
            del sys.modules["importlib.metadata"]
