"""The keeper (proxy/keeper.py) on its own, without mitmproxy: it follows a cassette as it grows, a
few bytes or many at a time, cut anywhere (inside a record too), and keeps an analysis that
``looptap show`` takes and prints exactly as a fresh analysis of the file prints; it keeps nothing
when the writer goes without saying where the cassette ended, nor when the file does not end
there."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cassettes.errors import CassetteError
from cassettes.reading import kept
from cassettes.reading.run import open_run
from cassettes.recording.pipeline import CassetteWriter
from cassettes.wire.exchange import Exchange
from proxy.keeper import Keeper
from proxy.keeper import main as keeper_main
from tests.support import progress
from tests.support.analysed import Analysed, cli_output, keep_every_run
from tests.support.recorder import keepers

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _shows(path: Path) -> list[tuple[int, bytes, str]]:
    return [cli_output("show", str(path)), cli_output("show", "--json", str(path))]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every run kept (however small), in a cache of the test's own."""
    yield keep_every_run(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A cassette of real recorded traffic: every 8th file of the corpus imported into one run (many
    API families, streams, tool calls, errors; findings in every layer)."""
    path = tmp_path_factory.mktemp("recorded") / "run.jsonl"
    files = sorted(p for p in CORPUS.rglob("*.yaml") if not p.name.endswith(".xai.yaml"))[::8]
    with CassetteWriter(path, meta={"source": "vcr"}) as w:
        for f in files:
            try:
                run = open_run(f, formats=("vcr",))
            except CassetteError:
                continue
            for ex in run.exchanges:
                w.append(ex)
    return path.read_bytes()




def _views_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each printed view ``show`` makes (none when it takes the views kept with the analysis)."""
    import cassettes.views.roundtrip_object as made

    views: list[int] = []
    real = made.roundtrip_json

    def counted(*a: Any, **k: Any) -> Any:
        views.append(1)
        return real(*a, **k)

    monkeypatch.setattr(made, "roundtrip_json", counted)
    return views


def _fresh(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bytes, str]]:
    with monkeypatch.context() as m:
        m.setenv("LOOPTAP_NO_CACHE", "1")
        return _shows(path)


