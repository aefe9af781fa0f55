"""Alike agents through the real recorder (issue 14): N = 2 and 4 per family, clean and with one
client bug on one agent. Goals: exactly N conversations, each one agent's turns in order, no
warning or error on a clean turn, the bug found on the buggy agent's bug turn. N = 16/64 and the
same-ids mode run in ``bench/concurrency.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.concurrency import FAMILIES, run_case
from tests.support.recorder import needs_recorder

pytestmark = [needs_recorder]

#: Every family at N=2 and 4 clean and at N=4 with every client bug (20 cases). The default run
#: takes each family with one bug (rotated) at N=4: its other three agents are clean, and every
#: clean turn of theirs is checked as a clean run's is (no finding, one conversation each); the
#: all-clean runs, N=2 and the other bugs are the nightly run's (``LOOPTAP_SLOW=1``, about 4 min).
_BUGS = ("dropped_result", "wrong_id", "no_echo")
_DEFAULT = {(f, 4, _BUGS[i % len(_BUGS)]) for i, f in enumerate(FAMILIES)}
_SLOW = pytest.mark.slow(reason="the same family at N=2, all clean, or with another bug")
CASES = [
    pytest.param(f, n, v, id=f"{f}-{n}-{v}", marks=() if (f, n, v) in _DEFAULT else _SLOW)
    for f, n, v in [(f, n, "clean") for f in FAMILIES for n in (2, 4)]
    + [(f, 4, v) for f in FAMILIES for v in _BUGS]
]


@pytest.mark.parametrize(("family", "n", "variant"), CASES)
def test_alike_agents(tmp_path: Path, family: str, n: int, variant: str) -> None:
    s = run_case(family, n, variant, tmp_path, seed=7)
    assert s.error is None, s.error
    assert s.round_trips >= 5 * n - 3
    assert s.conversations == n, s.wrong_groups
    assert s.grouped, s.wrong_groups
    assert s.false_findings == []
    if variant != "clean":
        assert s.bug_found, s.bug_codes
