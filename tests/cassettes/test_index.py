"""The incremental reader (cassettes.storage._index, cassettes.reading._incremental) and the viewer
helpers (growth, search, timeline)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import fixture_run
import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.errors import CassetteFormatError, CassetteIOError, NewerFormatError
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.reading import RunReader
from looptap.cassettes.storage import RecordIndex, read_records
from looptap.cassettes.views import growth_bars
from looptap.cassettes.views.search import search_turns
from looptap.cassettes.views.timeline import text_timeline

DEMO = Path(__file__).resolve().parents[2] / "cassettes" / "examples" / "tool_loop_anthropic.yaml"


def _read_all(run: RunReader, max_bytes: int | None = None) -> None:
    while not run.step(max_bytes).at_end:
        pass


@pytest.fixture
def fx(tmp_path: Path) -> Path:
    return fixture_run.write(tmp_path / "run.jsonl")


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    from looptap.cassettes.cli import main

    out = tmp_path / "demo.jsonl"
    assert main(["import", str(DEMO), "-o", str(out), "-q"]) == 0
    return out


@pytest.mark.parametrize("max_bytes", [None, 200, 5000])
def test_incremental_analysis_equals_the_batch_analysis(
    fx: Path, demo: Path, max_bytes: int | None
) -> None:
    for path in (fx, demo):
        run = RunReader(path)
        _read_all(run, max_bytes)
        run.finish()
        got = run.whole()
        want = analyse(read_records(path).exchanges)
        assert got.model_dump() == want.model_dump()
        assert run.records == len(read_records(path).exchanges)


def test_roundtrip_rebuilds_the_full_history_after_the_analysis_released_it(fx: Path) -> None:
    run = RunReader(fx, body_cache=1)  # every delta base must come back from disk
    _read_all(run)
    cas = read_records(fx)
    for ex_want in cas.exchanges:
        assert ex_want.seq is not None
        ex, rt = run.by_seq(ex_want.seq)
        assert ex.request_json() == ex_want.request_json()
        assert ex.response_chunks == ex_want.response_chunks
        assert rt.request is not None
        assert len(rt.request.messages) == len(ex_want.request_json()["messages"])


def test_small_body_cache_gives_the_same_analysis(fx: Path) -> None:
    run = RunReader(fx, body_cache=1)
    _read_all(run, 300)
    run.finish()
    assert run.whole().model_dump() == analyse(read_records(fx).exchanges).model_dump()


def test_live_file_grows_and_unfinished_line_waits_for_its_newline(
    fx: Path, tmp_path: Path
) -> None:
    lines = fx.read_bytes().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"".join(lines[:3]))  # header + 2 records
    run = RunReader(live)
    batch = run.step()
    assert [t.seq for t in batch.turns] == [0, 1] and batch.at_end
    half = len(lines[3]) // 2
    with live.open("ab") as f:
        f.write(lines[3][:half])  # the writer is mid-record
    batch = run.step()
    assert batch.turns == [] and batch.problems == [] and run.index.pending == half
    with live.open("ab") as f:
        f.write(lines[3][half:] + b"".join(lines[4:]))
    batch = run.step()
    assert [t.seq for t in batch.turns] == [2, 3, 4]
    assert run.problems == []
    run.finish()
    assert run.whole().model_dump() == analyse(read_records(fx).exchanges).model_dump()


def test_torn_tail_is_reported_once_the_file_is_finished(fx: Path, tmp_path: Path) -> None:
    data = fx.read_bytes()
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(data[: len(data) - 200])
    run = RunReader(torn)
    _read_all(run)
    assert run.problems == []
    run.finish()
    assert [p.kind for p in run.problems] == ["torn"]
    assert len(run.summaries) == 4
    assert [str(p) for p in run.problems] == [str(p) for p in read_records(torn).problems]


def test_corrupt_line_in_the_middle_is_skipped_and_reported(fx: Path, tmp_path: Path) -> None:
    lines = fx.read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join([*lines[:2], b"{not json\n", *lines[2:]]))
    run = RunReader(bad)
    _read_all(run)
    run.finish()
    assert [p.kind for p in run.problems] == ["corrupt"]
    assert len(run.summaries) == 5


def test_not_a_cassette_and_newer_format_raise(tmp_path: Path) -> None:
    yaml = tmp_path / "x.yaml"
    yaml.write_text("interactions: []\n")
    with pytest.raises(CassetteFormatError, match="not a looptap cassette"):
        RunReader(yaml).step()
    newer = tmp_path / "newer.jsonl"
    newer.write_text('{"type":"header","format":"looptap-cassette","format_version":99}\n')
    with pytest.raises(NewerFormatError, match="newer looptap"):
        RunReader(newer).step()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    run = RunReader(empty)
    assert run.step().at_end
    with pytest.raises(CassetteFormatError, match="empty file"):
        run.finish()


def test_index_offsets_point_at_their_records(fx: Path) -> None:
    index = RecordIndex(fx)
    recs = index.poll()
    assert len(index) == 5 == len(recs)
    for (_, rec), seq in zip(recs, index.seqs, strict=True):
        assert index.read_record(seq) == rec


def test_growth_bars_stack_up_to_the_input(fx: Path, demo: Path) -> None:
    for path in (fx, demo):
        analysis = analyse(read_records(path).exchanges)
        for conv in analysis.conversations:
            turns = [analysis.turns[s] for s in conv.turns]
            for bar, turn in zip(growth_bars(turns), turns, strict=True):
                assert bar.input == turn.tokens.input
                assert min(bar.system, bar.tools, bar.history, bar.tool_results, bar.new) >= 0
                assert bar.output == turn.tokens.output
                assert bar.cumulative_cost == turn.tokens.cumulative_cost
            first = growth_bars(turns)[0]
            assert first.history == first.tool_results == 0


def test_growth_new_input_of_a_tool_result_turn_is_mostly_tool_results(fx: Path) -> None:
    analysis = analyse(read_records(fx).exchanges)
    bar = growth_bars([analysis.turns[0], analysis.turns[1]])[1]
    assert bar.new == analysis.turns[1].tokens.segments.new  # type: ignore[union-attr]
    assert bar.new > 0 and bar.history > 0


def test_search_finds_text_calls_results_and_findings(fx: Path) -> None:
    turns = list(analyse(read_records(fx).exchanges).turns.values())
    assert [(h.seq, h.where) for h in search_turns(turns, "SUNNY")] == [(1, "E text")]
    assert (2, "E tool call") in [(h.seq, h.where) for h in search_turns(turns, '"town"')]
    assert (1, "C tool result") in [(h.seq, h.where) for h in search_turns(turns, "temp_c")]
    assert [h.seq for h in search_turns(turns, "dropped_tool_result")] == [3]
    assert search_turns(turns, "") == [] and search_turns(turns, "no such words here") == []
    assert len(search_turns(turns, "e", limit=3)) == 3


def test_timeline_follows_the_recorded_chunks(fx: Path) -> None:
    cas = read_records(fx)
    rts = parse_all(cas.exchanges)
    points = text_timeline(cas.exchanges[1], rts[1])
    assert rts[1].response is not None
    text = rts[1].response.text
    assert text == fixture_run.ANSWER
    assert len(points) == len(text.split(" "))  # one point per word-sized event
    assert points[-1].chars == len(text)
    assert all(a.offset < b.offset and a.chars < b.chars for a, b in itertools.pairwise(points))
    assert points[1].offset - points[0].offset == pytest.approx(fixture_run.PACE)
    few = text_timeline(cas.exchanges[1], rts[1], max_points=4)
    assert len(few) <= 5 and few[-1].chars == len(text)
    assert text_timeline(cas.exchanges[2], rts[2]) == []  # not streamed


def test_summaries_and_stored_turns_match_the_batch_analysis(fx: Path, demo: Path) -> None:
    for path in (fx, demo):
        run = RunReader(path, turn_cache=1)
        _read_all(run, 3000)
        run.finish()
        want = analyse(read_records(path).exchanges)
        assert list(run.summaries) == list(want.turns)
        for seq, summary in run.summaries.items():
            turn = want.turns[seq]
            assert run.full_turn(seq).model_dump() == turn.model_dump()
            assert summary.bar == growth_bars([turn])[0]
            assert summary.findings == turn.findings
            assert (summary.conversation, summary.index, summary.previous_seq) == (
                turn.conversation,
                turn.index,
                turn.previous_seq,
            )
            assert (summary.input, summary.output, summary.tool_calls) == (
                turn.tokens.input,
                turn.tokens.output,
                len(turn.e.tool_calls),
            )
            assert summary.appended_from == turn.c.appended_from
        assert run.analysis.turns == {}  # the reader holds summaries, not turns
        assert [f.model_dump() for f in run.analysis.findings] == [
            f.model_dump() for f in want.findings
        ]
        assert [c.model_dump() for c in run.analysis.conversations] == [
            c.model_dump() for c in want.conversations
        ]
        run.close()


def test_end_of_run_findings_reach_the_summaries(fx: Path) -> None:
    run = RunReader(fx)
    _read_all(run)
    before = sum(len(s.findings) for s in run.summaries.values())
    run.finish()
    want = analyse(read_records(fx).exchanges)
    assert sum(len(s.findings) for s in run.summaries.values()) == len(want.findings) >= before
    for seq, s in run.summaries.items():
        assert run.full_turn(seq).findings == s.findings == want.turns[seq].findings


def test_a_file_that_shrinks_while_followed_is_an_error(fx: Path, tmp_path: Path) -> None:
    live = tmp_path / "live.jsonl"
    live.write_bytes(fx.read_bytes())
    run = RunReader(live)
    _read_all(run)
    live.write_bytes(fx.read_bytes()[:500])  # another recording started over the same path
    with pytest.raises(CassetteIOError, match="shrank"):
        run.step()


def test_turn_store_blocks_round_trip_from_memory_and_disk(
    fx: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Full turns come back identical whether their block is being filled or was compressed to
    disk, and the store runs no thread of its own: a full block is compressed by the put that
    filled it (a compressor thread made a busy machine's reader wait for the interpreter lock)."""
    import threading

    from looptap.cassettes.reading import TurnStore

    monkeypatch.setattr(TurnStore, "BLOCK", 3000)
    want = analyse(read_records(fx).exchanges).turns
    threads = threading.active_count()
    store = TurnStore()
    where = {}
    for _ in range(3):  # enough turns for many blocks
        for seq, turn in want.items():
            where[(_, seq)] = (turn, store.put(turn))
            got = store.get(*where[(_, seq)][1])  # readable at once, from the block being filled
            assert got.model_dump() == turn.model_dump()
            assert len(store._filling) < store.BLOCK  # a full block is a row when put returns
    blocks = {w[0] for _, w in where.values()}
    assert len(blocks) > 5
    assert threading.active_count() == threads
    for turn, w in where.values():
        assert store.get(*w).model_dump() == turn.model_dump()
    store.flush()
    rows = list(store.blocks())  # (nothing left in memory: blocks() checks it)
    assert [b for b, _ in rows] == sorted(blocks)
    assert 0 < sum(len(d) for _, d in rows) < sum(w[2] for _, w in where.values())  # compressed
    again = TurnStore()  # another store holding these rows (a kept analysis taken)
    again.adopt(rows)
    for turn, w in where.values():
        assert store.get(*w).model_dump() == turn.model_dump()
        assert again.get(*w).model_dump() == turn.model_dump()
    store.close()
    again.close()
    with pytest.raises(ValueError, match="closed"):
        store.put(next(iter(want.values())))
    with pytest.raises(ValueError, match="closed"):
        store.get(*next(iter(where.values()))[1])


