"""The runs under some directories: every cassette file, found by name, newest first. The one walk
``looptap index`` and the MCP server's listing share."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["RUN_SUFFIXES", "run_files"]

#: The names of the files taken as runs (a looptap cassette, a vcrpy cassette).
RUN_SUFFIXES = (".jsonl", ".yaml", ".yml")
_SKIPPED_DIRS = ("node_modules", "__pycache__")


def run_files(roots: Sequence[Path]) -> list[Path]:
    """Every cassette under the (resolved) ``roots``, newest first; hidden directories (``.git``,
    ``.looptap``) and symlinks leading out of the roots are left out."""
    seen: dict[Path, float] = {}
    for r in roots:
        for dirpath, dirnames, filenames in os.walk(r):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in _SKIPPED_DIRS]
            for fn in filenames:
                if not fn.lower().endswith(RUN_SUFFIXES):
                    continue
                try:
                    real = (Path(dirpath) / fn).resolve(strict=True)
                    if any(real.is_relative_to(x) for x in roots) and real.is_file():
                        seen[real] = real.stat().st_mtime
                except OSError:
                    continue
    return sorted(seen, key=lambda p: (-seen[p], str(p)))
