"""cassettes.analysis is one façade over private modules (issue 56): its exported names are pinned
here, as httpx pins its ``__all__``: a name added to or dropped from the surface is a decision seen
in review. Public beside it: the subpackages (their own façades), ``codes`` (the finding codes'
table, whose constants every reader of a finding names), ``spill`` and ``pricing``, whose
``KEEP`` and ``calc_price`` tests set (read at call time, where a façade's copy would not reach),
and ``learning`` (``looptap rules learn``'s miner, which ``show`` does not load)."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.analysis as analysis

EXPORTED = [
    "ACTIVE", "CHECKS", "FILE", "KINDS", "PRICES_VERSION", "STATED_EXIT",
    "ApiReport", "CallCheck", "Conversation", "Dispatch", "Finding", "Layer", "McpCall",
    "McpLinker", "Rule", "RulesError", "RunAnalyser", "RunAnalysis", "Severity",
    "TokenCount", "ToolHttp", "Turn",
    "active", "active_text", "analyse", "apportion", "calc_price", "canonical_call", "capture",
    "claimed_success",
    "estimate_text", "get_snapshot", "kind_text", "lines", "load", "message_key",
    "normalise_schema", "parse_rules", "provider_for_url", "restore", "same_model",
    "schema_errors", "sections", "surely_valid", "table_identity", "tool_http", "unsourced",
    "using",
]  # fmt: skip
PUBLIC = ["codes", "dispatch", "learning", "pricing", "spill", "threading"]


def test_the_exported_names_are_pinned() -> None:
    assert analysis.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_other_module_is_private() -> None:
    for name in analysis.__all__:
        assert getattr(analysis, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(analysis.__path__)]
    assert sorted(m for m in modules if not m.startswith("_")) == PUBLIC, modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.analysis.{m}")