def test_turn_store_write_failure_surfaces_on_the_put_that_fills_a_block(
    fx: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk fails the reader's put that fills a block, with SQLite's error said as an
    OSError (the stores' file is SQLite's temporary database: a page limit of 1 is what SQLite
    says of a full disk, SQLITE_FULL)."""
    import sqlite3

    from looptap.cassettes.reading import TurnStore

    monkeypatch.setattr(TurnStore, "BLOCK", 1000)
    connect = sqlite3.connect

    def full(*a: Any, **k: Any) -> sqlite3.Connection:
        db = connect(*a, **k)
        db.execute("PRAGMA max_page_count=1")
        return db

    monkeypatch.setattr(sqlite3, "connect", full)
    turn = next(iter(analyse(read_records(fx).exchanges).turns.values()))
    store = TurnStore()
    with pytest.raises(OSError, match="disk is full"):
        for _ in range(1000 // len(turn.model_dump_json()) + 2):
            store.put(turn)
    store.close()


def test_incremental_run_with_small_store_blocks_matches_the_batch_analysis(
    fx: Path, demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looptap.cassettes.reading import TurnStore

    monkeypatch.setattr(TurnStore, "BLOCK", 2000)
    for path in (fx, demo):
        run = RunReader(path, turn_cache=1)
        _read_all(run, 3000)
        run.finish()
        want = analyse(read_records(path).exchanges)
        assert run.whole().model_dump() == want.model_dump()
        run.close()


def test_finish_compresses_the_last_block(fx: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished run keeps no turn JSON in memory: the block being filled is compressed, and
    every full turn still comes back."""
    from looptap.cassettes.reading import TurnStore

    monkeypatch.setattr(TurnStore, "BLOCK", 3000)
    run = RunReader(fx)
    _read_all(run)
    assert run.turn_store._filling  # a block still being filled before finish
    run.finish()
    store = run.turn_store
    assert not store._filling
    want = analyse(read_records(fx).exchanges)
    assert run.whole().model_dump() == want.model_dump()
    run.close()
