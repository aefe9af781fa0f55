"""History mutations injected into real clients (helper ctxc, session 47: the client matrix's
injector, tests/clients/inject, 6 variants x 8 clients: openai-python chat and responses,
anthropic-python, google-genai, openai-node runTools, vercel-ai responses and anthropic, strands
on Gemini; data/ctx/README.md). The injected request (#2, marked ``x-matrix-injected``) is
``C.history_mutated``, never management; the client's own history re-sent after it (#3) differs
from #2 again: said as the mutation undone, folded under #2's (session 48: it was a second warning);
nothing else is a warning or an error.

On 21bc15ea: the dropped middle group read as ``C.history_trimmed`` (a head drop) at #2 on all 8,
and Anthropic's re-sent history at #3 gave a false ``C.tool_results_split`` (the repeated call's
earlier twin taken for the answer's echo).

The dropped group is every message #1 sent after its opening: #2 is the opening, #1's answer and
its result, the shape a window that keeps the head and the latest round sends (bench/why_cases.py's
``trim-tail``; issue 103). Nothing on #2 tells the two apart: it reads as that trim, and #3, which
puts back what #2 dropped, is the warning that says the drop was none (its ``undoes_trim_seq``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.analysis.codes import Severity
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import read_records

DATA = Path(__file__).parent / "data" / "ctx" / "mutations"
FILES = sorted(p.name for p in DATA.glob("*.jsonl"))


def test_the_table_is_whole() -> None:
    assert len(FILES) == 48


@pytest.mark.parametrize("name", FILES)
def test_an_injected_mutation_is_named_and_nothing_else(name: str) -> None:
    cas = read_records(DATA / name)
    assert not cas.problems
    run = analyse(cas.exchanges, parse_all(cas.exchanges))
    injected = [
        e.seq
        for e in cas.exchanges
        if any(k.lower() == "x-matrix-injected" for k, _ in e.request_headers)
    ]
    assert injected == [2]
    assert len(run.conversations) == 1
    serious = {
        (f.code, f.seq)
        for f in run.findings
        if f.severity in (Severity.WARNING, Severity.ERROR) and not f.details.get("caused_by")
    }
    if "drop_middle" in name:
        assert serious == {("C.history_mutated", 3)}
        (undone,) = [f for f in run.findings if f.code == "C.history_mutated"]
        assert undone.details.get("undoes_trim_seq") == 2
        trims = [f.seq for f in run.findings if f.code == "C.history_trimmed"]
        assert trims == [2]
        return
    assert serious == {("C.history_mutated", 2)}
    # the client's real history re-sent at #3 undoes #2's change: its consequence, folded under it
    again = [f for f in run.findings if f.code == "C.history_mutated" and f.seq == 3]
    assert all(
        f.severity is Severity.INFO
        and (f.details.get("caused_by"), f.details.get("caused_by_seq")) == ("C.history_mutated", 2)
        for f in again
    ), [f.message for f in again]
    assert not [f for f in run.findings if f.code == "C.history_trimmed"]
