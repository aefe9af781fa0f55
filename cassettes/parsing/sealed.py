"""This machine's key: a random 32-byte file made on first use, readable by its owner only
(``$LOOPTAP_STATE_DIR``, else ``$XDG_STATE_HOME/looptap``, else ``~/.local/state/looptap``), with
which looptap seals what it keeps for itself on this machine (the price memo,
:mod:`cassettes.analysis.price_memo`): a file from anywhere else, or edited by hand, is not
believed.

Until 2026-11 the recorder's writer also sealed its parse of each response into the record
(``"parsed"``) for the first reader to take instead of parsing the raw; readers ignore that block
now (the kept analysis is what spares a later reader the work: docs/kept-analysis.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from cassettes.storage.store import open_regular

__all__ = ["machine_key", "state_dir"]

_KEY_FILE = "parse.key"


def state_dir() -> Path:
    """Where looptap keeps this machine's state (the sealing key)."""
    if os.environ.get("LOOPTAP_STATE_DIR"):
        return Path(os.environ["LOOPTAP_STATE_DIR"])
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "looptap"


_cache: dict[str, bytes | None] = {}


def machine_key(create: bool) -> bytes | None:
    """This machine's sealing key (``None`` when there is none and it may not or cannot be made)."""
    where = "key:" + "\0".join(
        os.environ.get(v, "") for v in ("LOOPTAP_STATE_DIR", "XDG_STATE_HOME", "HOME")
    )
    cached = _cache.get(where)
    if cached is not None:
        return cached
    try:
        path = state_dir() / _KEY_FILE
    except RuntimeError:  # no home directory
        return None
    key: bytes | None
    try:
        key = _read_key(path)
    except OSError:
        if not create:
            return None
        key = _make_key(path)
    if key is None or len(key) != 32:
        return None
    _cache[where] = key
    return key


def _read_key(path: Path) -> bytes:
    """The key file's bytes (a FIFO or a device put in its place is refused, never waited on:
    there is then no key, and nothing is sealed or kept)."""
    with open_regular(path) as f:
        return f.read(64)


def _make_key(path: Path) -> bytes | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        try:
            return _read_key(path)
        except OSError:
            return None
    except OSError:
        return None
    key = os.urandom(32)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key
