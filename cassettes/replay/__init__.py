"""Replay, by what a user does: serve a cassette to the real agent code (``serving``), fork and
compare runs (``forking``), test an agent with pytest (``testing``: the plugin), with what they
share below them: matching requests LLM-aware and explaining misses by layer (``matching``),
requests sent to a live upstream (``live``), the loopback wire (``transports``); ``_command`` is
``looptap replay``'s handler.

    ReplayServer   the loopback HTTP/1.1 server (``looptap replay``), threaded or in a loop
    Run            a recorded or replayed run with its assertion helpers (findings by layer, tokens,
                   cost): the one run class, :class:`cassettes.reading.Run`
    cmd_replay     ``looptap replay`` (the command registry's handler)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cassettes.lazy import on_first_use

# Loaded on first use (PEP 562): the pytest plugin lives under this package and loads in every test
# session, so importing the package must not import the server, the matcher and the analysis.
_EXPORTS = {
    "Run": "cassettes.reading",
    "ReplayServer": "cassettes.replay.serving",
    "cmd_replay": "cassettes.replay._command",
}

if TYPE_CHECKING:
    from cassettes.reading import Run
    from cassettes.replay._command import cmd_replay
    from cassettes.replay.serving import ReplayServer


__getattr__ = on_first_use(__name__, _EXPORTS)


__all__ = ["ReplayServer", "Run", "cmd_replay"]
