"""Each round trip's work spread over worker processes (cassettes/reading/parallel.py,
``Run.each_pair``; docs/kept-analysis.md): the results are the ones this process makes, in the
same order; ``show`` prints the same bytes; a worker that dies or raises never hangs the command
nor changes what it gives; ``LOOPTAP_WORKERS=1``, a small run and a busy machine keep it all in
this process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cassettes.parsing.roundtrip import RoundTrip
from cassettes.reading import parallel
from cassettes.reading.run import Run, open_run
from cassettes.views.roundtrip_object import roundtrip_json
from cassettes.wire.exchange import Exchange
from tests.support.analysed import Analysed, cli_output
from tests.support.huge import write_huge

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "llm-anthropic"


@pytest.fixture
def spread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers, for any run, a few round trips a task (so a run is many tasks)."""
    monkeypatch.setenv("LOOPTAP_WORKERS", "2")
    monkeypatch.setenv("LOOPTAP_PARALLEL_MIN", "1")
    monkeypatch.setenv("LOOPTAP_NO_CACHE", "1")
    monkeypatch.setattr(parallel, "CHUNK", 16)


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The processes this process forks from now on (their pids)."""
    made: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return made


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 round trips in conversations of 40 turns, each request a history delta."""
    return write_huge(tmp_path_factory.mktemp("par") / "long.jsonl", 300, "long", turns=40)


def _made(ex: Exchange, rt: RoundTrip) -> tuple[int, int | None, dict[str, Any]]:
    return os.getpid(), ex.seq, roundtrip_json(rt, ex)


def _each(run: Run, monkeypatch: pytest.MonkeyPatch, workers: str) -> list[Any]:
    monkeypatch.setenv("LOOPTAP_WORKERS", workers)
    return list(run.each_pair(_made))


def test_workers_give_what_this_process_gives_in_recording_order(
    spread: None, long_run: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    run = open_run(long_run, cache=False)
    try:
        here = _each(run, monkeypatch, "1")
        assert forks == []
        there = _each(run, monkeypatch, "2")
    finally:
        run.close()
    assert len(forks) == 2
    assert {pid for pid, _, _ in here} == {os.getpid()}
    assert {pid for pid, _, _ in there} == set(forks)  # made by the workers, both of them
    assert [(seq, v) for _, seq, v in there] == [(seq, v) for _, seq, v in here]
    assert [seq for _, seq, _ in there] == list(range(300))


def _show(*argv: str) -> bytes:
    rc, out, err = cli_output(*argv)
    assert rc in (0, 1), err
    return out


def test_show_prints_the_same_bytes_with_workers_on_a_synthetic_run_and_the_corpus(
    spread: None, long_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    rc, _, err = cli_output("import", str(CORPUS), "-o", f"{tmp_path}/")
    assert rc == 0, err
    inputs = [long_run, *sorted(tmp_path.rglob("*.jsonl"))]
    assert len(inputs) > 10
    for path in inputs:
        for argv in (["show", "--json", str(path)], ["show", str(path)]):
            monkeypatch.setenv("LOOPTAP_WORKERS", "1")
            here = _show(*argv)
            monkeypatch.setenv("LOOPTAP_WORKERS", "2")
            assert _show(*argv) == here, argv
    assert len(forks) >= 2 * len(inputs)  # every show of every input went through workers


def test_a_worker_killed_mid_run_neither_hangs_nor_changes_the_result(
    spread: None, long_run: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    parent = os.getpid()

    def killed(ex: Exchange, rt: RoundTrip) -> tuple[int | None, dict[str, Any]]:
        if os.getpid() != parent and ex.seq == 150:  # the worker that has it dies (SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        return ex.seq, roundtrip_json(rt, ex)

    run = open_run(long_run, cache=False)
    try:
        monkeypatch.setenv("LOOPTAP_WORKERS", "1")
        here = list(run.each_pair(killed))
        monkeypatch.setenv("LOOPTAP_WORKERS", "2")
        there = list(run.each_pair(killed))
    finally:
        run.close()
    assert len(forks) == 2
    assert there == here  # the rest done in this process
    for pid in forks:  # every worker was ended and reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_worker_that_raises_hands_over_and_the_run_s_own_error_is_raised_here(
    spread: None, long_run: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    parent = os.getpid()

    def flaky(ex: Exchange, rt: RoundTrip) -> int | None:
        if os.getpid() != parent and ex.seq == 70:
            raise RuntimeError("only in a worker")
        return ex.seq

    def broken(ex: Exchange, rt: RoundTrip) -> int | None:
        if ex.seq == 200:
            raise ValueError("round trip 200 cannot be shown")
        return ex.seq

    run = open_run(long_run, cache=False)
    try:
        assert list(run.each_pair(flaky)) == list(range(300))
        got: list[int | None] = []
        with pytest.raises(ValueError, match="round trip 200 cannot be shown"):
            for seq in run.each_pair(broken):
                got.append(seq)
    finally:
        run.close()
    assert got == list(range(200))
    assert len(forks) == 4


def test_a_pass_stopped_early_ends_its_workers(
    spread: None, long_run: Path, forks: list[int]
) -> None:
    """A consumer that stops (a closed pipe, Ctrl-C) ends the workers: none is left behind."""
    run = open_run(long_run, cache=False)
    try:
        them = run.each_pair(_made)
        assert next(iter(them))[1] == 0
        them.close()
    finally:
        run.close()
    assert len(forks) == 2
    for pid in forks:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_one_worker_a_small_run_or_a_busy_machine_keep_it_in_this_process(
    long_run: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    monkeypatch.setattr(parallel, "CHUNK", 16)
    run = open_run(long_run, cache=False)
    try:
        monkeypatch.setenv("LOOPTAP_PARALLEL_MIN", "1")
        monkeypatch.setenv("LOOPTAP_WORKERS", "1")
        assert len(list(run.each_pair(_made))) == 300
        monkeypatch.setenv("LOOPTAP_WORKERS", "0")
        assert len(list(run.each_pair(_made))) == 300
        monkeypatch.setenv("LOOPTAP_WORKERS", "2")
        monkeypatch.delenv("LOOPTAP_PARALLEL_MIN")  # (MIN_RECORDS: more than 300)
        assert len(list(run.each_pair(_made))) == 300
        assert forks == []
        monkeypatch.delenv("LOOPTAP_WORKERS")  # the cores, unless they are busy
        monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1})
        monkeypatch.setattr(os, "getloadavg", lambda: (2.5, 1.0, 1.0))
        assert parallel.workers() == 1
        monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 1.0, 1.0))
        assert parallel.workers() == 2
        monkeypatch.setenv("LOOPTAP_PARALLEL_MIN", "1")
        assert len(list(run.each_pair(_made))) == 300
        assert len(forks) == 2
    finally:
        run.close()
    monkeypatch.setenv("LOOPTAP_WORKERS", "2")  # a run held in memory (a vcrpy cassette): here
    held = open_run(CORPUS / "tests/cassettes/test_anthropic/test_stream_events_tool_calls.yaml")
    assert [seq for _, seq, _ in held.each_pair(_made)] == [ex.seq for ex in held.exchanges]
    assert len(forks) == 2


