"""The Wilson score interval of a flip rate: how sure K branches make us (docs/why.md)."""

from __future__ import annotations

import math

__all__ = ["Z95", "wilson"]

#: The standard normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval (low, high) of ``successes`` in ``n`` trials. Unlike the normal
    approximation it stays inside [0, 1] and is not empty at 0 or ``n`` successes (0 of 5 is
    (0, 0.43), not (0, 0)), which is what small K gives; ``n == 0`` says nothing: (0, 1)."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes in {n} trials")
    p = successes / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    denom = 1 + z2 / n
    return max(0.0, (centre - spread) / denom), min(1.0, (centre + spread) / denom)