def _followed(path: Path, data: bytes, cuts: list[int]) -> Keeper:
    """A keeper that followed ``data`` written to ``path`` up to each cut in turn (not finished)."""
    path.write_bytes(b"")
    keeper = Keeper(path)
    at = 0
    for cut in [*cuts, len(data)]:
        with path.open("ab") as f:
            f.write(data[at:cut])
        at = cut
        assert keeper.follow()
    return keeper


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_followed_cassette_is_kept_as_a_fresh_analysis_reads_it(
    seed: int, recorded: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    path = tmp_path / "run.jsonl"
    n = len(recorded.splitlines())
    assert n > 100
    # cut anywhere, records too
    cuts = sorted(rng.sample(range(1, len(recorded)), [3, 40, n][seed - 1]))
    keeper = _followed(path, recorded, cuts)
    try:
        assert keeper.finish(len(recorded))
    finally:
        keeper.close()
    counted = Analysed(monkeypatch)
    taken = _shows(path)
    assert counted.added == 0  # show took the keeper's analysis
    fresh = _fresh(path, monkeypatch)
    assert counted.added > 2 * 100
    assert taken == fresh
    assert all(f"{layer}." in fresh[0][1].decode() for layer in "EAC")  # (findings in every layer)


def test_a_keeper_told_another_end_keeps_nothing(
    recorded: bytes, tmp_path: Path, _cache: Path
) -> None:
    """The file does not end where the writer said (something was appended after it stopped)."""
    path = tmp_path / "run.jsonl"
    keeper = _followed(path, recorded, [len(recorded) // 2])
    try:
        assert not keeper.finish(len(recorded) - 10)
    finally:
        keeper.close()
    assert not _cache.exists() or not list(_cache.iterdir())


@pytest.mark.parametrize("said", [b"", b"end 12", b"stop\n"])
def test_a_keeper_whose_writer_goes_without_saying_where_the_cassette_ends_keeps_nothing(
    said: bytes, recorded: bytes, tmp_path: Path, _cache: Path
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(recorded)
    r, w = os.pipe()
    os.write(w, said)
    os.close(w)  # the writer is gone (killed: its end of the pipe closed)
    with os.fdopen(r, "rb") as control:
        assert keeper_main(str(path), control) == 1
    assert not _cache.exists() or not list(_cache.iterdir())


def test_a_keeper_told_where_the_cassette_ends_keeps_it(
    recorded: bytes, tmp_path: Path, _cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(recorded)
    r, w = os.pipe()
    os.write(w, b"end %d\n" % len(recorded))
    os.close(w)
    with os.fdopen(r, "rb") as control:
        assert keeper_main(str(path), control) == 0
    # the analysis and show's views of it
    assert sorted(p.suffix for p in _cache.iterdir()) == [".kept", ".views"]
    views = _views_made(monkeypatch)
    counted = Analysed(monkeypatch)
    taken = _shows(path)
    assert counted.added == 0 and views == []  # neither analysed nor printed anew: both taken
    assert taken == _fresh(path, monkeypatch)
    assert counted.added == 2 * (len(recorded.splitlines()) - 1)


def _exchange(i: int, size: int) -> Exchange:
    words = " ".join(f"w{i}-{k}" for k in range(size // 8))
    body = orjson.dumps(
        {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": f"question {i}: {words}"}],
        }
    )
    answer = orjson.dumps({"id": f"c{i}", "object": "chat.completion", "model": "gpt-4o-mini",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer {i}"}, "finish_reason": "stop"}],  # noqa: E501
                           "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})  # fmt: skip  # noqa: E501
    return Exchange("POST", "http://127.0.0.1:9/v1/chat/"
    "completions", [("content-type", "application/json")], body, status=200,
                    response_headers=[("content-type", "application/json")], response_chunks=[(0.01, answer)], ttfb=0.01)  # fmt: skip  # noqa: E501


@pytest.mark.parametrize("run", ["under the threshold", "with LOOPTAP_NO_CACHE", "kept"])
def test_the_writer_starts_a_keeper_for_a_run_that_is_kept_only(
    run: str, tmp_path: Path, _cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real writer process (proxy.writer, through the hand-off): a run under ``kept.MIN_BYTES``
    (the writer's, 1 MiB) or recorded with ``LOOPTAP_NO_CACHE`` starts no keeper and keeps nothing;
    a larger one is kept by the keeper the writer starts, and ``show`` takes it."""
    from proxy.handoff import Handoff

    if run == "with LOOPTAP_NO_CACHE":
        monkeypatch.setenv("LOOPTAP_NO_CACHE", "1")  # (the writer process inherits it)
    path = tmp_path / "run.jsonl"
    h = Handoff()
    h.open(path, settle=0.0)
    for i in range(40):
        h.hand_over(_exchange(i, 1000 if run == "under the threshold" else 32_000))
    h.close()
    assert h.recorded == 40
    assert (path.stat().st_size >= 1 << 20) == (run != "under the threshold")
    where = kept.location(path)
    assert where is not None
    if run != "kept":
        assert keepers(path) == []  # (a keeper started lives on for a while: its imports alone)
        assert not _cache.exists() or not list(_cache.iterdir())
        return
    progress.until(
        lambda: where.exists() or not keepers(path), what="the keeper, keeping the analysis"
    )
    monkeypatch.delenv("LOOPTAP_NO_CACHE", raising=False)
    counted = Analysed(monkeypatch)
    taken = _shows(path)
    assert counted.added == 0
    assert taken == _fresh(path, monkeypatch)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_keeper_recording_onto_a_kept_cassette_continues_its_kept_analysis(
    seed: int, recorded: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``looptap run -o +run.jsonl`` onto a cassette whose analysis is kept: the keeper goes on
    from the kept analysis (only the appended round trips analysed), the new bytes cut anywhere;
    ``show`` takes what it keeps and prints what a fresh analysis prints."""
    rng = random.Random(seed)
    lines = recorded.splitlines(keepends=True)
    k = [60, len(lines) // 2][seed - 1]
    head = b"".join(lines[:k])
    path = tmp_path / "run.jsonl"
    keeper = _followed(path, head, [])
    try:
        assert keeper.finish(len(head))  # the first recording, kept
    finally:
        keeper.close()
    counted = Analysed(monkeypatch)
    keeper = Keeper(path)  # the second recording appends
    try:
        at = len(head)
        for cut in [*sorted(rng.sample(range(at + 1, len(recorded)), 20)), len(recorded)]:
            with path.open("ab") as f:
                f.write(recorded[at:cut])
            at = cut
            assert keeper.follow()
        assert keeper.finish(len(recorded))
    finally:
        keeper.close()
    assert counted.added == len(lines) - k  # the appended round trips only
    taken = _shows(path)
    assert counted.added == len(lines) - k  # show took the keeper's analysis
    assert taken == _fresh(path, monkeypatch)


def test_the_writer_appending_to_a_kept_cassette_keeps_its_grown_analysis(
    tmp_path: Path, _cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real writer process, twice on one cassette (the second time appending to it, as
    ``-o +FILE`` does): what its keeper keeps of the grown file is what ``show`` takes."""
    from proxy.handoff import Handoff

    path = tmp_path / "run.jsonl"
    where = kept.location(path)
    assert where is not None
    for first in (0, 40):
        h = Handoff()
        h.open(path, settle=0.0)
        for i in range(first, first + 40):
            h.hand_over(_exchange(i, 32_000))
        h.close()
        assert h.recorded == 40
        progress.until(lambda: not keepers(path), what="the keeper, keeping the analysis")
        assert where.exists()
    # the grown file's analysis
    assert f'"size": {path.stat().st_size},'.encode() in where.read_bytes()[:4096]
    counted = Analysed(monkeypatch)
    taken = _shows(path)
    assert counted.added == 0
    assert taken == _fresh(path, monkeypatch)
    assert b"80 round trips" in taken[0][1]
