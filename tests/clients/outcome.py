"""What the client tests share around a run of a real client or agent through ``looptap run``:
Codex's wrapper (its base URL is read from its config only) and the run's outcome as the
context-management tests compare it (the scripted model's side calls, the findings said, the
conversations threaded). Names no environment of the matrix (tests/support/phases.py): importing
it moves no test module to another phase."""

from __future__ import annotations

import json
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


#: What says a client managed its context.
MANAGED = ("C.history_trimmed", "A.context_edited")
#: What a management causes and may say folded under it (``details.caused_by``): a trim, summary or
#: compaction changes the prompt's prefix, so the provider's prompt cache starts afresh.
FOLDED = ("C.cache_prefix_broken",)


def assert_managed_once(
    an: Any,
    main: tuple[int, ...],
    side: tuple[tuple[int, int], ...],
    at: int,
    code: str,
    kind: str,
    why: str = "",
    before: str = "",
) -> None:
    """A client's managed context as tests/clients/test_context.py judges it, live or from its
    recording (tests/cassettes/analysis/test_context_managed_recorded.py): one conversation the
    client kept (``main``), its management's side calls under the turn they read (``side``: (seq,
    the parent's seq)); the management said once, at ``at`` with ``code`` and ``kind``; nothing
    else said of the run but a consequence folded under it."""
    said, convs = findings_said(an), threads(an)
    assert sorted(convs) == sorted(
        [("main", None, main), *(("side_call", parent, (seq,)) for seq, parent in side)]
    ), (convs, said, why)
    managed = [f for f in an.findings if f.code in MANAGED]
    assert [(f.code, f.seq) for f in managed] == [(code, at)], said
    if code == "C.history_trimmed":
        # what was managed: the request of the conversation's turn before, and the side call
        # whose answer stands in its place
        details = managed[0].details
        assert details.get("kind") == kind, details
        assert details.get("from_seq") == main[main.index(at) - 1], details
        assert details.get("summary_by_seq") == (side[0][0] if side else None), details
    else:
        assert kind in json.dumps(managed[0].details), managed[0].details
    # a consequence folded under it (the prompt cache starts afresh after a trim) is not said again
    folded = [
        f
        for f in an.findings
        if f.code in FOLDED and f.seq == at and f.details.get("caused_by") == code
    ]
    others = [
        s
        for f, s in zip(an.findings, said, strict=True)
        if f.code not in MANAGED and f not in folded
    ]
    assert not others, (others, before)
