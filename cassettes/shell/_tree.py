"""The files of a working tree, walked and hashed the one way the recorder (proxy/workspace.py)
and a fork's scratch tree (:mod:`._fork`) both do it (bounded)."""

from __future__ import annotations

import hashlib
import os
import stat

__all__ = ["BLOB", "FILES", "HASHED", "KEPT", "SKIPPED", "digest", "file_hash", "walk"]

#: Files walked a scan, bytes hashed per file, bytes per blob kept, bytes of blobs kept a run.
FILES, HASHED, BLOB, KEPT = 20000, 16 << 20, 1 << 20, 256 << 20
#: Directories not walked (tools' caches and environments, version control's own store).
SKIPPED = frozenset(
    ".git .hg .svn node_modules __pycache__ .venv venv .tox .nox .mypy_cache .pytest_cache "
    ".ruff_cache .cache".split()
)


def file_hash(path: str, size: int) -> tuple[str | None, bytes | None]:
    """The file's sha256 and, when small enough to keep, its bytes (read once)."""
    if size > HASHED:
        return None, None
    try:
        with open(path, "rb", buffering=0) as f:
            data = f.read(HASHED + 1)
    except OSError:
        return None, None
    return hashlib.sha256(data).hexdigest(), (data if len(data) <= BLOB else None)


def walk(root: str, limit: int = FILES) -> tuple[dict[str, os.stat_result], bool]:
    """Every regular file under ``root`` (links not followed, :data:`SKIPPED` directories left
    out) by its path relative to ``root``, and whether the walk stopped at ``limit``."""
    out: dict[str, os.stat_result] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            name = f"{rel}/{e.name}" if rel else e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if e.name not in SKIPPED:
                    stack.append(name)
            elif stat.S_ISREG(st.st_mode):
                if len(out) >= limit:
                    return out, True
                out[name] = st
    return out, False


def digest(root: str) -> tuple[str, int, bool]:
    """The digest of the tree under ``root`` as the recorder takes it at a run's start (each
    file's path and sha256, in walk order), how many files, and whether the walk was cut."""
    files, cut = walk(root)
    listing = hashlib.sha256()
    for rel, st in files.items():
        sha, _ = file_hash(os.path.join(root, rel), st.st_size)
        listing.update(f"{rel}\0{sha}\n".encode())
    return listing.hexdigest(), len(files), cut
