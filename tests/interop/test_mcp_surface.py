"""cassettes.mcp is one façade over private modules (issue 56): its exported names are pinned
here, as httpx pins its ``__all__``, so that a name added to or dropped from the surface is a
decision seen in review, not a side effect."""

from __future__ import annotations

import importlib
import pkgutil

import cassettes.mcp as mcp

EXPORTED = [
    "DEFAULT_BYTES", "UNTRUSTED_NOTE",
    "QueryError", "Runs",
    "build_server", "cmd_mcp", "comparison", "diff", "encode", "fork_diff", "list_runs",
    "read_json", "run_summary", "search", "tail", "text", "turn", "web_report", "why_report",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert mcp.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in mcp.__all__:
        assert getattr(mcp, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(mcp.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"cassettes.mcp.{m}")


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        mcp.nothing_here  # noqa: B018
    except AttributeError as exc:
        assert "nothing_here" in str(exc)
    else:
        raise AssertionError("cassettes.mcp.nothing_here resolved")
