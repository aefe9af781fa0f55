"""Which agent a run is of (the ``runs`` table's ``agent`` and ``agent_source``, docs/fleet.md):
the name the user gave (``looptap run --agent``, ``$LOOPTAP_AGENT``: the header's ``agent``),
else the trace's ``service.name`` (an imported OTLP trace: the header's ``service``), else the
program of the command recorded (the header's ``command``), else the run's directory. Every
header field is untrusted: one that is not a name (cassettes.recording.valid_agent) is passed
over to the next source."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from cassettes.recording import valid_agent

__all__ = ["SOURCES", "agent_of", "command_text", "program"]

#: ``agent_source``'s values, in the order they are tried.
SOURCES = ("given", "service", "command", "directory")

#: Programs that run another (an interpreter, a package runner, a wrapper): the program is what
#: they run.
_RUNNERS = re.compile(
    r"(python|pypy|py)[\d.]*[mtw]?|node|nodejs|bun|bunx|deno|ruby|php|perl|java|dotnet|"
    r"uv|uvx|pipx|poetry|pipenv|hatch|pdm|rye|conda|npx|npm|pnpm|yarn|tsx|ts-node|"
    r"env|sh|bash|zsh|dash|fish|time|nice|nohup|timeout|xvfb-run|exec|sudo"
)
#: A runner's subcommands that take the program after them (``uv run``, ``npm exec`` …).
_RUN_WORDS = {"run", "exec", "x", "dlx", "tool", "script", "--"}
_SUFFIX = re.compile(r"\.(py|pyw|js|mjs|cjs|ts|mts|rb|sh|php|pl|exe)$", re.IGNORECASE)


def program(argv: Any) -> str | None:
    """The program a recorded command ran, named as a team knows it: ``python agent.py`` →
    ``agent``, ``python -m support.bot`` → ``support.bot``, ``uv run tsx src/triage.ts`` →
    ``triage``, ``claude -p …`` → ``claude``; a runner alone (``python -c …``) → ``python``.
    Options and ``VAR=value`` words are passed over. ``None``: no command, or none readable."""
    if isinstance(argv, str):
        try:
            argv = shlex.split(argv)
        except ValueError:
            argv = argv.split()
    if not isinstance(argv, list):
        return None
    words = [w for w in argv[:64] if isinstance(w, str)]
    runner: str | None = None
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        if w == "-m" and i < len(words):
            return valid_agent(words[i])
        if w in ("-c", "-e", "--eval") and runner is not None:
            break  # code given inline: the runner is all there is to name
        if w.startswith("-") or re.fullmatch(r"[A-Za-z_]\w*=.*", w):
            continue
        name = _SUFFIX.sub("", PurePath(w).name)
        if _RUNNERS.fullmatch(name.lower()) or (runner is not None and w in _RUN_WORDS):
            runner = runner or name
            continue
        return valid_agent(name)
    return valid_agent(runner)


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
