"""Serving a cassette (``looptap replay``): the loopback server (``server``, HTTP/1.1) and its
WebSocket sessions (``wsserve``), both speaking what one planner decides (``plan``), the faults a
replay injects (``faults``).

Matching is :mod:`cassettes.matching`'s, requests sent live :mod:`cassettes.replay.live`'s,
the wire :mod:`cassettes.replay.transports`'.
"""
