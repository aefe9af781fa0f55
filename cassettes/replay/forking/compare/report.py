"""A comparison's turns and figures (agreement, self-agreement, the arguments tallied, cost and
latency against the recording) and how it is said: the verdict, the text report, the JSON."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from ....hints import count
from ....untrusted import clean_line
from ....views import money
from .._lineup import canonical
from .answer import TEXT_MEASURE, TEXT_THRESHOLD, Sample, text_similarity

#: What :attr:`TurnComparison.arguments` tallies of the samples' calls.
_TALLIES = ("calls", "json", "schema_checked", "schema_valid", "equal_to_recording", "not_offered")


@dataclass
class TurnComparison:
    seq: int
    conversation: str | None
    turn: int | None
    recorded: Sample
    samples: list[Sample] = field(default_factory=list)
    #: What the recorded client never handled in the run (a tool never called, a finish reason never
    #: seen).
    new_to_client: list[str] = field(default_factory=list)
    #: The recorded turn's cost at the recorded model's own price (``None``: unknown).
    recorded_cost: Decimal | None = None
    #: The estimate of one sample: the candidate's price applied to the recorded usage.
    estimate: Decimal | None = None
    #: ``recorded_cost`` is an estimated price (the recorded host is no provider looptap knows:
    #: ``~``).
    recorded_estimated: bool = False
    #: The candidate's costs (``estimate``, each sample's) are priced by the model's name alone, no
    #: provider's own price list vouching for them (``~``, as for the recorded cost).
    candidate_estimated: bool = False

    @property
    def answers(self) -> list[Sample]:
        """The samples that are answers (errors are A-layer differences, not answers)."""
        return [s for s in self.samples if s.answered]

    @property
    def agreement(self) -> float | None:
        """Share of the answers that agree with the recording (``None``: no answer, or the
        recording has none: a recorded error sent with ``--include-errors``)."""
        answers = self.answers
        if not answers or not self.recorded.answered:
            return None
        return sum(s.agrees(self.recorded) for s in answers) / len(answers)

    @property
    def self_agreement(self) -> float | None:
        """Share of the answers that agree with the answers' most common one (``None``: no
        answer)."""
        answers = self.answers
        if not answers:
            return None
        return max(sum(a.agrees(b) for b in answers) for a in answers) / len(answers)

    def similarity(self, s: Sample) -> float | None:
        """:func:`text_similarity` of a text answer to the recorded text answer (else ``None``)."""
        if s.signature != "text" or self.recorded.signature != "text":
            return None
        return text_similarity(s.text, self.recorded.text)

    @property
    def arguments(self) -> dict[str, int]:
        """The samples' calls tallied: how many, how many with JSON arguments, how many checked
        against a declared schema and valid, how many JSON-equal to a recorded call of that tool,
        how many name a tool the request did not offer."""
        recorded = {canonical(call) for call in self.recorded.calls}
        out = dict.fromkeys(_TALLIES, 0)
        for s in self.samples:
            for (name, args), c in zip(s.calls, s.checks, strict=True):
                out["calls"] += 1
                out["json"] += c.json
                out["schema_checked"] += c.schema_valid is not None
                out["schema_valid"] += c.schema_valid is True
                out["equal_to_recording"] += c.json and canonical((name, args)) in recorded
                out["not_offered"] += c.offered is False
        return out

    def schema_violations(self) -> list[tuple[str, int]]:
        """The samples' schema violations, ``tool: $.path: reason``, most common first."""
        return Counter(
            f"{c.name}: {e}" for s in self.samples for c in s.checks for e in c.schema_errors
        ).most_common()

    def as_json(self) -> dict[str, Any]:
        def sample(s: Sample, own: bool = False) -> dict[str, Any]:
            checks = s.checks if len(s.checks) == len(s.calls) else [None] * len(s.calls)
            out = {
                "status": s.status,
                "calls": [
                    {"name": n, "arguments": a, **(c.as_json() if c is not None else {})}
                    for (n, a), c in zip(s.calls, checks, strict=True)
                ],
                "text": s.text[:2000],
                "refusal": s.refusal,
                "finish": s.finish,
                "output_tokens": s.output_tokens,
                "latency": round(s.latency, 4),
                "error": s.error,
                "cost": _money(s.cost),
            }
            if not own:
                sim = self.similarity(s)
                out |= {
                    "agrees": s.agrees(self.recorded) if s.answered else None,
                    "similarity": None if sim is None else round(sim, 4),
                }
            return out

        return {
            "seq": self.seq,
            "conversation": self.conversation,
            "turn": self.turn,
            "agreement": self.agreement,
            "self_agreement": self.self_agreement,
            "answers": len(self.answers),
            "errors": len(self.samples) - len(self.answers),
            "cost": {
                "recorded": _money(self.recorded_cost),
                "estimate": _money(self.estimate),
                "measured": _money(self.measured_cost),
                "recorded_estimated": self.recorded_estimated,
                "candidate_estimated": self.candidate_estimated,
            },
            "arguments": self.arguments,
            "new_to_client": self.new_to_client,
            "recorded": sample(self.recorded, own=True),
            "samples": [sample(s) for s in self.samples],
        }

    @property
    def measured_cost(self) -> Decimal | None:
        """The mean cost of one answer at the candidate's price, from the usage it reported
        (``None`` unless every answer's cost is known; errors are not answers)."""
        answers = self.answers
        if not answers or any(s.cost is None for s in answers):
            return None
        return sum((s.cost for s in answers if s.cost is not None), Decimal(0)) / len(answers)

    @property
    def recorded_latency(self) -> float | None:
        return self.recorded.latency if self.recorded.latency > 0 else None


