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

CASES = [(f, n, v) for f in FAMILIES for n in (2, 4) for v in ("clean",)] + [
    (f, 4, v) for f in FAMILIES for v in ("dropped_result", "wrong_id", "no_echo")
]


@pytest.mark.parametrize(("family", "n", "variant"), CASES, ids=[f"{f}-{n}-{v}" for f, n, v in CASES])
def test_alike_agents(tmp_path: Path, family: str, n: int, variant: str) -> None:
    s = run_case(family, n, variant, tmp_path, seed=7)
    assert s.error is None, s.error
    assert s.round_trips >= 5 * n - 3
    assert s.conversations == n, s.wrong_groups
    assert s.grouped, s.wrong_groups
    assert s.false_findings == []
    if variant != "clean":
        assert s.bug_found, s.bug_codes
