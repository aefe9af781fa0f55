"""The 95% interval of a flip rate: how sure K branches make us (docs/why.md).

The Wilson score interval with a continuity correction (Newcombe 1998, method 4): unlike the plain
Wilson interval, whose coverage at small K drops under the nominal 95% for a rate near 0 or 1
(about 92% at K=5 and a rate of 0.1), it holds the true rate at least about 95% of the time at
every K ``why`` uses (tests/why/test_why_core.py simulates it), at the price of a wider interval.
"""

from __future__ import annotations

import math

__all__ = ["wilson"]

#: The standard normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The continuity-corrected Wilson score interval (low, high) of ``successes`` in ``n``
    trials. It stays inside [0, 1] and is not empty at 0 or ``n`` successes (0 of 5 is
    (0, 0.54), not (0, 0)), which is what small K gives; ``n == 0`` says nothing: (0, 1)."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes in {n} trials")
    p = successes / n
    z2 = z * z
    denom = 2 * (n + z2)
    low = (
        0.0
        if successes == 0
        else (2 * n * p + z2 - 1 - z * math.sqrt(z2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1)))
        / denom
    )
    high = (
        1.0
        if successes == n
        else (2 * n * p + z2 + 1 + z * math.sqrt(z2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1)))
        / denom
    )
    return max(0.0, low), min(1.0, high)
