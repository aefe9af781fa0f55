"""A cost as people read it: the one formatting every view uses (``show``'s table and summary,
the inspector's panes and growth chart, the HTML page, ``compare``, the recorder's closing line).

Before this module each view had its own: ``show`` wrote ``~$0.0000`` for a price of a few
millionths of a dollar while the inspector wrote the conversation's total as ``$0.0001`` without
the ``~`` (issue 43). Now:

- ``unknown`` when no price is known — never ``$0``;
- four decimals from a tenth of a cent up (``$0.0036``, ``$1.2500``); below that two significant
  digits (``$0.000012``), so a small cost never reads as zero;
- ``~`` in front when the price is an estimate
  (:attr:`~cassettes.analysis._model.TokenCount.price_estimated`): the host is not a provider
  genai-prices knows (a gateway, a proxy, a local server: the model's list price, whatever the API
  family), or the token counts were looptap's estimate (the API reported no usage).

JSON outputs keep the number and carry the ``estimated`` flag beside it; only text goes through
here.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

__all__ = ["BY_HOST", "BY_TOKENS", "estimated_note", "estimated_why", "money"]

#: Why a cost is estimated, as bits (a turn may have both): the host is not a provider genai-prices
#: knows, so the price is the model's list price; the API reported no usage, so the token counts
#: are looptap's.
BY_HOST, BY_TOKENS = 1, 2


def estimated_why(tokens: Any) -> int:
    """Why this turn's own price is an estimate (:data:`BY_HOST`, :data:`BY_TOKENS`; 0: it is
    not); a cumulative estimate is an earlier turn's, said by that turn."""
    if not getattr(tokens, "price_estimated", False):
        return 0
    why = BY_HOST if (tokens.price_source or "").startswith("estimated:") else 0
    return why | (BY_TOKENS if tokens.source == "estimated" else 0)


def estimated_note(why: int) -> str:
    """What ``~`` means here, saying which of the two it is (both when both are)."""
    parts = []
    if why & BY_HOST:
        parts.append("the host is not a provider looptap knows, so the model's list price")
    if why & BY_TOKENS:
        parts.append("the API reported no usage, so looptap estimated the tokens")
    return "~: estimated cost" + (f": {'; '.join(parts)}" if parts else "")


#: Below this many dollars a cost is written to two significant digits instead of four decimals.
_SMALL = Decimal("0.001")
#: The most decimals written (a cost under a hundred-millionth of a dollar reads ``$0.00000000``).
_MOST = 8


def money(value: Decimal | float | None, estimated: bool = False) -> str:
    """``$0.0036``, ``~$0.000012`` (estimated), ``unknown`` (``None``)."""
    if value is None:
        return "unknown"
    v = value if isinstance(value, Decimal) else Decimal(repr(value))
    mark = "~" if estimated else ""
    sign = "-" if v < 0 else ""
    v = abs(v)
    if v == 0 or v >= _SMALL:
        return f"{mark}{sign}${v:,.4f}"
    # Two significant digits: 0.0000123 → 0.000012 (the exponent of its first digit, plus one).
    places = min(_MOST, -v.adjusted() + 1)
    return f"{mark}{sign}${v:.{places}f}"
