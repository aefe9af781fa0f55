"""cassettes.fleet is one façade over private modules (issue 56): its exported names are pinned
here, as httpx pins its ``__all__``, so that a name added to or dropped from the surface is a
decision seen in review. ``schema`` stays public: ``python -m cassettes.fleet.schema``
(docs/fleet.md) prints the docs' table."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.fleet as fleet

EXPORTED = [
    "RUN_SUFFIXES", "TABLES", "Window",
    "agent_of", "cmd_fleet", "cmd_index", "cmd_query", "connect", "cost", "doc_table",
    "export_parquet", "failing_turns", "findings", "grew", "latency", "open_fleet", "overviews",
    "program", "run_files", "runs_mentioning", "since_time", "stamp_of", "update", "weekly",
]  # fmt: skip
PUBLIC_MODULES = ["schema"]


def test_the_exported_names_are_pinned_and_every_module_is_private() -> None:
    assert fleet.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    for name in fleet.__all__:
        assert getattr(fleet, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(fleet.__path__)]
    assert [m for m in modules if not m.startswith("_")] == PUBLIC_MODULES, modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.fleet.{m}")
