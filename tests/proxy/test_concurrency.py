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
#: takes one: Responses at N=4 with a wrong id on one agent, its other three agents clean and
#: every clean turn of theirs checked as a clean run's is (no finding, one conversation each).
#: The rest is the nightly run's (``LOOPTAP_SLOW=1``, about 4 min; session 55): each family's
#: recording through the real recorder is test_e2e_sdks.py's by default, many agents at once
#: through one recorder test_load.py's, and the findings of the bugs are shown in process.
_BUGS = ("dropped_result", "wrong_id", "no_echo")
_DEFAULT = {("openai_responses", 4, "wrong_id")}
_SLOW = pytest.mark.slow(reason="another family, N=2, all clean or another bug; one by default")
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
