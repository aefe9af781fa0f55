"""Serving a cassette (``looptap replay``): the loopback server (``server``, HTTP/1.1) and its
WebSocket sessions (``wsserve``), both speaking what one planner decides (``plan``), the faults a
replay injects (``faults``).

Matching is :mod:`cassettes.replay.matching`'s, what a request sent live
becomes :mod:`cassettes.replay.live`'s, the wire :mod:`cassettes.net`'s.
"""
