"""looptap's version, from the installed distribution's metadata (one source: pyproject.toml).

Its own module, at the bottom of the import graph, so the modules that stamp it (the cassette
header, HAR, OTLP, the MCP server) need not import the ``cassettes`` package's exports.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__: str = version("looptap")
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"
