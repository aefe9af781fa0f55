"""The cassette format: lossless round trip of real traffic, delta encoding, versions, damage."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import cover_or_every, load, rel, walked

from looptap.cassettes.errors import CassetteFormatError, NewerFormatError
from looptap.cassettes.recording import Redactor
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import header_record, read_records
from looptap.cassettes.wire import Exchange

#: The round trips of the cover, at least (333 the last time it was counted).
COVER_ROUND_TRIPS = 300


def _json_or_bytes(data: bytes) -> Any:
    try:
        return ("json", orjson.loads(data))
    except orjson.JSONDecodeError:
        return ("bytes", data)


def _same(a: Exchange, b: Exchange) -> None:
    assert (a.method, a.url, a.status) == (b.method, b.url, b.status)
    assert a.request_headers == b.request_headers
    assert a.response_headers == b.response_headers
    assert _json_or_bytes(a.request_body) == _json_or_bytes(b.request_body)
    assert len(a.response_chunks) == len(b.response_chunks)
    for (ta, ca), (tb, cb) in zip(a.response_chunks, b.response_chunks, strict=True):
        assert ta == tb
        assert _json_or_bytes(ca) == _json_or_bytes(cb)


@pytest.mark.corpus
@cover_or_every("~9 s of CPU")
def test_every_corpus_cassette_survives_write_and_read(tmp_path: Path, files: str) -> None:
    """By default the corpus' cover of wire shapes and finding codes (``findings_cover()``, 178
    files); the nightly run every file (over 1,000, over 1,800 round trips)."""
    every = files == "every"
    files_read = walked(files)
    assert len(files_read) > (1000 if every else 150)
    total = 0
    for i, path in enumerate(files_read):
        exchanges = load(path)
        out = tmp_path / f"{i}.jsonl"
        red = Redactor()
        expected = [red.exchange(ex) for ex in exchanges]
        with CassetteWriter(out) as w:
            for ex in exchanges:
                w.append(ex)
        cas = read_records(out)
        assert cas.problems == [], rel(path)
        assert len(cas.exchanges) == len(exchanges), rel(path)
        for a, b in zip(expected, cas.exchanges, strict=True):
            _same(a, b)
        total += len(exchanges)
    assert total > (1800 if every else COVER_ROUND_TRIPS)


def _chat(history: list[dict[str, Any]], **extra: Any) -> Exchange:
    body = {
        "model": "gpt-4o-mini",
        "messages": history,
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        ],
        **extra,
    }
    resp = {
        "id": "x",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    return Exchange(
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.25, orjson.dumps(resp))],
    )


def _records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]


def test_history_is_delta_encoded_and_rebuilt(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    sent = []
    with CassetteWriter(out) as w:
        for turn in range(20):
            ex = _chat(copy.deepcopy(history))
            sent.append(ex.request_json())
            w.append(ex)
            history += [
                {"role": "assistant", "content": f"answer {turn}"},
                {"role": "user", "content": f"q {turn}"},
            ]
    recs = _records(out)
    assert "json" in recs[0]["request"]["body"]
    for i, rec in enumerate(recs[1:], start=1):
        d = rec["request"]["body"]["delta"]
        assert (d["base"], d["keep"], len(d["append"])) == (i - 1, 2 * i, 2)
        assert "tools" in d["inherit"] and "model" in d["inherit"]
    cas = read_records(out)
    assert [ex.request_json() for ex in cas.exchanges] == sent
    assert cas.exchanges[5].history_delta == {"base": 4, "keep": 10, "appended": 2}


def test_rewritten_history_interleaved_conversations_and_retries(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    a = [{"role": "user", "content": "conversation A"}]
    b = [{"role": "user", "content": "conversation B"}]
    bodies = []
    with CassetteWriter(out) as w:
        for ex in (
            _chat(a),  # 0
            _chat(b),  # 1
            # 2 extends 0
            _chat(a + [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "a2"}]),
            # 3 extends 1
            _chat(b + [{"role": "assistant", "content": "b1"}, {"role": "user", "content": "b2"}]),
            _chat(a + [{"role": "user", "content": "a2 (assistant turn dropped)"}]),  # 4 rewrites 2
            # 5 identical retry of 4
            _chat(a + [{"role": "user", "content": "a2 (assistant turn dropped)"}]),
            # 6 param change
            _chat(
                a + [{"role": "user", "content": "a2 (assistant turn dropped)"}], temperature=0.5
            ),
        ):
            bodies.append(ex.request_json())
            w.append(ex)
    recs = _records(out)
    deltas = [r["request"]["body"].get("delta") for r in recs]
    assert deltas[0] is None and deltas[1] is None
    assert (deltas[2]["base"], deltas[2]["keep"]) == (0, 1)
    assert (deltas[3]["base"], deltas[3]["keep"]) == (1, 1)
    assert deltas[4]["base"] in (0, 2) and deltas[4]["keep"] == 1
    assert (deltas[5]["base"], deltas[5]["keep"], deltas[5]["append"]) == (4, 2, [])
    assert deltas[6]["set"] == {"temperature": 0.5} and deltas[6]["base"] == 5
    cas = read_records(out)
    assert [ex.request_json() for ex in cas.exchanges] == bodies
    # key order kept
    assert [list(ex.request_json()) for ex in cas.exchanges] == [list(b) for b in bodies]


def test_rewrite_of_the_tail_is_labelled(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    h = [{"role": "user", "content": str(i)} for i in range(6)]
    with CassetteWriter(out) as w:
        w.append(_chat(h))
        w.append(_chat(h[:3] + [{"role": "user", "content": "summary of 3..5"}]))
    d = _records(out)[1]["request"]["body"]["delta"]
    assert d == d | {"base": 0, "keep": 3, "rewritten": True}
    assert (
        read_records(out).exchanges[1].request_json()["messages"][3]["content"] == "summary of 3..5"
    )


def test_appending_to_an_existing_cassette_continues_seq_and_deltas(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    h = [{"role": "user", "content": "hi"}]
    with CassetteWriter(out) as w:
        w.append(_chat(h))
    with CassetteWriter(out) as w:
        w.append(
            _chat(h + [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}])
        )
    recs = _records(out)
    assert [r["seq"] for r in recs] == [0, 1]
    assert recs[1]["request"]["body"]["delta"]["base"] == 0
    assert len(read_records(out).exchanges) == 2


def test_stream_chunks_keep_offsets_and_bytes(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    chunks = [
        (0.1, b'data: {"a":1}\n\n'),
        (0.2, 'data: {"b":"\u00e9"}\n\n'.encode()[:12]),
        (0.3, 'data: {"b":"\u00e9"}\n\n'.encode()[12:]),
        (0.4, b"\xff\xfe raw"),
    ]
    ex = Exchange(
        "POST",
        "https://x/v1/chat/completions",
        request_body=b"{}",
        status=200,
        response_chunks=chunks,
    )
    with CassetteWriter(out) as w:
        w.append(ex)
    assert read_records(out).exchanges[0].response_chunks == chunks


def test_header_checks(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_bytes(
        b'{"type":"header","format":"looptap-cassette",'
        b'"format_version":99,"writer":"looptap 9.0"}\n'
    )
    with pytest.raises(NewerFormatError, match=r"format 99 .* up to 1"):
        read_records(p)
    p.write_bytes(b'{"hello": 1}\n')
    with pytest.raises(CassetteFormatError, match="not a looptap cassette"):
        read_records(p)


def test_step_by_step_migration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cassette of an older format is migrated record by record through each step."""
    out = tmp_path / "run.jsonl"
    with CassetteWriter(out) as w:
        w.append(_chat([{"role": "user", "content": "hi"}]))
    # Pretend the current format is 3 and this file is format 1: two steps must run in order.
    steps: list[int] = []

    def step1(rec: dict[str, Any]) -> dict[str, Any]:
        steps.append(1)
        return rec | {"renamed": True}

    def step2(rec: dict[str, Any]) -> dict[str, Any]:
        steps.append(2)
        assert rec.get("renamed")
        return rec

    codec = header_record.__globals__  # the codec's (private) module, through a name of it
    monkeypatch.setitem(codec, "FORMAT_VERSION", 3)
    monkeypatch.setitem(codec, "MIGRATIONS", {1: step1, 2: step2})
    cas = read_records(out)
    assert steps == [1, 2] and len(cas.exchanges) == 1 and cas.format_version == 1


