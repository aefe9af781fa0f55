"""cassettes.mcp's and cassettes.mcp.query's exported names are pinned here, as httpx pins its
``__all__``, so that a name added to or dropped from the surface is a decision seen in review, not
a side effect. Both import plainly (no lazy table, issue 72)."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.mcp as mcp
import looptap.cassettes.mcp.query as query

EXPORTED = [
    "DEFAULT_BYTES", "UNTRUSTED_NOTE", "QueryError",
    "build_server", "cmd_mcp", "encode", "read_json", "text",
]  # fmt: skip
QUERIES = [
    "Runs", "comparison", "diff", "export_command", "findings", "fork_diff", "growth", "list_runs",
    "run_summary",
    "search", "tail", "turn", "verify_report", "web_report", "why_report",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert mcp.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    assert query.__all__ == QUERIES


def test_every_exported_name_resolves_and_only_the_queries_are_public() -> None:
    for name in mcp.__all__:
        assert getattr(mcp, name) is not None, name
    for name in query.__all__:
        assert getattr(query, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(mcp.__path__)]
    assert sorted(m for m in modules if not m.startswith("_")) == ["query"], modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.mcp.{m}")
