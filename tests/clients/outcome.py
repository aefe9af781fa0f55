"""What the client tests share around a run of a real client or agent through ``looptap run``:
Codex's wrapper (its base URL is read from its config only) and the run's outcome as the
context-management tests compare it (the scripted model's side calls, the findings said, the
conversations threaded). Names no environment of the matrix (tests/support/phases.py): importing
it moves no test module to another phase."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.support.scripted import ScriptedUpstream


def codex_wrapper(where: Path, codex: Path | str, config: str) -> Path:
    """A shell script that runs ``codex`` with ``$CODEX_HOME/config.toml`` written from
    ``config``, its ``@OPENAI_BASE_URL@`` replaced by the variable's value at start: ``looptap
    run`` exports its listener's URL (a fork, its replay server's), and Codex reads a custom
    provider's base URL from its config only. ``CODEX_HOME`` is made if missing."""
    (where / "config.toml.in").write_text(config)
    wrapper = where / "codex.sh"
    wrapper.write_text(
        '#!/bin/sh\nset -e\nmkdir -p "$CODEX_HOME"\n'
        f'sed "s#@OPENAI_BASE_URL@#$OPENAI_BASE_URL#" "{where}/config.toml.in" > '
        f'"$CODEX_HOME/config.toml"\nexec "{codex}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def side_calls(up: ScriptedUpstream) -> list[int]:
    """The requests the scripted model answered as a side call (a route's ``side:`` replies), in
    arrival order."""
    asked = [(e.seq, e.reply.what if e.reply else "") for e in up.log]
    return [seq for seq, what in asked if what.startswith("side:")]


def findings_said(an: Any) -> list[str]:
    """Every finding of an analysis, one line each (an assertion's message)."""
    return [
        f"{f.code} {f.severity} seq={f.seq} turn={f.turn} conv={f.conversation}: {f.message}"
        for f in an.findings
    ]


def threads(an: Any) -> list[tuple[str, int | None, tuple[int, ...]]]:
    """The conversations with turns: (kind, the parent's seq, the turns)."""
    return [
        (conv.kind, conv.parent_seq, tuple(conv.turns)) for conv in an.conversations if conv.turns
    ]


def keep(out: Path, name: str) -> None:
    """The run's cassette, for whoever reads it again (``LOOPTAP_CONTEXT_KEEP``: a directory)."""
    where = os.environ.get("LOOPTAP_CONTEXT_KEEP")
    if where and out.exists():
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(out, Path(where) / f"{name.replace(' ', '_').replace('/', '')}.jsonl")
