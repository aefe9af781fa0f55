"""The one reader of a cassette's records (cassettes.storage._source) and the round trips a Run
hands out with their exchanges (``Run.pairs``), whichever reader is behind the run."""

from __future__ import annotations

from pathlib import Path

import fixture_run
import orjson
import pytest

from looptap.cassettes.matching import IndexedRecordings
from looptap.cassettes.reading import Run, open_run
from looptap.cassettes.storage import RecordSource, read_records


def _damaged(path: Path) -> Path:
    """The fixture run with round trip 1's history base named as one the file does not hold."""
    fixture_run.write(path)
    lines = path.read_bytes().split(b"\n")
    rec = orjson.loads(lines[2])
    assert rec["seq"] == 1 and "delta" in rec["request"]["body"]
    rec["request"]["body"]["delta"]["base"] = 99
    lines[2] = orjson.dumps(rec)
    path.write_bytes(b"\n".join(lines))
    return path


def test_an_unreadable_record_is_skipped_by_position(tmp_path: Path) -> None:
    src = RecordSource(_damaged(tmp_path / "run.jsonl"))
    taken = list(src.take(src.poll(), 0))
    assert [pos for pos, _ in taken] == [0, 2, 3, 4]
    assert [ex.seq for _, ex in taken] == [0, 2, 3, 4]
    assert [p.kind for p in src.problems] == ["unreadable"] and src.problems[0].line == 3
    assert len(src) == 4 and list(src.positions()) == [0, 2, 3, 4]
    assert [src.nth(k) for k in range(4)] == [0, 2, 3, 4]
    # Another reader of the same records: the same index and skipped records, its own bodies.
    again = src.fork(1, keep_open=True)
    assert again.index is src.index and list(again.positions()) == [0, 2, 3, 4]
    whole = {ex.seq: ex for ex in read_records(tmp_path / "run.jsonl").exchanges}
    for pos in again.positions():
        ex = again.exchange_at(pos)
        assert ex.seq is not None and ex.request_json() == whole[ex.seq].request_json()
    again.close()
    with pytest.raises(KeyError):
        src.exchange_by_seq(7)


def test_the_replay_recordings_count_only_readable_records(tmp_path: Path) -> None:
    rec = IndexedRecordings(_damaged(tmp_path / "run.jsonl"))
    assert [ex.seq for ex in rec.scan()] == [0, 2, 3, 4]
    assert len(rec) == 4 and [rec.seq(i) for i in range(4)] == [0, 2, 3, 4]
    assert [rec.exchange(i).seq for i in range(4)] == [0, 2, 3, 4]
    assert len(rec.problems) == 1 and "line 3:" in rec.problems[0]


@pytest.mark.parametrize("how", ["stream", "whole", "follow", "memory"])
def test_pairs_are_each_round_trip_with_its_exchange(tmp_path: Path, how: str) -> None:
    path = _damaged(tmp_path / "run.jsonl")
    if how == "memory":
        run = Run.of(read_records(path).exchanges)
    elif how == "follow":
        run = open_run(path, follow=True)
        while not run.step().at_end:
            pass
    else:
        run = open_run(path, whole=how == "whole")
    pairs = list(run.pairs)
    assert len(run.pairs) == len(run) == len(pairs) == 4
    assert [ex.seq for ex, _ in pairs] == [rt.seq for _, rt in pairs] == [0, 2, 3, 4]
    assert [ex.seq for ex in run.exchanges] == [0, 2, 3, 4]
    assert [rt.model_dump() for _, rt in pairs] == [rt.model_dump() for rt in run.roundtrips]
    for k in (0, 1, -1):
        ex, rt = run.at(k)
        again = run.pairs[k]
        want = (pairs[k][0].seq, pairs[k][1].seq)
        assert (ex.seq, rt.seq) == want == (again[0].seq, again[1].seq)
    found = run.by_seq(3)
    assert found is not None and found[0].seq == found[1].seq == 3
    assert run.exchange_by_seq(2).seq == 2
    run.close()
