"""cassettes.replay.forking is one façade over private modules (issue 56): its exported names are
pinned here, so that a name added to or dropped from the surface is a decision seen in review.
``compare`` is a subpackage with its own façade (tests/replay/test_compare_surface.py)."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.replay.forking as forking

EXPORTED = [
    "MAX_BYTES", "VERSION",
    "Cursor", "CursorError", "Divergence", "ForkComparison", "ForkReplay", "ForkRow", "ForkSource",
    "PlanError",
    "agreement", "agreement_lines", "bases_of", "branch_diff", "branch_meta", "comparing",
    "diff_analysed", "divergence_lines", "fork_inputs", "fork_lined_up", "fork_view",
    "live_bases", "live_router", "locate", "origin_meta", "parse_cursor", "parse_from",
    "propose_files", "read_plan", "start_fork",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert forking.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in forking.__all__:
        assert getattr(forking, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(forking.__path__) if m.name != "compare"]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.replay.forking.{m}")


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        forking.nothing_here  # noqa: B018
    except AttributeError as exc:
        assert "nothing_here" in str(exc)
    else:
        raise AssertionError("looptap.cassettes.replay.forking.nothing_here resolved")
