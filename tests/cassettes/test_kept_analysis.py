"""Analyse a run once (issue 48, docs/kept-analysis.md): a looptap cassette's analysis is kept after
a reader computed it and taken by the next reader of the same bytes; a changed file, a changed or
forged kept analysis, or another analyser each lead to a fresh analysis, whose findings are the
ones a reader without any kept analysis gets."""

from __future__ import annotations

import functools
import pickle
from pathlib import Path
from typing import Any

import orjson
import pytest

from cassettes.parsing.sealed import machine_key
from cassettes.reading import kept
from cassettes.reading.run import open_run
from cassettes.recording.pipeline import CassetteWriter
from cassettes.wire.exchange import Exchange
from tests.support.analysed import Analysed, cli_output, keep_every_run

URL = "https://api.openai.com/v1/chat/completions"


def _exchange(i: int, status: int = 200) -> Exchange:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"question {i}"}]}
    answer = {"id": f"c{i}", "object": "chat.completion", "model": "gpt-4o-2024-08-06",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer {i}"}, "finish_reason": "stop"}],  # noqa: E501
              "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}  # fmt: skip
    return Exchange("POST", URL, [("content-type", "application/json")], orjson.dumps(body), status=status,  # noqa: E501
                    response_headers=[("content-type", "application/json")], response_chunks=[(0.01, orjson.dumps(answer))], ttfb=0.01)  # fmt: skip  # noqa: E501


def _cassette(path: Path, statuses: list[int]) -> Path:
    with CassetteWriter(path) as w:
        for i, status in enumerate(statuses):
            w.append(_exchange(i, status))
    return path


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every run kept (however small), in a cache of the test's own."""
    return keep_every_run(tmp_path, monkeypatch)




def _read(path: Path) -> tuple[list[tuple[str, int | None]], list[Any], int]:
    """Findings (code, seq), conversations and round trips of one ``open_run``."""
    run = open_run(path)
    try:
        return (
            [(f.code, f.seq) for f in run.analysis.findings],
            list(run.analysis.conversations),
            len(list(run.roundtrips)),
        )
    finally:
        run.close()


def _fresh(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setenv("LOOPTAP_NO_CACHE", "1")
        return _read(path)


def test_a_second_read_takes_the_kept_analysis_and_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path
) -> None:
    path = _cassette(tmp_path / "run.jsonl", [200, 500, 200, 200])
    counted = Analysed(monkeypatch)
    first = _read(path)
    assert counted.added == 4
    assert sorted(p.suffix for p in _cache.iterdir()) == [".kept"]
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in _cache.iterdir())
    second = _read(path)
    assert counted.added == 4  # nothing analysed again
    assert second == first == _fresh(path, monkeypatch)
    assert ("A.http_error", 1) in first[0]


def test_a_tampered_file_is_analysed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _cassette(tmp_path / "run.jsonl", [200, 200, 200])
    clean = _read(path)
    assert not [c for c, _ in clean[0] if c == "A.http_error"]
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines[2].count(b'"status":200') == 1
    # the same size: only the bytes tell
    lines[2] = lines[2].replace(b'"status":200', b'"status":500')
    path.write_bytes(b"".join(lines))
    counted = Analysed(monkeypatch)
    tampered = _read(path)
    assert counted.added == 3
    assert ("A.http_error", 1) in tampered[0]
    assert tampered == _fresh(path, monkeypatch)


def _sections(data: bytes) -> list[bytes]:
    """The kept file's sections (meta, state, turns, parses, the working state and the spilled
    tables' files), its MAC left out."""
    out, at = [], len(kept.MAGIC)
    while len(data) - at > 32:
        n = int.from_bytes(data[at : at + 8], "big")
        out.append(data[at + 8 : at + 8 + n])
        at += 8 + n
    assert len(data) - at == 32
    return out


def _forged(path: Path, kept_file: Path, key: bytes) -> bytes:
    """The kept file with every finding removed from its state, MAC'd with ``key``."""
    meta, state_raw, turns, parses, *working = _sections(kept_file.read_bytes())
    state = pickle.loads(state_raw)
    state["result"] = state["result"].model_copy(update={"findings": []})
    state["flagged"] = {}
    data = kept.MAGIC + b"".join(
        len(s).to_bytes(8, "big") + s
        for s in (meta, pickle.dumps(state), turns, parses, *working)
    )
    size = path.stat().st_size
    run_digest = kept.run_digest_of(key, path, size)
    assert run_digest is not None
    analyser = kept.analyser_digest()
    assert analyser is not None
    mac = kept.analysis_mac(key, analyser, size, run_digest)
    mac.update(data)
    return data + mac.digest()


@pytest.mark.parametrize("how", ["bytes changed", "rewritten without the key"])
def test_a_kept_analysis_with_a_finding_removed_is_not_taken(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path
) -> None:
    path = _cassette(tmp_path / "run.jsonl", [200, 500, 200])
    first = _read(path)
    assert ("A.http_error", 1) in first[0]
    (kept_file,) = _cache.glob("*.kept")
    data = kept_file.read_bytes()
    if how == "bytes changed":
        assert data.count(b"A.http_error") >= 1
        forged = data.replace(b"A.http_error", b"A.http_errox")  # the MAC no longer checks out
    else:  # a well-formed kept file, findings removed, MAC'd under a key that is not this machine's
        forged = _forged(path, kept_file, b"\x01" * 32)
        key = machine_key(create=True)
        assert key is not None
        # (this machine's key would vouch for it: the key is what guards)
        taken = _forged(path, kept_file, key)
        kept_file.write_bytes(taken)
        assert ("A.http_error", 1) not in _read(path)[0]
    kept_file.write_bytes(forged)
    counted = Analysed(monkeypatch)
    again = _read(path)
    assert counted.added == 3
    assert again == first == _fresh(path, monkeypatch)


