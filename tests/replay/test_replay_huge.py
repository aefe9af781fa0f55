"""The replay server serves a looptap cassette from its offset index: what it keeps per recorded
round trip is a few integers (it held every exchange and its request key, ~23 KB per round trip
of a one-turn run, so a million round trips did not fit), and it still answers from the
recording — the right round trip, each played once, a retry recorded twice played twice."""

from __future__ import annotations

import gc
import tracemalloc
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.replay.serving.server import UNPLAYED_LISTED, ReplayServer
from tests.support.huge import write_huge


@pytest.fixture(autouse=True)
def _served_from_the_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """These runs are small: serve them from the offset index as a large one would be (the
    threshold is the serving package's own: set where ReplayServer reads it)."""
    monkeypatch.setitem(ReplayServer.__init__.__globals__, "IN_MEMORY_BELOW", 0)


def _kept(path: Path) -> int:
    """Bytes a replay server keeps once it has read the recording (before serving)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    server = ReplayServer(path)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(server.matcher.recorded) > 0
    return after - before


@pytest.mark.slow(
    reason=(
        "three replay servers over 50, 300 and 1,500 round trips under tracemalloc (2-4 s of "
        "CPU): the index of offsets a large run is served from runs in the process in "
        "test_a_small_run_is_held_in_memory_and_a_large_one_indexed and "
        "test_answers_are_read_from_disk_by_offset"
    )
)
def test_a_replay_server_keeps_a_few_integers_per_recorded_round_trip(tmp_path: Path) -> None:
    _kept(write_huge(tmp_path / "warm.jsonl", 50))
    small = _kept(write_huge(tmp_path / "small.jsonl", 300))
    large = _kept(write_huge(tmp_path / "large.jsonl", 1_500))
    per_round_trip = (large - small) / 1_200
    assert per_round_trip < 200, f"{per_round_trip:.0f} bytes kept per recorded round trip"


def _ask(server: ReplayServer, k: int) -> tuple[int, bytes, str | None]:
    body = orjson.dumps(
        {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": f"Question {k} of the sweep?"}],
        }
    )
    req = urllib.request.Request(
        server.url + "/v1/chat/completions", data=body, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read(), r.headers.get("x-looptap-replay")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), None


def test_answers_are_read_from_disk_by_offset(tmp_path: Path) -> None:
    from looptap.cassettes.matching._recording import EXCHANGE_CACHE

    path = write_huge(tmp_path / "run.jsonl", 3 * EXCHANGE_CACHE)
    n = 3 * EXCHANGE_CACHE
    server = ReplayServer(path)
    with server:
        # out of order, beyond the caches: each answer is its own recorded one
        for k in [n - 1, 0, n // 2, *range(1, 8)]:
            status, body, seq = _ask(server, k)
            assert status == 200 and f"Answer {k}.".encode() in body and seq == f"seq={k}", (
                k,
                status,
                body[:200],
            )
        status, body, _ = _ask(server, 0)  # played once: a repeat is a miss naming it
        assert status != 200 and b"already played" in body
    lines = server.report_lines()
    assert f"played 10 of {n:,} recorded round trips" in lines[0], lines[0]
    assert (
        f"… and {n - 10 - UNPLAYED_LISTED:,} more unplayed round trips" in lines
        or n - 10 <= UNPLAYED_LISTED
    )


def test_a_diff_keeps_a_bounded_number_of_divergences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs that differ on every turn: the first MAX_DIVERGENCES are kept and printed, the
    others counted in one line (text) and ``left_out`` (JSON), never held."""
    from looptap.cassettes.cli import main
    from looptap.cassettes.replay import comparison
    from looptap.cassettes.replay.forking.rundiff import diff_analysed

    a = write_huge(tmp_path / "a.jsonl", 12)
    b = tmp_path / "b.jsonl"
    b.write_bytes(a.read_bytes().replace(b'"content":"Answer ', b'"content":"Reply '))
    assert main(["diff", str(a), str(b)]) == 1
    whole = capsys.readouterr().out
    assert "12 divergences" in whole and "more divergences" not in whole
    # the cap a diff keeps, patched where it is read: a name of a private module (no seam offers it)
    monkeypatch.setattr("looptap.cassettes.replay.forking.divergence.MAX_DIVERGENCES", 5)
    kept: list[int] = []
    real = diff_analysed

    def spy(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        kept.append(len(out))
        return out

    monkeypatch.setattr(comparison, "diff_analysed", spy)  # where `looptap diff` calls it
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert kept == [5]
    assert (
        out[0].endswith(": 12 divergences")
        and out[-1] == "… and 7 more divergences, not listed (the first 5 are)"
    ), out
    assert main(["diff", "--json", str(a), str(b)]) == 1
    doc = orjson.loads(capsys.readouterr().out)
    assert len(doc["divergences"]) == 5 and doc["left_out"] == 7


def test_a_run_beyond_the_memory_budget_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from looptap.cassettes.cli import main
    from looptap.cassettes.reading import RunTooLargeError

    path = write_huge(tmp_path / "run.jsonl", 50)
    monkeypatch.setenv("LOOPTAP_MEMORY_BUDGET_MB", "1")
    with pytest.raises(RunTooLargeError, match="memory budget of 1 MB"):
        ReplayServer(path)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "LOOPTAP_MEMORY_BUDGET_MB" in err[0], err


def test_a_small_run_is_held_in_memory_and_a_large_one_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looptap.cassettes.matching import IndexedRecordings
    from looptap.cassettes.matching._recording import InMemory

    path = write_huge(tmp_path / "run.jsonl", 20)
    where = ReplayServer.__init__.__globals__  # the module-level threshold ReplayServer reads
    monkeypatch.setitem(where, "IN_MEMORY_BELOW", path.stat().st_size + 1)
    assert isinstance(ReplayServer(path).matcher.index.src, InMemory)
    monkeypatch.setitem(where, "IN_MEMORY_BELOW", path.stat().st_size)
    assert isinstance(ReplayServer(path).matcher.index.src, IndexedRecordings)
