"""What the runs of a fixed agent are expected to send (``looptap why DIR --confirm``,
:mod:`cassettes.why._expected`; docs/why.md "Confirming a fix"): each run where the fix shows as
the first run sent, and the requests a fixed agent asks again counted by the model's error rate
the investigation measured, not by one run's draw. The branch files are written by the real
cassette writer; the runs end to end are bench/why_cases.py's (the relay and flaky cases) and
tests/why/test_why_confirm.py's.

On d22946dd the estimate was the budget's figure for the first run and the first run's count for
each other: a fixed agent that asked again in a later run only (the relay and flaky cases: 3
expected, 4 sent) was never counted, and a fixed agent that went live before the verdict's turn
had its first run counted at the budget's figure (3 expected, 4 sent)."""

from __future__ import annotations

from pathlib import Path

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.why._expected import asked_again, error_rate, expected
from looptap.cassettes.why._intervention import Intervention
from tests.cassettes.analysis.scenarios import Script

FLAKY = {"layer": "E", "flips": 3, "samples": 3}


def _branch(tmp: Path, name: str, asks: int) -> str:
    """A branch that asked the same question ``asks`` times (the fixed agent's check asking
    again), then answered."""
    s = Script("openai_chat")
    s.user("Weather in Paris and Lyon?")
    for _ in range(asks):
        s.reply("Paris: sunny; Lyon: rain.", echo=False)  # asked again: the same request
    with CassetteWriter(tmp / name, meta={"source": "test"}) as w:
        for ex in s.exchanges:
            w.append(ex)
    return name


def _fork() -> Intervention:
    """The verdict's turn live (seq 1); at most, its conversation from turn 0 (the ``:diverge``
    cursor)."""
    return Intervention(
        "E", "c1", 1, "your fixed agent", "confirm", seqs=[1], reach=[0, 1], diverge=True
    )


def test_a_request_sent_again_word_for_word_is_asked_again(tmp_path: Path) -> None:
    assert asked_again(tmp_path / _branch(tmp_path, "once.jsonl", 1)) == 0
    assert asked_again(tmp_path / _branch(tmp_path, "thrice.jsonl", 3)) == 2
    assert asked_again(tmp_path / "missing.jsonl") == 0


def test_the_error_rate_is_the_investigations_at_the_verdicts_turn() -> None:
    # the recorded answer wrong, and 3 re-samples that all flipped: 1 wrong of 4 answers seen
    assert error_rate(FLAKY) == 0.25
    assert error_rate({"layer": "E", "flips": 3, "samples": 5}) == 0.5
    assert error_rate({"layer": "C", "flips": 3, "samples": 3}) is None
    assert error_rate({"layer": "E", "flips": None, "samples": 3}) is None


def test_asking_again_is_counted_by_the_error_rate_once_the_first_run_asked_again(
    tmp_path: Path,
) -> None:
    """The relay case's confirm (K = 3): the first run asked again (2 sent, 1 where the fix
    shows); the other two are each expected to ask 1/3 more (p = 1/4: p / (1 - p)): 2 + 2 × 4/3,
    said before they run."""
    first = {"branch": _branch(tmp_path, "r1.jsonl", 2), "sent": 2, "result": "flipped"}
    e = expected(_fork(), FLAKY, first, tmp_path, 3)
    assert (e.budget, e.shape, round(e.again, 3), round(e.total, 2)) == (3, 1, 0.333, 4.67)
    assert "asked again" in e.said(3) and "25%" in e.said(3) and "its 2, and 1 a run" in e.said(3)
    # the rate's interval (1 wrong of 4 answers: 0.01-0.78) gives the range of the expectation
    assert (round(e.low, 2), round(e.high, 2)) == (4.03, 11.11)
    assert "between 4.0 and 11.1 at that rate's 95% interval" in e.said(3)
    assert e.most == 6 and e.said(3).endswith(
        "at most 6 if every turn the fork may reach went live, and more for each request asked "
        "again"
    )


def test_a_first_run_that_did_not_ask_again_is_each_runs(tmp_path: Path) -> None:
    """A fixed agent whose first run did not ask again is expected not to (a deterministic one's
    estimate is then exact: the budget's words, as before); a later run that asks again meets
    the confirm's limit (tests/why/test_why_keep.py)."""
    first = {"branch": _branch(tmp_path, "o1.jsonl", 1), "sent": 1, "result": "flipped"}
    e = expected(_fork(), FLAKY, first, tmp_path, 3)
    assert (e.total, e.again, e.first) == (3, 0, 1)
    assert e.said(3) == (
        "the budget expected 3; at most 6 if every turn the fork may reach went live"
    )


def test_where_the_fix_shows_is_the_first_runs(tmp_path: Path) -> None:
    """tests/why/test_why_confirm.py's fixed agent that goes live before the verdict's turn:
    2 a run, not the budget's 1; at layer C no error rate, nothing asked again."""
    first = {"branch": _branch(tmp_path, "d1.jsonl", 1), "sent": 2, "result": "flipped"}
    e = expected(_fork(), {"layer": "C", "flips": 3, "samples": 3}, first, tmp_path, 2)
    assert (e.budget, e.shape, e.total) == (2, 2, 4)
    assert e.said(2) == (
        "estimated 4 once the first run ended: 2 a run as the first run sent × 2; the budget "
        "expected 2"
    )
