"""Layer analysis: conversations, E/A/C layers per turn, findings by layer, token-cost growth."""

from __future__ import annotations

from cassettes.analysis.model import (
    ApiReport,
    Conversation,
    Dispatch,
    Emission,
    Finding,
    RunAnalysis,
    Severity,
    TokenCount,
    Turn,
)
from cassettes.analysis.run import analyse

__all__ = [
    "ApiReport",
    "Conversation",
    "Dispatch",
    "Emission",
    "Finding",
    "RunAnalysis",
    "Severity",
    "TokenCount",
    "Turn",
    "analyse",
]
