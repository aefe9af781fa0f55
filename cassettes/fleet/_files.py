"""The runs under some directories: every cassette file, found by name, newest first. The one walk
``looptap index`` and the MCP server's listing share."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

__all__ = ["RUN_SUFFIXES", "run_files", "run_stats"]

#: The names of the files taken as runs (a looptap cassette, a vcrpy cassette).
RUN_SUFFIXES = (".jsonl", ".yaml", ".yml")
_SKIPPED_DIRS = ("node_modules", "__pycache__")


def run_files(roots: Sequence[Path]) -> list[Path]:
    """Every cassette under the (resolved) ``roots``, newest first; hidden directories (``.git``,
    ``.looptap``) and symlinks leading out of the roots are left out."""
    seen = run_stats(roots)
    return sorted(seen, key=lambda p: (-seen[p].st_mtime_ns, str(p)))


def run_stats(roots: Sequence[Path]) -> dict[Path, os.stat_result]:
    """:func:`run_files`' files with their ``stat``, in one ``os.scandir`` walk: one ``stat`` a
    file (the directory entry tells a directory from a file; only a symlink is resolved)."""
    seen: dict[Path, os.stat_result] = {}
    dirs = [str(r) for r in roots]
    while dirs:
        try:
            with os.scandir(dirs.pop()) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if not e.name.startswith(".") and e.name not in _SKIPPED_DIRS:
                        dirs.append(e.path)
                    continue
                if not e.name.lower().endswith(RUN_SUFFIXES):
                    continue
                path = Path(e.path)
                if e.is_symlink():
                    path = path.resolve(strict=True)
                    if not any(path.is_relative_to(r) for r in roots):
                        continue
                st = e.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                seen[path] = st
    return seen
