"""Serving a cassette (``looptap replay``), in private modules behind this façade (the names below
are its whole surface, pinned by tests/replay/test_serving_surface.py): the loopback server
(``_server``, HTTP/1.1) and its WebSocket sessions (``_websocket``), both speaking what one planner
decides (``_plan``, asking the fork's router when there is one): recorded answers played by
``_player`` (over HTTP or as a WebSocket session's messages: pace, chunks, faults), requests sent
live relayed by ``_relay`` (a WebSocket session by ``_websocket`` itself), all written through
``_sender``, the one seam to the wire; the faults a replay injects (``_faults``); the recorded
round trips served, opened from any format (``_recordings``).

Matching is :mod:`cassettes.matching`'s, what a request sent live becomes
:mod:`cassettes.replay.live`'s, the wire :mod:`cassettes.net`'s. Plain imports: each caller (the
replay command, the recorder, the pytest plugin's session) loads the server anyway.
"""

from __future__ import annotations

from ._faults import (
    REFUSAL_TEXT,
    STATUS_KINDS,
    Fault,
    FaultPlan,
    FaultSpecError,
    parse_fault,
)
from ._plan import MISS_CODE, Answer, Forward, Missed, Planner, Play
from ._server import (
    IDLE_TIMEOUT,
    PLACEHOLDER_KEY,
    READ_TIMEOUT,
    UNPLAYED_LISTED,
    ReplayServer,
    parse_pace,
    placeholder_keys,
    replay_env,
)

__all__ = [
    "IDLE_TIMEOUT",
    "MISS_CODE",
    "PLACEHOLDER_KEY",
    "READ_TIMEOUT",
    "REFUSAL_TEXT",
    "STATUS_KINDS",
    "UNPLAYED_LISTED",
    "Answer",
    "Fault",
    "FaultPlan",
    "FaultSpecError",
    "Forward",
    "Missed",
    "Planner",
    "Play",
    "ReplayServer",
    "parse_fault",
    "parse_pace",
    "placeholder_keys",
    "replay_env",
]
