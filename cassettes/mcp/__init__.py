"""``looptap mcp``: a read-only MCP server over a root of runs. Its names here are pinned by
tests/interop/test_mcp_surface.py and imported plainly:

- ``_server``: the server, its tools and the command; ``_stdio``: its stdio transport;
- ``_answers``: bounded, safe JSON (the fence, the byte budget).

The questions it answers are :mod:`cassettes.mcp.query`'s (``_turnquery`` a turn, ``_forkquery``
a fork or a comparison, ``_whyquery`` a why) over the runs under the roots (``_runs``), the parts
of an answer about recorded things in ``_parts`` (findings, messages, a turn's layers, what a diff
tolerated). That module is imported by name, by the server's first tool call, never by this
package: the server answers ``initialize`` before the queries, and the analysis they load, are
imported (tests/interop/test_mcp_start.py).
"""

from __future__ import annotations

from ._answers import (
    DEFAULT_BYTES,
    UNTRUSTED_NOTE,
    QueryError,
    encode,
    read_json,
    text,
)
from ._server import build_server, cmd_mcp

__all__ = [
    "DEFAULT_BYTES",
    "UNTRUSTED_NOTE",
    "QueryError",
    "build_server",
    "cmd_mcp",
    "encode",
    "read_json",
    "text",
]