@dataclass
class Comparison:
    run: str
    model: str | None
    samples: int
    turns: list[TurnComparison]
    #: The recorded turns not sent (a recorded error: ``seq 3 (recorded 429)``).
    skipped: list[str] = field(default_factory=list)
    #: Why the comparison stopped before its end (a transport or credential failure), or ``None``.
    stopped: str | None = None

    def summary(self) -> dict[str, int]:
        """The argument tallies of every turn added up (the E line of the whole comparison)."""
        total: Counter[str] = Counter()
        for t in self.turns:
            total.update(t.arguments)
        return {k: total[k] for k in _TALLIES}

    def verdict(self) -> dict[str, Any]:
        """The whole comparison in figures: agreement over every answer, the cost and latency of the
        candidate against the recording's, the E and A differences counted."""
        pairs = [(t, s) for t in self.turns if t.recorded.answered for s in t.answers]
        agree = sum(s.agrees(t.recorded) for t, s in pairs)
        errors = sum(len(t.samples) - len(t.answers) for t in self.turns)
        finish = sum(s.finish != t.recorded.finish for t, s in pairs)
        tally = self.summary()
        timed = [t for t in self.turns if t.recorded_latency is not None and t.answers]
        lat_c = sum(sum(s.latency for s in t.answers) / len(t.answers) for t in timed)
        lat_r = sum(t.recorded_latency or 0.0 for t in timed)
        return {
            "turns": len(self.turns),
            "answers": len(pairs),
            "agree": agree,
            "agreement": round(agree / len(pairs), 4) if pairs else None,
            **self._costs(),
            "latency_ratio": round(lat_c / lat_r, 4) if timed and lat_r > 0 else None,
            "e_differences": len(pairs) - agree,
            "schema_violations": tally["schema_checked"] - tally["schema_valid"],
            "a_differences": finish + errors,
            "finish_differences": finish,
            "errors": errors,
            "skipped": len(self.skipped),
            "stopped": self.stopped,
        }

    def _costs(self) -> dict[str, Any]:
        """The cost figures of :meth:`verdict`. Cost: per sample, measured (the candidate's own
        usage at its price) where every turn has it, else the estimate (its price on the recorded
        usage); over the turns with a recorded cost."""
        measured, how = self._costed()
        cand = sum(
            (
                (t.measured_cost if how == "measured" else t.estimate) or Decimal(0)
                for t in measured
            ),
            Decimal(0),
        )
        rec = sum((t.recorded_cost or Decimal(0) for t in measured), Decimal(0))
        return {
            "cost_ratio": round(float(cand / rec), 4) if measured and rec > 0 else None,
            "cost_basis": how if measured else None,
            "cost_candidate": _money(cand) if measured else None,
            "cost_recorded": _money(rec) if measured else None,
            "cost_recorded_estimated": any(t.recorded_estimated for t in measured),
            "cost_candidate_estimated": any(t.candidate_estimated for t in measured),
        }

    def _costed(self) -> tuple[list[TurnComparison], str]:
        """The turns the cost is compared over, and how the candidate's is had (see
        :meth:`_costs`)."""
        measured = [
            t for t in self.turns if t.measured_cost is not None and t.recorded_cost is not None
        ]
        if not measured or len(measured) < sum(
            t.recorded_cost is not None and bool(t.answers) for t in self.turns
        ):
            return [
                t for t in self.turns if t.estimate is not None and t.recorded_cost is not None
            ], "estimated"
        return measured, "measured"

    def verdict_line(self) -> str:
        v = self.verdict()
        who = self.model or "the recorded model"
        if not v["answers"]:
            line = f"verdict: {who}: no answers to compare"
            if self.stopped:
                return f"{line} (the comparison stopped: {self.stopped})"
            return line + (f" ({count(v['errors'], 'error')})" if v["errors"] else "")
        line = (
            f"verdict: {who} agrees with the recording in {v['agree']}/{v['answers']} answers "
            f"({v['agreement']:.0%}) over {count(v['turns'], 'turn')}"
        )
        if v["cost_ratio"] is not None:
            line += (
                f"; cost ×{v['cost_ratio']:.2f} the recorded "
                f"({money(Decimal(v['cost_candidate']), v['cost_candidate_estimated'])} against "
                f"{money(Decimal(v['cost_recorded']), v['cost_recorded_estimated'])} for one "
                f"answer to each turn, {v['cost_basis']})"
            )
        else:
            line += "; cost ratio unknown (no price)"
        line += (
            f"; latency ×{v['latency_ratio']:.2f}"
            if v["latency_ratio"] is not None
            else "; latency ratio unknown"
        )
        line += (
            f"; E differences {v['e_differences']} (answers that "
            f"differ), {v['schema_violations']} off the schema"
        )
        line += (
            f"; A differences {v['a_differences']} "
            f"({count(v['finish_differences'], 'finish reason')}, {count(v['errors'], 'error')})"
        )
        if self.stopped:
            line += f"; INCOMPLETE, stopped: {self.stopped}"
        return line

    def as_json(self) -> dict[str, Any]:
        # "looptap": what marks a saved report (``--report``) for ``looptap mcp``'s ``comparison``.
        return {
            "looptap": "compare",
            "run": self.run,
            "model": self.model,
            "samples": self.samples,
            "verdict": self.verdict(),
            "verdict_line": self.verdict_line(),
            "text_agreement": {"measure": TEXT_MEASURE, "threshold": TEXT_THRESHOLD},
            "skipped": self.skipped,
            "stopped": self.stopped,
            "arguments": self.summary(),
            "turns": [t.as_json() for t in self.turns],
        }

    def lines(self) -> list[str]:
        out = [
            self.verdict_line(),
            f"looptap compare {self.run} → {self.model or 'the recorded model'}: "
            f"{count(len(self.turns), 'turn')} × {count(self.samples, 'sample')}, teacher-forced; "
            "text answers agree at a "
            f"{TEXT_MEASURE} of at least {TEXT_THRESHOLD:.2f}",
        ]
        if self.skipped:
            out.append(
                f"skipped: {', '.join(self.skipped)} (recorded errors: --include-errors sends them)"
            )
        if self.stopped:
            out.append(f"stopped: {self.stopped}")
        for t in self.turns:
            out += _turn_lines(t)
        summary = self.summary()
        if summary["calls"]:
            out.append(f"E over all turns: {_tally(summary)}")
        return [clean_line(line) for line in out]


