"""Bounded memory on long runs: what the analysis releases changes nothing it finds, and what it
keeps per turn does not grow with the run."""

from __future__ import annotations

import gc
import itertools
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import CORPUS, corpus_files, findings_cover, load
from scenarios import (
    WEATHER,
    Call,
    Tool,
    anthropic_assistant,
    anthropic_results,
    anthropic_turn,
    anthropic_user,
    edit_request,
    openai_responses_results,
    openai_responses_turn,
    openai_responses_user,
)

from looptap.cassettes.analysis import RunAnalyser, RunAnalysis, Turn, analyse
from looptap.cassettes.analysis._state import QUIET_KEEP
from looptap.cassettes.reading import RunReader
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange


def _keep_everything(exchanges: list[Exchange], active: int = 1_000_000) -> RunAnalysis:
    """The analysis without releasing anything (no reload hook, every history kept)."""
    a = RunAnalyser(active=active)
    for ex in exchanges:
        a.add(ex)
    return a.finish()


#: Beside the corpus' cover (:func:`findings_cover`), the files whose conversations, every
#: file's taking turns in one run, give a finding the cover's files alone do not (a conversation
#: threaded across files: a dropped tool result, an orphan result, a retry of a rejected request,
#: a dropped instruction, an answer continued; two files' own context edit and repeated call),
#: the fewest files a code: the nightly case below fails, naming the code, when the default run no
#: longer finds every code the whole corpus does.
THREADED = [
    "pydantic-ai/tests/cassettes/test_model_name_suggestions/test_inferred_model_name_suggestion.yaml",
    "pydantic-ai/tests/cassettes/test_model_name_suggestions/"
    "test_model_name_suggestion[openai-responses].yaml",
    *(
        "pydantic-ai/tests/cassettes/test_tool_availability_portability/"
        f"test_tool_availability_portability_matrix[{case}].yaml"
        for case in ("R3-T3-native-search", "R5-T3-native-search")
    ),
    *(
        f"pydantic-ai/tests/models/cassettes/{name}.yaml"
        for name in (
            "test_google/test_google_instructions_only_with_tool_calls",
            "test_google/test_google_model_empty_assistant_response",
            "test_google/test_google_model_retrying_after_empty_response",
            "test_groq/test_tool_use_failed_error",
            "test_groq/test_tool_use_failed_error_streaming",
            "test_openai_responses/test_openai_responses_reasoning_generate_summary",
        )
    ),
]


def _released_run(files: list[Path], order: str) -> list[Exchange]:
    per_file = [load(p) for p in files]
    if order == "in_order":
        exchanges = list(itertools.chain.from_iterable(per_file))
    else:
        exchanges = [
            ex for group in itertools.zip_longest(*per_file) for ex in group if ex is not None
        ]
    for i, ex in enumerate(exchanges):
        ex.seq = i
    return exchanges


def _default_files() -> list[Path]:
    return sorted({*findings_cover(), *(CORPUS / name for name in THREADED)})


def _codes(analysis: dict[str, Any]) -> set[str]:
    return {f["code"] for f in analysis["findings"]} | {
        f["code"] for t in analysis["turns"].values() for f in t["findings"]
    }


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("order", "files"),
    [
        # (every file's conversations active at once: the most released)
        ("interleaved", "cover"),
        pytest.param(
            "interleaved",
            "every",
            marks=pytest.mark.slow(reason="every corpus file, not its cover: ~18 s of CPU"),
        ),
        pytest.param(
            "in_order",
            "every",
            marks=pytest.mark.slow(reason="the same corpus file after file, ~25 s"),
        ),
    ],
)
def test_releasing_contexts_and_histories_changes_no_finding(order: str, files: str) -> None:
    """Corpus round trips in one run (hundreds of conversations, interleaved or not): analysed
    keeping everything, releasing as usual, and releasing every history at once. By default the
    corpus' cover of wire shapes and finding codes and the files of :data:`THREADED` (186 files,
    172 conversations, every finding code the whole corpus gives); the nightly run every file
    (1,099), interleaved and in order."""
    exchanges = _released_run(_default_files() if files == "cover" else corpus_files(), order)
    want = _keep_everything(exchanges).model_dump()
    assert len(want["conversations"]) > 100
    assert analyse(exchanges).model_dump() == want
    assert _keep_everything(exchanges, active=0).model_dump() == want
    assert _without_turns(exchanges).model_dump() == want
    if files == "every" and order == "interleaved":  # the default run's files still find it all
        cover = _keep_everything(_released_run(_default_files(), order)).model_dump()
        assert _codes(want) <= _codes(cover), sorted(_codes(want) - _codes(cover))


