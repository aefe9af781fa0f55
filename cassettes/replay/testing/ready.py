"""The recorder's ready file: what ``looptap record --ready-file PATH`` (and ``looptap run``)
writes once its listeners accept connections, for a program that starts the recorder and must
know where it listens without scraping its ``export`` lines.

One JSON object (docs/recorder.md, "The ready file"), written atomically (a private temporary file
beside it, then linked into place) with mode 0600, and removed when the recorder stops if it is
still the file written; a reader sees no file, or the whole object. The path is checked before the
recorder starts: only a ready file an earlier recorder left is replaced (docs/reliability.md,
"Paths looptap writes"). It holds addresses, paths and the client environment, never a secret: the
environment is exactly what the ``export`` lines say (base URLs, proxies, CA bundles), and an
upstream URL is written without user, password, query or fragment.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Literal, TypedDict
from urllib.parse import urlsplit

from ...errors import CassetteFormatError
from ...recording import seal
from ...storage import (
    FileId,
    Target,
    UnsafePath,
    check_target,
    open_regular,
    remove_if_same,
    same_path,
    write_new,
)

__all__ = [
    "SCHEMA",
    "VERSION",
    "Ready",
    "ReadyListener",
    "bare_url",
    "check_ready_path",
    "clear_stale",
    "read_ready",
    "remove_ready",
    "write_ready",
]

#: The ``schema`` and ``version`` of the object; the version changes when a field's meaning does
#: (new fields may appear without a change).
SCHEMA = "looptap.recorder.ready"
VERSION = 1


class ReadyListener(TypedDict):
    #: A built-in API listener's name, an ``--upstream`` name, or ``forward``.
    name: str
    mode: Literal["reverse", "forward"]
    host: str
    port: int
    #: What a client is pointed at: the base URL of a reverse listener, the forward proxy's URL.
    url: str
    #: Where a reverse listener forwards to (``None`` for the forward proxy).
    upstream: str | None
    #: The variables that carry ``url`` to a client (base URLs; the proxy variables for
    #: ``forward``).
    env: list[str]


class Ready(TypedDict):
    schema: str
    version: int
    #: looptap's version.
    looptap: str
    #: The recorder's process id.
    pid: int
    #: The cassette it records into (absolute).
    cassette: str
    #: The address the listeners bind (``--listen-host``).
    listen_host: str
    listeners: list[ReadyListener]
    #: The forward proxy's URL (``HTTPS_PROXY``).
    proxy_url: str
    #: mitmproxy's CA certificate (PEM), which the forward proxy signs TLS interceptions with.
    ca_cert: str
    #: The environment a client needs: the same names and values as the ``export`` lines.
    env: dict[str, str]


def bare_url(url: str) -> str:
    """``url`` without user, password, query and fragment (what may be written down)."""
    try:
        u = urlsplit(url)
        host = u.hostname or ""
        port = u.port
    except ValueError:
        return ""
    if ":" in host:
        host = f"[{host}]"
    return f"{u.scheme}://{host}{f':{port}' if port is not None else ''}{u.path}"


def _is_ready_file(path: Path) -> bool:
    """Whether ``path`` is a ready file a recorder of this user left (at most 1 MiB is read, no link
    followed): the one existing file ``--ready-file`` may replace."""
    try:
        with open_regular(path, follow=False) as f:
            if os.fstat(f.fileno()).st_uid != os.geteuid():
                return False
            raw = f.read(1 << 20)
    except OSError:
        return False
    try:
        obj = json.loads(raw)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("schema") == SCHEMA


def check_ready_path(path: str | Path, *, cassette: str | Path | None = None) -> Target:
    """Check ``--ready-file PATH`` before the recorder starts (storage/_paths.py): refused when it
    is the cassette, a link, a directory, a device, a FIFO or a socket, or an existing file that is
    not a ready file a recorder left; such a left-over one is what :attr:`Target.replaces` names.
    Raises :class:`~cassettes.storage.UnsafePath`."""
    path = Path(path)
    if cassette is not None and same_path(path, cassette):
        raise UnsafePath(
            f"the ready file {path} is the cassette: give --ready-file a path of its own"
        )
    return check_target(
        path,
        "the ready file",
        owned=_is_ready_file,
        hint="it is not a ready file a recorder left; give --ready-file a new path",
    )


def clear_stale(target: Target) -> None:
    """Remove the left-over ready file :func:`check_ready_path` found (if it is still that very
    file), so it is never read as this recorder's."""
    remove_if_same(target.path, target.replaces)


def write_ready(path: str | Path, ready: Ready) -> FileId:
    """Write ``ready`` to ``path`` atomically, readable by its owner only, where no file is (a
    private temporary beside it, then linked into place: a name taken meanwhile, a link planted
    there, is left alone and refused). The identity of the file written, for
    :func:`remove_ready`. Raises ``OSError`` (:class:`~cassettes.storage.UnsafePath` for a
    name taken)."""
    data = (json.dumps(ready, indent=2) + "\n").encode()
    return write_new(Target(Path(path)), seal(data))


def remove_ready(path: str | Path, created: FileId | None) -> bool:
    """Remove the ready file (the recorder stops listening) if it is still the one this recorder
    wrote (``created``); a file put there since by anyone else is left. Whether it was removed."""
    return remove_if_same(path, created)


def read_ready(path: str | Path) -> Ready | None:
    """The ready file at ``path``, or ``None`` while there is none. Raises
    :class:`CassetteFormatError` for a file that is not a ready file of this version."""
    try:  # (a FIFO or a device is refused, never waited on)
        with open_regular(path) as f:
            raw = f.read(1 << 20)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise CassetteFormatError(
            f"cannot read the recorder's ready file {path}: {exc.strerror or exc}"
        ) from None
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise CassetteFormatError(f"{path}: not a recorder ready file ({exc})") from None
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA:
        raise CassetteFormatError(f"{path}: not a recorder ready file (schema {SCHEMA!r} expected)")
    if obj.get("version") != VERSION:
        raise CassetteFormatError(
            f"{path}: recorder ready file version {obj.get('version')!r}; "
            f"this looptap reads version {VERSION}"
        )
    env = obj.get("env")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise CassetteFormatError(f"{path}: the ready file's env is not an object of strings")
    if not isinstance(obj.get("pid"), int) or not isinstance(obj.get("listeners"), list):
        raise CassetteFormatError(f"{path}: the ready file lacks its pid or listeners")
    ready: Ready = obj  # type: ignore[assignment]  # checked above as far as a reader relies on it
    return ready
