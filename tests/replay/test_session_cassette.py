"""The pytest plugin's reader of its session recording (``SessionCassette``), on the growing-file
reader (:mod:`cassettes.storage._index`): round trips read as far as asked, requests stored as
history deltas rebuilt in full, a record the writer has not finished left for the next read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from real_corpus import corpus_files

from looptap.cassettes.errors import CassetteError
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.replay.testing.recorder import SessionCassette
from looptap.cassettes.storage import load_vcr, read_records
from looptap.cassettes.wire import Exchange


def _conversation() -> list[Exchange]:
    """A corpus recording whose later requests extend the earlier ones (stored as deltas)."""
    for p in corpus_files("pydantic-ai/**/test_cache_prefix_stability/*.yaml"):
        got = load_vcr(p)
        bodies = [ex.request_json() for ex in got]
        msgs = [b.get("messages") for b in bodies if isinstance(b, dict)]
        if (
            len(got) >= 3
            and len(msgs) == len(got)
            and all(isinstance(m, list) for m in msgs)
            and len(msgs[-1]) > len(msgs[0])
        ):
            return list(got)
    raise AssertionError("no multi-turn recording in the corpus")


def test_reads_as_far_as_asked_and_waits_for_a_half_written_record(tmp_path: Path) -> None:
    exchanges = _conversation()
    path = tmp_path / "session.jsonl"
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(dataclasses.replace(ex))
    whole = path.read_bytes()
    lines = whole.splitlines(keepends=True)
    assert b'"delta"' in b"".join(lines[2:])  # later requests are stored as deltas
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])  # the writer is mid-record
    session = SessionCassette(path)
    got = session.upto(len(exchanges) - 1)
    with pytest.raises(CassetteError, match="the file holds"):
        session.upto(len(exchanges))
    path.write_bytes(whole)  # the writer finished it
    again = session.upto(len(exchanges))
    assert again[: len(got)] == got
    full = read_records(path).exchanges
    assert [ex.request_json() for ex in again] == [ex.request_json() for ex in full]
    assert [ex.response_chunks for ex in again] == [ex.response_chunks for ex in full]


def test_an_unreadable_record_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with CassetteWriter(path) as w:
        w.append(dataclasses.replace(_conversation()[0]))
    with path.open("ab") as f:
        f.write(b'{"type": "exchange", "seq": "one"\n')
    with pytest.raises(CassetteError, match="unreadable record"):
        SessionCassette(path).upto(2)
