"""cassettes.matching is one façade over private modules (issue 56): its exported names are pinned
here, as httpx pins its ``__all__``, so that a name added to or dropped from the surface is a
decision seen in review, not a side effect."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.matching as matching

EXPORTED = [
    "IGNORED", "MAX_TURNS",
    "Change", "IndexedRecordings", "Matcher", "Miss", "Numbering", "Recorded", "RequestKey",
    "Rules", "Tolerated", "VolatileSpans",
    "attribute", "bare_text", "clip", "entries_of", "entry_line", "here", "json_diff",
    "parse_ignore", "parse_substitution", "project_rules", "recorded", "report_lines",
    "request_key", "rules_of_args", "short", "this_process", "tolerated", "tolerated_notes",
    "tool_host", "tool_result_changes", "turn_entries", "volatile_for", "window",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert matching.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in matching.__all__:
        assert getattr(matching, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(matching.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.matching.{m}")
