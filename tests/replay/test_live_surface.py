"""cassettes.replay.live is one façade over private modules (issue 56): its exported names are
pinned here, so that a name added to or dropped from the surface is a decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.replay.live as live

EXPORTED = [
    "MAX_CONTINUE",
    "Chains", "Continuation", "Edit", "EditError", "Threads",
    "apply_edits", "as_sent_live", "carried", "cut_text", "edit_file", "edit_notes",
    "edited_headers", "joined", "model_of", "parse_edit", "parse_edits", "parsed", "rendered_for",
    "with_model",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert live.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in live.__all__:
        assert getattr(live, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(live.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.replay.live.{m}")

