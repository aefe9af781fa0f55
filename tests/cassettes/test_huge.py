"""Huge runs: what a command keeps per conversation stays small, parking a quiet conversation
changes nothing the analysis finds, and a run beyond the memory budget is refused in one line.

Sizes are small (hundreds of round trips); the figures at 10k-1M are bench/huge.py's."""

from __future__ import annotations

import gc
import os
import tracemalloc
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.analysis import ACTIVE, RunAnalyser, analyse
from looptap.cassettes.cli import main
from looptap.cassettes.reading import RunReader, RunTooLargeError, open_run
from looptap.cassettes.storage import read_records
from tests.support.huge import write_huge

_HEADER = (
    b'{"type":"header","format":"looptap-cassette","format_version":1,"writer":"looptap '
    b'0.1.0","created":"2026-01-01T00:00:00.000Z","meta":{}}\n'
)


def _retained(path: Path) -> int:
    """Bytes an incremental read keeps once the run is read and analysed (what a command holds
    for its second pass, before the analyser's working state is let go)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    inc = RunReader(path)
    while not inc.step().at_end:
        pass
    inc.finish()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    inc.close()
    return after - before


def test_a_quiet_conversation_keeps_a_small_record(tmp_path: Path) -> None:
    # Warm imports and caches (prices, schemas) so they are not counted as the run's.
    _retained(write_huge(tmp_path / "warm.jsonl", 40))
    # (both past the quiet conversations' states held in memory, QUIET_KEEP (64; 256 before
    # issue 106): each table that spills makes its filter of keys once, in both. 300 and 700
    # until session 54: 4,730 bytes a conversation there, 4,443 at 100 and 300, the same twice)
    small = _retained(write_huge(tmp_path / "small.jsonl", 100))
    large = _retained(write_huge(tmp_path / "large.jsonl", 300))
    # A one-turn conversation kept its parsed round trip, views and checks' memory (~17 KB);
    # parked, it keeps the threader's hashes, its summary and a few hundred bytes of state.
    per_conversation = (large - small) / 200
    assert per_conversation < 8_000, f"{per_conversation:.0f} bytes kept per one-turn conversation"


def _interleaved(path: Path, conversations: int, turns: int, stop_early: set[int]) -> Path:
    """``conversations`` tool-calling conversations taking turns round-robin (more than the
    analyser keeps active, so each is parked between its turns); those in ``stop_early`` stop
    after their first turn, with a call pending."""
    lines = [_HEADER]
    seq = 0
    history: dict[int, list[dict[str, object]]] = {
        k: [{"role": "user", "content": f"Task {k}: look things up for me, please."}]
        for k in range(conversations)
    }
    for t in range(turns):
        for k in range(conversations):
            if t and k in stop_early:
                continue
            call = {
                "id": f"call_{k}_{t}",
                "type": "function",
                "function": {
                    "name": "lookup",
                    "arguments": orjson.dumps({"q": f"{k}-{t}"}).decode(),
                },
            }
            final = t == turns - 1
            message = {
                "role": "assistant",
                "content": "Done." if final else None,
                **({} if final else {"tool_calls": [call]}),
            }
            resp = {
                "id": f"chatcmpl-{seq}",
                "object": "chat.completion",
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "stop" if final else "tool_calls",
                    }
                ],
                "usage": {
                    "prompt_tokens": 20 + 10 * t,
                    "completion_tokens": 5,
                    "total_tokens": 25 + 10 * t,
                },
            }
            req = {
                "model": "gpt-4o-mini",
                "messages": history[k],
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "lookup",
                            "parameters": {
                                "type": "object",
                                "properties": {"q": {"type": "string"}},
                            },
                        },
                    }
                ],
            }
            rec = {
                "type": "exchange",
                "seq": seq,
                "started": 1767225600.0 + seq,
                "method": "POST",
                "url": "https://api.openai.com/v1/chat/completions",
                "request": {
                    "headers": [["content-type", "application/json"]],
                    "body": {"json": req},
                },
                "response": {
                    "status": 200,
                    "reason": "OK",
                    "headers": [["content-type", "application/json"]],
                    "body": {"json": resp, "t": 0.1},
                },
                "timing": {"ttfb": 0.4, "duration": 0.5},
            }
            lines.append(orjson.dumps(rec) + b"\n")
            history[k] = [
                *history[k],
                message,
                {"role": "tool", "tool_call_id": call["id"], "content": f"result {k}-{t}"},
            ]
            seq += 1
    path.write_bytes(b"".join(lines))
    return path


def test_parking_quiet_conversations_changes_nothing_found(tmp_path: Path) -> None:
    """Conversations parked between their turns (and some never continued, with a call pending:
    an end-of-run finding computed when parked) are analysed exactly as when everything is kept."""
    n = ACTIVE * 3
    path = _interleaved(tmp_path / "run.jsonl", n, 3, stop_early={1, 7, 20, n - 1})
    exchanges = read_records(path).exchanges
    keep = RunAnalyser(active=10**6)  # no reload hook: nothing is ever parked
    for ex in exchanges:
        keep.add(ex)
    want = keep.finish()
    assert any(f.code == "C.stopped_with_pending_calls" for f in want.findings)
    assert len(want.conversations) == n
    assert analyse(read_records(path).exchanges).model_dump() == want.model_dump()
    inc = RunReader(path)
    while not inc.step().at_end:
        pass
    inc.finish()
    assert inc.analyser.state.parked, "the run never parked a conversation: the test tests nothing"
    got = inc.whole()
    inc.close()
    assert [c.model_dump() for c in got.conversations] == [
        c.model_dump() for c in want.conversations
    ]
    assert [f.model_dump() for f in got.findings] == [f.model_dump() for f in want.findings]
    assert {s: t.model_dump() for s, t in got.turns.items()} == {
        s: t.model_dump() for s, t in want.turns.items()
    }


def test_a_run_beyond_the_memory_budget_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_huge(tmp_path / "run.jsonl", 300)
    monkeypatch.setenv("LOOPTAP_MEMORY_BUDGET_MB", "1")
    with pytest.raises(RunTooLargeError, match="memory budget of 1 MB"):
        open_run(path)
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "LOOPTAP_MEMORY_BUDGET_MB" in err[0], err
    monkeypatch.setenv("LOOPTAP_MEMORY_BUDGET_MB", "0")  # no limit
    assert len(open_run(path)) == 300


def _kept_by_open_run(path: Path) -> int:
    """Bytes a command's ``open_run`` keeps once the run is read and analysed (its second pass
    reads the round trips again from disk)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    run = open_run(path)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(run) > 0
    return after - before


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("LOOPTAP_SLOW"), reason="LOOPTAP_SLOW=1 (about 2 minutes under tracemalloc)"
)
def test_a_command_keeps_a_few_hundred_bytes_per_quiet_conversation(tmp_path: Path) -> None:
    # What grows with a run of one-turn conversations once a command has read it: the turns'
    # places in the store (integers in arrays), each conversation's slotted record, the checks'
    # findings. With a TurnSummary, a growth bar and a pydantic Conversation each it was ~2 KB.
    _kept_by_open_run(write_huge(tmp_path / "warm.jsonl", 40))
    small = _kept_by_open_run(write_huge(tmp_path / "small.jsonl", 200))
    large = _kept_by_open_run(write_huge(tmp_path / "large.jsonl", 700))
    per_conversation = (large - small) / 500
    assert per_conversation < 1_000, f"{per_conversation:.0f} bytes kept per one-turn conversation"


