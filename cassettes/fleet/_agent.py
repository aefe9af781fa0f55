"""Which agent a run is of (the ``runs`` table's ``agent`` and ``agent_source``, docs/fleet.md):
the name the user gave (``looptap run --agent``, ``$LOOPTAP_AGENT``: the header's ``agent``),
else the trace's ``service.name`` (an imported OTLP trace: the header's ``service``), else the
program of the command recorded (the header's ``command``), else the run's directory. Every
header field is untrusted: one that is not a name (cassettes.recording.valid_agent) is passed
over to the next source."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..recording import program_at, valid_agent

__all__ = ["SOURCES", "agent_of", "command_text", "program"]

#: ``agent_source``'s values, in the order they are tried.
SOURCES = ("given", "service", "command", "directory")


def program(argv: Any) -> str | None:
    """The program a recorded command ran, named as a team knows it
    (:func:`cassettes.recording.program_at`); a command given as one string is split as a shell
    would. ``None``: no command, or none readable."""
    if isinstance(argv, str):
        try:
            argv = shlex.split(argv)
        except ValueError:
            argv = argv.split()
    if not isinstance(argv, list):
        return None
    return program_at([w for w in argv[:64] if isinstance(w, str)])[0]


def command_text(argv: Any) -> str | None:
    """The ``command`` column: the recorded command as a shell would show it (300 characters at
    most)."""
    if isinstance(argv, list) and argv and all(isinstance(w, str) for w in argv):
        return shlex.join(argv)[:300]
    if isinstance(argv, str) and argv:
        return argv[:300]
    return None


def agent_of(meta: Mapping[str, Any], path: Path) -> tuple[str | None, str | None]:
    """The run's agent and the source it came from (one of :data:`SOURCES`)."""
    for source, name in (
        ("given", valid_agent(meta.get("agent"))),
        ("service", valid_agent(meta.get("service"))),
        ("command", program(meta.get("command"))),
        ("directory", valid_agent(path.parent.name)),
    ):
        if name is not None:
            return name, source
    return None, None
