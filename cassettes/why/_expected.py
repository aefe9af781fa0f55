"""What the runs of a fixed agent are expected to send live (``looptap why DIR --confirm``;
docs/why.md "Confirming a fix"), said once the first run ended and kept to by the others
(:func:`cassettes.why._keep.run_all`).

Before anything runs, the budget counts a run as a repair at the verdict's turn
(:func:`cassettes.why._confirm._fork`). Two things it cannot know until the fixed agent ran:

- **Where the fix shows.** A fixed agent may differ from the recording before the verdict's turn
  (the ``…:diverge`` cursor then sends it live from there) or send fewer than the budget counted
  (a conversation that hears its answer served as recorded). That is the agent's, the same in
  each run: the first run's count, less the requests it asked again, is each run's **shape**.
- **How often it asks again.** A fixed agent that checks the model's answer and asks again when
  it is wrong sends a request more per wrong answer, a count drawn by the model's error rate.
  Where the verdict is the model (E), the investigation measured that rate at the verdict's turn:
  the recorded answer was wrong, and each re-sample that did not flip was wrong too, so
  ``p = (1 + samples - flips) / (1 + samples)``; an agent that asks until an answer is right
  asks ``p / (1 - p)`` times more on average (geometric). A request asked again is one sent
  again word for word in the same run (:func:`asked_again`); an agent whose first run asked
  again is counted so in every other run. At another layer no rate was measured: the first run's
  repeats stand for each run.

So the estimate for K runs is the first run's count and ``(K - 1) × (shape + asked again)``: a
figure of the expectation, not of one draw (with a model wrong 30–40% of the time, what K runs
send spreads over several counts, and no one figure is within 10% of each: docs/why.md). The
confirm keeps its runs to it instead: none passes 110% of it, and runs are added while they sent
under 90% (:mod:`cassettes.why._confirm`). An agent whose first run did not ask again is expected
not to; where its later runs do, they meet that limit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CassetteError
from ..reading import open_run
from ._interval import wilson
from ._intervention import Intervention

__all__ = ["Expected", "asked_again", "expected"]


def asked_again(branch: Path) -> int:
    """The requests of ``branch`` (its live round trips) that repeat an earlier one of it word
    for word (the same body): asked again. 0 when it cannot be read."""
    try:
        run = open_run(branch, whole=True)
        seen: set[bytes] = set()
        again = 0
        for ex in run.exchanges:
            if ex.tool:  # a tool's HTTP call (live or served) is not a request to the model
                continue
            digest = hashlib.sha256(ex.request_body).digest()
            again += digest in seen
            seen.add(digest)
        return again
    except (OSError, CassetteError, ValueError):
        return 0


def error_rate(verdict: dict[str, Any]) -> float | None:
    """The model's error rate at the verdict's turn as the investigation saw it (an E verdict:
    the recorded answer wrong, each re-sample that did not flip wrong); ``None`` at another
    layer, or with no sample."""
    seen = _answers(verdict)
    return None if seen is None else seen[0] / seen[1]


def _answers(verdict: dict[str, Any]) -> tuple[int, int] | None:
    """(wrong, seen): the answers at the verdict's turn the investigation saw
    (:func:`error_rate`)."""
    flips, samples = verdict.get("flips"), verdict.get("samples")
    if verdict.get("layer") != "E" or not isinstance(samples, int) or not isinstance(flips, int):
        return None
    if samples < 1 or not 0 <= flips <= samples:
        return None
    return 1 + samples - flips, 1 + samples


def _more(rate: float) -> float:
    """The requests asked again a run on average, each answer wrong with ``rate`` (geometric)."""
    return rate / (1 - rate) if rate < 1 else float("inf")


@dataclass
class Expected:
    #: What the K runs are expected to send live, in all (the first run's count included).
    total: float
    #: Per run: the requests where the fix shows (the first run's, less its repeats).
    shape: int
    #: Per run after the first: the requests expected to be asked again.
    again: float
    #: The model's error rate at the verdict's turn that drew them (``None``: not measured).
    rate: float | None
    #: The budget's figure before anything ran.
    budget: int
    #: What the runs may send at most (every turn the fork may reach live: what ``--max-requests``
    #: was kept against before anything ran), a request asked again aside.
    most: int = 0
    #: :attr:`total` at the ends of the error rate's 95% interval (the same when nothing is asked
    #: again).
    low: float = 0.0
    high: float = 0.0
    #: What the first run sent.
    first: int = 0

    def said(self, runs: int) -> str:
        """How the figure was made for K = ``runs``, and the most the runs may send, for the
        report's ``sent live`` line."""
        most = (
            f"; at most {self.most} if every turn the fork may reach went live"
            + (", and more for each request asked again" if self.again else "")
            if self.most > self.total
            else ""
        )
        return self._how(runs) + most

    def _how(self, runs: int) -> str:
        if self.rate is not None and self.again:
            return (
                f"estimated {self.total:.1f} once the first run ended: its {self.first}, and "
                f"{self.shape} a run where the fix shows and {self.again:.2f} asked again (the "
                f"fixed agent asks again; the model was wrong at the verdict's turn in "
                f"{self.rate:.0%} of the answers the why saw, so a run asks {self.again:.2f} more "
                f"on average) × {runs - 1}, "
                + (
                    f"between {self.low:.1f} and {self.high:.1f}"
                    if self.high < float("inf")
                    else f"at least {self.low:.1f}"
                )
                + f" at that rate's 95% interval; the budget expected {self.budget}"
            )
        if self.shape * runs == self.budget and not self.again and self.first == self.shape:
            return f"the budget expected {self.budget}"
        return (
            f"estimated {self.total:.0f} once the first run ended: {self.shape + self.again:.0f} "
            f"a run as the first run sent × {runs}; the budget expected {self.budget}"
        )


def expected(
    fork: Intervention,
    verdict: dict[str, Any],
    first: dict[str, Any],
    directory: Path,
    runs: int,
) -> Expected:
    """What ``runs`` runs are expected to send (the module docstring), once the ``first`` (as
    :class:`~cassettes.why._branches.Branches` gave it, its branch in ``directory``) ended."""
    budget, most = fork.expected(runs), fork.most_requests * runs
    rate = error_rate(verdict)
    sent = int(first.get("sent") or 0)
    if not sent:  # nothing live in the first run: the budget's figure for the others
        per = fork.expected(1)
        total = float(per * (runs - 1))
        return Expected(total, per, 0.0, rate, budget, most, total, total, 0)
    again = asked_again(directory / str(first["branch"])) if first.get("branch") else 0
    shape, rest = sent - again, runs - 1
    seen = _answers(verdict)
    if seen is not None and again:
        # the rate and its interval (wilson: the verdict's own), asked until an answer is right
        low, high = wilson(*seen)
        more = _more(seen[0] / seen[1])
        return Expected(
            sent + rest * (shape + more),
            shape,
            more,
            rate,
            budget,
            most,
            sent + rest * (shape + _more(low)),
            sent + rest * (shape + _more(high)),
            sent,
        )
    more = 0.0 if seen is not None else float(again)
    total = sent + rest * (shape + more)
    return Expected(total, shape, more, rate, budget, most, total, total, sent)
