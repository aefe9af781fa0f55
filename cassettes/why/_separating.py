"""Whether more samples can tell two interventions apart, by the interval arithmetic of
:mod:`cassettes.why._stats`, and what to say when they cannot (docs/why.md "Reading the verdict").

Two interventions whose 95% intervals overlap are not told apart; "try K=…" is advice only when,
at the flip rates seen, K samples each would give intervals that no longer overlap. Two that flip
the outcome at the same rate never separate, at any K: saying "try K=40" then is advice that
cannot converge (issue 68: ≤ 0.4% of simulated investigations became determined at K = 10 … 160).
"""

from __future__ import annotations

from ..hints import count
from ._stats import wilson
from ._tally import Tally

__all__ = ["MOST", "advice", "needed", "why_alike"]

#: The most samples per intervention ``why`` advises (beyond it, say they cannot be told apart).
MOST = 200


def needed(a: Tally, b: Tally, most: int = MOST) -> int | None:
    """The fewest samples each at which ``a``'s and ``b``'s intervals would no longer overlap, if
    they flipped the outcome at the rates seen; ``None`` when no K up to ``most`` would (the same
    rate, or rates too close)."""
    ra, rb = a.rate, b.rate
    if ra is None or rb is None or ra == rb:
        return None
    hi, lo = max(ra, rb), min(ra, rb)
    for k in range(max(a.samples, b.samples) + 1, most + 1):
        if wilson(round(hi * k), k)[0] > wilson(round(lo * k), k)[1]:
            return k
    return None


def advice(best: Tally, tied: list[Tally]) -> str:
    """What more samples can do for ``best`` and the interventions ``tied`` with it: the K that
    separates them all, or which cannot be separated and why."""
    ks = [needed(best, t) for t in tied]
    if all(k is not None for k in ks):
        k = max(k for k in ks if k is not None)
        return (
            f"try K={k} (--samples {k}): at the rates seen, "
            f"{count(k, 'sample')} each would separate them"
        )
    alike = [t for t, k in zip(tied, ks, strict=True) if k is None]
    rates = ", ".join(f"{t.flips}/{t.samples}" for t in [best, *alike])
    return (
        f"more samples would not separate them: at the rates seen ({rates}) their intervals "
        f"overlap at any K up to {MOST}"
    )


def why_alike(best: Tally, tied: list[Tally]) -> str:
    """Why E re-samples flip the outcome alike, and what more samples can do: re-samples of one
    conversation whose later turns are not held are nested (each re-samples every later turn
    too), so no K tells their turns apart; held ones are told apart by the arithmetic of
    :func:`advice`."""
    mine = [
        t for t in [best, *tied] if t.intervention.conversation == best.intervention.conversation
    ]
    last = max(t.intervention.turn for t in mine)
    if len(mine) < 2 or all(t.intervention.hold for t in mine if t.intervention.turn < last):
        said = (
            "the re-sampled earlier turn answered differently, which takes the later turns live "
            "(re-sampled) too; "
            if len(mine) > 1
            else ""
        )
        return said + advice(best, tied)
    return (
        "a re-sample from a turn re-samples every later turn of its conversation too (with this "
        "outcome the later turns are not held), so more samples cannot tell which turn: the "
        "earliest turn from which re-sampling flips it is "
        f"{best.intervention.conversation} turn {min(t.intervention.turn for t in mine)}"
    )
