"""A run with one turn answered ``400`` (issue 71 item 12: the HTML row, the page's opening turn,
the inspector's A pane): a copy of a cassette whose round trip ``seq`` got an Anthropic-shaped
``invalid_request_error`` instead of its answer."""

from __future__ import annotations

from pathlib import Path

import orjson

from looptap.cassettes.reading import open_run
from looptap.cassettes.recording.pipeline import CassetteWriter


def with_a_400(src: Path, out: Path, seq: int = 2) -> Path:
    """``src`` copied to ``out`` with round trip ``seq`` answered 400."""
    exchanges = list(open_run(src, whole=True).exchanges)
    bad = exchanges[seq]
    bad.status = 400
    bad.response_headers = [("content-type", "application/json")]
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "roles"}}
    bad.response_chunks = [(None, orjson.dumps(body))]
    with CassetteWriter(out, meta={"source": "test"}) as w:
        for ex in exchanges:
            w.append(ex)
    return out
