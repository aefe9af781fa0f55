"""The fleet: many runs as tables (``looptap index``, ``query``, ``fleet``, ``export
--parquet``; docs/fleet.md). Importing this package imports no DuckDB: only
:mod:`cassettes.fleet.index`'s functions do, when called."""
