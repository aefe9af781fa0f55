"""cassettes.analysis.dispatch is one façade over private modules (issue 56): its exported names
are pinned here, as httpx pins its ``__all__``: a name added to or dropped from the surface is a
decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.analysis.dispatch as dispatch

EXPORTED = [
    "CHECKS", "FINAL_CHECKS", "GROUP_CHAT", "REREAD", "TEXT_ACTION",
    "blocked_page", "build", "fold_root_causes", "is_consequence", "is_error_result",
    "multi_agent",
    "ordered_findings", "replay_miss", "reprompted", "result_texts", "speaker",
]  # fmt: skip


def test_the_exported_names_are_pinned_and_every_module_is_private() -> None:
    assert dispatch.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    for name in dispatch.__all__:
        assert getattr(dispatch, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(dispatch.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.analysis.dispatch.{m}")
