"""cassettes.replay.forking.compare is one façade over private modules (issue 56): an answer read
and checked, the comparison and its report, the plan and budget, the sending. Its exported names
are pinned here, as httpx pins its ``__all__``: a name added to or dropped from the surface is a
decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.replay.forking.compare as compare

EXPORTED = [
    "TEXT_MEASURE", "TEXT_THRESHOLD",
    "ArgumentCheck", "BudgetError", "Comparison", "Sample", "TurnComparison",
    "check_arguments", "check_budget", "compare_run", "estimate_costs", "offered_tools",
    "plan_requests", "send_list", "text_similarity", "upstream_bases", "where_sent",
]  # fmt: skip


def test_the_exported_names_are_pinned_and_every_module_is_private() -> None:
    assert compare.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    for name in compare.__all__:
        assert getattr(compare, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(compare.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.replay.forking.compare.{m}")
