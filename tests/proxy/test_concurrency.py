"""Alike agents through the real recorder (issue 14): N = 2 and 4 per family, clean and with one
client bug on one agent. Goals: exactly N conversations, each one agent's turns in order, no
warning or error on a clean turn, the bug found on the buggy agent's bug turn. N = 16/64 and the
same-ids mode run in ``bench/concurrency.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.concurrency import FAMILIES, run_case
from tests.support.recorder import needs_recorder

pytestmark = [needs_recorder]

#: The default suite: each family clean at N=4, and each client bug on one family (rotated), about
#: 80 s on two cores; LOOPTAP_SLOW=1 runs every family at N=2 and 4 with every bug (20 cases, ~4
#: min).
_BUGS = ("dropped_result", "wrong_id", "no_echo")
if os.environ.get("LOOPTAP_SLOW"):
    CASES = [(f, n, "clean") for f in FAMILIES for n in (2, 4)] + [
        (f, 4, v) for f in FAMILIES for v in _BUGS
    ]
else:
    CASES = [(f, 4, "clean") for f in FAMILIES] + [
        (f, 4, _BUGS[i % len(_BUGS)]) for i, f in enumerate(FAMILIES)
    ]


@pytest.mark.parametrize(
    ("family", "n", "variant"), CASES, ids=[f"{f}-{n}-{v}" for f, n, v in CASES]
)
def test_alike_agents(tmp_path: Path, family: str, n: int, variant: str) -> None:
    s = run_case(family, n, variant, tmp_path, seed=7)
    assert s.error is None, s.error
    assert s.round_trips >= 5 * n - 3
    assert s.conversations == n, s.wrong_groups
    assert s.grouped, s.wrong_groups
    assert s.false_findings == []
    if variant != "clean":
        assert s.bug_found, s.bug_codes
