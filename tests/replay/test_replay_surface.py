"""cassettes.replay re-exports nothing (issue 72 item 5): the pytest plugin loads the package in
every test session, so its import imports nothing; ``looptap replay``'s handler is named by its
module in the registry (``cassettes.replay.command:cmd_replay``), which a reader and a tool
follow."""

from __future__ import annotations

import importlib
from types import ModuleType

import looptap.cassettes.replay as replay
from looptap.cassettes.commands import COMMANDS


def test_the_package_exports_nothing() -> None:
    assert not hasattr(replay, "__all__")
    names = [n for n, v in vars(replay).items() if not n.startswith("__")]
    assert all(isinstance(vars(replay)[n], ModuleType) for n in names), names  # its subpackages


def test_the_registry_names_the_handler_by_its_module() -> None:
    (run,) = [c.run for c in COMMANDS if c.name == "replay"]
    assert run == "looptap.cassettes.replay.command:cmd_replay"
    module, _, name = run.partition(":")
    assert callable(getattr(importlib.import_module(module), name))
