"""E — what the model emitted: view and checks. (Being written; see the analysis brief.)"""

from __future__ import annotations

from cassettes.analysis.context import Check, FinalCheck, TurnContext
from cassettes.analysis.model import EmissionView

CHECKS: tuple[Check, ...] = ()
FINAL_CHECKS: tuple[FinalCheck, ...] = ()


def build(ctx: TurnContext) -> EmissionView:
    return EmissionView()
