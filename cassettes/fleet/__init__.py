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

from cassettes.fleet._command import cmd_fleet, cmd_index, cmd_query, export_parquet, open_fleet
from cassettes.fleet._files import RUN_SUFFIXES, run_files
from cassettes.fleet._index import connect, update
from cassettes.fleet._mcp import overviews, runs_mentioning
from cassettes.fleet._questions import cost, failing_turns, findings, since_time
from cassettes.fleet._rows import stamp_of
from cassettes.fleet.schema import TABLES, doc_table

__all__ = [
    "RUN_SUFFIXES",
    "TABLES",
    "cmd_fleet",
    "cmd_index",
    "cmd_query",
    "connect",
    "cost",
    "doc_table",
    "export_parquet",
    "failing_turns",
    "findings",
    "open_fleet",
    "overviews",
    "run_files",
    "runs_mentioning",
    "since_time",
    "stamp_of",
    "update",
]