def _peak_kept(path: Path) -> int:
    """Bytes an incremental read holds once every round trip is analysed, before the end-of-run
    checks: the analysis's working state at its largest (every conversation still continuable)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    inc = RunReader(path, summaries=False)  # as the commands read a run (open_run)
    while not inc.step().at_end:
        pass
    # (its blocks waiting for the compressor: a few MB at most, however long the run)
    inc.parses.flush()
    gc.collect()
    # (less the block of turns being filled for the turn store: up to 256 KB, however long the run)
    after = tracemalloc.get_traced_memory()[0] - inc.turn_store._filling.__sizeof__()
    tracemalloc.stop()
    inc.finish()
    inc.close()
    return after - before


@pytest.mark.slow(
    reason="three runs under tracemalloc, ~8 s of CPU; the state going to the spill file past "
    "its keep is the default run's (test_memory's test_quiet_conversations_states_go_to_disk_"
    "past_a_few_dozen, test_a_spilled_analysis_equals_the_one_held_in_memory)"
)
def test_the_analysis_state_of_a_quiet_conversation_is_spilled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the threader and the analyser keep per conversation (history hashes, its record, the
    checks' memory) goes to disk past a fixed number of entries: memory per conversation is the
    offset indexes' few bytes per round trip (~70), not kilobytes (3.2 KB per one-turn
    conversation before; a million of them took 3 GB)."""
    from looptap.cassettes.analysis import spill

    monkeypatch.setattr(spill, "KEEP", 64)
    _peak_kept(write_huge(tmp_path / "warm.jsonl", 100))
    small = _peak_kept(write_huge(tmp_path / "small.jsonl", 200))
    large = _peak_kept(write_huge(tmp_path / "large.jsonl", 1_000))
    per_conversation = (large - small) / 800
    # (150 before the reader kept each round trip's parse for its printers and viewers: the store
    # of parses adds 13 bytes of place per round trip, its data on disk)
    assert per_conversation < 170, (
        f"{per_conversation:.0f} bytes kept per one-turn conversation while analysing"
    )


