"""Huge bodies in the core: memory stays bounded by the body being written, not by the run."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange


def _big_stream(i: int, mib: int) -> Exchange:
    event = (
        "data: "
        + json.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 60000}}]})
        + "\n\n"
    ).encode()
    chunks = [(k * 0.001, event) for k in range(mib * 1024 * 1024 // len(event))] + [
        (1.0, b"data: [DONE]\n\n")
    ]
    body = {
        "model": "gpt-4o",
        "stream": True,
        "messages": [{"role": "user", "content": f"conversation {i}"}],
    }
    return Exchange(
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("content-type", "application/json")],
        request_body=json.dumps(body).encode(),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=chunks,
    )


def test_writer_does_not_keep_the_responses_it_wrote(tmp_path: Path) -> None:
    """Twelve 4 MiB streams through one writer (the recorder's writer process lives for the whole
    run): what it holds afterwards is far below one body per round trip. Found while measuring the
    recorder with 100 MB bodies: the writer kept its last 64 parsed responses as bases for the
    next requests, so its memory grew by each response's size, up to 64 of them."""
    w = CassetteWriter(tmp_path / "big.jsonl")
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(12):
            w.append(_big_stream(i, 4))
        gc.collect()
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        w.close()
    assert held < 8 * 1024 * 1024, (
        f"the writer still holds {held / 1e6:.0f} MB after writing 12 × 4 MiB"
    )
    cas = read_records(tmp_path / "big.jsonl")
    assert len(cas.exchanges) == 12 and not cas.problems
    assert all(len(ex.response_body) > 4_000_000 for ex in cas.exchanges)
