"""Token accounting and cost per turn. (Being written; see the analysis brief.)"""

from __future__ import annotations

from cassettes.analysis.context import TurnContext
from cassettes.analysis.model import TokenView


def build(ctx: TurnContext) -> TokenView:
    return TokenView()
