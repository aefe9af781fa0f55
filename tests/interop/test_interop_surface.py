"""cassettes.interop is one façade over private modules (issue 56): its exported names are pinned
here, as httpx pins its ``__all__``, so that a name added to or dropped from the surface is a
decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.interop as interop

EXPORTED = [
    "batches", "cmd_export", "cmd_textconv", "encode_request", "har_chunks", "import_runs",
    "iter_requests", "render", "runs_in", "sniff", "traces_url",
]  # fmt: skip


def test_the_exported_names_are_pinned_and_every_module_is_private() -> None:
    assert interop.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    for name in interop.__all__:
        assert getattr(interop, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(interop.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.interop.{m}")
