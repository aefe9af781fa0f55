"""Never a traceback from reading (issue 100 item 5; docs/reliability.md): no check or analysis
step raises on any real recording kept here. The suite sets ``LOOPTAP_RAISE_CONTAINED``: a step
that raises fails the test that reads it, where a user's ``show`` would contain it and exit 4. So
every test that reads a recording guards it; those that read them all:

- the corpus (1,099 files of other projects' vcrpy cassettes): test_codes'
  ``test_every_finding_of_the_corpus_is_its_rows`` analyses each; the slow test below too;
- the client matrix's recordings made through the real ``looptap run`` with real SDKs and
  frameworks: data/ctx and its 48 mutations through ``show`` and ``show --json``
  (test_context_counts); tests/clients/recorded and tests/interop/traces here, as ``show`` reads
  them (the streamed reader, its parking and restores); all of them through ``show`` itself with
  ``LOOPTAP_SLOW=1`` (about a minute)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from real_corpus import corpus_files, load, rel

from looptap.cassettes.analysis import analyse
from looptap.cassettes.reading import open_run
from tests.support.analysed import cli_output

pytestmark = pytest.mark.corpus

TESTS = Path(__file__).parents[1]
#: The client matrix's recordings kept in the repository (real clients through ``looptap run``).
MATRIX = sorted(
    p
    for d in ("cassettes/analysis/data/ctx", "clients/recorded", "interop/traces")
    for p in (TESTS / d).rglob("*.jsonl")
)
#: Those no other test reads whole (data/ctx: test_context_counts shows each).
UNSHOWN = [p for p in MATRIX if "data/ctx" not in str(p)]
SLOW = bool(os.environ.get("LOOPTAP_SLOW"))


@pytest.mark.slow
@pytest.mark.skipif(not SLOW, reason="LOOPTAP_SLOW=1 (about a minute)")
def test_no_step_raises_on_the_corpus() -> None:
    failed: list[str] = []
    files = corpus_files()
    for path in files:
        try:
            exchanges = load(path)
        except Exception:  # a file the importer refuses is test_corpus's (it names them)
            continue
        for i, ex in enumerate(exchanges):
            ex.seq = i
        run = analyse(exchanges)
        failed += [f"{rel(path)}: {e}" for e in run.errors]
    assert len(files) > 1000
    assert failed == []


@pytest.mark.parametrize("path", UNSHOWN, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_step_raises_on_the_recordings_no_other_test_reads_whole(path: Path) -> None:
    run = open_run(path, cache=False)
    try:
        assert run.analysis.errors == []
        assert len(run.exchanges) > 0
    finally:
        run.close()


@pytest.mark.slow
@pytest.mark.skipif(not SLOW, reason="LOOPTAP_SLOW=1 (about a minute)")
@pytest.mark.parametrize("path", MATRIX, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_step_raises_on_the_matrix_recordings_in_show(path: Path) -> None:
    rc, out, err = cli_output("show", "--json", "--no-cache", str(path))
    assert rc == 0, err
    assert out


def test_the_matrix_recordings_are_found() -> None:
    assert len(MATRIX) >= 100 and len(UNSHOWN) >= 38, (len(MATRIX), len(UNSHOWN))
