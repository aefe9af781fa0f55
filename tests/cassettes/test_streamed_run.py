"""A cassette read as a stream (``open_run`` on a .jsonl file): the same round trips, views, turns
and findings as the whole-file reader, with memory that does not grow with the records."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.huge import write_huge

from looptap.cassettes.reading import Run, open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import RecordIndex, header_record, load_vcr, read_records
from looptap.cassettes.views import turn_json
from looptap.cassettes.views.schema import roundtrip_json
from tests.hostile.corpus import hostile_exchanges, million_tiny
from tests.real_corpus import corpus_files


def _views(run: Any) -> list[dict[str, Any]]:
    out = []
    for ex, rt in run.pairs:
        v = roundtrip_json(rt, ex)
        turn = run.analysis.turns.get(v["seq"])
        v["analysis"] = turn_json(turn) if turn is not None else None
        out.append(v)
    return out


def _whole(path: Path) -> Any:
    cas = read_records(path)
    return Run.of(cas.exchanges, path.name, cas.header, [str(p) for p in cas.problems])


def _cassette(path: Path, exchanges: list[Any]) -> Path:
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    return path


# Agent loops (history deltas, tool pairings, several conversations) from every family.
_SAMPLES = [
    p
    for p in corpus_files()
    if any(k in p.name for k in ("tool", "agent", "multi", "conversation"))
][:40]


@pytest.mark.parametrize("source", _SAMPLES, ids=lambda p: p.name)
def test_the_stream_reads_what_the_whole_file_reader_reads(source: Path, tmp_path: Path) -> None:
    path = _cassette(tmp_path / "run.jsonl", load_vcr(source))
    streamed, whole = open_run(path), _whole(path)
    assert len(streamed.exchanges) == len(whole.exchanges)
    assert _views(streamed) == _views(whole)
    assert streamed.analysis.findings == whole.analysis.findings
    assert streamed.analysis.conversations == whole.analysis.conversations
    assert streamed.families == whole.families
    assert streamed.problems == whole.problems


def test_hostile_and_damaged_records_read_alike(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "run.jsonl", hostile_exchanges())
    data = path.read_bytes().splitlines(keepends=True)
    # a corrupt line, a record of the wrong type and one whose history delta names nothing
    data.insert(3, b'{"type":"exchange","seq":\n')
    data.insert(5, b'{"type":"exchange","seq":"x","method":1}\n')
    data.insert(
        6,
        b'{"type":"exchange","seq":999,"method":"POST","url":"https://api.openai.com/v1/chat/'
        b'completions","request":{"headers":[],"body":{"delta":{"base":4242,"keep":1,'
        b'"append":[]}}},"response":null}\n',
    )
    path.write_bytes(b"".join(data))
    streamed, whole = open_run(path), _whole(path)
    assert _views(streamed) == _views(whole)
    assert streamed.analysis.findings == whole.analysis.findings
    assert len(streamed.problems) == len(whole.problems) >= 2


def test_a_last_record_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "run.jsonl", hostile_exchanges("")[:3])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    run = open_run(path)
    assert len(run.exchanges) == len(_whole(path).exchanges) == 3
    assert run.problems == []


def test_a_torn_last_record_is_reported_and_skipped(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "run.jsonl", hostile_exchanges("")[:3])
    path.write_bytes(path.read_bytes()[:-40])
    run = open_run(path)
    assert len(run.exchanges) == 2
    assert [p.split(":")[0] for p in run.problems] == [
        p.split(":")[0] for p in _whole(path).problems
    ]
    assert "torn last record" in run.problems[0]


def test_columns_index_like_lists(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "run.jsonl", hostile_exchanges("")[:4])
    run = open_run(path)
    seqs = [ex.seq for ex in run.exchanges]
    assert [run.exchanges[i].seq for i in range(4)] == seqs
    assert run.exchanges[-1].seq == seqs[-1]
    assert run.roundtrips[1].seq == seqs[1]
    with pytest.raises(IndexError):
        run.exchanges[4]


@pytest.mark.slow(
    reason="30,000 records under tracemalloc, ~20 s of CPU; a stream's step bound is the default "
    "run's (test_a_stream_holds_the_records_of_one_small_step_at_a_time)"
)
def test_memory_does_not_grow_with_the_records(tmp_path: Path) -> None:
    """The whole-file reader held about 4 KB per record (the exchange, its parse and its view); the
    stream keeps the index (24 bytes a record) and holds one round trip at a time, plus the records
    of one step (``STEP_BYTES``) while it reads them (bounded by the step, not the file).
    The small file is read once first, its figures dropped: the first read of a process allocates
    its caches and lazy imports (about 2 MB here), which counted against the small run made the
    slope look smaller than it is (with 40,000 records it hid 26 bytes a record)."""
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    million_tiny(small, 2_000)
    million_tiny(big, 30_000)  # 4.5 MB: more than one block

    def held(path: Path) -> tuple[int, int]:
        tracemalloc.start()
        try:
            run = open_run(path)
            n = sum(1 for _ in run.pairs)
            assert n == len(run.exchanges)
            current, peak = tracemalloc.get_traced_memory()
            return current, peak
        finally:
            tracemalloc.stop()

    held(small)  # the process's one-time allocations, not counted
    (kept_small, _), (kept_big, peak_big) = held(small), held(big)
    per_record = (kept_big - kept_small) / 28_000
    assert per_record < 100, f"{per_record:.0f} bytes kept per record"
    assert peak_big < 48 * 2**20, f"peak {peak_big / 2**20:.0f} MB"


def test_the_header_alone_is_an_empty_run(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(orjson.dumps(header_record({})) + b"\n")
    run = open_run(path)
    assert len(run.exchanges) == 0 and list(run.roundtrips) == [] and len(run.analysis.turns) == 0


def test_exports_written_in_pieces_hold_the_whole_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``export`` writes HAR an entry at a time (one per round trip) and OTLP a thousand spans a
    line: the same spans as the document built whole. The OTLP piece is made 10 spans here (the
    size is ``iter_requests``' parameter), so a run of 69 round trips is written in many pieces,
    round-trip spans and conversation roots alike (a run of 1,000+ round trips cost 30 s here)."""
    from looptap.cassettes.cli import main
    from looptap.cassettes.interop import cmd_export, iter_requests
    from tests.interop.cassette_files import build_request

    whole_requests = iter_requests
    piece = 10
    monkeypatch.setitem(  # where `looptap export` calls it: the globals of cmd_export's module
        cmd_export.__globals__,
        "iter_requests",
        lambda run, content=True, project=None: whole_requests(
            run, content, project, spans_per_request=piece
        ),
    )
    path = _cassette(tmp_path / "run.jsonl", hostile_exchanges() * 3)  # 69 round trips
    har, otel = tmp_path / "out.har", tmp_path / "out.otlp.json"
    assert main(["export", "--har", str(har), "--otel", str(otel), "-q", str(path)]) == 0
    monkeypatch.undo()  # the whole document below is built in one piece, as without the patch
    run = open_run(path)
    assert len(orjson.loads(har.read_bytes())["log"]["entries"]) == len(run.exchanges)
    lines = [orjson.loads(line) for line in otel.read_bytes().splitlines()]
    assert len(lines) > len(run.exchanges) // piece >= 6
    spans = [s for req in lines for s in req["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    whole = build_request(run)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    key = lambda s: s["spanId"]  # noqa: E731
    assert sorted(spans, key=key) == sorted(whole, key=key)
    assert (har.stat().st_mode & 0o777) == (otel.stat().st_mode & 0o777) == 0o600


def test_a_stream_holds_the_records_of_one_small_step_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records a step reads are held parsed until the step is analysed, so the step's size is
    the peak's: a stream reads its file a megabyte at a time (``STEP_BYTES``; 4 MB raised a 100 MB
    run's first ``show`` from 92 to 104 MB). No step of a 3 MB run holds more than about that.
    (40 conversations of 10 turns, each begun with 14,000 words: 400 round trips of 3.4 MB, a
    reader's work a sixth of the 4,000 short ones' of 3.1 MB before session 56.)"""
    path = write_huge(tmp_path / "run.jsonl", 400, "long", turns=10, words=14_000)
    assert path.stat().st_size > 3 * 2**20
    held: list[int] = []
    poll = RecordIndex.poll

    def counted(self: RecordIndex, max_bytes: int | None = None) -> list[Any]:
        recs = poll(self, max_bytes)
        held.append(sum(len(orjson.dumps(rec)) for _, rec in recs))
        return recs

    monkeypatch.setattr(RecordIndex, "poll", counted)
    run = open_run(path, cache=False)
    assert len(run) == 400 and len(held) >= 3
    assert max(held) <= 1.1 * 2**20, f"{max(held) / 2**20:.1f} MB of records held by one step"
