"""looptap's core: cassettes of LLM traffic, read truthfully and stored well.

No mitmproxy and no textual here: everything a test suite needs works with this package alone.
"""

from __future__ import annotations

__version__ = "0.1.0"

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
from cassettes.redact import Redactor
from cassettes.roundtrip import RoundTrip, parse_exchange
from cassettes.store import Cassette, CassetteWriter, read_cassette
from cassettes.vcr import load_vcr, read_vcr
from cassettes.view import roundtrip_json

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
