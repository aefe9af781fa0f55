"""Parse once (``cassettes.parsing.sealed``): the writer's parse of each response, stored with its
record, is what a reader gets, exactly what parsing the raw gives, and only when it can be
trusted."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import corpus_exchanges, corpus_files, load, rel

from cassettes.parsing import sealed
from cassettes.parsing.roundtrip import RoundTrip, parse_all
from cassettes.recording.pipeline import CassetteWriter
from cassettes.storage.store import read_records
from cassettes.wire.exchange import Exchange


@pytest.fixture(autouse=True)
def _own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own machine key."""
    state = tmp_path / "state"
    monkeypatch.setenv("LOOPTAP_STATE_DIR", str(state))
    return state


def _view(rt: RoundTrip) -> dict[str, Any]:
    return rt.model_dump(mode="json")


def _restores(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Patch ``sealed.restore`` to count which stored blocks were taken."""
    seen: list[bool] = []
    real = sealed.restore

    def counting(*args: Any, **kwargs: Any) -> Any:
        side = real(*args, **kwargs)
        seen.append(side is not None)
        return side

    monkeypatch.setattr(sealed, "restore", counting)
    return seen


def _without_blocks(exchanges: list[Exchange]) -> list[Exchange]:
    return [dataclasses.replace(ex, stored_parse=None) for ex in exchanges]


def _record(path: Path, exchanges: list[Exchange] | tuple[Exchange, ...]) -> None:
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(dataclasses.replace(ex))


def test_every_corpus_cassette_reads_back_as_parsing_its_raw_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All of the shared corpus, recorded through the real writer: every response a reader takes
    from its sealed block is exactly what parsing the raw bytes gives (every field of the round
    trip: parts, usage, errors, notes, timing), and nearly every response is sealed."""
    seen = _restores(monkeypatch)
    files = corpus_files()
    assert len(files) > 1000
    records = sealed_records = 0
    for i, src in enumerate(files):
        out = tmp_path / f"{i}.jsonl"
        _record(out, load(src))
        for line in out.read_bytes().splitlines()[1:]:
            rec = orjson.loads(line)
            records += 1
            sealed_records += "parsed" in rec
        cas = read_records(out)
        raw = parse_all(_without_blocks(cas.exchanges))
        before = len(seen)
        fast = parse_all(cas.exchanges)
        assert len(seen) - before == sum(
            "parsed" in orjson.loads(x) for x in out.read_bytes().splitlines()[1:]
        )
        assert all(seen[before:]), rel(src)
        assert [_view(r) for r in fast] == [_view(r) for r in raw], rel(src)
        out.unlink()
    # Every response the writer reached is sealed; the rest are requests that never got an answer
    # parsed (not a call the family parses, no response).
    assert sealed_records / records > 0.9, (sealed_records, records)


def _one_run(tmp_path: Path) -> Path:
    exchanges = [ex for _, _, ex in corpus_exchanges("llm-anthropic/**/test_anthropic/*.yaml")][:6]
    assert exchanges
    path = tmp_path / "run.jsonl"
    _record(path, exchanges)
    return path


def test_the_reader_takes_the_sealed_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _one_run(tmp_path)
    seen = _restores(monkeypatch)
    parse_all(read_records(path).exchanges)
    assert seen and all(seen)


def test_another_machines_cassette_is_parsed_from_its_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _one_run(tmp_path)
    monkeypatch.setenv("LOOPTAP_STATE_DIR", str(tmp_path / "elsewhere"))  # no key there
    seen = _restores(monkeypatch)
    cas = read_records(path)
    got = parse_all(cas.exchanges)
    assert seen and not any(seen)
    assert [_view(r) for r in got] == [
        _view(r) for r in parse_all(_without_blocks(read_records(path).exchanges))
    ]
    # Reading never makes a key; a key made elsewhere does not fit either.
    assert not (tmp_path / "elsewhere").exists()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "parse.key").write_bytes(b"k" * 32)
    seen.clear()
    parse_all(read_records(path).exchanges)
    assert seen and not any(seen)


def _rewrite(path: Path, change: Any) -> None:
    lines = path.read_bytes().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        rec = orjson.loads(line)
        change(rec)
        out.append(orjson.dumps(rec))
    path.write_bytes(b"\n".join(out) + b"\n")


