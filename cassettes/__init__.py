"""looptap's core: cassettes of LLM traffic, read truthfully and stored well.

No mitmproxy and no textual here: everything a test suite needs works with this package alone.
A run, in any format looptap reads, is opened one way: ``open_run(path)`` gives a :class:`Run`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import on_first_use

# Exports are loaded on first use (PEP 562), so `import cassettes` (and the pytest plugin, which
# every test session of every project that installs looptap loads) costs next to nothing. With
# them imported plainly, `import pytest, cassettes.replay.testing.plugin` took 2.3x the CPU time
# (0.37 s against 0.16 s; whole-process medians of 6 interleaved pairs, 2026-11-27).
_EXPORTS = {
    "__version__": "looptap.cassettes._version",
    "FORMAT_VERSION": "looptap.cassettes.storage",
    "CassetteError": "looptap.cassettes.errors",
    "CassetteFormatError": "looptap.cassettes.errors",
    "CassetteIOError": "looptap.cassettes.errors",
    "ImportFormatError": "looptap.cassettes.errors",
    "NewerFormatError": "looptap.cassettes.errors",
    "Exchange": "looptap.cassettes.wire",
    "ApiError": "looptap.cassettes.models",
    "FinishReason": "looptap.cassettes.models",
    "Message": "looptap.cassettes.models",
    "NormalisedRequest": "looptap.cassettes.models",
    "NormalisedResponse": "looptap.cassettes.models",
    "Part": "looptap.cassettes.models",
    "ToolCall": "looptap.cassettes.models",
    "ToolResult": "looptap.cassettes.models",
    "ToolSpec": "looptap.cassettes.models",
    "Usage": "looptap.cassettes.models",
    "Redactor": "looptap.cassettes.recording",
    "RoundTrip": "looptap.cassettes.parsing",
    "parse_exchange": "looptap.cassettes.parsing",
    "CassetteWriter": "looptap.cassettes.recording.pipeline",
    "Run": "looptap.cassettes.reading",
    "open_run": "looptap.cassettes.reading",
    "roundtrip_json": "looptap.cassettes.views",
}

if TYPE_CHECKING:
    from ._version import __version__
    from .errors import (
        CassetteError,
        CassetteFormatError,
        CassetteIOError,
        ImportFormatError,
        NewerFormatError,
    )
    from .models import (
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
    from .parsing import RoundTrip, parse_exchange
    from .reading import Run, open_run
    from .recording import Redactor
    from .recording.pipeline import CassetteWriter
    from .storage import FORMAT_VERSION
    from .views import roundtrip_json
    from .wire import Exchange


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
