"""What the writer stores per record is what readers read: no parse, no derived view. Files written
before (until 2026-11) carry the writer's parse of each response (``parsed``, sealed with the
machine key) and the ``looptap.roundtrip/1`` view (``derived``): readers ignore both and parse the
raw, so such a file reads exactly as one without them, whatever the blocks say."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import orjson
from real_corpus import corpus_exchanges

from looptap.cassettes.parsing import RoundTrip, parse_all
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange


def _view(rt: RoundTrip) -> dict[str, Any]:
    return rt.model_dump(mode="json")


def _record(path: Path, exchanges: list[Exchange] | tuple[Exchange, ...]) -> None:
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(dataclasses.replace(ex))


def _with_blocks(path: Path, old: Path, blocks: Any) -> None:
    """``path``'s records, each given what ``blocks(record)`` returns, written to ``old``."""
    head, *rest = path.read_bytes().splitlines()
    recs = [orjson.loads(r) for r in rest]
    old.write_bytes(b"\n".join([head, *(orjson.dumps({**r, **blocks(r)}) for r in recs)]) + b"\n")


def _lie(rec: dict[str, Any]) -> dict[str, Any]:
    """A ``parsed`` block as older files hold one, saying what the raw does not (edited by hand, or
    crafted to show a reviewer one thing while replay serves another)."""
    text = {"kind": "text", "text": "LOOKS-HARMLESS"}
    return {
        "parsed": {
            "framing": "json",
            "ttft": None,
            "stream": False,
            "transport_error": None,
            "notes": ["LOOKS-HARMLESS"],
            "errors": [],
            "response": {"id": "msg_x", "model": "claude-x", "parts": [text]},
            "mac": "0" * 32,
        },
        "derived": {"schema": "looptap.roundtrip/1"},
    }


def test_nothing_is_stored_per_record_that_no_reader_reads(tmp_path: Path) -> None:
    """The writer stores neither a parse nor the ``looptap.roundtrip/1`` view (no reader reads
    them; ``show --json`` makes the view when asked). A file that holds them (written before),
    whatever they say, reads as one that does not."""
    exchanges = [ex for _, _, ex in itertools.islice(corpus_exchanges(), 20)]
    path = tmp_path / "run.jsonl"
    _record(path, exchanges)
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]
    assert len(lines) == 20 and not any("derived" in rec or "parsed" in rec for rec in lines)
    old = tmp_path / "old.jsonl"
    _with_blocks(path, old, _lie)
    assert old.read_bytes().count(b"LOOKS-HARMLESS") == 40
    new_rts = [_view(rt) for rt in parse_all(read_records(path).exchanges)]
    assert [_view(rt) for rt in parse_all(read_records(old).exchanges)] == new_rts
    assert "LOOKS-HARMLESS" not in orjson.dumps(new_rts).decode()


def test_a_response_too_deep_to_store_parsed_is_stored_and_read_back(tmp_path: Path) -> None:
    """Tool-call arguments nested deeper than orjson writes (a model decides how deep): the
    record keeps the raw body, and a reader reads it back."""
    deep = b'{"a":' * 300 + b'"leaf"' + b"}" * 300
    body = (
        b'{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":'
        b'[{"type":"tool_use","id":"toolu_1","name":"f","input":' + deep + b"}],"
        b'"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}'
    )
    ex = Exchange(
        method="POST",
        url="https://api.anthropic.com/v1/messages",
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(
            {"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        ),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.1, body)],
    )
    path = tmp_path / "deep.jsonl"
    _record(path, [ex])
    assert len(read_records(path).exchanges) == 1
