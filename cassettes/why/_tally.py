"""What one intervention's branches showed: how many flipped the outcome, how many failed as the
recording did, how many are no sample (the fork could not run, the outcome cannot be told), and
the interval of its flip rate (:mod:`cassettes.why._interval`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..hints import count
from ._interval import wilson
from ._intervention import Intervention

__all__ = ["Tally"]


@dataclass
class Tally:
    intervention: Intervention
    flips: int = 0
    samples: int = 0
    #: Branches that are no sample (not run, or their outcome unknown).
    invalid: int = 0
    #: The branch files, with what each showed (``flipped``, ``failed``, ``invalid: …``).
    branches: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, intervention: Intervention, results: Iterable[dict[str, Any] | None]) -> Tally:
        """The tally of ``intervention``'s branch results (each ``flipped``, ``failed``, or no
        sample; ``None``: a branch not run yet, left out)."""
        t = cls(intervention)
        for r in results:
            if r is None:
                continue
            t.branches.append(r)
            if _no_sample(r):
                t.invalid += 1
            else:
                t.samples += 1
                t.flips += r["result"] == "flipped"
        return t

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.flips, self.samples)

    @property
    def rate(self) -> float | None:
        return self.flips / self.samples if self.samples else None

    @property
    def counts(self) -> tuple[int, int]:
        """``(flips, samples)``: the rate as :mod:`cassettes.why._interval` reads it."""
        return self.flips, self.samples

    @property
    def ci(self) -> str:
        low, high = self.interval
        return f"95% CI {low:.2f}–{high:.2f}"

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
            # the requests its branches sent live (against live_requests_per_sample × branches)
            "sent": sum(int(b.get("sent") or 0) for b in self.branches),
            "branches": self.branches,
        }

    @property
    def left_out(self) -> str:
        """The branches that are no sample, and why (the first reason, and how many share it)."""
        if not self.invalid:
            return ""
        whys = [str(b.get("why") or "no reason given") for b in self.branches if _no_sample(b)]
        first = whys[0] if whys else "no reason given"
        same = sum(w == first for w in whys)
        also = f" ({same} of them)" if 1 < same < self.invalid else ""
        of = self.invalid + self.samples
        verb = "is" if self.invalid == 1 else "are"
        branches = count(of, "branch", "branches")
        return f"{self.invalid} of {branches} {verb} no sample: {first}{also}"

    def line(self) -> str:
        i = self.intervention
        head = f"{i.layer} {i.conversation} turn {i.turn}: {i.what}"
        if i.missing is not None:
            said = f" (the API said: {i.evidence!r})" if i.evidence else ""
            return f"{head}: not run: {i.missing}{said}"
        if not self.samples:
            return f"{head}: no sample: {self.left_out}"
        extra = f"; {self.left_out}" if self.invalid else ""
        caveat = f"; but {i.caveat}" if i.caveat else ""
        return f"{head}: flipped {self.flips}/{self.samples} ({self.ci}){extra}{caveat}"


def _no_sample(branch: dict[str, Any]) -> bool:
    return branch.get("result") not in ("flipped", "failed")
