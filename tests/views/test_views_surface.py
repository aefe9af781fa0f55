"""cassettes.views is one façade over private modules (issue 56): its exported names are pinned
here, as httpx pins its ``__all__``, so that a name added to or dropped from the surface is a
decision seen in review, not a side effect. Public modules: ``schema`` (users run ``python -m
cassettes.views.schema``, docs/show-json.md), and what ``show`` does not load, named by their
callers: ``search``, ``timeline``, ``report`` and ``htmlpage``."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.views as views

EXPORTED = [
    "BY_HOST", "BY_TOKENS", "CONTINUED", "SEVERITY_MARK", "SEVERITY_RANK", "SPLIT",
    "GrowthBar", "GrowthRows", "TurnSummary",
    "analysis_lines", "conversation_json", "counts_said", "edit_lines", "edit_text",
    "edited_messages", "edits_json", "error_phrase", "estimated_note", "estimated_why",
    "growth_bars", "growth_row", "http_body_lines", "http_call_text", "layer_findings", "link_text",
    "mcp_link_json", "money", "reading_line", "reconstructed_said",
    "root_cause_lines", "roundtrip_json", "shell_answered", "shell_by_call", "shell_call_json",
    "shell_call_lines", "split_json",
    "status_text", "summarise", "summary_lines", "tool_call_http_json", "tool_http_link_json",
    "turn_json", "turn_layers_json",
]  # fmt: skip
PUBLIC_MODULES = ["htmlpage", "report", "schema", "search", "timeline"]


def test_the_exported_names_are_pinned() -> None:
    assert views.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_other_module_is_private() -> None:
    for name in views.__all__:
        assert getattr(views, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(views.__path__)]
    public = [m for m in modules if not m.startswith("_")]
    assert modules and public == PUBLIC_MODULES, modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.views.{m}")
