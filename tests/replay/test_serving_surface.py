"""cassettes.replay.serving is one façade over private modules (issue 56): the server, its
WebSocket sessions, the planner, the player, the relay, the sender, the faults, the recordings.
Its exported names are pinned here, as httpx pins its ``__all__``: a name added to or dropped from
the surface is a decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.replay.serving as serving

EXPORTED = [
    "IDLE_TIMEOUT", "MISS_CODE", "PLACEHOLDER_KEY", "READ_TIMEOUT", "REFUSAL_TEXT", "STATUS_KINDS",
    "UNPLAYED_LISTED",
    "Answer", "Fault", "FaultPlan", "FaultSpecError", "Forward", "Missed", "Planner", "Play",
    "ReplayServer", "parse_fault", "parse_pace", "placeholder_keys", "replay_env",
]  # fmt: skip


def test_the_exported_names_are_pinned_and_every_module_is_private() -> None:
    assert serving.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    for name in serving.__all__:
        assert getattr(serving, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(serving.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.replay.serving.{m}")
