"""Linear analysis: parsing only what each request appended gives exactly the full parse."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_corpus import cover_or_every, load, rel, walked

from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records

pytestmark = pytest.mark.corpus

#: The incremental requests the cover holds, at least (62 the last time it was counted).
COVER_INCREMENTAL = 50


def _signature(ra) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [
        (
            t.seq,
            t.conversation,
            t.index,
            t.c.link,
            t.c.kept,
            t.c.echoed_assistant,
            len(t.c.appended),
            sorted(f.code for f in t.findings),
            t.tokens.input,
            t.tokens.segments.model_dump() if t.tokens.segments else None,
            str(t.tokens.cost),
        )
        for t in ra.turns.values()
    ]


@cover_or_every("~10 s of CPU")
def test_incremental_parse_and_analysis_equal_the_full_ones(tmp_path: Path, files: str) -> None:
    """By default the corpus' cover of wire shapes and finding codes (``findings_cover()``); the
    nightly run every file and its count of incremental requests (over 300)."""
    incremental_requests = 0
    for i, path in enumerate(walked(files)):
        recorded = load(path)
        if len(recorded) < 2:
            # (one round trip has no earlier request to be a history delta of: its incremental
            # parse is its full parse, by construction; 651 of the 1,099 files)
            continue
        out = tmp_path / f"{i}.jsonl"
        with CassetteWriter(out) as w:
            for ex in recorded:
                w.append(ex)
        exchanges = read_records(out).exchanges
        parsed: dict[int, RoundTrip] = {}
        for ex in exchanges:
            assert ex.seq is not None
            base_seq = (ex.history_delta or {}).get("base")
            inc = parse_exchange(ex, parsed.get(base_seq) if isinstance(base_seq, int) else None)
            full = parse_exchange(ex)
            parsed[ex.seq] = inc
            if inc.reused is not None:
                incremental_requests += 1
            assert inc.request == full.request, f"{rel(path)}#{ex.seq}"
        assert _signature(analyse(exchanges)) == _signature(
            analyse(exchanges, [parse_exchange(e) for e in exchanges])
        ), rel(path)
    assert incremental_requests > (300 if files == "every" else COVER_INCREMENTAL)
