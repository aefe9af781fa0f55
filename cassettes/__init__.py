"""looptap's core: cassettes of LLM traffic, read truthfully and stored well.

No mitmproxy and no textual here: everything a test suite needs works with this package alone.
A run, in any format looptap reads, is opened one way: ``open_run(path)`` gives a :class:`Run`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cassettes.lazy import on_first_use

# Exports are loaded on first use (PEP 562), so `import cassettes` (and the pytest plugin, which
# every test session of every project that installs looptap loads) costs next to nothing. With
# them imported plainly, `import pytest, cassettes.replay.testing.plugin` took 2.3x the CPU time
# (0.37 s against 0.16 s; whole-process medians of 6 interleaved pairs, 2026-11-27).
_EXPORTS = {
    "__version__": "cassettes._version",
    "FORMAT_VERSION": "cassettes.storage",
    "CassetteError": "cassettes.errors",
    "CassetteFormatError": "cassettes.errors",
    "CassetteIOError": "cassettes.errors",
    "ImportFormatError": "cassettes.errors",
    "NewerFormatError": "cassettes.errors",
    "Exchange": "cassettes.wire",
    "ApiError": "cassettes.models",
    "FinishReason": "cassettes.models",
    "Message": "cassettes.models",
    "NormalisedRequest": "cassettes.models",
    "NormalisedResponse": "cassettes.models",
    "Part": "cassettes.models",
    "ToolCall": "cassettes.models",
    "ToolResult": "cassettes.models",
    "ToolSpec": "cassettes.models",
    "Usage": "cassettes.models",
    "Redactor": "cassettes.recording",
    "RoundTrip": "cassettes.parsing",
    "parse_exchange": "cassettes.parsing",
    "CassetteWriter": "cassettes.recording.pipeline",
    "Run": "cassettes.reading",
    "open_run": "cassettes.reading",
    "roundtrip_json": "cassettes.views",
}

if TYPE_CHECKING:
    from cassettes._version import __version__
    from cassettes.errors import (
        CassetteError,
        CassetteFormatError,
        CassetteIOError,
        ImportFormatError,
        NewerFormatError,
    )
    from cassettes.models import (
        ApiError,
        FinishReason,
        Message,
        NormalisedRequest,
        NormalisedResponse,
        Part,
        ToolCall,
        ToolResult,
        ToolSpec,
        Usage,
    )
    from cassettes.parsing import RoundTrip, parse_exchange
    from cassettes.reading import Run, open_run
    from cassettes.recording import Redactor
    from cassettes.recording.pipeline import CassetteWriter
    from cassettes.storage import FORMAT_VERSION
    from cassettes.views import roundtrip_json
    from cassettes.wire import Exchange


__getattr__ = on_first_use(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "FORMAT_VERSION",
    "ApiError",
    "CassetteError",
    "CassetteFormatError",
    "CassetteIOError",
    "CassetteWriter",
    "Exchange",
    "FinishReason",
    "ImportFormatError",
    "Message",
    "NewerFormatError",
    "NormalisedRequest",
    "NormalisedResponse",
    "Part",
    "Redactor",
    "RoundTrip",
    "Run",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "__version__",
    "open_run",
    "parse_exchange",
    "roundtrip_json",
]
