"""Replay: serve a cassette to the real agent code, match its requests LLM-aware, explain misses
by layer, diff two runs, and the pytest plugin that ties it together.

    ReplayServer   the loopback HTTP/1.1 server (``looptap replay``), threaded or in a loop
    Matcher        which recorded round trip answers a request; ``Miss`` when none does
    json_diff      JSON-path differences (``messages[4].content[0].content``)
    Run            assertion helpers over a recorded or replayed run (findings by layer, tokens, cost)
    diff_runs      where two runs of the same agent diverge (``looptap diff``)
"""

from __future__ import annotations

from cassettes.replay.jsondiff import Change, json_diff
from cassettes.replay.matcher import Matcher, Miss, Recorded, Verdict, request_key
from cassettes.replay.rundiff import Divergence, diff_runs
from cassettes.replay.runview import Run
from cassettes.replay.server import ReplayServer, parse_pace, replay_env

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
