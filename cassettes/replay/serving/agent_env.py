"""What an agent's process is given to run against a replay server: the base URLs of every API
family (:func:`replay_env`), the proxy variables that send its tools' HTTP there too
(:func:`tool_proxy_env`, with Node's ``fetch`` shim in ``NODE_OPTIONS``), a placeholder key for
each SDK that will not start without one (:func:`placeholder_keys`), and these as the ``export``
lines ``looptap replay`` prints (:func:`export_lines`) and its callers read back
(:func:`read_export`: the fork).

An export line is ``export NAME=VALUE``, ``VALUE`` quoted for a POSIX shell (``eval "$(looptap
replay …)"``): a path or a user's ``NODE_OPTIONS`` with a space stays one word. A value holding a
control character (a newline would start a line of its own, a command in ``eval``) is never
printed; the lines carry nothing recorded (no value here comes from the cassette: a tool's host
is routed by the server, never exported).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from ...net import node_options
from ...providers import FAMILIES, REVERSE_UPSTREAMS, by_family
from ...untrusted import has_unsafe

__all__ = [
    "OWN_NAMES",
    "PLACEHOLDER_KEY",
    "export_lines",
    "placeholder_keys",
    "read_export",
    "replay_env",
    "tool_proxy_env",
]

#: The names a request to the replay server's own address may give it (the proxy variables point
#: at ``127.0.0.1``; a client may write ``localhost``).
OWN_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})

#: The key each SDK that refuses to start without one gets when replaying (never a real one: the
#: replay server is offline and never checks it).
PLACEHOLDER_KEY = "looptap-replay-placeholder-key"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def replay_env(url: str) -> dict[str, str]:
    """The environment variables SDKs read their base URLs from, all pointing at ``url``."""
    env: dict[str, str] = {}
    for _name, (_upstream, variables, suffix) in REVERSE_UPSTREAMS.items():
        for var in variables:
            env[var] = url + suffix
    return env


def placeholder_keys(environ: Mapping[str, str]) -> dict[str, str]:
    """A placeholder key for each API whose SDK refuses to start without one and that has none in
    ``environ``: its first variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, …)."""
    keys: dict[str, str] = {}
    for fam in FAMILIES:
        adapter = by_family(fam)
        names = adapter.profile.api_key_env if adapter is not None else ()
        if names and not any(environ.get(n) or n in keys for n in names):
            keys.setdefault(names[0], PLACEHOLDER_KEY)
    return keys


def tool_proxy_env(
    url: str, tool_hosts: Sequence[str], no_proxy: str = "", node: str = ""
) -> dict[str, str]:
    """The proxy variables that send an agent's HTTP to the replay server at ``url``, which
    answers its tools' calls from the recording (a model call through them reaches it too, at its
    own address). ``NO_PROXY`` keeps the user's entries (``no_proxy``) and the loopback names,
    unless the recording's tools called a loopback host (``tool_hosts``): then the loopback is
    not left out, so those calls reach the replay server too. Node's ``fetch`` honours them
    through ``NODE_USE_ENV_PROXY`` (22.21, 24) or, before, the shim required after the user's
    ``NODE_OPTIONS`` (``node``; left out when that cannot be written,
    :func:`~cassettes.net.node_options`)."""
    loopback = any(h.rsplit(":", 1)[0].strip("[]") in OWN_NAMES for h in tool_hosts)
    keep = [v for v in no_proxy.split(",") if v.strip()]
    if not loopback:
        keep += ["127.0.0.1", "localhost"]
    else:
        keep = [v for v in keep if v.strip().lower() not in OWN_NAMES]
    value = ",".join(dict.fromkeys(keep))
    shim = node_options(node)
    return {
        "HTTPS_PROXY": url,
        "HTTP_PROXY": url,
        "https_proxy": url,
        "http_proxy": url,
        "NO_PROXY": value,
        "no_proxy": value,
        "NODE_USE_ENV_PROXY": "1",
        **({"NODE_OPTIONS": shim} if shim else {}),
    }


def export_lines(env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """``export NAME=VALUE`` for each variable of ``env``, the value quoted for a POSIX shell;
    and the names left out: a name that is not a shell variable's, a value with a control or
    invisible format character (never printed, so never run by ``eval``)."""
    lines: list[str] = []
    left: list[str] = []
    for name, value in env.items():
        if not _NAME.fullmatch(name) or has_unsafe(value) or any(c in value for c in "\t\n\r"):
            left.append(name if _NAME.fullmatch(name) else "(a variable with an unusable name)")
            continue
        lines.append(f"export {name}={shlex.quote(value)}")
    return lines, left


def read_export(line: str) -> tuple[str, str] | None:
    """An :func:`export_lines` line read back: its name and value (unquoted), or ``None`` for a
    line that is not one."""
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if len(words) != 2 or words[0] != "export":
        return None
    name, eq, value = words[1].partition("=")
    return (name, value) if eq and _NAME.fullmatch(name) else None
