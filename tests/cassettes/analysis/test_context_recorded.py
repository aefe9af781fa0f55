"""Real clients managing their context, recorded through ``looptap run`` against a scripted
loopback model (helper ctxc, session 47; data/ctx/README.md says how each was made): each one
conversation, its summariser a side call under the turn whose history it was fed, the management
said once, nothing false.

- strands-agents 1.62.0 ``SummarizingConversationManager`` after a 400 (Chat, Responses, Gemini);
- crewai 1.15.30 ``respect_context_window=True`` after a 400: the summariser fed the history as
  rendered text, its ``<summary>`` in place of the whole history;
- google-adk 2.13.0 events compaction (``LlmEventSummarizer``): the summariser fed the events
  as rendered text, its answer in place of them as a model message.

On c86d115d: CrewAI read as three conversations (the summariser "main", the retry a hand-off of
it), ADK as three conversations with nothing said, Strands' retry a new conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.analysis import RunAnalysis, analyse
from looptap.cassettes.analysis.codes import Severity
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import read_records

DATA = Path(__file__).parent / "data" / "ctx"


def _run(name: str) -> RunAnalysis:
    cas = read_records(DATA / f"{name}.jsonl")
    assert not cas.problems
    return analyse(cas.exchanges, parse_all(cas.exchanges))


def _convs(run: RunAnalysis) -> list[tuple[str, int | None, list[int]]]:
    return sorted((c.kind, c.parent_seq, c.turns) for c in run.conversations if c.turns)


def _serious(run: RunAnalysis) -> list[tuple[str, int | None]]:
    return [
        (f.code, f.seq)
        for f in run.findings
        if f.severity in (Severity.WARNING, Severity.ERROR) and not f.details.get("caused_by")
    ]


#: recording → (conversations, the managed round trip, the refused one (or None), its side call)
CASES = {
    "strands_summarizing_after_overflow": (
        [("main", None, [0, 1, 2, 3, 5]), ("side_call", 1, [4])],
        5,
        3,
        4,
    ),
    "strands_summarizing_after_overflow_gemini": (
        [("main", None, [0, 1, 2, 3, 5]), ("side_call", 1, [4])],
        5,
        3,
        4,
    ),
    "strands_summarizing_after_overflow_responses": (
        [("main", None, [0, 1, 2, 3, 5]), ("side_call", 1, [4])],
        5,
        3,
        4,
    ),
    "crewai_respect_context_window": (
        [("main", None, [0, 1, 2, 3, 5]), ("side_call", 3, [4])],
        5,
        3,
        4,
    ),
    "google-adk_events_compaction": (
        [("main", None, [0, 1, 2, 3, 5, 6]), ("side_call", 3, [4])],
        5,
        None,
        4,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_client_managing_its_context_reads_right(name: str) -> None:
    convs, managed, refused, side = CASES[name]
    run = _run(name)
    assert _convs(run) == sorted(convs)
    (trim,) = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert trim.seq == managed
    assert trim.details["kind"] == "summarised"
    assert trim.details["summary_by_seq"] == side
    assert trim.details["after_overflow"] == refused
    assert ("after round trip" in trim.message) == (refused is not None)
    assert not [f for f in run.findings if f.code == "C.stopped_with_pending_calls"]
    # the refusal itself is the one true error; nothing else is a warning or an error
    assert _serious(run) == ([("A.http_error", refused)] if refused is not None else [])


def test_crewai_the_task_the_summariser_saw_is_info_not_a_warning() -> None:
    """CrewAI's summary restates the task in its own words: not carried word for word, but
    its summariser was given it (rendered into its prompt), so the model may know it: said with
    the trim, never ``C.user_instruction_dropped``."""
    run = _run("crewai_respect_context_window")
    (trim,) = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert trim.details["restated"] and "Current Task" in trim.details["restated"][0]
    assert "may restate" in trim.message
    assert not [f for f in run.findings if f.code == "C.user_instruction_dropped"]


#: Summaries that land elsewhere than in place of the history (issue 103, item 2;
#: data/ctx/README.md says how each was recorded): recording → (conversations, (trim's seq, its
#: side call) each, the infos that stand unexplained). On f29135f5: Agno 5 main conversations,
#: Haystack its summary of summaries main and a summary a hand-off, LlamaIndex 3 main
#: conversations and its summaries hand-offs.
LANDING = {
    # agno 3.1.10 session summaries: the transcript in the summary call's system prompt, its JSON
    # answer's ``summary`` in the next run's system prompt; #3 goes on with the last run whole,
    # its system prompt changed to carry #2's summary (a true info: nothing was dropped)
    "agno_session_summaries": (
        [("main", None, [0, 1, 3, 4, 6, 7]), ("side_call", 1, [2]), ("side_call", 4, [5]),
         ("side_call", 7, [8])],
        [(6, 5)],
        [("C.cache_prefix_broken", 3)],
    ),
    # haystack-ai 3.4.1 SummarizationCompactor: #7 folds the summaries #3 and #6 into one
    "haystack_summarization_compactor": (
        [("main", None, [0, 1, 2, 4, 5, 8]), ("side_call", 2, [3]), ("side_call", 5, [6]),
         ("side_call", 5, [7])],
        [(4, 3), (8, 7)],
        [],
    ),
    # llama-index-core 0.14.25 ChatSummaryMemoryBuffer: the summary a system message; #3 given
    # the summary #1 with the messages since
    "llama-index_chat_summary_buffer": (
        [("main", None, [0, 2, 4]), ("side_call", 0, [1]), ("side_call", 2, [3])],
        [(2, 1), (4, 3)],
        [],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LANDING))
def test_a_summary_is_linked_where_its_answer_lands(name: str) -> None:
    convs, trims, infos = LANDING[name]
    run = _run(name)
    assert _convs(run) == sorted(convs)
    said = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert [(f.seq, f.details["summary_by_seq"]) for f in said] == trims
    for f in said:
        assert f.details["kind"] == "summarised"
        assert f"replaced by the summary of side call #{f.details['summary_by_seq']}" in f.message
    rest = [
        (f.code, f.seq) for f in run.findings if f not in said and not f.details.get("caused_by")
    ]
    assert rest == infos, [f.message for f in run.findings]