def _money(x: Decimal | None) -> str | None:
    """Dollars as text (a JSON number would lose digits): 4 decimals, 6 under a cent."""
    if x is None:
        return None
    return f"{x:.4f}" if abs(x) >= Decimal("0.01") or x == 0 else f"{x:.6f}"


def _tally(a: dict[str, int]) -> str:
    n = a["calls"]
    line = (
        f"{count(n, 'call')}; JSON {a['json']}/{n}; "
        f"schema-valid {a['schema_valid']}/{a['schema_checked']}"
    )
    if a["schema_checked"] < a["json"]:
        line += f" ({a['json'] - a['schema_checked']} with no schema to check)"
    line += f"; JSON-equal to the recording {a['equal_to_recording']}/{n}"
    if a["not_offered"]:
        line += f"; {a['not_offered']} name a tool the request did not offer"
    return line


def _turn_lines(t: TurnComparison) -> list[str]:
    """One turn of :meth:`Comparison.lines`: how its answers agree, then by layer."""
    out = []
    where = (
        f"conversation {t.conversation}, turn {t.turn} (seq {t.seq})"
        if t.turn is not None
        else f"seq {t.seq}"
    )
    of = f" of {len(t.answers)} answers" if len(t.answers) < len(t.samples) else ""
    if t.self_agreement is None:
        out.append(f"{where}: no answer ({count(len(t.samples), 'error')})")
    elif t.agreement is None:
        out.append(
            f"{where}: the recording has no answer here (an error), nothing to agree with; the "
            f"answers agree with each other {t.self_agreement:.0%}{of}"
        )
    else:
        out.append(
            f"{where}: agrees with the recording {t.agreement:.0%}, with itself "
            f"{t.self_agreement:.0%}{of}"
        )
    out.append(f"  E recorded: {_said(t.recorded)}")
    for sig, n in Counter(_said(s) for s in t.samples).most_common(5):
        out.append(f"  E {n}× {sig}")
    sims = [x for x in (t.similarity(s) for s in t.samples) if x is not None]
    if sims:
        out.append(
            f"  E text similarity to the recording {sum(sims) / len(sims):.2f} avg, "
            f"{min(sims):.2f} min ({sum(x >= TEXT_THRESHOLD for x in sims)}/{len(sims)} at "
            f"{TEXT_THRESHOLD:.2f} or more)"
        )
    if t.arguments["calls"]:
        out.append(f"  E arguments: {_tally(t.arguments)}")
    for violation, n in t.schema_violations()[:5]:
        out.append(f"  E {n}× off the schema: {violation[:200]}")
    out.append(_api_line(t))
    for new in t.new_to_client:
        out.append(f"  C new to the client: {new}")
    return out