_CHILD = """
import json, os, sys
from cassettes.reading.run import open_run
run = open_run(sys.argv[1], cache=False)
def loaded(ex, rt):
    return os.getpid(), sorted(m for m in ("textual", "mitmproxy", "inspector", "proxy")
                               if m in sys.modules)
print(json.dumps([os.getpid(), sorted({(p, tuple(m)) for p, m in run.each_pair(loaded)})]))
"""


def test_workers_import_neither_textual_nor_mitmproxy(long_run: Path) -> None:
    env = {**os.environ, "LOOPTAP_WORKERS": "2", "LOOPTAP_PARALLEL_MIN": "1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(long_run)],
        capture_output=True, text=True, check=True, cwd=ROOT, env=env,
    )  # fmt: skip
    parent, made = json.loads(done.stdout)
    assert {pid for pid, _ in made} - {parent}, "the work was done in worker processes"
    assert all(mods == [] for _, mods in made)


def test_a_forked_reader_reads_the_stores_through_a_file_description_of_its_own(
    tmp_path: Path,
) -> None:
    """A fork shares its parent's file offset: a worker seeking in the store's file would move
    the parent's (and its siblings') reads. ``reopen`` gives it its own."""
    from cassettes.reading.stores import TurnStore

    store = TurnStore(tmp_path)
    places = [store.put_data(bytes([i]) * 100_000) for i in range(8)]  # several blocks
    store.flush()
    file, _, _ = store.kept()
    assert file is not None
    fd = file.fileno()
    os.lseek(fd, 0, os.SEEK_SET)
    pid = os.fork()
    if pid == 0:  # the worker: read every block from the file
        code = 2
        try:
            store.reopen()
            same = all(store.get_data(*w) == bytes([i]) * 100_000 for i, w in enumerate(places))
            code = 0 if same else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # the parent's offset did not move
    store.close()


def test_a_kept_analysis_prints_the_same_with_workers(
    spread: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    """The store of full turns of a kept analysis is written from its rows into a file of this
    process (buffered): the workers, reading it through descriptions of their own, must see every
    block."""
    import sqlite3

    from cassettes.reading import kept

    monkeypatch.setattr(kept, "MIN_BYTES", 0)
    monkeypatch.setenv("LOOPTAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LOOPTAP_NO_CACHE")
    path = write_huge(tmp_path / "run.jsonl", 400, "long", turns=40)
    monkeypatch.setenv("LOOPTAP_WORKERS", "1")
    first = _show("show", "--json", str(path))  # analysed and kept (its views too)
    (db,) = (tmp_path / "cache").glob("*.sqlite")
    with sqlite3.connect(db) as c:
        c.execute("UPDATE run SET views_done = NULL")  # (its views made again, by the workers)
    monkeypatch.setenv("LOOPTAP_WORKERS", "2")
    counted = Analysed(monkeypatch)
    again = _show("show", "--json", str(path))
    assert counted.added == 0  # the kept analysis, taken
    assert len(forks) == 2
    assert again == first
    monkeypatch.setenv("LOOPTAP_WORKERS", "1")
    assert again == _show("show", "--json", "--no-cache", str(path))
