"""Real clients that manage their context (tests/clients/test_context.py, issue 82), their
recordings judged by the core alone (session 55, h105m): each made by that test through the real
``looptap run`` (mitmproxy 11.0.2) against its scripted model, kept with
``LOOPTAP_CONTEXT_KEEP=DIR``. The live runs of these cases are nightly; the framework's other
idiom runs live by default (LangChain's ``trim_messages``, openai-agents' session limit, Claude
Code's auto-compact). Versions: langchain 1.x with langchain-openai (its
``SummarizationMiddleware`` and ``ContextEditingMiddleware``), openai-agents (Responses compaction,
``truncation="auto"``), Claude Code 2.1.328 (``/compact`` given to the resumed session).

The judgement is the live test's, read off the recording: one conversation the client kept, its
management's side calls under the turn they read; the management said once, where it happened;
nothing else said of the run (but a consequence folded under it)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import read_records
from tests.clients.outcome import assert_managed_once

DATA = Path(__file__).parent / "data" / "ctx" / "managed"


class Case(NamedTuple):
    name: str
    main: tuple[int, ...]
    side: tuple[tuple[int, int], ...]
    at: int
    code: str
    kind: str


#: tests/clients/test_context.py's CASES for these runs.
CASES = (
    Case("langchain_SummarizationMiddleware", (0, 1, 2, 4, 5), ((3, 2),), 4,
         "C.history_trimmed", "summarised"),
    Case("langchain_ContextEditingMiddleware", (0, 1, 2), (), 2, "C.history_trimmed", "cleared"),
    Case("openai-agents_responses_compaction", (0, 1, 2, 4, 5), ((3, 2),), 4,
         "C.history_trimmed", "summarised"),
    Case("openai-agents_truncation_auto", (0, 1, 2), (), 0, "A.context_edited", "truncation"),
    Case("claude-code_/compact", (0, 1, 2, 3, 5), ((4, 3),), 5, "C.history_trimmed",
         "summarised"),
)  # fmt: skip


def _file(name: str) -> Path:
    return DATA / f"{name.replace('/', '')}.jsonl"


def test_every_case_is_recorded() -> None:
    assert sorted(p.name for p in DATA.glob("*.jsonl")) == sorted(_file(c.name).name for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_managed_context_is_one_conversation_said_once(case: Case) -> None:
    cas = read_records(_file(case.name))
    assert not cas.problems, [str(p) for p in cas.problems]
    assert all(e.status == 200 for e in cas.exchanges)
    an = analyse(cas.exchanges, parse_all(cas.exchanges))
    assert_managed_once(an, case.main, case.side, case.at, case.code, case.kind)
