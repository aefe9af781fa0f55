"""The verdict: per intervention, how often it flipped the outcome, with a Wilson interval,
ranked; a headline naming the layer and turn whose change flips it most reliably, naming every
one when several flipped it every time (each is enough: no K tells them apart), or saying
plainly that K samples cannot tell (docs/why.md "Reading the verdict").

A *flip* is a branch that does not fail by the outcome, where the recording did. A branch the
fork could not run (the client diverged before the cursor, the recorder failed) or whose outcome
cannot be told is not a sample: it is counted apart and said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cassettes.hints import count
from cassettes.why.interventions import Intervention
from cassettes.why.stats import wilson

__all__ = ["Tally", "Verdict", "verdict"]


@dataclass
class Tally:
    intervention: Intervention
    flips: int = 0
    samples: int = 0
    #: Branches that are no sample (not run, or their outcome unknown).
    invalid: int = 0
    #: The branch files, with what each showed (``flipped``, ``failed``, ``invalid: …``).
    branches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.flips, self.samples)

    @property
    def rate(self) -> float | None:
        return self.flips / self.samples if self.samples else None

    def as_json(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            **self.intervention.as_json(),
            "flips": self.flips,
            "samples": self.samples,
            "invalid": self.invalid,
            "rate": self.rate,
            "low": round(low, 4),
            "high": round(high, 4),
            "branches": self.branches,
        }

    def line(self) -> str:
        i = self.intervention
        low, high = self.interval
        head = f"{i.layer} {i.conversation} turn {i.turn}: {i.what}"
        if i.missing is not None:
            return f"{head}: not run: {i.missing}"
        if not self.samples:
            invalid = count(self.invalid, "branch", "branches")
            return f"{head}: no sample could be judged ({invalid} invalid)"
        extra = (
            f"; {count(self.invalid, 'invalid branch', 'invalid branches')} left out"
            if self.invalid
            else ""
        )
        return f"{head}: flipped {self.flips}/{self.samples} (95% CI {low:.2f}–{high:.2f}){extra}"


@dataclass
class Verdict:
    determined: bool
    headline: str
    best: Tally | None
    #: Interventions whose interval overlaps the best's and that flipped the outcome too.
    tied: list[Tally]
    ranked: list[Tally]
    samples: int
    #: The best and every tied one flipped the outcome in every sample: each is enough on its own.
    either: bool = False

    def as_json(self) -> dict[str, Any]:
        b = self.best
        low, high = b.interval if b is not None else (0.0, 1.0)
        head: dict[str, Any] = {
            "determined": self.determined,
            "headline": self.headline,
            "layer": b.intervention.layer if b else None,
            "conversation": b.intervention.conversation if b else None,
            "turn": b.intervention.turn if b else None,
            "intervention": b.intervention.key if b else None,
            "flips": b.flips if b else 0,
            "samples": b.samples if b else 0,
            "low": round(low, 4),
            "high": round(high, 4),
            "tied": [t.intervention.key for t in self.tied],
            "either": self.either,
        }
        return {"verdict": head, "interventions": [t.as_json() for t in self.ranked]}


def verdict(tallies: list[Tally], samples: int) -> Verdict:
    """Rank by the interval's low end, then the rate; the best determines the outcome when it
    flipped it and no other intervention that flipped it has an interval reaching the best's low
    end. ``samples``: the K asked for (what "try K=…" quadruples)."""
    ran = [t for t in tallies if t.intervention.missing is None and t.samples]
    ranked = sorted(ran, key=lambda t: (-t.interval[0], -(t.rate or 0.0), t.intervention.key))
    ranked += [t for t in tallies if t not in ranked]
    more = f"try K={samples * 4} (--samples {samples * 4})"
    if not ran:
        return Verdict(
            False,
            "no intervention could be run or judged: see each below",
            None,
            [],
            ranked,
            samples,
        )
    best = ranked[0]
    if best.flips == 0:
        return Verdict(
            False,
            f"nothing flipped the outcome in {count(best.samples, 'sample')} of any intervention: "
            "not "
            f"determined with K={samples}; {more}, or the cause is not among these suspects",
            None,
            [],
            ranked,
            samples,
        )
    low = best.interval[0]
    tied = [t for t in ranked[1:len(ran)] if t.flips and t.interval[1] >= low]
    i = best.intervention
    said = (
        f"{i.layer} at {i.conversation} turn {i.turn} ({i.what}): flipped "
        f"{best.flips}/{best.samples} (95% CI {low:.2f}–{best.interval[1]:.2f})"
    )
    if tied and best.flips == best.samples and all(t.flips == t.samples for t in tied):
        # every one flipped it every time: more samples cannot separate two sufficient changes
        return _either(best, tied, ranked, samples)
    if tied:
        others = "; ".join(
            f"{t.intervention.layer} at {t.intervention.conversation} turn {t.intervention.turn} "
            f"({t.intervention.what}) {t.flips}/{t.samples}"
            for t in tied
        )
        return Verdict(
            False,
            f"not determined with K={samples}: {said}, and its interval overlaps {others}; {more}",
            best,
            tied,
            ranked,
            samples,
        )
    rest = (
        " no other intervention flipped it"
        if all(t.flips == 0 for t in ranked[1 : len(ran)])
        else " the others flipped it clearly less often"
    )
    return Verdict(True, f"{_layer_name(i.layer)}: {said};{rest}", best, [], ranked, samples)


def _either(best: Tally, tied: list[Tally], ranked: list[Tally], samples: int) -> Verdict:
    """The verdict when ``best`` and every one ``tied`` with it flipped the outcome every time:
    each is enough on its own, and more samples cannot tell them apart."""
    i, low = best.intervention, best.interval[0]
    both = " and ".join(
        [
            f"{i.layer} ({i.what}) {best.flips}/{best.samples} (95% CI "
            f"{low:.2f}–{best.interval[1]:.2f})"
        ]
        + [
            f"{t.intervention.layer} ({t.intervention.what}) {t.flips}/{t.samples} (95% CI "
            f"{t.interval[0]:.2f}–{t.interval[1]:.2f})"
            for t in tied
        ]
    )
    where = {(t.intervention.conversation, t.intervention.turn) for t in [best, *tied]}
    at = f" at {i.conversation} turn {i.turn}" if len(where) == 1 else ""
    return Verdict(
        True,
        f"either change flips it{at}: {both}; each is enough on its own (more samples cannot tell "
        "two sufficient fixes apart)",
        best,
        tied,
        ranked,
        samples,
        either=True,
    )


def _layer_name(layer: str) -> str:
    return {"E": "the model (E)", "A": "the API (A)", "C": "the client (C)"}[layer]