def test_an_edited_block_is_not_believed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cassette whose stored parse says something its raw does not (edited by hand, or crafted
    to show a reviewer one thing while replay serves another) shows what the raw says."""
    path = _one_run(tmp_path)

    def lie(rec: dict[str, Any]) -> None:
        if "parsed" not in rec:
            return
        rec["parsed"]["notes"].append("LOOKS-HARMLESS")
        resp = rec["parsed"].get("response") or {}
        for part in resp.get("parts", []):
            if part.get("text"):
                part["text"] = "LOOKS-HARMLESS"

    _rewrite(path, lie)
    assert b"LOOKS-HARMLESS" in path.read_bytes()
    seen = _restores(monkeypatch)
    got = parse_all(read_records(path).exchanges)
    assert seen and not any(seen)
    assert "LOOKS-HARMLESS" not in orjson.dumps([_view(r) for r in got]).decode()


def test_an_edited_raw_response_is_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _one_run(tmp_path)
    edited = 0

    def edit(rec: dict[str, Any]) -> None:
        nonlocal edited
        body = (rec.get("response") or {}).get("body") or {}
        if (
            "json" in body
            and isinstance(body["json"], dict)
            and isinstance(body["json"].get("content"), list)
        ):
            for block in body["json"]["content"]:
                if block.get("type") == "text":
                    block["text"] = "EDITED-IN-THE-RAW"
                    edited += 1
        mark = '"type":"text_delta","text":"'
        if isinstance(body.get("text"), str) and mark in body["text"]:  # a stream stored whole
            body["text"] = body["text"].replace(mark, mark + "EDITED-IN-THE-RAW ", 1)
            edited += 1

    _rewrite(path, edit)
    assert edited
    seen = _restores(monkeypatch)
    got = parse_all(read_records(path).exchanges)
    assert "EDITED-IN-THE-RAW" in orjson.dumps([_view(r) for r in got]).decode()
    assert 0 < seen.count(False) <= edited


def test_a_parser_that_changed_parses_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _one_run(tmp_path)
    monkeypatch.setattr(sealed, "parser_digest", lambda: b"another parser's source")
    seen = _restores(monkeypatch)
    parse_all(read_records(path).exchanges)
    assert seen and not any(seen)


def test_no_state_directory_means_nothing_sealed_and_nothing_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LOOPTAP_STATE_DIR", str(blocker / "state"))
    path = _one_run(tmp_path)
    recs = [orjson.loads(x) for x in path.read_bytes().splitlines()[1:]]
    assert recs and not any("parsed" in r for r in recs)
    assert len(read_records(path).exchanges) == len(recs)


def test_the_key_is_private(_own_key: Path, tmp_path: Path) -> None:
    _one_run(tmp_path)
    key = _own_key / "parse.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert len(key.read_bytes()) == 32


def test_a_response_too_deep_to_store_is_stored_without_its_parse(tmp_path: Path) -> None:
    """Tool-call arguments nested deeper than orjson writes (a model decides how deep): the
    record keeps the raw body and no parse block (a reader parses the raw)."""
    deep = b'{"a":' * 300 + b'"leaf"' + b"}" * 300
    body = (
        b'{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":'
        b'[{"type":"tool_use","id":"toolu_1","name":"f","input":' + deep + b'}],'
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
    rec = orjson.loads(path.read_bytes().splitlines()[1])
    assert "parsed" not in rec
    assert len(read_records(path).exchanges) == 1


def test_nothing_is_stored_per_record_that_no_reader_reads(tmp_path: Path) -> None:
    """The writer no longer computes the ``looptap.roundtrip/1`` view for every record (``derived``:
    no reader read it; ``show --json`` makes it when asked). A file that holds it (written before)
    reads as one that does not."""
    exchanges = [ex for _, _, ex in itertools.islice(corpus_exchanges(), 20)]
    path = tmp_path / "run.jsonl"
    _record(path, exchanges)
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]
    assert len(lines) == 20 and not any("derived" in rec for rec in lines)
    old = tmp_path / "old.jsonl"
    head, *rest = path.read_bytes().splitlines()
    old.write_bytes(
        b"\n".join(
            [
                head,
                *(
                    orjson.dumps({**orjson.loads(r), "derived": {"schema": "looptap.roundtrip/1"}})
                    for r in rest
                ),
            ]
        )
        + b"\n"
    )
    new_rts = [_view(rt) for rt in parse_all(read_records(path).exchanges)]
    assert [_view(rt) for rt in parse_all(read_records(old).exchanges)] == new_rts
