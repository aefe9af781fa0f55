"""``looptap mcp``: a read-only MCP server over a root of runs. One façade over private modules,
its names pinned by tests/interop/test_mcp_surface.py:

- ``_server``: the server, its tools and the command; ``_stdio``: its stdio transport;
- ``_query``: the questions it answers (``_turnquery`` a turn, ``_forkquery`` a fork or a
  comparison, ``_whyquery`` a why) over the runs under the roots (``_runs``);
- ``_answers``: bounded, safe JSON (the fence, the byte budget); ``_parts``: the parts of an
  answer about recorded things (findings, messages, a turn's layers, what a diff tolerated).

Names are loaded on first use (PEP 562): the server answers ``initialize`` before the queries,
and what they load, are imported (tests/interop/test_mcp_start.py). With the names imported
plainly, ``looptap mcp``'s start up to reading its closed stdin took 1.26x the CPU time (0.86 s
against 0.68 s; whole-process medians of 6 interleaved pairs, 2026-11-27).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cassettes.lazy import on_first_use

_MODULES = {
    "_answers": "DEFAULT_BYTES UNTRUSTED_NOTE QueryError encode read_json text",
    "_forkquery": "comparison fork_diff",
    "_query": "diff list_runs run_summary search tail web_report",
    "_runs": "Runs",
    "_server": "build_server cmd_mcp",
    "_turnquery": "turn",
    "_whyquery": "why_report",
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}

if TYPE_CHECKING:
    from cassettes.mcp._answers import (
        DEFAULT_BYTES,
        UNTRUSTED_NOTE,
        QueryError,
        encode,
        read_json,
        text,
    )
    from cassettes.mcp._forkquery import comparison, fork_diff
    from cassettes.mcp._query import diff, list_runs, run_summary, search, tail, web_report
    from cassettes.mcp._runs import Runs
    from cassettes.mcp._server import build_server, cmd_mcp
    from cassettes.mcp._turnquery import turn
    from cassettes.mcp._whyquery import why_report


__getattr__ = on_first_use(__name__, _EXPORTS)


__all__ = [
    "DEFAULT_BYTES",
    "UNTRUSTED_NOTE",
    "QueryError",
    "Runs",
    "build_server",
    "cmd_mcp",
    "comparison",
    "diff",
    "encode",
    "fork_diff",
    "list_runs",
    "read_json",
    "run_summary",
    "search",
    "tail",
    "text",
    "turn",
    "web_report",
    "why_report",
]
