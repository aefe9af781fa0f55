"""Where a run was recorded: the agent's working directory and home, kept in the cassette header
(``meta.cwd``, ``meta.home``), so that a replay or a fork in another checkout, on another machine
or under another user reads the recording's ``/home/alice/proj`` as ``<cwd>`` just as it reads its
own (:class:`~cassettes.matching.VolatileSpans`, built from them by
:func:`~cassettes.matching.volatile_for`).

Only the two paths are written: no environment variable, no user name besides what the paths
hold. A header is untrusted: a value that is not a string, is empty or longer than
:data:`MAX_PATH`, is not absolute or holds a control character is ignored (a replay without it
tolerates this machine's paths only, as before the fields existed).

A module of the base, importing nothing of looptap: the recorder's writer process writes the
header's two paths (:func:`here`) and loads no matcher (tests/test_startup_imports.py); the
matcher reads them back (:func:`recorded`).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_PATH", "PLACES", "here", "path_value", "recorded", "this_process"]

#: The header fields (in ``meta``): the agent's working directory, its home.
PLACES = ("cwd", "home")
#: The longest path taken from a header (Linux's PATH_MAX): longer is not a directory.
MAX_PATH = 4096


def path_value(value: Any) -> str | None:
    """``value`` if it can be a directory's absolute path as a header holds it, else ``None``."""
    if not isinstance(value, str) or not 1 < len(value) <= MAX_PATH or not value.startswith("/"):
        return None
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in value):
        return None  # a newline, an escape, a bidi override, a lone surrogate: not a path to match
    return value


def this_process(cwd: str | None = None, home: str | None = None) -> tuple[str | None, str]:
    """``cwd`` and ``home``, each this process's where not given (``None`` for a working
    directory removed under us)."""
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:  # the directory was removed under us
            cwd = None
    return cwd, home if home is not None else os.path.expanduser("~")


def here(cwd: str | None = None, home: str | None = None) -> dict[str, str]:
    """The header fields for a run recorded now by an agent in ``cwd`` with ``home`` (this
    process's by default: ``looptap run``'s child inherits both); a field that cannot be known
    or fails :func:`path_value` is left out."""
    cwd, home = this_process(cwd, home)
    out: dict[str, str] = {}
    for name, value in zip(PLACES, (cwd, home), strict=True):
        p = path_value(value)
        if p is not None:
            out[name] = p
    return out


def recorded(header: Any) -> tuple[list[str], list[str]]:
    """The working directories and homes a cassette header says its run was recorded in (each a
    list of zero or one): what :func:`path_value` accepts, nothing else."""
    meta = header.get("meta") if isinstance(header, Mapping) else None
    if not isinstance(meta, Mapping):
        return [], []
    cwd, home = (path_value(meta.get(name)) for name in PLACES)
    return ([cwd] if cwd else []), ([home] if home else [])
