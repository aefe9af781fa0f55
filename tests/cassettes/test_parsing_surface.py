"""cassettes.parsing is one façade over a private module (issue 56): its exported names are pinned
here, so that a name added to or dropped from the surface is a decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.parsing as parsing

EXPORTED = [
    "MAX_PARSE_BYTES", "RoundTrip",
    "parse_all", "parse_exchange", "parse_request_side", "parse_response_side", "side_call",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert parsing.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in parsing.__all__:
        assert getattr(parsing, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(parsing.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.parsing.{m}")
