"""The intervals a flip rate is read by, and what K samples would show (docs/why.md "Reading the
verdict"). Plain arithmetic on counts (``(successes, trials)``): what a verdict makes of them is
:mod:`cassettes.why._verdict`'s.

The interval of one rate is the Wilson score interval with a continuity correction (Newcombe 1998,
method 4): unlike the plain Wilson interval, whose coverage at small K drops under the nominal 95%
for a rate near 0 or 1 (about 92% at K=5 and a rate of 0.1), it holds the true rate at least about
95% of the time at every K ``why`` uses (tests/why/test_why_core.py simulates it), at the price of
a wider interval (:func:`wilson`).

The interval of the *difference* of two rates is Newcombe's hybrid score interval (1998, method
10), built from the Wilson score intervals of the two rates (:func:`difference`): a change is shown
to flip the outcome more often than the run succeeds without it when that interval lies wholly
above 0. The recorded run is such a rate too: it failed, 0 successes in 1 run (:data:`RECORDED`).

How many samples would tell two rates apart, if they were the rates seen: :func:`needed` (their
intervals no longer overlap) and :func:`shown_at` (the difference's interval above 0), each up to
:data:`MOST`. Two rates that are the same never separate, at any K (issue 68: ≤ 0.4% of simulated
investigations became determined at K = 10 … 160).
"""

from __future__ import annotations

import math

__all__ = ["MOST", "RECORDED", "Z95", "difference", "needed", "score", "shown_at", "wilson"]

#: The standard normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054

#: The recorded run as a sample of the run without any change: it failed, once.
RECORDED = (0, 1)

#: The most samples per intervention ``why`` advises (beyond it, say they cannot be told apart).
MOST = 200


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


def score(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The plain Wilson score interval (low, high) of ``successes`` in ``n`` trials: the parts
    Newcombe's interval of a difference is built from (:func:`difference`)."""
    if n <= 0:
        return 0.0, 1.0
    p, z2 = successes / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def difference(a: tuple[int, int], b: tuple[int, int], z: float = Z95) -> tuple[float, float]:
    """The 95% interval of rate ``a`` minus rate ``b`` (each ``(successes, trials)``): Newcombe's
    hybrid score interval (1998, method 10), from the Wilson score intervals of each rate. It
    holds 0 when the samples cannot show the two rates differ (1 of 5 against 0 of 5:
    −0.26–0.57; 4 of 5 against 0 of 5: 0.19–0.96)."""
    (x, n), (y, m) = a, b
    if n <= 0 or m <= 0:
        return -1.0, 1.0
    p, q = x / n, y / m
    (l1, u1), (l2, u2) = score(x, n, z), score(y, m, z)
    d = p - q
    return d - math.sqrt((p - l1) ** 2 + (u2 - q) ** 2), d + math.sqrt(
        (u1 - p) ** 2 + (q - l2) ** 2
    )


def needed(a: tuple[int, int], b: tuple[int, int], most: int = MOST) -> int | None:
    """The fewest samples each at which the intervals of ``a`` and ``b`` (each ``(successes,
    trials)``) would no longer overlap, if those were the rates; ``None`` when no K up to ``most``
    would (no trials, the same rate, or rates too close)."""
    if not a[1] or not b[1] or a[0] / a[1] == b[0] / b[1]:
        return None
    hi, lo = max(a[0] / a[1], b[0] / b[1]), min(a[0] / a[1], b[0] / b[1])
    for k in range(max(a[1], b[1]) + 1, most + 1):
        if wilson(round(hi * k), k)[0] > wilson(round(lo * k), k)[1]:
            return k
    return None


def shown_at(best: tuple[int, int], rival: tuple[int, int] | None, most: int = MOST) -> int | None:
    """The fewest samples each at which, at the rates seen, the interval of the difference between
    ``best`` and ``rival`` (``None``: the recorded run, which stays one run) would lie above 0;
    ``None`` when no K up to ``most`` would (or ``best`` has no trials)."""
    if not best[1]:
        return None
    rate = rival[0] / rival[1] if rival and rival[1] else 0.0
    for k in range(max(best[1], rival[1] if rival else 0) + 1, most + 1):
        other = RECORDED if rival is None else (round(rate * k), k)
        if difference((round(best[0] / best[1] * k), k), other)[0] > 0:
            return k
    return None
