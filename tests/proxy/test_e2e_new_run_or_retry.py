"""Issue 54: the same request sent by a separate run, appended to the same cassette, is no retry.

Recorded for real: the openai SDK (``max_retries=0``) sends a request the API rejects (the fake
upstream serves OpenAI's real 400 ``unsupported_value`` from the corpus) under ``looptap run -o
run.jsonl``; a second ``looptap run -o +run.jsonl`` runs the same program again five minutes later
(its clock moved with libfaketime, the recorder's and the client's alike). Both requests carry
the SDK's own ``x-stainless-retry-count: 0``. The second was read as the first one's retry,
``C.retry_of_rejected_request`` (warning); it is a new run: its own conversation, no retry finding,
each 400 its own ``A.http_error``.

Twin: the same second run right away (no clock moved) stays a retry — an identical request a few
seconds after a failure is what a client's own retry loop sends, and looptap says so.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.storage import read_records
from tests.support import progress
from tests.support.clock import moved, needs_faketime
from tests.support.recorder import RECORDER, SCRUB, needs_recorder
from tests.support.upstream import FakeUpstream

pytestmark = [needs_recorder]

REPO = Path(__file__).resolve().parents[2]
REJECTED = (
    "source=pydantic-ai/tests/models/cassettes/test_openai/"
    "test_openai_o1_mini_system_role[system].yaml#0"
)
CLIENT = f"""
import openai
c = openai.OpenAI(max_retries=0)  # base URL and key from the environment looptap run sets up
try:
    c.chat.completions.create(
        model="o1-mini",
        messages=[
            {{"role": "system", "content": "You are a helpful assistant."}},
            {{"role": "user", "content": "What is the capital of France?"}},
        ],
        extra_headers={{"X-Fake-Upstream": "text; {REJECTED}"}},
    )
except openai.BadRequestError as e:
    print("rejected", e.status_code, flush=True)
"""


def _run(tmp_path: Path, up: FakeUpstream, out: str, env: dict[str, str]) -> None:
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    argv = [
        *RECORDER,
        "run",
        "-o",
        out,
        "--confdir",
        str(tmp_path / "conf"),
        "--upstream",
        f"openai={up.url}",
        "--",
        sys.executable,  # the test environment holds the openai SDK
        str(script),
    ]
    base = {k: v for k, v in os.environ.items() if k.upper() not in SCRUB}
    base.update(OPENAI_API_KEY="sk-test-0000", PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO), **env)
    proc = progress.run(argv, env=base, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "rejected 400" in proc.stdout, (
        proc.stdout,
        proc.stderr[-3000:],
    )


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeUpstream, Path]]:
    """The upstream both runs of a case send to, and the first run's cassette, recorded once
    (it is the same for every case); the twin's second run is appended to a copy of it right away
    (``twin/run.jsonl``: within seconds of the failure, as before), the other case's to its own."""
    tmp = tmp_path_factory.mktemp("first")
    with FakeUpstream() as up:
        _run(tmp, up, "run.jsonl", {})
        (tmp / "twin").mkdir()
        (tmp / "twin" / "run.jsonl").write_bytes((tmp / "run.jsonl").read_bytes())
        _run(tmp / "twin", up, "+run.jsonl", {})
        yield up, tmp


def _judged(tmp_path: Path, later: dict[str, str]) -> list[tuple[str, int | None]]:
    """The two runs of ``tmp_path/run.jsonl`` (the second ``later``) as the analysis reads them."""
    cas = read_records(tmp_path / "run.jsonl")
    assert not cas.problems and len(cas.exchanges) == 2
    for ex in cas.exchanges:  # the SDK's own counter: a first attempt, both times
        assert ex.request_header("x-stainless-retry-count") == "0"
    run = analyse(cas.exchanges)
    started = [ex.started for ex in cas.exchanges]
    assert all(s is not None for s in started)
    gap = started[1] - started[0]  # type: ignore[operator]
    assert (gap > 240) == bool(later), gap
    assert [f.code for f in run.findings if f.code == "A.http_error"] == ["A.http_error"] * 2
    return [(f.code, f.seq) for f in run.findings if f.code.startswith("C.")] + [
        ("conversations", len(run.conversations))
    ]


@pytest.mark.slow(
    reason=(
        "three looptap runs under libfaketime; the judgement on the same wire in process: "
        "tests/cassettes/analysis/test_dispatch.py::test_a_retry_needs_evidence"
    )
)
@needs_faketime
def test_a_run_appended_minutes_later_is_a_new_start_not_a_retry(
    tmp_path: Path, first_run: tuple[FakeUpstream, Path]
) -> None:
    """Was: [("C.retry_of_rejected_request", 1), ("conversations", 1)]."""
    # (Python's time.sleep fails with EINVAL under libfaketime when only the date moves: the
    # monotonic clocks move too here, by the same offset in every process of the run.)
    later = {k: v for k, v in moved("+5m").items() if k != "FAKETIME_DONT_FAKE_MONOTONIC"}
    up, first = first_run
    (tmp_path / "run.jsonl").write_bytes((first / "run.jsonl").read_bytes())
    _run(tmp_path, up, "+run.jsonl", later)
    assert _judged(tmp_path, later) == [("conversations", 2)]


@pytest.mark.slow(
    reason=(
        "its module's shared two runs; the judgement on the same wire in process: "
        "tests/cassettes/analysis/test_dispatch.py::test_a_retry_needs_evidence"
    )
)
def test_twin_the_same_request_right_after_the_failure_is_still_a_retry(
    first_run: tuple[FakeUpstream, Path],
) -> None:
    assert _judged(first_run[1] / "twin", {}) == [
        ("C.retry_of_rejected_request", 1),
        ("conversations", 1),
    ]
