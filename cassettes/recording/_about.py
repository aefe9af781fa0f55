"""What a recording's header says of the agent it recorded (docs/cassette-format.md): the name the
user gave it (``looptap run --agent NAME``, ``looptap record --agent``, else ``$LOOPTAP_AGENT``)
and the command ``looptap run`` ran, for the header's ``meta`` (``"agent"``, ``"command"``). The
fleet index names each run's agent from them (docs/fleet.md).

A name is 1 to 100 printable characters; of the command, only the words up to the program it ran
are kept (``python agent.py --key K`` keeps ``python agent.py``: the arguments after the program
may carry a key no pattern knows), each clipped to 300 characters and scrubbed by the recording's
redactor first (a ``VAR=value`` before the program).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

__all__ = ["AGENT_ENV", "agent_name", "program_at", "run_about", "valid_agent"]

#: The environment variable that names the agent when ``--agent`` is not given.
AGENT_ENV = "LOOPTAP_AGENT"
#: Bounds of what the header keeps.
NAME_MAX = 100
ARGS_MAX = 64
ARG_MAX = 300


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


def program_at(words: Sequence[str]) -> tuple[str | None, int]:
    """The program ``words`` (a command) ran, named as a team knows it: ``python agent.py`` →
    ``agent``, ``python -m support.bot`` → ``support.bot``, ``uv run tsx src/triage.ts`` →
    ``triage``, ``claude -p …`` → ``claude``; a runner alone (``python -c …``) → ``python``.
    Options and ``VAR=value`` words are passed over. With the number of words read to name it
    (what :func:`run_about` keeps). ``None``: none readable."""
    runner: str | None = None
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        if w == "-m" and i < len(words):
            return valid_agent(words[i]), i + 1
        if w in ("-c", "-e", "--eval") and runner is not None:
            i -= 1  # code given inline: the runner is all there is to name
            break
        if w.startswith("-") or re.fullmatch(r"[A-Za-z_]\w*=.*", w):
            continue
        name = _SUFFIX.sub("", PurePath(w).name)
        if _RUNNERS.fullmatch(name.lower()) or (runner is not None and w in _RUN_WORDS):
            runner = runner or name
            continue
        return valid_agent(name), i
    return valid_agent(runner), i


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
    words = [str(a) for a in list(command or ())[:ARGS_MAX]]
    args = [scrub(a)[:ARG_MAX] for a in words[: program_at(words)[1]]]
    if args:
        out["command"] = args
    return out
