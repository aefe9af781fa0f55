"""The verdict: per intervention, how often it flipped the outcome, with a Wilson interval,
ranked; a headline naming the layer and turn whose change flips it most reliably, naming every
one when several flipped it every time (each is enough: no K tells them apart), or saying
plainly that K samples cannot tell (docs/why.md "Reading the verdict").

A *flip* is a branch that does not fail by the outcome, where the recording did. A branch the
fork could not run (the client diverged before the cursor, the recorder failed) or whose outcome
cannot be told is not a sample: it is counted apart, listed with its reason, and the verdict says
on how many samples it rests.

A request the API refused for what it holds (``c-refused``: a 4xx naming a tool's schema, a
parameter, the model) is the client's, shown by the API's message: when nothing that ran flipped
the outcome, the verdict names it, with the fork that would test a fix, and advises no more
samples (the same request is refused every time; more samples of what ran cannot change that).
A refusal the client recovered from (``c-recovered``) and a failure it retried itself and got an
answer for (``a-retried``) are context, never the verdict. When nothing that ran flipped the
outcome, the headline names what was tried; while a suspect on the wire stands untested (listed
and not run, or run with a substitute that cannot be right) it says so and why, and places
nothing off the wire; only when every one was tested does it say the cause is likely off the
wire (the tools' code, the environment, the data), naming the context.

What one intervention's branches showed is a :class:`Tally`; the intervals its flip rate is read
by, and what K samples would show, are :mod:`cassettes.why._interval`'s.

**A verdict is determined only when its interval says so**: the change must be shown, at 95%, to
flip the outcome more often than the run succeeds without it: the interval of the *difference*
between its flip rate and each other intervention's that ran (each a run with this suspect left as
the recording had it) lies wholly above 0; an intervention that ran alone is compared with the
recorded run itself. So a lone suspect that flipped 1 of 5 (95% interval 0.01–0.70) is not
determined, whatever else is missing: the difference's interval (−0.61–0.20 against the recorded
run) holds 0 (:func:`unshown`). Over simulated investigations in which every intervention flips at
the same rate (tests/why/test_why_core.py), at most about 6% are determined.

Two interventions whose 95% intervals overlap are not told apart; "try K=…" is advice only when,
at the flip rates seen, K samples each would give intervals that no longer overlap
(:func:`cassettes.why._interval.needed`): two that flip the outcome at the same rate never
separate, and saying "try K=40" then is advice that cannot converge.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from ..hints import command_line, count
from ._interval import MOST, RECORDED, difference, needed, shown_at
from ._tally import Tally

__all__ = ["Verdict", "advice", "only_context", "unshown", "verdict", "why_alike"]


def unshown(best: Tally, rivals: list[Tally]) -> tuple[Tally | None, tuple[float, float]] | None:
    """Why ``best`` is not shown to flip the outcome more often than the run succeeds without it:
    the first of ``rivals`` (each other intervention that ran; none: the recorded run,
    :data:`RECORDED`, as ``None``) against which the interval of the difference of their rates
    holds 0, with that interval; ``None`` when it is shown against every one (the rule of the
    module docstring)."""
    against: list[tuple[Tally | None, tuple[int, int]]] = [
        (t, t.counts) for t in rivals if t.samples
    ] or [(None, RECORDED)]
    for t, rate in against:
        d = difference(best.counts, rate)
        if d[0] <= 0:
            return t, d
    return None


def _not_shown(
    best: Tally,
    rival: Tally | None,
    d: tuple[float, float],
    samples: int,
    tied: list[Tally] | None = None,
) -> str:
    """The headline of a verdict its interval does not show (:func:`unshown`): the best, the
    interval of the difference that holds 0, and what more samples can do. ``tied``: those
    that flipped it alike beside it (E re-samples, or changes each enough), none of them a
    control: when nothing else ran, the recorded run is the only one."""
    alike = tied or []
    if rival is None:
        k = shown_at(best.counts, None)
        beside = (
            "nothing else ran"
            if not alike
            else "nothing else that ran flipped it less often (beside it "
            + "; ".join(_named(t) for t in alike)
            + ", alike)"
        )
        what = (
            f"{beside}, and against the recorded run (it failed, 1 run) the interval of "
            f"the difference is {d[0]:+.2f}–{d[1]:+.2f}, which holds 0"
        )
        more = (
            f"try K={k} (--samples {k}): at the rates seen, {count(k, 'sample')} would show it "
            "against the recorded run; or run the other layers beside it (the model re-sampled "
            "at that turn is its control)"
            if k is not None
            else "more samples of it alone cannot show it (the recorded run is one run): run the "
            "other layers beside it (the model re-sampled at that turn is its control)"
        )
        if alike and all(t.intervention.layer == "E" for t in [best, *alike]):
            # which turn: said as for a verdict of the layer (nested re-samples: no K tells)
            more += f"; which turn: {why_alike(best, alike)}"
    else:
        k = shown_at(best.counts, rival.counts)
        what = (
            f"against {_named(rival)} the interval of the difference is "
            f"{d[0]:+.2f}–{d[1]:+.2f}, which holds 0"
        )
        more = (
            f"try K={k} (--samples {k}): at the rates seen, {count(k, 'sample')} each would show it"
            if k is not None
            else f"at the rates seen no K up to {MOST} would show it"
        )
    return (
        f"not determined with K={samples}: {_said(best)}, which does not show that it flips the "
        f"outcome more often than the run succeeds without it: {what}; {more}"
    )


def advice(best: Tally, tied: list[Tally]) -> str:
    """What more samples can do for ``best`` and the interventions ``tied`` with it: the K that
    separates them all, or which cannot be separated and why."""
    ks = [needed(best.counts, t.counts) for t in tied]
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
    #: The verdict rests on a refused request (``best`` is its suspect, not run), not on flips.
    refused: bool = False
    #: Not determined at a turn, but every intervention that could be the cause is the model's
    #: (E re-samples): the layer is determined.
    layer_only: bool = False

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
            "by": "refusal" if self.refused else "flips",
            "evidence": b.intervention.evidence if b else None,
            "fix": shlex.join(b.intervention.fix) if b and b.intervention.fix else None,
            "left_out": b.invalid if b else 0,
            "layer_determined": self.determined or self.layer_only,
            # where a fix of a layer-only verdict is confirmed from: its earliest turn there
            "from_turn": min(
                (t.intervention.turn for t in [b, *self.tied] if _alongside(t, b)), default=None
            )
            if b
            else None,
        }
        return {"verdict": head, "interventions": [t.as_json() for t in self.ranked]}


def verdict(tallies: list[Tally], samples: int, untried: list[str] | None = None) -> Verdict:
    """Rank by the interval's low end, then the rate; the best determines the outcome when it
    flipped it, no other intervention that flipped it has an interval reaching the best's low
    end, and the interval of the difference between its rate and every other's that ran (none:
    the recorded run's) lies above 0 (:func:`unshown`). ``samples``: the K asked for (what "try
    K=…" quadruples). A refused request decides when nothing that ran flipped the outcome
    (:func:`_refusal`). ``untried``: what else on the wire was not tried, said (combinations of
    repairs over the limits): with it, nothing is placed off the wire."""
    ran, ranked = _ranked(tallies)
    by_refusal = _refusal(tallies, ran, ranked, samples)
    if by_refusal is not None:
        return by_refusal
    if not ran:
        none = "no intervention could be run or judged: see each below"
        said = _only_context(ranked) if only_context(ranked) else none
        return Verdict(False, said, None, [], ranked, samples)
    best, rivals = ranked[0], ranked[1 : len(ran)]
    if best.flips == 0:
        said = _off_the_wire(tallies, ran, samples, untried or [])
        return Verdict(False, said, None, [], ranked, samples)
    tied = [t for t in rivals if t.flips and t.interval[1] >= best.interval[0]]
    # the interval must say so: shown to flip it more often than each other that ran (or than
    # the recorded run, when it ran alone); those it ties with are judged by the rules below
    weak = unshown(best, [t for t in rivals if t not in tied])
    every = tied and best.flips == best.samples and all(t.flips == t.samples for t in tied)
    alike = tied and all(t.intervention.layer == "E" for t in [best, *tied])
    if weak is not None and (not tied or every or alike):
        # a verdict it would be (one change, changes each enough, the model's layer): not shown
        return Verdict(False, _not_shown(best, *weak, samples, tied), best, tied, ranked, samples)
    if every:
        # every one flipped it every time: more samples cannot separate two sufficient changes
        return _either(best, tied, ranked, samples)
    if tied:
        return _overlapping(best, tied, ranked, samples)
    layer = _layer_name(best.intervention.layer)
    return Verdict(True, f"{layer}: {_said(best)};{_rest(rivals)}", best, [], ranked, samples)


def _ranked(tallies: list[Tally]) -> tuple[list[Tally], list[Tally]]:
    """(those that ran, every tally ranked: those that ran by the interval's low end, then the
    rate, then those that did not run)."""
    ran = [t for t in tallies if t.intervention.missing is None and t.samples]
    ranked = sorted(ran, key=lambda t: (-t.interval[0], -(t.rate or 0.0), t.intervention.key))
    return ran, ranked + [t for t in tallies if t not in ranked]


def _rest(rivals: list[Tally]) -> str:
    """What the interventions other than a determining one did."""
    if not rivals:
        return " no other intervention ran"
    if all(t.flips == 0 for t in rivals):
        return " no other intervention flipped it"
    return " the others flipped it clearly less often"


def _more(samples: int) -> str:
    return f"try K={samples * 4} (--samples {samples * 4})"


def _said(best: Tally) -> str:
    """The best intervention, how often it flipped the outcome and its interval, in a line."""
    i = best.intervention
    return (
        f"{i.layer} at {i.conversation} turn {i.turn} ({i.what}): flipped "
        f"{best.flips}/{best.samples} ({best.ci})" + _still_failed(best) + _resting(best)
    )


def _overlapping(best: Tally, tied: list[Tally], ranked: list[Tally], samples: int) -> Verdict:
    """The verdict when others that flipped the outcome have intervals reaching ``best``'s low
    end: not determined; "try K=…" only when more samples can separate them
    (:func:`advice`). When every one is an E re-sample, the layer is
    determined (the model's), the turn is not."""
    others = "; ".join(_named(t) for t in tied)
    model = all(t.intervention.layer == "E" for t in [best, *tied])
    head = (
        f"the model (E); which turn is not determined with K={samples}: {_said(best)}, and its "
        f"interval overlaps {others}; {why_alike(best, tied)}"
        if model
        else f"not determined with K={samples}: {_said(best)}, and its interval overlaps "
        f"{others}; {advice(best, tied)}"
    )
    return Verdict(False, head, best, tied, ranked, samples, layer_only=model)


def _named(t: Tally) -> str:
    i = t.intervention
    return f"{i.layer} at {i.conversation} turn {i.turn} ({i.what}) {t.flips}/{t.samples}"


def _alongside(t: Tally, best: Tally) -> bool:
    return t.intervention.conversation == best.intervention.conversation


def _still_failed(t: Tally) -> str:
    """A repair (C, A) that flipped only some samples: the others still failed with it, so
    something else fails the run too (a second cause)."""
    failed = t.samples - t.flips
    if t.intervention.layer == "E" or not failed:
        return ""
    return (
        f"; with it, {failed} of {count(t.samples, 'branch', 'branches')} still failed: another "
        "cause fails the run too"
    )


def _resting(t: Tally) -> str:
    """Branches of ``t`` that are no sample (the fork failed …): on how many samples it rests."""
    if not t.invalid:
        return ""
    return f" [{count(t.samples, 'sample')} left: {t.left_out}]"


def _refusal(
    tallies: list[Tally], ran: list[Tally], ranked: list[Tally], samples: int
) -> Verdict | None:
    """The verdict when the API refused the client's request and nothing that ran flipped the
    outcome: the request is the suspect, by the API's message, and no more samples can help
    (``None``: no refusal, or something flipped the outcome)."""
    refused = next((t for t in tallies if t.intervention.kind == "c-refused"), None)
    if refused is None or any(t.flips for t in ran):
        return None
    i = refused.intervention
    test = (
        f"test a fix with a fork at it ({command_line(i.fix)})"
        if i.fix
        else "fix the client and record again"
    )
    said = f": {i.evidence!r}" if i.evidence else ""
    return Verdict(
        True,
        f"the client (C): {i.what} at {i.conversation} turn {i.turn}{said}; the API refuses the "
        f"same request every time, so more samples cannot change it ({_tried(ran)}); {test}",
        refused,
        [],
        [refused, *[t for t in ranked if t is not refused]],
        samples,
        refused=True,
    )


#: Interventions that are context, never a suspect: a refusal the client recovered from, a failure
#: it retried itself and got an answer for.
CONTEXT = ("c-recovered", "a-retried")


def _off_the_wire(tallies: list[Tally], ran: list[Tally], samples: int, untried: list[str]) -> str:
    """The headline when nothing that ran flipped the outcome. While a cause on the wire stands
    untested (a suspect listed and not run, one that ran with a substitute that cannot be right:
    :func:`untested`), what was tried is named with why it could not settle the cause, and
    nothing is placed off the wire; else said plainly, the cause is likely where a fork cannot
    reach (the tools' code, the environment, the data); context (a refusal the client recovered
    from, a failure it retried) is named; more samples are advised only to rule out a change that
    flips the outcome rarely (the widest interval's high end)."""
    context = "".join(f"; {_recovered(t)}" for t in tallies if t.intervention.kind in CONTEXT)
    high = max(t.interval[1] for t in ran)
    left = [t for t in ran if t.invalid]
    rare = (
        f"a change that flips it in fewer than {high:.0%} of runs could still hide in "
        f"K={samples}: {_more(samples)} to rule that out" + (_resting(left[0]) if left else "")
    )
    open_ = untested(tallies) + untried
    if open_:
        return (
            f"not determined: nothing looptap ran flipped the outcome ({_tried(ran)}), and a "
            f"cause on the wire stands untested: {'; '.join(open_)}; so it cannot be placed off "
            f"the wire{context}; {rare}"
        )
    return (
        f"not determined: nothing looptap can change flipped the outcome ({_tried(ran)}); the "
        "cause is likely off the wire (the tools' code, the environment, the data the agent "
        f"read), where a fork cannot reach{context}; {rare}"
    )


def untested(tallies: list[Tally]) -> list[str]:
    """The suspects on the wire a verdict of "nothing flipped it" leaves untested, each said with
    why: listed and not run (not context), or run with a substitute that cannot be right and no
    flip (:attr:`Intervention.caveat`)."""
    out = []
    for t in tallies:
        i = t.intervention
        head = f"{i.layer} {i.conversation} turn {i.turn} ({i.what})"
        if i.missing is not None and i.kind not in CONTEXT:
            out.append(f"{head} not run: {i.missing}")
        elif i.missing is None and i.caveat and not t.flips:
            out.append(f"{head} ran, but {i.caveat}")
    return out


def _tried(ran: list[Tally]) -> str:
    """What ran when nothing that ran flipped the outcome."""
    n = count(sum(t.samples for t in ran), "sample")
    if not ran:
        return "nothing could be run"
    if len(ran) == 1:
        return f"the one intervention run did not flip it in {n}"
    return f"none of the {len(ran)} interventions run flipped it in {n}"


def _recovered(t: Tally) -> str:
    """A refusal the client recovered from, a failure it retried itself, as context."""
    i = t.intervention
    if i.kind == "a-retried":
        return f"the API's failure at {i.conversation} turn {i.turn} is context: {i.missing}"
    return f"the API's refusal at {i.conversation} turn {i.turn} is {i.missing}"


def only_context(ranked: list[Tally]) -> bool:
    """Every suspect found is a refusal the client recovered from: context, nothing to run."""
    return bool(ranked) and all(t.intervention.kind in CONTEXT for t in ranked)


def _only_context(ranked: list[Tally]) -> str:
    """The headline when the only suspects on the wire are refusals the client recovered from:
    nothing looptap can change is left, so the cause is likely off the wire."""
    said = "; ".join(_recovered(t) for t in ranked)
    return (
        f"not determined: {said}; nothing else looptap can change was found in the layers "
        "searched, so the cause is likely off the wire (the tools' code, the environment, the "
        "data the agent read), where a fork cannot reach"
    )


def _either(best: Tally, tied: list[Tally], ranked: list[Tally], samples: int) -> Verdict:
    """The verdict when ``best`` and every one ``tied`` with it flipped the outcome every time:
    each is enough on its own, and more samples cannot tell them apart."""
    i = best.intervention
    both = " and ".join(
        f"{t.intervention.layer} ({t.intervention.what}) {t.flips}/{t.samples} ({t.ci})"
        for t in [best, *tied]
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
