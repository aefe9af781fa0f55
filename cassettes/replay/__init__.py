"""Replay, by what a user does: serve a cassette to the real agent code (``serving``), fork and
compare runs (``forking``), test an agent with pytest (``testing``: the plugin), with what they
share below them: matching requests LLM-aware and explaining misses by layer (``matching``),
requests sent to a live upstream (``live``), the loopback wire (``transports``); ``cli`` registers
the commands.

    ReplayServer   the loopback HTTP/1.1 server (``looptap replay``), threaded or in a loop
    Matcher        which recorded round trip answers a request; ``Miss`` when none does
    json_diff      JSON-path differences (``messages[4].content[0].content``)
    Run            a recorded or replayed run with its assertion helpers (findings by layer, tokens,
                   cost): the one run class, :class:`cassettes.reading.run.Run`
    diff_runs      where two runs of the same agent diverge (``looptap diff``)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use (PEP 562): the pytest plugin lives under this package and loads in every test
# session, so importing the package must not import the server, the matcher and the analysis.
_EXPORTS = {
    "Change": "cassettes.matching",
    "json_diff": "cassettes.matching",
    "Matcher": "cassettes.matching",
    "Miss": "cassettes.matching",
    "Recorded": "cassettes.matching",
    "Verdict": "cassettes.matching",
    "request_key": "cassettes.matching",
    "Divergence": "cassettes.replay.forking.rundiff",
    "diff_runs": "cassettes.replay.forking.rundiff",
    "Run": "cassettes.reading.run",
    "ReplayServer": "cassettes.replay.serving.server",
    "parse_pace": "cassettes.replay.serving.server",
    "replay_env": "cassettes.replay.serving.server",
}

if TYPE_CHECKING:
    from cassettes.matching import Change, Matcher, Miss, Recorded, Verdict, json_diff, request_key
    from cassettes.reading.run import Run
    from cassettes.replay.forking.rundiff import Divergence, diff_runs
    from cassettes.replay.serving.server import ReplayServer, parse_pace, replay_env


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cassettes.replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Change",
    "Divergence",
    "Matcher",
    "Miss",
    "Recorded",
    "ReplayServer",
    "Run",
    "Verdict",
    "diff_runs",
    "json_diff",
    "parse_pace",
    "replay_env",
    "request_key",
]
