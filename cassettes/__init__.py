"""looptap's core: cassettes of LLM traffic, read truthfully and stored well.

No mitmproxy and no textual here: everything a test suite needs works with this package alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Exports are loaded on first use (PEP 562), so `import cassettes` (and the pytest plugin, which
# every test session of every project that installs looptap loads) costs next to nothing.
_EXPORTS = {
    "__version__": "cassettes._version",
    "FORMAT_VERSION": "cassettes.codec",
    "CassetteError": "cassettes.errors",
    "CassetteFormatError": "cassettes.errors",
    "CassetteIOError": "cassettes.errors",
    "ImportFormatError": "cassettes.errors",
    "NewerFormatError": "cassettes.errors",
    "Exchange": "cassettes.exchange",
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
    "Redactor": "cassettes.redact",
    "RoundTrip": "cassettes.roundtrip",
    "parse_exchange": "cassettes.roundtrip",
    "Cassette": "cassettes.store",
    "CassetteWriter": "cassettes.pipeline",
    "read_cassette": "cassettes.store",
    "load_vcr": "cassettes.vcr",
    "read_vcr": "cassettes.vcr",
    "roundtrip_json": "cassettes.view",
}

if TYPE_CHECKING:
    from cassettes.codec import FORMAT_VERSION
    from cassettes.errors import (
        CassetteError,
        CassetteFormatError,
        CassetteIOError,
        ImportFormatError,
        NewerFormatError,
    )
    from cassettes.exchange import Exchange
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
    from cassettes.pipeline import CassetteWriter
    from cassettes.redact import Redactor
    from cassettes.roundtrip import RoundTrip, parse_exchange
    from cassettes.store import Cassette, read_cassette
    from cassettes.vcr import load_vcr, read_vcr
    from cassettes.view import roundtrip_json


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cassettes' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "FORMAT_VERSION",
    "ApiError",
    "Cassette",
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
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "__version__",
    "load_vcr",
    "parse_exchange",
    "read_cassette",
    "read_vcr",
    "roundtrip_json",
]
