"""No import circle inside cassettes/matching (issue 91): the matcher's parts that only read a
matcher (a recorded round trip's view, the tolerated differences' report) name what they read as
protocols instead of importing the matcher's module, which imports them. Import-time and
type-checking imports alike (grimp counts both)."""

from __future__ import annotations

import itertools

import grimp


def test_no_two_modules_of_matching_import_each_other() -> None:
    graph = grimp.build_graph("looptap")
    mods = sorted(m for m in graph.modules if m.startswith("looptap.cassettes.matching."))
    circles = [
        (a, b)
        for a, b in itertools.combinations(mods, 2)
        if graph.chain_exists(a, b) and graph.chain_exists(b, a)
    ]
    assert circles == []
