"""What a recording's header says of the agent it recorded (docs/cassette-format.md): the name the
user gave it (``looptap run --agent NAME``, ``looptap record --agent``, else ``$LOOPTAP_AGENT``)
and the command ``looptap run`` ran, for the header's ``meta`` (``"agent"``, ``"command"``). The
fleet index names each run's agent from them (docs/fleet.md).

A name is 1 to 100 printable characters; the command is kept as its arguments (64 at most, each
clipped to 300 characters), each scrubbed by the recording's redactor first: a key given on a
command line never reaches the header.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["AGENT_ENV", "agent_name", "run_about", "valid_agent"]

#: The environment variable that names the agent when ``--agent`` is not given.
AGENT_ENV = "LOOPTAP_AGENT"
#: Bounds of what the header keeps.
NAME_MAX = 100
ARGS_MAX = 64
ARG_MAX = 300


def valid_agent(value: Any) -> str | None:
    """``value`` as an agent's name: a string of 1 to :data:`NAME_MAX` characters, none a
    control or format character, stripped of surrounding blanks; else ``None`` (a header is
    untrusted: a name that is not one is not read)."""
    if not isinstance(value, str):
        return None
    name = value.strip()
    if not name or len(name) > NAME_MAX:
        return None
    if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in name):
        return None
    return name


def agent_name(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The agent's name for a recording: ``given`` (``--agent``), else :data:`AGENT_ENV` when
    set and not empty, else ``None``. Raises :class:`ValueError` (one line) for a name that is
    not one."""
    where, value = ("--agent", given) if given is not None else (AGENT_ENV, environ.get(AGENT_ENV))
    if value is None or (where == AGENT_ENV and not value.strip()):
        return None
    name = valid_agent(value)
    if name is None:
        raise ValueError(
            f"{where} wants a name of 1 to {NAME_MAX} printable characters (no control "
            f"characters, tabs or line breaks): {value[:NAME_MAX]!r}"
        )
    return name


def run_about(
    agent: str | None, command: Sequence[str] | None, scrub: Callable[[str], str]
) -> dict[str, Any]:
    """The header's ``agent`` and ``command`` fields (those known): ``scrub`` is the recording's
    redactor's (a name or an argument it would mask is masked, as in the round trips)."""
    out: dict[str, Any] = {}
    name = valid_agent(agent)
    if name is not None:
        out["agent"] = scrub(name)
    args = [scrub(str(a))[:ARG_MAX] for a in list(command or ())[:ARGS_MAX]]
    if args:
        out["command"] = args
    return out
