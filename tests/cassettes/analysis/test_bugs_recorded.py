"""The client matrix's injected bugs, recorded with the real clients and judged by the core alone
(session 55, h105m): each file is the bug run of one client of tests/clients/test_matrix.py (the
real ``looptap run`` 11.0.2 recorder, the client's pinned package, the injector of
tests/clients/inject wrapping its httpx or fetch), named ``CLIENT.BUG.jsonl``, and of each coding
agent of tests/clients/test_agents.py. The live runs
(``test_injected_bug_is_named``) run nightly but for one client of each bug and injector; this
module reads the same judgement the live test makes off each recording, so the analysis of every
client's bug is checked on every run. data/matrix_bugs/README.md says how to record them again.

The judgement: exactly one round trip carries the injector's mark; it is a turn; a root cause
of layer C at it names the bug (``BUG_CAUSES``); no root cause comes before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.analysis.codes import Severity
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.reading import open_run
from looptap.cassettes.storage import read_records

DATA = Path(__file__).parent / "data" / "matrix_bugs"
FILES = sorted(p.name for p in DATA.glob("*.jsonl"))

#: The root causes that name each injected bug (tests/clients/clients.py's, which a core module
#: cannot import: it names the matrix's environments).
BUG_CAUSES = {
    "drop_result": ("C.dropped_tool_result",),
    "wrong_id": ("C.wrong_tool_call_id", "C.orphan_tool_result"),
    "mutate_history": ("C.tool_result_altered", "C.history_mutated"),
}


#: The coding agents' bug runs (tests/clients/test_agents.py), named ``agent.ID.BUG.jsonl``.
AGENTS = ("claude-code", "codex", "gemini-cli", "opencode_anthropic", "opencode_responses")


def test_the_table_is_whole() -> None:
    """Every client of the matrix and every coding agent, each bug injected at least once."""
    assert len(FILES) == 42 + len(AGENTS), FILES
    assert {n.split(".")[1] for n in FILES if n.startswith("agent.")} == set(AGENTS)
    assert {name.split(".")[-2] for name in FILES} == set(BUG_CAUSES)


def _marked(ex: object, agent: bool) -> bool:
    if any(k.lower() == "x-matrix-injected" for k, _ in ex.request_headers):  # type: ignore[attr-defined]
        return True
    # Codex's WebSocket requests carry the mark in their metadata (test_agents.py's)
    body = ex.request_json() if agent else None  # type: ignore[attr-defined]
    return isinstance(body, dict) and "x-matrix-injected" in (body.get("metadata") or {})


@pytest.mark.parametrize("name", FILES)
def test_the_injected_bug_is_the_first_root_cause(name: str) -> None:
    bug = name.split(".")[-2]
    agent = name.startswith("agent.")
    if agent:  # read as test_agents.py reads them: the whole run opened
        run = open_run(DATA / name, whole=True)
        exchanges, an = list(run.exchanges), run.analysis
    else:
        cas = read_records(DATA / name)
        assert not cas.problems, [str(p) for p in cas.problems]
        exchanges, an = cas.exchanges, analyse(cas.exchanges, parse_all(cas.exchanges))
    marked = [ex.seq for ex in exchanges if _marked(ex, agent)]
    assert len(marked) == 1, marked
    seq = marked[0]
    assert an.turns.get(seq) is not None, seq
    serious = [f for f in an.findings if f.severity in (Severity.WARNING, Severity.ERROR)]
    roots = [f for f in serious if not f.details.get("caused_by")]
    named = [f for f in roots if f.seq == seq and f.layer == "C" and f.code in BUG_CAUSES[bug]]
    said = [
        f"{f.code} {f.layer} seq={f.seq} caused_by={f.details.get('caused_by')}"
        for f in an.findings
    ]
    assert named, said
    first = min((f.seq for f in roots if f.seq is not None), default=None)
    assert first == seq, ("an earlier root cause than the injected bug", said)
