"""cassettes.why is one façade over private modules (issue 56): its exported names are pinned here,
so that a name added to or dropped from the surface is a decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.why as why

EXPORTED = [
    "STATE",
    "Branches", "Intervention", "Judged", "Outcome", "OutcomeError", "Purse", "Refused", "Tally",
    "budget_lines", "cmd_why", "default_output", "emit_result", "end_state", "interventions",
    "judged_from", "kept_flags", "live_turns", "parse_outcome", "passed_flags", "refusal",
    "report_lines", "resumed_head", "rounds", "run_check", "together_verdict", "verdict",
    "where_sent", "why", "wilson",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert why.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in why.__all__:
        assert getattr(why, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(why.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.why.{m}")