def _without_turns(exchanges: list[Exchange]) -> RunAnalysis:
    """The analysis holding no turns (as the incremental reader runs it), the turns it returned
    put back together."""
    from looptap.cassettes.parsing import parse_exchange

    turns: dict[int, Turn] = {}
    a = RunAnalyser(
        lambda seq: (exchanges[seq], parse_exchange(exchanges[seq]), turns[seq]), keep_turns=False
    )
    for ex in exchanges:
        turn = a.add(ex)
        if turn is not None:
            turns[turn.seq] = turn
    got = a.finish()
    assert got.turns == {}
    # a turn a later request moved (a handed loop, a turn proved another conversation's) is put
    # where it is now, as the incremental reader does (RunReader._place_moved)
    got.turns = {seq: a.placed(turn) for seq, turn in turns.items()}
    return got


def test_a_fork_to_a_released_turn_reads_it_again() -> None:
    """``previous_response_id`` pointing back past the latest turn: the released context of that
    turn is read again, and the analysis is the one that kept it."""
    call = Call("get_weather", {"city": "Paris"})
    t0 = openai_responses_turn(
        [openai_responses_user("Weather in Paris?")], None, [call], tools=[WEATHER]
    )
    rid = orjson.loads(t0.response_body)["id"]
    t1 = openai_responses_turn(
        openai_responses_results([(call, "sunny")]), "Sunny.", tools=[WEATHER]
    )
    t2 = openai_responses_turn([openai_responses_user("Thanks!")], "Welcome.", tools=[WEATHER])
    t2_rid = orjson.loads(t1.response_body)["id"]
    edit_request(t1, lambda b: b.update(previous_response_id=rid))
    edit_request(t2, lambda b: b.update(previous_response_id=t2_rid))
    # A branch from turn 0 again, this time forgetting the result.
    fork = openai_responses_turn(
        [openai_responses_user("And in Rome?")], "Checking.", tools=[WEATHER]
    )
    edit_request(fork, lambda b: b.update(previous_response_id=rid))
    exchanges = [t0, t1, t2, fork]
    for i, ex in enumerate(exchanges):
        ex.seq = i
    reloaded: list[int] = []
    want = _keep_everything(exchanges)
    a = RunAnalyser(lambda seq: (reloaded.append(seq), _reload(exchanges, a, seq))[1])
    for ex in exchanges:
        a.add(ex)
    got = a.finish()
    assert reloaded == [0]
    assert got.model_dump() == want.model_dump()
    assert got.turns[3].previous_seq == 0
    assert "C.dropped_tool_result" in [f.code for f in got.turns[3].findings]


def _reload(exchanges: list[Exchange], a: RunAnalyser, seq: int):  # type: ignore[no-untyped-def]
    from looptap.cassettes.parsing import parse_exchange

    return exchanges[seq], parse_exchange(exchanges[seq]), a.result.turns[seq]


# -- memory ----------------------------------------------------------------------------------------

_READ = Tool(
    "read_file", {"type": "object", "properties": {"path": {"type": "string"}}}, "Read a file."
)
_RESULT = "\n".join(f"{n:4d}  def f_{n}(x): return x * {n}" for n in range(60))  # ~2 KB


