"""A reader waits for the recorder's keeper that is finishing the same run (issue 48,
cassettes/reading/keeping.py, docs/kept-analysis.md): it takes the keeper's analysis instead of
analysing the run beside it; it does not wait while the recording goes on, for a claim on other
bytes, for a keeper that died, or past a keeper that makes no progress; whatever it takes is
checked as any kept analysis is, and reads what a fresh analysis reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cassettes.reading import keeping
from cassettes.reading.run import open_run
from cassettes.recording.pipeline import CassetteWriter
from cassettes.wire.exchange import Exchange
from tests.support import progress
from tests.support.analysed import Analysed, keep_every_run

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for the recorder's writer and keeper, in a process of its own: it claims the keeping
# of the cassette as the writer does (``recording``, or ``finishing`` at the size it is given) and
# says so; on ``go`` it analyses the run, keeping the analysis (its own claim does not make it
# wait), and lets go of the claim; on ``quit`` it lets go without keeping anything.
KEEPER = textwrap.dedent(
    """
    import os, sys
    from cassettes.reading import keeping, kept
    from cassettes.reading.run import open_run
    kept.MIN_BYTES = 0
    path, state, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    claim = keeping.Claim.take(path, pid=os.getpid())
    assert claim is not None
    if state == "finishing":
        claim.finishing(size)
    print("claimed", flush=True)
    if sys.stdin.readline().strip() == "go":
        open_run(path).close()
        print("kept", flush=True)
    claim.close()
    """
)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return keep_every_run(tmp_path, monkeypatch)


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    """Six round trips of one conversation each, two of them API errors."""
    url = "https://api.openai.com/v1/chat/completions"
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for i, status in enumerate([200, 500, 200, 200, 429, 200]):
            body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"question {i}"}]}
            answer = {
                "id": f"c{i}",
                "object": "chat.completion",
                "model": "gpt-4o-2024-08-06",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": f"a {i}"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            }  # fmt: skip
            w.append(
                Exchange(
                    "POST", url, [("content-type", "application/json")], orjson.dumps(body),
                    status=status, response_headers=[("content-type", "application/json")],
                    response_chunks=[(0.01, orjson.dumps(answer))], ttfb=0.01,
                )
            )  # fmt: skip
    return path


class Holder:
    """The stand-in keeper: started holding its claim."""

    def __init__(self, path: Path, state: str, size: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", KEEPER, str(path), state, str(size)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )  # fmt: skip
        assert self.proc.stdout is not None
        said = next(progress.lines(self.proc, self.proc.stdout, what="the keeper's claim"), "")
        assert said.strip() == "claimed"

    def say(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def end(self) -> int:
        if self.proc.poll() is None:
            self.say("quit")
        return progress.wait(self.proc)


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        if h.proc.poll() is None:
            h.proc.kill()
            h.proc.wait()


def _read(path: Path) -> tuple[list[tuple[str, int | None]], int]:
    run = open_run(path)
    try:
        return [(f.code, f.seq) for f in run.analysis.findings], len(list(run.roundtrips))
    finally:
        run.close()


def _fresh(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setenv("LOOPTAP_NO_CACHE", "1")
        return _read(path)


def _on_first_wait(monkeypatch: pytest.MonkeyPatch, then: Callable[[], None]) -> list[float]:
    """Calls ``then`` the first time a reader waits for a keeper (its first pause); returns the
    pauses taken."""
    pauses: list[float] = []
    real = time.sleep

    def pause(seconds: float) -> None:
        if not pauses:
            then()
        pauses.append(seconds)
        real(seconds)

    monkeypatch.setattr(time, "sleep", pause)
    return pauses


def test_a_reader_waits_for_the_keeper_finishing_the_run_and_takes_its_analysis(
    run_file: Path, monkeypatch: pytest.MonkeyPatch, holders: list[Holder]
) -> None:
    holder = Holder(run_file, "finishing", run_file.stat().st_size)
    holders.append(holder)
    state = keeping.read_state(run_file)
    assert state is not None and state.state == "finishing" and state.pid == holder.proc.pid
    # The keeper finishes only once the reader waits for it: a reader that did not wait would
    # analyse the run itself.
    pauses = _on_first_wait(monkeypatch, lambda: holder.say("go"))
    counted = Analysed(monkeypatch)
    taken = _read(run_file)
    assert pauses, "the reader did not wait for the keeper"
    assert counted.added == 0  # it took the keeper's analysis
    assert holder.end() == 0
    assert keeping.read_state(run_file) is None  # released with its last holder
    assert taken == _fresh(run_file, monkeypatch)
    assert ("A.http_error", 1) in taken[0]


@pytest.mark.parametrize("state, delta", [("recording", 0), ("finishing", 1), ("finishing", -1)])
def test_a_reader_does_not_wait_while_the_recording_goes_on_or_for_other_bytes(
    run_file: Path, monkeypatch: pytest.MonkeyPatch, holders: list[Holder], state: str, delta: int
) -> None:
    holder = Holder(run_file, state, run_file.stat().st_size + delta)
    holders.append(holder)
    pauses = _on_first_wait(monkeypatch, lambda: None)
    counted = Analysed(monkeypatch)
    got = _read(run_file)
    assert not pauses and counted.added == 6  # analysed here, at once
    assert holder.end() == 0
    assert got == _fresh(run_file, monkeypatch)


def test_a_keeper_that_died_leaves_no_claim(
    run_file: Path, monkeypatch: pytest.MonkeyPatch, holders: list[Holder]
) -> None:
    holder = Holder(run_file, "finishing", run_file.stat().st_size)
    holders.append(holder)
    holder.proc.send_signal(signal.SIGKILL)
    progress.wait(holder.proc)
    assert keeping.read_state(run_file) is None  # the kernel let go of its lock
    pauses = _on_first_wait(monkeypatch, lambda: None)
    counted = Analysed(monkeypatch)
    got = _read(run_file)
    assert not pauses and counted.added == 6
    assert got == _fresh(run_file, monkeypatch)


def test_a_reader_stops_waiting_for_a_keeper_that_makes_no_progress(
    run_file: Path, monkeypatch: pytest.MonkeyPatch, holders: list[Holder]
) -> None:
    holder = Holder(run_file, "finishing", run_file.stat().st_size)  # and then says nothing
    holders.append(holder)
    monkeypatch.setattr(keeping, "STALL", 0.2)
    pauses = _on_first_wait(monkeypatch, lambda: None)
    counted = Analysed(monkeypatch)
    got = _read(run_file)
    assert pauses and counted.added == 6  # waited, gave up, analysed it here
    assert keeping.read_state(run_file) is not None  # (the keeper still holds its claim)
    assert holder.end() == 0
    assert got == _fresh(run_file, monkeypatch)


def test_a_claim_is_a_regular_file_of_this_user_and_says_nothing_secret(
    run_file: Path, cache: Path
) -> None:
    claim = keeping.Claim.take(run_file, pid=os.getpid())
    assert claim is not None
    try:
        claim.finishing(1234)
        claim.progress(99)
        where = keeping.claim_path(run_file)
        assert where is not None and where.parent == cache
        assert where.stat().st_mode & 0o777 == 0o600
        said = [b"finishing", b"1234", b"99", str(os.getpid()).encode()]
        assert where.read_bytes().split() == said
        assert keeping.Claim.take(run_file) is None  # one claim at a time
    finally:
        claim.close()
    # a link planted where the claim goes is not followed
    where.unlink()
    target = cache / "elsewhere"
    target.write_bytes(b"")
    where.symlink_to(target)
    assert keeping.Claim.take(run_file) is None and target.read_bytes() == b""