def _api_line(t: TurnComparison) -> str:
    """A: finish reasons, errors, output tokens and latency of the samples."""
    finishes = ", ".join(
        f"{f or '-'} ×{n}" for f, n in Counter(s.finish for s in t.samples).items()
    )
    errors = sum(s.error is not None for s in t.samples)
    toks = [s.output_tokens for s in t.samples if s.output_tokens is not None]
    lat = [s.latency for s in t.samples]
    line = f"  A finish {finishes} (recorded {t.recorded.finish or '-'}); errors {errors}"
    if toks:
        line += (
            f"; output tokens {sum(toks) / len(toks):.0f} avg (recorded "
            f"{t.recorded.output_tokens if t.recorded.output_tokens is not None else '-'})"
        )
    if lat:
        line += f"; latency {sum(lat) / len(lat):.2f} s avg"
        if t.recorded_latency is not None:
            line += f" (recorded {t.recorded_latency:.2f} s)"
    if t.measured_cost is not None or t.recorded_cost is not None:
        measured = "?" if t.measured_cost is None else money(t.measured_cost, t.candidate_estimated)
        recorded = "?" if t.recorded_cost is None else money(t.recorded_cost, t.recorded_estimated)
        line += f"; cost {measured} an answer (recorded {recorded})"
    return line


def _said(s: Sample) -> str:
    if s.error is not None:
        return f"error {s.status}: {s.error[:100]}"
    if s.calls:
        return ", ".join(f"{n}({orjson.dumps(a).decode()[:80]})" for n, a in s.calls)
    return "refusal" if s.refusal else f"text {s.text[:60]!r}"
