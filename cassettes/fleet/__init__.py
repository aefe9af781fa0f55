"""The fleet: many runs as tables (``looptap index``, ``query``, ``fleet``, ``export
--parquet``; docs/fleet.md). One façade, its names pinned by tests/fleet/test_fleet_surface.py,
over:

- ``_files``: the run files under a directory; ``_rows``: one run's rows and its stamp;
- ``_index``: the DuckDB index, updated run by run; ``_mcp``: what it answers the MCP server;
- ``_questions``: the named questions' SQL; ``_command``: the commands;
- ``schema``: the tables' columns (public: ``python -m cassettes.fleet.schema`` prints the docs'
  table).

Importing this package imports no DuckDB: only ``_index``'s functions do, when called.
"""

from __future__ import annotations

from ._agent import agent_of, program
from ._command import cmd_fleet, cmd_index, cmd_query, export_parquet, open_fleet
from ._files import RUN_SUFFIXES, run_files
from ._index import connect, update
from ._mcp import overviews, runs_mentioning
from ._questions import (
    Window,
    cost,
    failing_turns,
    findings,
    grew,
    latency,
    since_time,
    weekly,
)
from ._rows import stamp_of
from .schema import TABLES, doc_table

__all__ = [
    "RUN_SUFFIXES",
    "TABLES",
    "Window",
    "agent_of",
    "cmd_fleet",
    "cmd_index",
    "cmd_query",
    "connect",
    "cost",
    "doc_table",
    "export_parquet",
    "failing_turns",
    "findings",
    "grew",
    "latency",
    "open_fleet",
    "overviews",
    "program",
    "run_files",
    "runs_mentioning",
    "since_time",
    "stamp_of",
    "update",
    "weekly",
]
