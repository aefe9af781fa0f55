"""Layer analysis: conversations, E/A/C views per turn, findings by layer, token-cost growth."""

from __future__ import annotations

from cassettes.analysis.model import (
    ApiView,
    Conversation,
    DispatchView,
    EmissionView,
    Finding,
    RunAnalysis,
    Severity,
    TokenView,
    Turn,
)
from cassettes.analysis.run import analyse

__all__ = [
    "ApiView",
    "Conversation",
    "DispatchView",
    "EmissionView",
    "Finding",
    "RunAnalysis",
    "Severity",
    "TokenView",
    "Turn",
    "analyse",
]