def test_another_analyser_analyses_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _cassette(tmp_path / "run.jsonl", [200, 500, 200])
    first = _read(path)
    digest = kept.analyser_digest()
    assert digest is not None
    changed = bytes(b ^ 0xFF for b in digest)
    monkeypatch.setattr(kept, "analyser_digest", lambda: changed)  # a changed source
    counted = Analysed(monkeypatch)
    assert _read(path) == first
    assert counted.added == 3
    assert _read(path) == first  # kept again, for this analyser
    assert counted.added == 3


def test_other_price_data_analyses_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path
) -> None:
    """genai-prices' price table is part of the analyser: after it changed (an upgrade), show prints
    the new table's costs, as a fresh analysis does, not the kept analysis' (nor its kept views)."""
    from cassettes.analysis import price_memo, tokens

    # the price memo below is the test's own
    monkeypatch.setenv("LOOPTAP_STATE_DIR", str(tmp_path / "state"))
    price_memo.process_memo().forget()
    path = str(_cassette(tmp_path / "run.jsonl", [200, 200, 200]))
    old = cli_output("show", "--json", path)
    assert old == cli_output("show", "--json", path)  # (the kept analysis and its views, taken)
    real, identity = tokens.calc_price, price_memo.table_identity()
    assert identity is not None and b'"cost"' in old[1]

    def doubled(*a: Any, **k: Any) -> Any:  # the new table's prices
        total, prov, model = real(*a, **k)
        return total * 2, prov, model

    monkeypatch.setattr(tokens, "calc_price", doubled)
    # its data file, rewritten
    monkeypatch.setattr(price_memo, "table_identity", lambda: [*identity[:-1], identity[-1] + 1])
    price_memo.process_memo().forget()
    # (a new process)
    monkeypatch.setattr(kept, "analyser_digest", functools.cache(kept.analyser_digest.__wrapped__))
    fresh = cli_output("show", "--json", "--no-cache", path)
    assert fresh != old
    counted = Analysed(monkeypatch)
    assert cli_output("show", "--json", path) == fresh
    assert counted.added == 3


def test_a_grown_file_is_continued_with_its_new_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(tests/cassettes/test_kept_growth.py: the outputs, and what is not continued)"""
    lines = (
        _cassette(tmp_path / "whole.jsonl", [200, 200, 500]).read_bytes().splitlines(keepends=True)
    )
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(lines[:3]))  # the header and two round trips
    assert not [c for c, _ in _read(path)[0] if c == "A.http_error"]
    with path.open("ab") as f:  # the recording goes on
        f.write(lines[3])
    counted = Analysed(monkeypatch)
    grown = _read(path)
    assert counted.added == 1  # the new round trip only
    assert ("A.http_error", 2) in grown[0]
    assert grown == _fresh(path, monkeypatch)




def test_show_prints_the_same_from_a_kept_analysis_and_its_kept_views(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path
) -> None:
    path = str(_cassette(tmp_path / "run.jsonl", [200, 500, 200]))
    fresh = [
        cli_output("show", "--no-cache", path),
        cli_output("show", "--json", "--no-cache", path),
    ]
    assert not _cache.exists() or not list(_cache.iterdir())  # --no-cache keeps nothing
    counted = Analysed(monkeypatch)
    assert [cli_output("show", path), cli_output("show", "--json", path)] == fresh
    assert counted.added == 3
    assert sorted(p.suffix for p in _cache.iterdir()) == [".kept", ".views"]
    assert [cli_output("show", path), cli_output("show", "--json", path)] == fresh
    assert counted.added == 3
    (views,) = _cache.glob("*.views")
    views.write_bytes(views.read_bytes()[:-1] + b"\0")  # views that do not check out are made again
    assert [cli_output("show", path), cli_output("show", "--json", path)] == fresh
    assert b"A.http_error" in fresh[0][1]


def test_no_cache_in_the_environment_keeps_and_takes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path
) -> None:
    path = _cassette(tmp_path / "run.jsonl", [200, 500])
    monkeypatch.setenv("LOOPTAP_NO_CACHE", "1")
    _read(path)
    assert not _cache.exists()


@pytest.mark.parametrize("where", ["under a file", "a file"])
def test_an_unusable_cache_location_reads_the_run_without_a_word(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(_cassette(tmp_path / "run.jsonl", [200, 500]))
    fresh = cli_output("show", "--no-cache", path)
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    monkeypatch.setenv(
        "LOOPTAP_CACHE_DIR", str(blocker / "cache" if where == "under a file" else blocker)
    )
    assert cli_output("show", path) == fresh
    assert cli_output("show", path) == fresh
    assert blocker.read_text() == "not a directory"


def test_a_followed_kept_analysis_gives_its_turns_a_few_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inspector's first screen does not wait for every turn of a kept analysis to be
    summarised."""
    from cassettes.reading import incremental

    path = _cassette(tmp_path / "run.jsonl", [200, 500, 200, 200, 200])
    first = _read(path)
    monkeypatch.setattr(incremental, "KEPT_STEP", 2)
    counted = Analysed(monkeypatch)
    run = open_run(path, follow=True, cache=True)
    sizes = []
    while True:
        batch = run.step()
        sizes.append(len(batch.turns))
        if batch.at_end:
            break
    run.finish()
    assert counted.added == 0 and sizes == [2, 2, 1]
    assert sorted(run.summaries) == [0, 1, 2, 3, 4]
    assert [(f.code, f.seq) for f in run.analysis.findings] == first[0]
    run.close()
