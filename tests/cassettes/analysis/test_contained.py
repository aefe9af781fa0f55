"""Never a traceback from reading (issue 100 item 5; docs/reliability.md): a check or analysis
step that raises on a recording is contained per round trip, where the checks are run
(``_judgement.judge``; the parse and threading in ``RunAnalyser.add``; the end-of-run pass): the
run still reads, the round trip carries a ``<layer>.not_judged`` note naming the step, ``show`` and
``run``'s summary say it and exit 4. The suite sets ``LOOPTAP_RAISE_CONTAINED``, under which
nothing is contained (a check that raises fails the test that met it); these tests unset it.

On f29135f5: ``show`` raised ``TypeError: 'int' object is not iterable`` (``_roots._dropped_text``)
on a run whose history, after the messages it kept, went on with the previous answer (the
question before it dropped), and ``run``'s summary said ``could not read … for the summary``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_grown_continued import _write
from test_history_transforms import Case, _run

from looptap.cassettes.analysis import _analyser, analyse
from looptap.cassettes.analysis import threading as threading_
from looptap.cassettes.analysis.dispatch import _layer
from looptap.cassettes.wire import Exchange
from looptap.proxy.summary import summary_lines
from tests.support.analysed import cli_output

#: The runs that raised on f29135f5: the agent's own model asked for a summary, the same words
#: each time, and the history sent back starts with that answer (the question before it
#: dropped); a question swapped with a later answer does the same.
REPEATED_SUMMARY = [(0, []), (0, [("asked", 0, 0)]), (0, [("asked", 0, 0)])]
#: ``show``'s and ``run``'s documented status for a run read with a step failed (docs/recorder.md).
EXIT_NOT_JUDGED = 4
DROPPED_BEFORE_ANSWER = Case("openai_chat", [[(0, []), (1, [None, ("reorder", 0, 8)])]], [])
CASES = {
    **{
        f"summary-{f}": Case(f, [REPEATED_SUMMARY], [])
        for f in ("openai_chat", "anthropic", "gemini")
    },
    "reorder": DROPPED_BEFORE_ANSWER,
}


@pytest.fixture
def contained(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user reads: what raises is contained."""
    monkeypatch.delenv("LOOPTAP_RAISE_CONTAINED", raising=False)


def _cassette(tmp_path: Path, exchanges: list[Exchange]) -> Path:
    return _write(tmp_path / "run.jsonl", exchanges)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_run_reads_through_show_and_runs_summary(tmp_path: Path, name: str) -> None:
    """The instance, with nothing contained (the suite's flag stays set): no step raises."""
    path = _cassette(tmp_path, _run(CASES[name])[0])
    rc, out, err = cli_output("show", "--no-cache", str(path))
    assert rc == 0, err
    assert b"C.history_trimmed" in out
    lines = summary_lines(path)
    assert not getattr(lines, "not_judged", True), lines
    assert "round trips in" in lines[0] and lines[-1].startswith("details:"), lines


def _boom(ctx: Any) -> Iterator[Any]:
    if ctx.seq == 1:
        raise TypeError("'int' object is not iterable")
    return iter(())


def test_a_check_that_raises_leaves_a_note_and_the_rest_judged(
    contained: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_analyser, "CHECKS", (*_analyser.CHECKS, _boom))
    exchanges = _run(DROPPED_BEFORE_ANSWER)[0]
    run = analyse(exchanges)
    assert run.errors == [
        "check _boom failed on round trip #1: TypeError: 'int' object is not iterable"
    ]
    (note,) = [f for f in run.findings if f.code.endswith(".not_judged")]
    assert (note.code, note.seq, note.severity) == ("E.not_judged", 1, "info")  # (as a rule)
    assert "check _boom failed" in note.message and not note.details["checks_skipped"]
    # the other checks ran on that round trip and every other one: the run's findings are the
    # same as without the broken check, the note aside
    monkeypatch.undo()
    clean = analyse(_run(DROPPED_BEFORE_ANSWER)[0])
    assert [f.code for f in run.findings if f is not note] == [f.code for f in clean.findings]

    monkeypatch.delenv("LOOPTAP_RAISE_CONTAINED", raising=False)
    monkeypatch.setattr(_analyser, "CHECKS", (*_analyser.CHECKS, _boom))
    path = _cassette(tmp_path, exchanges)
    for cache in ("--no-cache", None):  # made, then kept and read back: the same status
        for _ in range(2 if cache is None else 1):
            rc, out, err = cli_output("show", *([cache] if cache else []), str(path))
            assert rc == EXIT_NOT_JUDGED, err
            assert "1 analysis step failed" in err and "Traceback" not in err
            assert b"E.not_judged" in out and b"(!) analysis: check _boom failed" in out
    rc, out, err = cli_output("show", "--json", "--no-cache", str(path))
    assert rc == EXIT_NOT_JUDGED and b'"E.not_judged"' in out
    lines = summary_lines(path)
    assert lines.not_judged and any("1 analysis step failed" in ln for ln in lines), lines
    assert lines[-1].startswith("details:")


def test_under_the_suites_flag_a_check_that_raises_fails_loudly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(ctx: Any) -> Iterator[Any]:
        raise ValueError("a check's own bug")

    monkeypatch.setenv("LOOPTAP_RAISE_CONTAINED", "1")
    monkeypatch.setattr(_analyser, "CHECKS", (*_analyser.CHECKS, broken))
    with pytest.raises(ValueError, match="a check's own bug"):
        analyse(_run(Case("anthropic", [[(1, [])]], []))[0])


def test_a_layer_that_raises_runs_no_check_on_its_round_trip(
    contained: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each check reads the layers: with one missing none runs (a wrong finding is worse than
    none), and the note says so."""
    real = _layer.build

    def build(ctx: Any, link: Any) -> Any:
        if ctx.seq == 1:
            raise KeyError("messages")
        return real(ctx, link)

    monkeypatch.setattr("looptap.cassettes.analysis.dispatch.build", build)
    run = analyse(_run(DROPPED_BEFORE_ANSWER)[0])
    assert run.errors == ["the C layer failed on round trip #1: KeyError: 'messages'"]
    on_1 = [f for f in run.findings if f.seq == 1]
    assert [f.code for f in on_1] == ["C.not_judged"]
    assert on_1[0].details["checks_skipped"] and "No check ran" in on_1[0].message
    assert len(run.turns) == len(_run(DROPPED_BEFORE_ANSWER)[0])


def test_a_threading_step_that_raises_leaves_that_round_trip_out_and_reads_on(
    contained: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = threading_.Threader.add
    calls = {"n": 0}

    def add(self: Any, *a: Any, **k: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise IndexError("list index out of range")
        return real(self, *a, **k)

    monkeypatch.setattr(threading_.Threader, "add", add)
    exchanges = _run(DROPPED_BEFORE_ANSWER)[0]
    run = analyse(exchanges)
    assert run.errors == [
        "the analysis failed on round trip #1: IndexError: list index out of range"
    ]
    assert sorted(run.turns) == [s for s in range(len(exchanges)) if s != 1]
