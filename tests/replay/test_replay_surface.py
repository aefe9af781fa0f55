"""cassettes.replay's own façade (issue 56): its exported names pinned, as httpx pins its
``__all__``; ``looptap replay``'s handler is one of them (the registry names
``cassettes.replay:cmd_replay``), loaded on first use like the others."""

from __future__ import annotations

import cassettes.replay as replay
from cassettes.commands import COMMANDS

EXPORTED = ["ReplayServer", "Run", "cmd_replay"]


def test_the_exported_names_are_pinned_and_each_resolves() -> None:
    assert replay.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    for name in replay.__all__:
        assert getattr(replay, name) is not None, name


def test_the_registry_names_the_handler_through_the_facade() -> None:
    (run,) = [c.run for c in COMMANDS if c.name == "replay"]
    assert run == "cassettes.replay:cmd_replay"
