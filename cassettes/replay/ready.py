"""The recorder's ready file: what ``looptap record --ready-file PATH`` (and ``looptap run``)
writes once its listeners accept connections, for a program that starts the recorder and must
know where it listens without scraping its ``export`` lines.

One JSON object (docs/recorder.md, "The ready file"), written atomically (a temporary file beside
it, then a rename) with mode 0600, and removed when the recorder stops; a reader sees no file, or
the whole object. It holds addresses, paths and the client environment, never a secret: the
environment is exactly what the ``export`` lines say (base URLs, proxies, CA bundles), and an
upstream URL is written without user, password, query or fragment.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Literal, TypedDict
from urllib.parse import urlsplit

from cassettes.errors import CassetteFormatError

__all__ = ["SCHEMA", "VERSION", "Ready", "ReadyListener", "bare_url", "read_ready", "remove_ready", "write_ready"]

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
    #: The variables that carry ``url`` to a client (base URLs; the proxy variables for ``forward``).
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


def write_ready(path: str | Path, ready: Ready) -> None:
    """Write ``ready`` to ``path`` atomically, readable by its owner only. Raises ``OSError``."""
    path = Path(path)
    data = (json.dumps(ready, indent=2) + "\n").encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def remove_ready(path: str | Path) -> None:
    """Remove the ready file (the recorder stops listening); nothing if it is gone."""
    with contextlib.suppress(OSError):
        Path(path).unlink()


def read_ready(path: str | Path) -> Ready | None:
    """The ready file at ``path``, or ``None`` while there is none. Raises
    :class:`CassetteFormatError` for a file that is not a ready file of this version."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CassetteFormatError(f"cannot read the recorder's ready file {path}: {exc.strerror or exc}") from None
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise CassetteFormatError(f"{path}: not a recorder ready file ({exc})") from None
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA:
        raise CassetteFormatError(f"{path}: not a recorder ready file (schema {SCHEMA!r} expected)")
    if obj.get("version") != VERSION:
        raise CassetteFormatError(f"{path}: recorder ready file version {obj.get('version')!r}; this looptap reads version {VERSION}")
    env = obj.get("env")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise CassetteFormatError(f"{path}: the ready file's env is not an object of strings")
    if not isinstance(obj.get("pid"), int) or not isinstance(obj.get("listeners"), list):
        raise CassetteFormatError(f"{path}: the ready file lacks its pid or listeners")
    ready: Ready = obj  # type: ignore[assignment]  # checked above as far as a reader relies on it
    return ready