def _write_run(path: Path, conversations: int, turns: int) -> Path:
    """``conversations`` agents, two at a time, each ``turns`` tool-calling turns: every request
    re-sends its history (stored as history deltas) and every result is ~2 KB."""
    scripts = []
    for c in range(conversations):
        history = [anthropic_user(f"CONV-{c}: fix the tests in src/")]
        exchanges = []
        for t in range(turns):
            call = Call("read_file", {"path": f"src/m_{c}_{t}.py"}, id=f"toolu_{c}_{t}")
            text = f"Turn {t} of {c}: reading the next file. " * 8
            exchanges.append(anthropic_turn([*history], text, [call], tools=[_READ]))
            history.append(anthropic_assistant(text, [call]))
            history.extend(anthropic_results([(call, f"{c}/{t}\n{_RESULT}")]))
        scripts.append(exchanges)
    with CassetteWriter(path) as w:
        for pair in range(0, conversations, 2):
            for a, b in itertools.zip_longest(*scripts[pair : pair + 2]):
                for ex in (a, b):
                    if ex is not None:
                        w.append(ex)
    return path


def _retained(path: Path) -> tuple[int, int]:
    """Bytes still allocated after reading the whole run (Python's own allocations), and turns."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run = RunReader(path, body_cache=2)
        while not run.step().at_end:
            pass
        run.finish()
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    turns = len(run.summaries)
    run.close()
    return retained, turns


@pytest.mark.slow(
    reason="two tool-loop runs under tracemalloc, ~8 s of CPU; a run's memory per conversation "
    "and per turn kept is the default run's (test_huge's quiet-conversation record, "
    "test_kept_readback's bounded objects per turn)"
)
def test_memory_per_turn_does_not_grow_with_the_run(tmp_path: Path) -> None:
    # Imports and caches (prices, schemas) warmed up, so they are not counted as the run's.
    _retained(_write_run(tmp_path / "warm.jsonl", 2, 3))
    small, n_small = _retained(_write_run(tmp_path / "small.jsonl", 24, 12))
    large, n_large = _retained(_write_run(tmp_path / "large.jsonl", 48, 12))
    # Each turn re-sends ~2 KB more history than the one before; a turn whose parsed request,
    # views and texts stayed in memory took 20-50 KB. What stays is its summary, the threader's
    # hashes, the checks' ids and hashes, and the latest turn of each (12-turn) conversation;
    # since issue 103 the threader's continuity tokens too (a 64-bit hash per token an answer
    # produced, docs/threading.md "Provider evidence first"): 5,018-5,030 measured, was under 5,000.
    per_added_turn = (large - small) / (n_large - n_small)
    assert per_added_turn < 5_500, f"{per_added_turn:.0f} bytes retained per added turn"
    assert large / n_large <= small / n_small, "memory per turn grows with the run"


def test_quiet_conversations_states_go_to_disk_past_a_few_dozen(tmp_path: Path) -> None:
    """A quiet (parked) conversation's state — its checks' memory and token sums, tens of KB for a
    long one — goes to the spill file once more than :data:`QUIET_KEEP` (64) of them are held, not
    once 4,096 are (80 MB at 1 GB of 100-turn conversations, issue 73; 256 until issue 106); the
    findings and the turns' tokens are those of an analysis that keeps everything in memory."""
    from support.huge import write_huge

    from looptap.cassettes.storage import read_records

    path = write_huge(tmp_path / "run.jsonl", 400 * 2, "long", turns=2)
    reader = RunReader(path)
    held, at_end = 0, False
    while not at_end:
        at_end = reader.step(64 * 1024).at_end
        held = max(held, sum(1 for _ in reader.analyser.state.convs.hot_items()))
    reader.finish()
    assert held <= QUIET_KEEP + 17 + 17, held  # (the keep, the live ones, those not yet trimmed)
    assert reader.analyser.state.spill.used
    got, want = reader.whole(), _keep_everything(read_records(path).exchanges)
    assert len(want.conversations) == 400
    assert [f.model_dump() for f in got.findings] == [f.model_dump() for f in want.findings]
    assert [t.tokens.model_dump() for t in got.turns.values()] == [
        t.tokens.model_dump() for t in want.turns.values()
    ]
    reader.close()
