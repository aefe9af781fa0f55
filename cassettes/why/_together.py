"""Causes that act together (issue 68, item 4; docs/why.md "Causes that act together").

When no single intervention flips the outcome, two repairs may be needed at once: the client drops
a result *and* the cap cuts the answer; putting the result back alone leaves the answer cut,
lifting the cap alone leaves it without the result. Then the top repairs (C and A, up to three,
of one conversation, in the order they are listed: C first, then A, each in turn order) are tried
together: every pair of them, one fork at the earliest member's turn with every member's edits;
the three together only when no pair flipped it. A combination that flips the outcome where each
of its members alone did not is reported as **needed together**, claiming no more than the
samples show: how often together, how often each alone.

Only repairs are combined: an E re-sample changes nothing a fork can add to another's (any fork
re-sends its turn live), and a combination needs one cursor, so its members share a conversation.
"""

from __future__ import annotations

from itertools import combinations

from ..hints import count
from ._intervention import Intervention
from ._tally import Tally
from ._verdict import Verdict, unshown

__all__ = ["candidates", "combined", "flips_alone", "rounds", "together_verdict"]

#: The most repairs combined.
_TOP = 3


def candidates(found: list[Intervention]) -> list[Intervention]:
    """The repairs that may be combined: runnable C and A interventions that change the requests
    (an edit) on the recorded model, the first :data:`_TOP` of the conversation with most."""
    repairs = [
        i
        for i in found
        if i.layer in ("C", "A") and i.missing is None and i.edits and i.model is None
    ]
    by_conv: dict[str, list[Intervention]] = {}
    for i in repairs:
        by_conv.setdefault(i.conversation, []).append(i)
    best = max(by_conv.values(), key=len, default=[])
    return best[:_TOP] if len(best) >= 2 else []


def combined(members: tuple[Intervention, ...]) -> Intervention | None:
    """One fork with every member's change, at the earliest member's turn (``None`` when two
    members edit the same item differently: no one request can carry both)."""
    edits: dict[str, str] = {}
    for m in members:
        for e in m.edits:
            target = e.partition("=")[0]
            if edits.get(target, e) != e:
                return None
            edits[target] = e
    first = min(members, key=lambda m: m.turn)
    layer = "+".join(dict.fromkeys(m.layer for m in members))
    return Intervention(
        layer,
        first.conversation,
        first.turn,
        "together: " + " and ".join(f"{m.layer} turn {m.turn} ({m.what})" for m in members),
        "together",
        edits=list(edits.values()),
        seqs=sorted({s for m in members for s in m.seqs}),
        extra=sum(m.extra for m in members),
        cap_lifted=any(m.kind == "a-cap" for m in members),
        tag="+".join(m.key for m in members),
        parts=[m.key for m in members],
        literal=[e for m in members for e in m.literal],
    )


def rounds(found: list[Intervention]) -> list[list[Intervention]]:
    """The combinations to try, in rounds: every pair of the :func:`candidates`, then (only when
    no pair flipped it) the three together."""
    top = candidates(found)
    pairs = [c for p in combinations(top, 2) if (c := combined(p)) is not None]
    three = [c for c in [combined(tuple(top))] if c is not None] if len(top) == 3 else []
    return [r for r in (pairs, three) if r]


def _alone(t: Tally, singles: dict[str, Tally]) -> str:
    parts = [singles[k] for k in t.intervention.parts if k in singles]
    return ", ".join(
        f"{p.intervention.layer} turn {p.intervention.turn} {p.flips}/{p.samples}" for p in parts
    )


def together_verdict(v: Verdict, singles: list[Tally], tried: list[Tally], samples: int) -> Verdict:
    """The verdict once combinations ran (``tried``), where no single one (``singles``) flipped
    the outcome (``v``, the singles' verdict): a combination that flipped it, named as needed
    together (not determined while another overlaps it); else ``v``, saying the combinations
    did not flip it either."""
    by_key = {t.intervention.key: t for t in singles}
    ran = [t for t in tried if t.samples]
    flipped = [t for t in ran if t.flips]
    # a combination that holds one that flipped adds nothing to it
    flipped = [
        t
        for t in flipped
        if not any(
            o is not t and set(o.intervention.parts) < set(t.intervention.parts) for o in flipped
        )
    ]
    ranked = sorted(ran, key=lambda t: (-t.interval[0], -(t.rate or 0.0), t.intervention.key))
    ranked += [t for t in tried if t not in ranked]
    if not flipped:
        said = "; ".join(f"{t.intervention.what} {t.flips}/{t.samples}" for t in ran)
        tail = f"; tried together, they did not flip it either ({said})" if ran else ""
        return Verdict(v.determined, v.headline + tail, v.best, v.tied, ranked + v.ranked, samples)
    best = max(flipped, key=lambda t: (t.interval[0], t.rate or 0.0))
    tied = [t for t in flipped if t is not best and t.interval[1] >= best.interval[0]]
    i, (low, high) = best.intervention, best.interval
    still = best.samples - best.flips
    said = (
        f"{i.what} at {i.conversation} turn {i.turn}: together they flipped it "
        f"{best.flips}/{best.samples} (95% CI {low:.2f}–{high:.2f}); alone none of them did "
        f"({_alone(best, by_key)})"
        + (
            f"; with them, {still} of {count(best.samples, 'branch', 'branches')} still failed"
            if still
            else ""
        )
    )
    if tied:
        others = "; ".join(f"{t.intervention.what} {t.flips}/{t.samples}" for t in tied)
        head = (
            f"needed together, but which combination is not determined with K={samples}: "
            f"{said}; its interval overlaps {others}"
        )
    else:
        head = f"needed together: {said}"
    # the interval must say so, against every single change that ran (docs/why.md)
    weak = None if tied else unshown(best, [t for t in singles if t.samples])
    if weak is not None:
        rival, (low_d, high_d) = weak
        against = (
            f"{rival.intervention.layer} turn {rival.intervention.turn} {rival.flips}/"
            f"{rival.samples}"
            if rival is not None
            else "the recorded run (it failed, 1 run)"
        )
        head = (
            f"not determined with K={samples}: {said}; against {against} the interval of the "
            f"difference is {low_d:+.2f}–{high_d:+.2f}, which holds 0"
        )
    return Verdict(not tied and weak is None, head, best, tied, ranked + v.ranked, samples)


def flips_alone(tallies: list[Tally], v: Verdict) -> bool:
    """Whether the singles' verdict leaves room for combinations: nothing flipped the outcome
    (and no refused request decided it)."""
    return not v.refused and not any(t.flips for t in tallies)
