"""What an investigation sends and costs, checked before anything is sent: compare's budget guard
(:func:`cassettes.replay.forking.compare.check_budget`), on the recorded turns each branch re-runs
live.

A branch re-runs live the recorded turns the fork puts live
(:func:`cassettes.why._suspects.live_turns`: the turn, its conversation's later ones unless held,
and for a repair the conversations its answer goes to; the agent may make more or fewer: the
estimate is the recorded continuation's), and the requests an intervention may add (a cut
answer's continuations: each counted, priced as the turn it continues). The limits
(``--max-requests``, ``--max-cost``) are kept against what it may send at most: held turns and
every linked conversation live too.
Each turn is priced by the model the branch actually uses (``--model``, else the one the turn
recorded), at that model's own price on the recorded usage, as ``looptap compare`` prices a
candidate. A resumed investigation counts only the branches left to run.

At run time, :class:`Purse` keeps the branches to a total: ``--max-requests`` (every branch started
with ``looptap run --from … --max-requests`` of its share: past it, the fork sends nothing), and a
confirm's limit (:mod:`cassettes.why._confirm`).
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from ..hints import count
from ..replay.forking.compare.budget import BudgetError, check_budget, estimate_costs, plan_requests
from ..replay.forking.cursor import live_router
from ._intervention import Intervention
from ._suspects import _SAID_AGAIN, _SAID_AGAIN_THINKING

__all__ = ["Purse", "check"]


@dataclasses.dataclass
class Purse:
    """What the branches may still send live in all (``total``; ``None``: no limit), shared by
    the runs in flight. A run starting is given what is left, less what the runs in flight hold
    and the least each run still to start needs (its reserve: what :meth:`plan` was told); what
    it did not send comes back when it ends (:meth:`close`). So the total is never passed, and a
    run is never given less than its reserve while the reserves fit (the budget check made them
    fit ``--max-requests``: each branch's at-most), whatever ``--jobs``."""

    total: int | None = None
    #: Sent by the runs that ended.
    spent: int = 0
    #: Given to the runs in flight.
    held: int = 0
    #: The reserves of the runs not started yet.
    reserved: int = 0
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def plan(self, reserves: Iterable[int]) -> None:
        """Runs to come, each with the least it needs."""
        with self._lock:
            self.reserved += sum(reserves)

    def drop(self, reserve: int) -> None:
        """A run planned with ``reserve`` will not start."""
        with self._lock:
            self.reserved = max(0, self.reserved - reserve)

    def open(self, reserve: int) -> int | None:
        """A run (planned with ``reserve``) starts: what it may send (``None``: no limit)."""
        with self._lock:
            self.reserved = max(0, self.reserved - reserve)
            if self.total is None:
                return None
            given = max(0, self.total - self.spent - self.held - self.reserved)
            self.held += given
            return given

    def close(self, given: int | None, sent: int) -> None:
        """A run given ``given`` (:meth:`open`) ended, having sent ``sent``."""
        with self._lock:
            if given is not None:
                self.held -= given
            self.spent += sent

    def left(self) -> int | None:
        """What no run holds nor has spent (``None``: no limit)."""
        with self._lock:
            return None if self.total is None else self.total - self.spent - self.held


def planned_for(
    by_seq: dict[int, Any], router: Any, i: Intervention, seqs: list[int], extra: int
) -> list[Any]:
    """One :class:`~cassettes.replay.forking.compare.Planned` per live request of one sample of
    ``i``: the recorded turns ``seqs`` (``by_seq``: :func:`plan_requests`'s), and ``extra``
    continuations of a cut answer, each priced as its turn; priced for the model ``i`` uses."""
    mine = [dataclasses.replace(by_seq[s], said=set()) for s in seqs if s in by_seq]
    start = by_seq.get(i.seqs[0]) if i.seqs else None
    if start is not None:
        mine += [dataclasses.replace(start, said=set()) for _ in range(extra)]
    estimate_costs(mine, router, i.model)
    return mine


#: check_budget's first words: "1 request (…)", "2 requests (…)", "1,000 requests (…)".
_COUNTED = re.compile(r"^[\d,]+ requests? \([^)]*\)")


def resumed_head(line: str, said: str) -> str:
    """check_budget's first line with its count of requests replaced by ``said`` (what a resumed
    investigation has left to send)."""
    return _COUNTED.sub(lambda _: said, line, count=1)


def check(
    run: Any,
    chosen: list[Intervention],
    samples: int,
    bases: dict[str, str],
    max_requests: int | None,
    max_cost: Decimal | None,
    allow_unknown: bool = False,
    kept: dict[str, int] | None = None,
) -> list[str]:
    """The budget lines; raises :class:`~cassettes.replay.forking.compare.BudgetError` when over a
    limit. ``kept``: per intervention (its key), the branches an earlier run of this
    investigation finished (``--resume``): only what is left is counted, and said so."""

    models = sorted({i.model for i in chosen if i.model})
    who = "the recorded model" + (f" and {', '.join(models)}" if models else "")
    done = {i.key: min(samples, (kept or {}).get(i.key, 0)) for i in chosen}
    branches = sum(samples - d for d in done.values())
    by_seq = {p.seq: p for p in plan_requests(run)}  # the run's turns, parsed once
    router = live_router(bases)
    # an E re-sample whose answer another conversation hears: as many samples counted changing it
    # (that conversation live too) as its chance of coming back word for word leaves; the others
    # said again (that conversation served)
    most, expected, low, high = [], [], 0, 0
    for i in chosen:
        left = samples - done[i.key]
        changed = i.changed(left)
        reach = sorted(set(i.seqs) | set(i.reach))
        most += planned_for(by_seq, router, i, reach, i.extra) * left
        expected += planned_for(by_seq, router, i, i.seqs, i.expected_extra) * changed
        again = planned_for(by_seq, router, i, i.recorded or i.seqs, i.expected_extra)
        expected += again * (left - changed)
        low, high = low + i.recorded_requests * left, high + i.live_requests * left

    def head(lines: list[str], n: int, at_most: bool) -> list[str]:
        """``lines`` (check_budget's on every request, once) headed by what they count."""
        said = f"at most {count(n, 'request')}" if at_most else count(n, "request")
        if any(done.values()):
            of = count(len(chosen) * samples, "branch", "branches")
            said += (
                f" left to send ({branches} of {of} left to run; {sum(done.values())} kept from "
                "the earlier run)"
            )
        else:
            said += (
                f"{'' if at_most else ' expected'} ({n // max(samples, 1)} a sample of "
                f"{count(len(chosen), 'intervention')} × {count(samples, 'sample')})"
            )
        return [resumed_head(lines[0], said), *lines[1:]]

    # the limits are kept against what the branches may send at most
    try:
        check_budget(most, 1, max_requests, max_cost, allow_unknown, who)
    except BudgetError as exc:
        raise BudgetError(str(exc), head(exc.lines, len(most), True)) from None
    lines = head(check_budget(expected, 1, None, None, True, who), len(expected), False)
    if low < high:
        lines.append(
            f"between {low} and {count(high, 'request')}: {low} if each re-sampled answer that "
            "another conversation hears comes back word for word as recorded (that conversation "
            f"is then served from the recording), {high} if each changes; expected: an answer of "
            f"n tokens said again with chance {_SAID_AGAIN}^n, {_SAID_AGAIN_THINKING}^n where "
            "the model thought first (its request asked it to, or its answer carries reasoning), "
            "as re-sent requests were answered in real recordings"
        )
    if len(most) > max(high, len(expected)):
        lines.append(
            f"at most {count(len(most), 'request')} if re-sampled answers differ from the "
            "recording and each change reaches the conversations linked to it (held turns and "
            "those conversations are served while their requests match); --max-requests and "
            "--max-cost are kept against that"
        )
    return lines
