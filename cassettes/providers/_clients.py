"""What looptap knows about particular clients' reading of the base URLs it exports: a line said at
the start of ``looptap run`` when the command is a client that will not work as started, with what
to change (never a change made for the user: their settings stay theirs).

- **Gemini CLI** (``@google/gemini-cli``; checked on 0.61.0): with ``GOOGLE_GEMINI_BASE_URL`` set
  and no auth type chosen in its settings, it picks its ``gateway`` auth, which its headless mode
  (``gemini -p``) refuses: it prints "Invalid auth method selected." and exits 0 having sent
  nothing. Choosing ``gemini-api-key`` in ``security.auth.selectedType`` makes it use the key and
  still send to the base URL. Settings are read where the CLI reads them: the system file
  (``GEMINI_CLI_SYSTEM_SETTINGS_PATH`` or ``/etc/gemini-cli/settings.json``), the user's
  (``~/.gemini/settings.json``) and the workspace's (``.gemini/settings.json``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import CassetteError
from ..storage import open_regular

__all__ = ["start_advice"]

#: The most of a settings file read (a settings file is a few KB).
_SETTINGS_BYTES = 1 << 20

GEMINI_CLI_AUTH = (
    "Gemini CLI: with GOOGLE_GEMINI_BASE_URL set (this recorder's listener) and no auth type in "
    "its "
    'settings, it picks its gateway auth, which `gemini -p` refuses ("Invalid auth method '
    'selected.", nothing sent); add "security": {"auth": {"selectedType": "gemini-api-key"}} to '
    "~/.gemini/settings.json (docs/recorder.md)"
)


def _program(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """The real path of the program ``argv`` starts (through ``npx``/``node`` to its script), or
    the words themselves when it cannot be found."""
    words = list(argv[:4])
    if not words:
        return ""
    found = shutil.which(words[0], path=env.get("PATH"))
    real = os.path.realpath(found) if found else words[0]
    return " ".join([real, *words[1:]])


def _read_settings(path: Path) -> Any:
    """A settings file's JSON (comments allowed, as the CLI allows them), or ``None``."""
    import orjson

    try:
        with open_regular(path) as f:  # never a FIFO or a device
            raw = f.read(_SETTINGS_BYTES + 1)
    except (OSError, CassetteError):
        return None
    if len(raw) > _SETTINGS_BYTES:
        return None
    text = "\n".join(
        line
        for line in raw.decode("utf-8", "replace").splitlines()
        if not line.lstrip().startswith("//")
    )
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _auth_chosen(env: Mapping[str, str], cwd: Path) -> bool:
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or Path.home())
    files = [
        Path(env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json"),
        home / ".gemini" / "settings.json",
        cwd / ".gemini" / "settings.json",
    ]
    for path in files:
        settings = _read_settings(path)
        security = settings.get("security") if isinstance(settings, dict) else None
        auth = security.get("auth") if isinstance(security, dict) else None
        if (
            isinstance(auth, dict)
            and isinstance(auth.get("selectedType"), str)
            and auth["selectedType"]
        ):
            return True
    return False


def start_advice(argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> list[str]:
    """Lines to say before ``argv`` starts with ``env`` (the child's environment, looptap's base
    URLs in it): one per client that will not work as started."""
    out: list[str] = []
    chose_other = (
        env.get("GOOGLE_GENAI_USE_GCA") == "true" or env.get("GOOGLE_GENAI_USE_VERTEXAI") == "true"
    )
    if (
        env.get("GOOGLE_GEMINI_BASE_URL")
        and not chose_other
        and "gemini-cli" in _program(argv, env).replace("\\", "/")
        and not _auth_chosen(env, cwd or Path.cwd())
    ):
        out.append(GEMINI_CLI_AUTH)
    return out
