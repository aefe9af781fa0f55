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

__all__ = ["ESTIMATED_NOTE", "money"]

#: What ``~`` means, for the line under a table or a pane that shows one.
ESTIMATED_NOTE = (
    "~: estimated cost, the list price of the model; the host is not a provider looptap knows, "
    "or the API reported no usage and looptap estimated the tokens"
)

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
