"""A confirm kept to its estimate (``looptap why DIR --confirm``; docs/why.md "Confirming a
fix"): once the first run of the fixed agent ended, what all K runs are expected to send is said
(:mod:`cassettes.why._expected`), and the runs never send more than ``floor(1.1 × estimate)`` in
all (``--max-requests`` when lower): each is a fork started with its share of a
:class:`~cassettes.why._budget.Purse` as its own ``--max-requests``
(:mod:`cassettes.replay.forking.limit`: past it nothing is sent, and a run stopped there is not
judged). Runs are added while they sent under 90% of it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..hints import count
from ._branches import Branches
from ._budget import Purse
from ._expected import Expected
from ._expected import expected as estimate
from ._intervention import Intervention
from ._investigation import say

__all__ = ["Kept", "run_all"]


@dataclass
class Kept:
    """The runs of a confirm, and how they were kept to its estimate (:func:`run_all`)."""

    results: list[dict[str, Any]]
    estimate: Expected
    #: The most all runs may send (``floor(1.1 × estimate)``, or ``--max-requests`` when lower;
    #: ``None``: one run, no estimate to keep to).
    limit: int | None = None
    #: Runs planned and not started (the limit reached, a run stopped there), and runs added
    #: (the runs sent under 90% of the estimate).
    not_started: int = 0
    added: int = 0

    @property
    def stopped(self) -> int:
        return sum(1 for r in self.results if r.get("stopped"))

    @property
    def sent(self) -> int:
        """What the runs made sent live, in all."""
        return sum(int(r.get("sent") or 0) for r in self.results)

    def lines(self) -> list[str]:
        """The report's line on how the runs were kept (:func:`_kept_lines`)."""
        return _kept_lines(self, self.sent)


#: How far the runs of a confirm may go past their estimate, and how far under it they add runs.
_OVER, _UNDER = 1.1, 0.9


