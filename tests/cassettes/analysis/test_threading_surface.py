"""cassettes.analysis.threading is one façade over private modules (issue 56): its exported names
are pinned here, as httpx pins its ``__all__``: a name added to or dropped from the surface is a
decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.analysis.threading as threading

EXPORTED = ["Attempt", "Link", "Threader", "restore_threads", "threads_state"]


def test_the_exported_names_are_pinned_and_every_module_is_private() -> None:
    assert threading.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    for name in threading.__all__:
        assert getattr(threading, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(threading.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.analysis.threading.{m}")