@pytest.mark.parametrize(
    "keep",
    [
        1,
        pytest.param(
            5, marks=pytest.mark.slow(reason="a third spill threshold between 1 and 24: same code")
        ),
        24,
    ],
)
def test_a_spilled_analysis_equals_the_one_held_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: int
) -> None:
    """With tables spilled after ``keep`` entries (history hashes, turns, records, parked
    conversations on disk and read back), the analysis is the one made holding everything."""
    from looptap.cassettes.analysis import spill

    n = ACTIVE * 3
    path = _interleaved(tmp_path / "run.jsonl", n, 3, stop_early={1, 7, 20, n - 1})
    want = RunAnalyser(active=10**6, keep=10**9)
    for ex in read_records(path).exchanges:
        want.add(ex)
    expected = want.finish()
    monkeypatch.setattr(spill, "KEEP", keep)
    inc = RunReader(path)
    while not inc.step().at_end:
        pass
    inc.finish()
    assert inc.analyser.state.spill.used and inc.analyser.state.threader._spill.used, (
        "nothing was spilled: the test tests nothing"
    )
    got = inc.whole()
    inc.close()
    assert [c.model_dump() for c in got.conversations] == [
        c.model_dump() for c in expected.conversations
    ]
    assert [f.model_dump() for f in got.findings] == [f.model_dump() for f in expected.findings]
    assert {s: t.model_dump() for s, t in got.turns.items()} == {
        s: t.model_dump() for s, t in expected.turns.items()
    }
    held = analyse(read_records(path).exchanges)
    assert held.model_dump() == expected.model_dump()


def test_the_tables_in_memory_stay_within_tens_of_megabytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a table keeps in memory before it spills (``spill.KEEP`` entries, and up to half as
    many again between trims) times what the analysis holds per conversation kept in memory: the
    part of a command's peak that grows with a run until the tables are full. With 20,000 entries
    it was ~120 MB (show: 104 MB at 10k round trips, 227 MB at 100k)."""
    from looptap.cassettes.analysis import spill

    keep = spill.KEEP
    monkeypatch.setattr(spill, "KEEP", 10**6)  # nothing spilled: every conversation's state held
    _peak_kept(write_huge(tmp_path / "warm.jsonl", 100))
    # (200 and 600 until session 54: 3,982 bytes a conversation there, 4,010 at 100 and 300)
    small = _peak_kept(write_huge(tmp_path / "small.jsonl", 100))
    large = _peak_kept(write_huge(tmp_path / "large.jsonl", 300))
    per_conversation = (large - small) / 200
    held = per_conversation * keep * 1.5
    assert held < 64 * 2**20, (
        f"{per_conversation:.0f} bytes per conversation held × {keep:,} kept: {held / 2**20:.0f} MB"
    )


def test_show_with_a_filter_holds_neither_the_conversations_nor_the_lines(tmp_path: Path) -> None:
    """``show --turn 0`` keeps every conversation of a one-turn run: the filtered analysis reads
    them from the run on each pass, and the findings and growth tables are printed a line at a
    time (a list of every conversation and of every line was ~2.5 KB per conversation: 2.5 GB
    at a million)."""
    from looptap.cassettes.cli.showfilter import ShowFilter
    from looptap.cassettes.views import analysis_lines

    run = open_run(write_huge(tmp_path / "run.jsonl", 400))
    lines = 0
    for _ in analysis_lines(ShowFilter(None, 0, None, None).analysis(run.analysis)):  # warm
        lines += 1
    assert lines > 400 * 4
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in analysis_lines(ShowFilter(None, 0, None, None).analysis(run.analysis)):
        pass
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    assert peak < 300_000, f"{peak:,} bytes held while printing 400 conversations"