def run_all(
    runner: Branches,
    fork: Intervention,
    verdict: dict[str, Any],
    samples: int,
    jobs: int,
    limit: int | None,
    shown: Callable[[Branches, dict[str, Any]], str],
) -> Kept:
    """The K runs of the fixed agent, kept to their estimate. The first runs alone: where a fixed
    agent first differs from the recording (at the verdict's turn, or before it: the
    ``…:diverge`` cursor goes live there) is known only once it ran; it may send what
    ``--max-requests`` allows, else what the budget said all K runs may send at most. Then the
    estimate for all K (:mod:`cassettes.why._expected`) is said, and the others are kept to
    ``floor(1.1 × estimate)`` in all (``--max-requests`` when lower), each started as a fork
    that sends nothing past its share (:class:`Purse`):

    - with ``--jobs`` above 1, ``--jobs`` at a time, each given what is left less the least each
      run still to start sends (its shape): none can take another's least, so a fixed agent that
      sends what its first run sent (every deterministic one) runs as before, never stopped;
    - once a run is stopped at its share (it asked again past what was left for it), or with
      ``--jobs 1``, the rest run one at a time, each given all that is left: a run stopped there
      reached the limit, and no later run is started (said).

    When the runs sent under 90% of the estimate, runs are added one at a time (at most K), each
    given all that is left, while the total is under it: more samples for what the user was
    told."""
    from concurrent.futures import ThreadPoolExecutor

    halted = threading.Event()

    def one(k: int, reserve: int) -> dict[str, Any] | None:
        if halted.is_set():
            runner.purse.drop(reserve)  # planned, not started (run one at a time, or not at all)
            return None
        result = runner.one(fork, k, reserve)
        result["sample"] = k
        if result.get("stopped"):
            halted.set()
        result["after"] = shown(runner, result)
        say(f"confirm sample {k}/{samples}: {result['result']}" + _why_not(result))
        return result

    cap = limit if limit is not None else fork.most_requests * samples
    say(
        f"confirm: at most {count(cap, 'request')} sent live in all ("
        + (
            f"--max-requests {limit}"
            if limit is not None
            else f"every turn the fork may reach, live, in each of {count(samples, 'run')}"
        )
        + "): the runs are kept to it; one that would pass it is stopped there and not judged"
        + (
            "; past the refused request the recording holds nothing (its answer, the turns it "
            "leads to): what a run sends there is measured by the first, and the at-most for "
            "the others said before they start"
            if fork.past_end and limit is None
            else ""
        )
    )
    try:
        runner.purse = Purse(cap)
        first = one(1, 0)
        assert first is not None
        exp = estimate(fork, verdict, first, runner.directory, samples)
        if samples < 2:
            return Kept([first], exp)
        if first.get("stopped"):
            say(
                f"confirm: the first run was stopped at its limit ({_first_limit(limit)}): the "
                f"other {count(samples - 1, 'run')} not run"
                + ("" if limit is not None else " (--max-requests N lets each run go further)")
            )
            return Kept([first], exp, first.get("limit"), samples - 1)
        if limit is None and fork.past_end:
            cap = _past_the_recording(fork, first, samples, cap)
            exp.most = max(exp.most, cap)
        keep = _said_estimate(fork, exp, first, samples, cap, limit is not None)
        sent = int(first.get("sent") or 0)
        runner.purse = Purse(keep, spent=sent)
        reserve, rest = exp.shape, samples - 1
        fits = max(0, min(rest, (keep - sent) // reserve)) if reserve else rest
        if fits < rest:
            say(
                f"confirm: {count(rest - fits, 'run')} of the other {rest} would pass {keep}: not "
                "run"
            )
        kept = Kept([first], exp, keep, rest - fits)
        pending = list(range(2, fits + 2))
        if jobs > 1 and pending:
            runner.purse.plan([reserve] * len(pending))
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                ran = list(pool.map(lambda k: one(k, reserve), pending))
            kept.results += [r for r in ran if r is not None]
            pending = [k for k, r in zip(pending, ran, strict=True) if r is None]
            if pending:
                say(
                    "confirm: a run was stopped at its share of the limit: the other "
                    f"{count(len(pending), 'run')} one at a time, each given all that is left"
                )
            halted.clear()
        for n, k in enumerate(pending):
            ran_before = len(kept.results)
            if not _one_more(kept, one, k):
                kept.not_started += len(pending) - n - (len(kept.results) - ran_before)
                if kept.stopped:
                    say(
                        f"confirm: a run was stopped at the limit ({keep}): "
                        f"{count(kept.not_started, 'later run')} not started"
                    )
                break
        else:
            _add(kept, one, samples)
        kept.results.sort(key=lambda r: int(r.get("sample") or 0))
        return kept
    except KeyboardInterrupt:
        runner.interrupt()
        raise


def _past_the_recording(fork: Intervention, first: dict[str, Any], samples: int, cap: int) -> int:
    """The at-most of all the runs once the first ended, for a fork past the recording's end (a
    refused request that ended its conversation: :attr:`Intervention.past_end`, said before the
    first run): where the fixed agent sent more than every turn the recording shows the fork may
    reach (the refused request answered now, and the turns it leads to), each other run may send
    what the first sent; said before they start. ``cap`` otherwise."""
    sent = int(first.get("sent") or 0)
    if sent <= fork.most_requests:
        return cap
    most = sent * samples
    if most <= cap:
        return cap
    say(
        f"confirm: the first run sent {count(sent, 'request')} live, more than the "
        f"{fork.most_requests} a run may reach in the recording (the fixed agent went on past "
        f"it: its later turns are not in the recording); the at-most for {count(samples, 'run')} "
        f"is now {most}, {sent} a run as the first sent"
    )
    return most


def _said_estimate(
    fork: Intervention, exp: Expected, first: dict[str, Any], samples: int, cap: int, given: bool
) -> int:
    """The estimate said on stderr once the first run ended, and the most all runs may send:
    110% of it, never more than the at-most said before the first run (``cap``: ``given``, from
    ``--max-requests``)."""
    most = math.floor(_OVER * exp.total)
    keep = min(most, cap)
    sent, rest = int(first.get("sent") or 0), samples - 1
    if sent != fork.expected(1):
        others = f"the other {count(rest, 'run')} " + ("is" if rest == 1 else "are")
        say(
            f"confirm: the first run sent {count(sent, 'request')} live, the budget expected "
            f"{fork.expected(1)} (the fixed agent went live from where it first differs from "
            f"the recording): {others} expected to send {round(exp.total - sent, 1):g}"
        )
    say(
        f"confirm: the estimate for {count(samples, 'run')}, in live requests: "
        f"{round(exp.total, 1):g} ({exp.said(samples)}); the runs are kept to {keep} in all ("
        + (
            "at most 110% of it"
            if keep == most
            else f"--max-requests {cap}"
            if given
            else f"the at-most said for all the runs, {cap}"
        )
        + "): a run that would pass it is stopped there and not judged"
    )
    return keep


def _one_more(kept: Kept, one: Any, k: int) -> bool:
    """Run ``k`` given all that is left (one at a time); ``False`` when it was not started (what
    is left is under a run's least) or was stopped at the limit (nothing left then)."""
    assert kept.limit is not None
    left = kept.limit - kept.sent
    if left < max(1, kept.estimate.shape):
        return False
    result = one(k, 0)
    assert result is not None
    kept.results.append(result)
    return not result.get("stopped")


def _add(kept: Kept, one: Any, samples: int) -> None:
    """Runs added, one at a time (at most ``samples``), while the runs sent under 90% of the
    estimate and what is left holds a run's least (:attr:`Expected.shape`); each said."""
    floor = _UNDER * kept.estimate.total
    while kept.added < samples and kept.limit is not None:
        sent = kept.sent
        left, k = kept.limit - sent, len(kept.results) + kept.not_started + 1
        if sent >= floor or left < max(1, kept.estimate.shape):
            return
        say(
            f"confirm: the runs sent {sent}, under 90% of the estimate "
            f"({kept.estimate.total:.1f}): run {k} added, given the "
            f"{count(left, 'request')} left of {kept.limit}"
        )
        ran_before = len(kept.results)
        going = _one_more(kept, one, k)
        if len(kept.results) > ran_before:
            kept.added += 1
            kept.results[-1]["added"] = True
        if not going:
            return


def _first_limit(limit: int | None) -> str:
    if limit is not None:
        return f"--max-requests {limit}"
    return "what the budget said all the runs may send at most"


def _kept_lines(kept: Kept, sent: int) -> list[str]:
    """How the runs were kept to their estimate (a confirm of more than one run): sent against
    it, the limit, and the runs stopped, not started and added."""
    if kept.limit is None or not kept.estimate.total:
        return []
    ratio = sent / kept.estimate.total
    said = [
        f"kept to the estimate: {sent} sent for {kept.estimate.total:.1f} estimated "
        f"({ratio:.0%}), at most {kept.limit} in all"
    ]
    if kept.stopped:
        said.append(f"{count(kept.stopped, 'run')} stopped at the limit (not judged)")
    if kept.not_started:
        said.append(f"{count(kept.not_started, 'run')} not started (the limit reached)")
    if kept.added:
        said.append(f"{count(kept.added, 'run')} added (the runs sent under 90% of it)")
    return ["; ".join(said)]


def _why_not(result: dict[str, Any]) -> str:
    return f": {result['why']}" if result.get("why") else ""
