"""Serving a cassette (``looptap replay``). No re-exports; the modules: the loopback server
(``server``, HTTP/1.1) and its WebSocket sessions (``_websocket``), both speaking what one planner
decides (``plan``, asking the fork's router when there is one): recorded answers played by
``_player`` (over HTTP or as a WebSocket session's messages: pace, chunks, faults), requests sent
live relayed by ``_relay`` (a WebSocket session by ``_websocket`` itself), all written through
``_sender``, the one seam to the wire; the faults a replay injects (``faults``); the recorded
round trips served, opened from any format (``_recordings``); the CA and certificate of the
HTTPS tools' hosts, made for one replay (``_tls``); the environment an agent is given to run
against the server, and the ``export`` lines that print it (``agent_env``).

Matching is :mod:`cassettes.matching`'s, what a request sent live becomes
:mod:`cassettes.replay.live`'s, the wire :mod:`cassettes.net`'s.
"""