def test_damage_is_reported_not_fatal(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    h = [{"role": "user", "content": "hi"}]
    with CassetteWriter(out) as w:
        for i in range(4):
            w.append(_chat(h + [{"role": "user", "content": str(j)} for j in range(i)]))
    lines = out.read_bytes().splitlines(keepends=True)
    # corrupt record 1 (the base of record 2's delta) and tear the last one
    damaged = (
        lines[0]
        + lines[1]
        + b'{"type":"exchange", garbage\n'
        + lines[3]
        + lines[4][: len(lines[4]) // 2]
    )
    out.write_bytes(damaged)
    cas = read_records(out)
    kinds = sorted(p.kind for p in cas.problems)
    assert kinds == ["corrupt", "torn", "unreadable"]  # record 2 lost its base, reported
    assert [ex.seq for ex in cas.exchanges] == [0]
    assert any("missing or unreadable" in str(p) for p in cas.problems)


@pytest.mark.parametrize("truncate_fails", [False, True])
def test_a_failed_write_leaves_only_whole_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, truncate_fails: bool
) -> None:
    """A write that fails half way (full disk, file size limit) is taken back, so the cassette
    still ends with whole records; if it cannot be taken back, the next record starts on a new
    line and the reader reports the partial one."""
    import os

    from looptap.cassettes.errors import CassetteIOError

    path = tmp_path / "run.jsonl"
    w = CassetteWriter(path)
    w.append(_chat([{"role": "user", "content": "first"}]))
    real_write = os.write
    calls = {"n": 0}

    def failing_write(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))  # half the record lands
        raise OSError(27, "File too large")

    monkeypatch.setattr(os, "write", failing_write)
    if truncate_fails:
        monkeypatch.setattr(
            os, "ftruncate", lambda fd, n: (_ for _ in ()).throw(OSError(5, "I/O error"))
        )
    with pytest.raises(CassetteIOError, match="File too large"):
        w.append(_chat([{"role": "user", "content": "second"}]))
    monkeypatch.undo()
    w.append(_chat([{"role": "user", "content": "third"}]))
    w.close()
    cas = read_records(path)
    assert [ex.request_json()["messages"][0]["content"] for ex in cas.exchanges] == [
        "first",
        "third",
    ]
    assert len(cas.problems) == (1 if truncate_fails else 0)
