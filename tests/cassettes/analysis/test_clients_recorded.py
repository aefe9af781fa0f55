"""Issue 90's cases recorded with real clients (helper ctxf, session 48), read by the core alone:
each recording made through the real ``looptap run`` against a scripted loopback model
(data/ctx/README.md says how; tests/clients/ records them again).

- pydantic-ai-slim 2.68.0 ``FallbackModel(fallback_on=OutputTokenLimitExceeded)``: a tool call cut
  by ``max_tokens``, the same request sent again to the next model, then the lookup repeated six
  times. On c86d115d: two conversations, the cut turn alone in the first.
- the same with ``fallback_on=IncompleteToolCall``: no request-level retry (pydantic-ai answers the
  cut call in place with an error result). One conversation on c86d115d too: a guard.
- crewai 1.15.30, its text protocol (``o1-mini``), every request carrying the task prompt's "…not a
  summary."; a client bug planted (the second request leaves out the first answer). One
  conversation, the planted ``C.assistant_not_echoed`` found. So on c86d115d too: a guard.
- openai-agents 0.24.0, a user's ``call_model_input_filter`` that cuts every older tool output to
  20 characters (Responses and Chat): ``C.history_mutated`` where each output is first sent cut,
  never ``C.history_trimmed``. On c86d115d: an info ``C.history_trimmed`` at each, no mutation.
- three frameworks' windows over a chat of three questions: AutoGen 0.7.5
  ``BufferedChatCompletionContext(buffer_size=4)`` (slides at #2-#5), Strands 1.62.0
  ``SlidingWindowConversationManager(window_size=4)`` and llama-index-core 0.14.25
  ``ChatMemoryBuffer(token_limit=30)`` (both drop at #4): a trim said where each drop happened,
  nothing else. All read so on c86d115d; AutoGen's was misread from becef044 until this session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.analysis import RunAnalysis, analyse
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import read_records

DATA = Path(__file__).parent / "data" / "ctx"


def _run(name: str) -> RunAnalysis:
    cas = read_records(DATA / f"{name}.jsonl")
    assert not cas.problems
    return analyse(cas.exchanges, parse_all(cas.exchanges))


@pytest.mark.parametrize(
    "name",
    ["pydantic-ai_fallback_on_output_limit", "pydantic-ai_fallback_on_incomplete_tool_call"],
)
def test_a_cut_tool_call_retried_by_pydantic_ai_is_one_conversation(name: str) -> None:
    run = _run(name)
    convs = [(c.kind, c.parent_seq, c.turns) for c in run.conversations if c.turns]
    assert convs == [("main", None, list(range(9)))]
    repeats = [f for f in run.findings if f.code == "E.repeated_call"]
    # the lookup made seven times: each of its six repeats said, in the one conversation
    assert sorted(f.seq or 0 for f in repeats) == [2, 3, 4, 5, 6, 7]
    assert {f.conversation for f in repeats} == {run.conversations[0].id}
    assert [f.seq for f in run.findings if f.code == "A.truncated_length"] == [0]
    assert not [c for c in run.conversations if c.kind == "side_call"]


def test_the_fallback_models_request_is_the_cut_answers_retry() -> None:
    """The same request sent again after the cut answer: that answer thrown away, said once."""
    run = _run("pydantic-ai_fallback_on_output_limit")
    assert [f.seq for f in run.findings if f.code == "C.answer_discarded"] == [1]


def test_crewai_saying_not_a_summary_in_every_request_is_one_conversation() -> None:
    run = _run("crewai_not_a_summary_planted")
    assert [(c.kind, c.turns) for c in run.conversations if c.turns] == [("main", [0, 1, 2, 3, 4])]
    serious = [(f.code, f.seq) for f in run.findings if f.severity in ("warning", "error")]
    assert serious == [("C.assistant_not_echoed", 1), ("C.history_mutated", 2)]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_tool_output_the_client_shortened_is_a_mutation_not_a_trim(api: str) -> None:
    run = _run(f"openai-agents_filter_shorter_{api}")
    assert [(c.kind, c.turns) for c in run.conversations if c.turns] == [("main", [0, 1, 2, 3])]
    mutated = [(f.seq, f.severity) for f in run.findings if f.code == "C.history_mutated"]
    assert mutated == [(2, "warning"), (3, "warning")]
    assert not [f for f in run.findings if f.code in ("C.history_trimmed", "A.context_edited")]


#: recording -> the round trips where the window dropped messages, and why it is not read right
WINDOWS = {
    # since becef044 its later slides (a head that is an answer) were read as a dropped middle
    # group: a false C.history_mutated at #3-#5 (c86d115d read it right)
    "autogen_buffered_context": ([2, 3, 4, 5], ""),
    "strands_sliding_window": ([4], ""),
    "llama-index_memory_buffer": ([4], ""),
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_a_frameworks_window_is_a_trim_said_where_it_dropped(
    name: str, request: pytest.FixtureRequest
) -> None:
    trimmed, pending = WINDOWS[name]
    if pending:
        request.applymarker(pytest.mark.xfail(reason=pending, strict=True))
    run = _run(name)
    assert [(c.kind, c.turns) for c in run.conversations if c.turns] == [("main", list(range(6)))]
    trims = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert [(f.seq, f.details.get("kind")) for f in trims] == [(s, "trimmed") for s in trimmed]
    others = [
        (f.code, f.seq)
        for f in run.findings
        if f not in trims
        and f.details.get("caused_by") != "C.history_trimmed"
        and f.code != "A.usage_missing"
    ]
    assert others == []


@pytest.mark.parametrize(
    ("name", "seqs", "serious"),
    [
        ("instructor_reask", [0, 1], [("E.arguments_schema", 0)]),
        ("strands_structured_output", [0, 1, 2, 3], [("E.arguments_schema", 2)]),
    ],
)
def test_another_frameworks_forced_tool_retry_is_one_conversation(
    name: str, seqs: list[int], serious: list[tuple[str, int]]
) -> None:
    """instructor 1.15.4's reask and Strands 1.62.0's forced structured output, each retrying a
    forced call that failed validation: one conversation, the invalid call said (a guard: so on
    c86d115d too)."""
    run = _run(name)
    assert [(c.kind, c.turns) for c in run.conversations if c.turns] == [("main", seqs)]
    found = [(f.code, f.seq) for f in run.findings if f.severity in ("warning", "error")]
    assert found == serious


def test_llamaindex_ts_history_the_app_shortened_is_a_mutation() -> None:
    """LlamaIndex.TS 0.12.1: the app's kept chat, each tool result cut to 20 characters, passed
    back for the next question. On c86d115d: ``C.history_trimmed`` info, no mutation."""
    run = _run("llamaindex-ts_history_shorter")
    assert [(c.kind, c.turns) for c in run.conversations if c.turns] == [("main", [0, 1, 2, 3])]
    found = [(f.code, f.seq, f.severity) for f in run.findings if f.code != "A.usage_missing"]
    assert found == [("C.history_mutated", 3, "warning")]
