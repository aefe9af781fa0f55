"""A grown file continued reads a rendered history as a whole file does (issue 90; docs/threading.md
"Context management", docs/kept-analysis.md "A file that grew"). The rendered-history rule looks
for a recent conversation's latest request in a summariser's user text, and the C layer asks what
the summary's writer was given: both are kept in the continued state, so a file shown while its
run was recording (its analysis kept), then grown past the summariser, prints what a fresh read
of every byte prints.

The runs: the real recordings of Google ADK 2.13.0's events compaction and CrewAI 1.15.30's
``respect_context_window`` (data/ctx/README.md), cut after each round trip; and the scripted ADK
compaction with an instruction its summariser never saw, cut in two growths. On 20d0006a (and
c86d115d) a continued file lost the rendered lookups: the summariser was a new conversation and
the compaction a summary of unknown origin."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_context_rendered import _compacted_run, _guardrail_run

from looptap.cassettes.analysis import spill
from looptap.cassettes.recording.pipeline import CassetteWriter
from tests.support.analysed import cli_output, keep_every_run

DATA = Path(__file__).parent / "data" / "ctx"
RECORDED = [
    "google-adk_events_compaction",
    "crewai_respect_context_window",
    # issue 103: the summary in the system prompt, the summarisers proved (the last one never
    # used), and a summariser given its own summary (continued state VERSION 7)
    "agno_session_summaries",
    "llama-index_chat_summary_buffer",
]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return keep_every_run(tmp_path, monkeypatch)


def _growths(path: Path, whole: Path, cuts: list[int]) -> tuple[bytes, bytes]:
    """``show --json`` and ``show`` of ``whole`` written at ``path`` in growths (cut after
    ``cuts`` records, each shown and kept before the next is appended)."""
    head, *records = whole.read_bytes().splitlines(keepends=True)
    path.write_bytes(head)
    done = 0
    for k in [*cuts, len(records)]:
        with path.open("ab") as f:  # the recording goes on
            f.write(b"".join(records[done:k]))
        done = k
        rc, out, err = cli_output("show", "--json", str(path))
        assert rc == 0 and not err, err
    return out, cli_output("show", str(path))[1]  # (the kept analysis of the grown file)


def _fresh(path: Path) -> tuple[bytes, bytes]:
    """``show --json`` and ``show`` of ``path`` read fresh (no kept analysis)."""
    return tuple(
        cli_output(*c, "--no-cache", str(path))[1] for c in (("show", "--json"), ("show",))
    )  # type: ignore[return-value]


def _grown(tmp_path: Path, whole: Path, cuts: list[int]) -> tuple[bytes, bytes]:
    """``show --json`` (then ``show``) of ``whole`` written in growths, and of the whole file read
    fresh."""
    path = tmp_path / "-".join(map(str, cuts)) / "run.jsonl"
    path.parent.mkdir()
    out, text = _growths(path, whole, cuts)
    fresh, fresh_text = _fresh(path)
    assert text == fresh_text
    return out, fresh


@pytest.mark.parametrize("name", RECORDED)
def test_a_real_rendered_compaction_continued_reads_as_the_whole_file(
    name: str, tmp_path: Path, _cache: Path
) -> None:
    whole = DATA / f"{name}.jsonl"
    n = len(whole.read_bytes().splitlines()) - 1
    # Every cut grows to the same bytes at the same path: read fresh once (the kept analyses
    # removed before each cut, so each is kept and continued afresh).
    path = tmp_path / "run" / "run.jsonl"
    path.parent.mkdir()
    path.write_bytes(whole.read_bytes())
    fresh = _fresh(path)
    assert b'"side_call"' in fresh[0] and b'"summarised"' in fresh[0]
    for k in range(1, n):
        shutil.rmtree(_cache, ignore_errors=True)
        assert _growths(path, whole, [k]) == fresh, k


@pytest.mark.parametrize("family", ["openai_chat", "gemini"])
def test_a_scripted_compaction_continued_in_two_growths(family: str, tmp_path: Path) -> None:
    """The summariser (#4) never saw the instruction: a warning the whole file gives, and the
    continued one (cut before the summariser, then before the next request) gives too."""
    whole = tmp_path / "whole.jsonl"
    with CassetteWriter(whole) as w:
        for ex in _compacted_run(family, instruction=True, seen=False):
            w.append(ex)
    grown, fresh = _grown(tmp_path, whole, [5, 6])
    assert grown == fresh
    assert b"C.user_instruction_dropped" in fresh


@pytest.mark.parametrize("spilled", [False, True], ids=["in_memory", "spilled"])
@pytest.mark.parametrize("cuts", [[4], [5], [4, 5]])
def test_a_guardrail_settled_as_a_handoff_reads_so_when_continued(
    cuts: list[int], spilled: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guardrail quoting the worker (#4) is a side call until the run ends without its
    answer carried: a file kept then (a hand-off) and grown (the worker goes on, #5) reads it
    as the whole file does (also with every table of the analysis spilled past 1 entry)."""
    if spilled:
        monkeypatch.setattr(spill, "KEEP", 1)
    whole = tmp_path / "whole.jsonl"
    with CassetteWriter(whole) as w:
        for ex in _guardrail_run("openai_chat", goes_on=True):
            w.append(ex)
    grown, fresh = _grown(tmp_path, whole, cuts)
    assert grown == fresh
    assert b'"conversation_kind":"handoff"' in fresh
