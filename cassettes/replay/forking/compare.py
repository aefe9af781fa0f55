"""``looptap compare RUN --model NAME``: the recorded requests sent to a candidate model, teacher
forced (each request is the recorded one, with the recorded history, so a divergence does not
compound), ``--samples K`` times each, and the answers compared with the recording by layer.

Per turn: E — which tools were called with which arguments: whether they parse as JSON, whether
they satisfy the schema of the tool as the recorded request declared it (``tools``, ``functions``,
``functionDeclarations`` …: whatever the family's adapter reads; checked by
:func:`cassettes.analysis.emission.schema_errors`, the same validator and bounds as the
``E.arguments_schema`` check), whether they are JSON-equal to the recording; how similar the text
is (:data:`TEXT_MEASURE`, agreeing at :data:`TEXT_THRESHOLD`), refusals; A — finish reasons, usage,
latency, errors; and whether the recorded client would be handed something it never handled in the
recording (a tool never called in it, or not even offered by the request; a finish reason never
seen). Agreement rates: how often an answer agrees with the recording (same tool calls, same
arguments; or, for a text answer, text similar enough) and how often the samples agree with their
own most common answer. A verdict heads the report: agreement, cost and latency against the
recording, and the E and A differences counted.

What is sent: the recorded turns that were answered; a turn the recording shows failing (HTTP
status >= 400, or a transport error: a 429 then its retry) is skipped and listed, unless asked
for. A transport failure or a refusal of the credentials (401, 403, 407) or of the model/path
(404) stops the comparison at once (the remaining requests are not sent, nor paid): such a
failure is the setup's, not an answer, and counts in no agreement. A 429 or 5xx is the
candidate's answer at the A layer (an error, in the verdict's count), not retried and not an
answer E agreement is measured on.

Nothing is sent before the budget is checked: ``--max-requests`` (turns x K) and ``--max-cost``
(the candidate's own price, from genai-prices' offline data, applied to the recorded usage of
each turn, K times: an estimate). A candidate without a known price makes the estimate unknown:
``--max-cost`` then refuses unless ``allow_unknown`` (``--allow-unknown-price``). ``--dry-run``
lists what would be sent, and where, and sends nothing. Credentials are not in a cassette
(redacted when recorded): give them with ``--header 'authorization: Bearer …'``.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from difflib import SequenceMatcher
from typing import Any
from urllib.parse import urlsplit

import orjson

from cassettes import providers
from cassettes.analysis.emission import schema_errors
from cassettes.analysis.price_memo import PRICES_VERSION, calc_price, provider_for_url
from cassettes.errors import CassetteError
from cassettes.hints import count
from cassettes.matching import request_key
from cassettes.models import NormalisedResponse, ToolCall, ToolSpec
from cassettes.net import (
    Upstream,
    UpstreamError,
    header_problem,
    recorded_request_headers,
    said_name,
)
from cassettes.parsing.roundtrip import parse_exchange
from cassettes.replay.forking.lineup import answer_kind
from cassettes.replay.live.chains import chaining_of, self_contained, threads_of
from cassettes.replay.live.model import with_model
from cassettes.untrusted import clean_line
from cassettes.views.money import money
from cassettes.wire.exchange import Exchange, Headers
from cassettes.wire.own import without_own

__all__ = [
    "TEXT_MEASURE",
    "TEXT_THRESHOLD",
    "ArgumentCheck",
    "BudgetError",
    "Comparison",
    "Sample",
    "TurnComparison",
    "check_arguments",
    "check_budget",
    "compare_run",
    "estimate_costs",
    "offered_tools",
    "plan_requests",
    "send_list",
    "text_similarity",
    "upstream_bases",
    "where_sent",
]

#: How two text answers are compared (stated in every report's header and in docs/fork.md).
TEXT_MEASURE = (
    "word-level difflib ratio (difflib.SequenceMatcher over "
    "the whitespace-split words, the first 2,000 of each)"
)
#: Two text answers agree when their similarity is at least this.
TEXT_THRESHOLD = 0.7
_MAX_WORDS = 2000
#: What :attr:`TurnComparison.arguments` tallies of the samples' calls.
_TALLIES = ("calls", "json", "schema_checked", "schema_valid", "equal_to_recording", "not_offered")


class BudgetError(CassetteError):
    """The comparison would exceed ``--max-requests`` or ``--max-cost``: nothing was sent.
    ``lines``: the estimate it was refused on."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.lines = lines or []


def text_similarity(a: str, b: str) -> float:
    """:data:`TEXT_MEASURE` of two texts, from 0 (nothing in common) to 1 (the same words; two
    empty texts too). Whitespace and line breaks do not count; case and punctuation do."""
    return _ratio(*sorted((a, b)))


@functools.lru_cache(maxsize=512)
def _ratio(a: str, b: str) -> float:
    """The ratio of two texts (in a canonical order: the measure is symmetric), kept for the
    report's several readers of one pair (up to 0.2 s for two answers of 2,000 words)."""
    wa, wb = a.split()[:_MAX_WORDS], b.split()[:_MAX_WORDS]
    if not wa and not wb:
        return 1.0
    return SequenceMatcher(None, wa, wb, autojunk=False).ratio()


def _similar(a: str, b: str) -> bool:
    """``text_similarity(a, b) >= TEXT_THRESHOLD``, ruled out first by difflib's cheap upper bounds
    (the K x K pairs of self-agreement need no more than the answer)."""
    wa, wb = a.split()[:_MAX_WORDS], b.split()[:_MAX_WORDS]
    if wa and wb:
        sm = SequenceMatcher(None, wa, wb, autojunk=False)
        if sm.real_quick_ratio() < TEXT_THRESHOLD or sm.quick_ratio() < TEXT_THRESHOLD:
            return False
    return text_similarity(a, b) >= TEXT_THRESHOLD


@dataclass
class ArgumentCheck:
    """One tool call's arguments against the tool the recorded request declared under its name."""

    name: str
    #: The arguments parse as JSON.
    json: bool
    #: The request offered a tool of that name (``None``: it offered no tools at all).
    offered: bool | None
    #: The offered tool declares a schema that could be checked (a schema that is itself invalid is
    #: not).
    checked: bool = False
    #: Violations of that schema, each ``$.path: reason`` (bounded as ``E.arguments_schema``'s).
    schema_errors: list[str] = field(default_factory=list)
    #: Why the arguments are not JSON.
    parse_error: str | None = None

    @property
    def schema_valid(self) -> bool | None:
        """``None`` when there was nothing to check against (or the arguments are not JSON)."""
        return None if not (self.json and self.checked) else not self.schema_errors

    def as_json(self) -> dict[str, Any]:
        return {
            "json": self.json,
            "offered": self.offered,
            "schema_valid": self.schema_valid,
            "schema_errors": self.schema_errors,
            "parse_error": self.parse_error,
        }


@dataclass
class Sample:
    status: int | None
    #: (tool name, arguments) of each call, in order.
    calls: list[tuple[str, Any]]
    text: str
    refusal: bool
    finish: str | None
    output_tokens: int | None
    latency: float
    error: str | None = None
    #: Each call's arguments checked (JSON, schema, offered), in the order of ``calls``.
    checks: list[ArgumentCheck] = field(default_factory=list)
    #: The reported usage as genai-prices keys (``None``: none reported).
    usage: dict[str, int] | None = None
    #: What the answer cost at the candidate's price (``None``: unknown).
    cost: Decimal | None = None

    @property
    def signature(self) -> str:
        """The kind of answer (:func:`~cassettes.replay.forking.lineup.answer_kind`). Two answers
        agree when their signatures are equal and, for text, the texts are similar
        (:meth:`agrees`)."""
        return answer_kind(self.status, self.error is not None, self.calls, self.refusal)

    @property
    def answered(self) -> bool:
        """An answer of the model (not an error): what agreement is measured on."""
        return self.error is None

    def agrees(self, other: Sample) -> bool:
        """The same calls with the same arguments; both refusals; or two texts whose
        :func:`text_similarity` is at least :data:`TEXT_THRESHOLD`."""
        if self.signature != other.signature:
            return False
        return self.signature != "text" or _similar(self.text, other.text)


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
        recorded = {_canon(n, a) for n, a in self.recorded.calls}
        out = dict.fromkeys(_TALLIES, 0)
        for s in self.samples:
            for (name, args), c in zip(s.calls, s.checks, strict=True):
                out["calls"] += 1
                out["json"] += c.json
                out["schema_checked"] += c.schema_valid is not None
                out["schema_valid"] += c.schema_valid is True
                out["equal_to_recording"] += c.json and _canon(name, args) in recorded
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


def _canon(name: str, arguments: Any) -> str:
    """A call as comparable text: the tool's name and its arguments as canonical JSON (key order
    does not matter; unparsable arguments stay the raw string, equal only to the same string)."""
    try:
        return (
            name
            + "\x00"
            + orjson.dumps(
                arguments, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
            ).decode()
        )
    except TypeError:
        return name + "\x00" + repr(arguments)


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
        line += (
            "; cost "
            f"{money(t.measured_cost, t.candidate_estimated) if t.measured_cost is not None else '?'}"  # noqa: E501
            " an answer (recorded "
            f"{money(t.recorded_cost, t.recorded_estimated) if t.recorded_cost is not None else '?'}"  # noqa: E501
            ")"
        )
    return line


def _said(s: Sample) -> str:
    if s.error is not None:
        return f"error {s.status}: {s.error[:100]}"
    if s.calls:
        return ", ".join(f"{n}({orjson.dumps(a).decode()[:80]})" for n, a in s.calls)
    return "refusal" if s.refusal else f"text {s.text[:60]!r}"


def _sample(ex: Exchange, latency: float, tools: list[ToolSpec]) -> Sample:
    """The answer in ``ex``, its calls checked against ``tools`` (those the recorded request
    declared)."""
    rt = parse_exchange(ex)
    r = rt.response
    # a broken stream is no answer
    if (
        r is None
        or ex.status is None
        or ex.status >= 400
        or r.error is not None
        or ex.transport_error is not None
    ):
        return Sample(ex.status, [], "", False, None, None, latency, error=_failure(ex, r)[:500])
    # not a zero-valued placeholder
    calls = [
        c for c in r.tool_calls if c.name or c.id or (c.arguments_raw or "").strip() or c.arguments
    ]
    return Sample(
        ex.status,
        [
            (c.name or "?", c.arguments if c.arguments is not None else c.arguments_raw)
            for c in calls
        ],
        r.text,
        _refused(r),
        r.finish_reason_raw,
        r.usage.output_tokens if r.usage else None,
        latency,
        checks=[check_arguments(c, tools) for c in calls],
        usage=_price_usage(rt.family, r.usage),
    )


def _price_usage(family: str, usage: Any) -> dict[str, int] | None:
    """Reported usage as genai-prices' keys (the family's adapter knows its extras), or ``None``."""
    if usage is None or (usage.input_tokens is None and usage.output_tokens is None):
        return None
    adapter = providers.by_family(family)
    if adapter is not None:
        return adapter.profile.price_usage(usage)
    return {
        k: v
        for k, v in (("input_tokens", usage.input_tokens), ("output_tokens", usage.output_tokens))
        if v is not None
    }


def _failure(ex: Exchange, r: NormalisedResponse | None) -> str:
    """Why a sample has no answer: the API's error message, else the transport error, else its
    status."""
    why = (
        (r.error.message if r is not None and r.error is not None else None)
        or ex.transport_error
        or f"status {ex.status}"
    )
    if ex.transport_error is not None and ex.status is not None and ex.status < 400:
        why = f"the answer broke off: {ex.transport_error}"
    return str(why)


def _refused(r: NormalisedResponse) -> bool:
    """Whether the model refused: a refusal part, or a refusal finish."""
    return any(p.kind == "refusal" for p in r.parts) or (
        r.finish_reason is not None and str(r.finish_reason.value) == "refusal"
    )


def check_arguments(c: ToolCall, tools: list[ToolSpec]) -> ArgumentCheck:
    """``c``'s arguments: JSON? valid against the declared schema of its tool? (jsonschema is
    imported with the check, when a comparison first needs it.)"""
    spec = next((t for t in tools if t.name == c.name), None) if c.name else None
    parsed = c.arguments_error is None and (
        c.arguments is not None or not (c.arguments_raw or "").strip()
    )
    out = ArgumentCheck(
        c.name or "?",
        json=parsed,
        offered=(spec is not None) if tools else None,
        parse_error=c.arguments_error,
    )
    if parsed and spec is not None and spec.parameters and c.kind == "function":
        out.checked = True
        out.schema_errors = schema_errors(
            c.arguments if c.arguments is not None else {}, spec.parameters
        )
    return out


def offered_tools(ex: Exchange) -> list[ToolSpec]:
    """The tools the recorded request declared (as its family's adapter reads them)."""
    req = parse_exchange(ex).request
    return list(req.tools) if req is not None else []


@dataclass
class Planned:
    """One recorded turn to send: its exchange and its place."""

    ex: Exchange
    seq: int
    conversation: str | None
    turn: int | None
    #: The recorded turn's cost at the recorded model's own price (the analysis' figure).
    cost: Decimal | None
    #: ``cost`` is an estimated price (a list price by the model's name: ``~``).
    cost_estimated: bool = False
    #: The recorded usage as genai-prices keys: what the candidate is priced on.
    usage: dict[str, int] | None = None
    #: ``usage`` was estimated by looptap (the call reported none), not reported.
    usage_estimated: bool = False
    family: str = "unknown"
    #: The model the recorded request asked for.
    model: str | None = None
    #: What selects a price variant (the recorded service tier).
    price_context: dict[str, str] = field(default_factory=dict)
    #: Why the recording shows this turn failing (``recorded 429``), or ``None``.
    recorded_error: str | None = None
    #: The candidate's price (genai-prices provider id or ``None`` for by name, the model as it
    #: knows it).
    price_ref: tuple[str | None, str] | None = None
    #: The recorded request as it is sent (set by :func:`compare_run`): a request continuing an
    #: answer by its id (the Responses API's ``previous_response_id``) self-contained, since the
    #: candidate never gave that answer; ``None``: the recorded body as it is.
    body: bytes | None = None
    #: Recorded headers already said (on stderr) not to be sent: once per turn, not per sample.
    said: set[str] = field(default_factory=set)
    #: One sample's estimated cost at the candidate's price, and where that price came from (or why
    #: none).
    estimate: Decimal | None = None
    price_note: str = ""


def plan_requests(run: Any) -> list[Planned]:
    """The recorded turns of ``run`` (model calls, in recording order), with their recorded usage
    and whether the recording shows them failing."""
    out: list[Planned] = []
    by_seq = {ex.seq if ex.seq is not None else i: ex for i, ex in enumerate(run.exchanges)}
    for seq, t in sorted(run.analysis.turns.items()):
        ex = by_seq.get(seq)
        if ex is None:
            continue
        rt = parse_exchange(ex)
        adapter = providers.by_family(rt.family)
        p = Planned(
            ex,
            seq,
            t.conversation,
            t.index,
            t.tokens.cost,
            t.tokens.price_estimated,
            family=rt.family,
            model=(rt.request.model if rt.request is not None else None)
            or (rt.response.model if rt.response is not None else None),
            price_context=adapter.profile.price_context(rt.response) if adapter is not None else {},
        )
        if ex.transport_error:
            p.recorded_error = "recorded transport error"
        elif ex.status is None or ex.status >= 400:
            p.recorded_error = (
                f"recorded {ex.status}" if ex.status is not None else "recorded without a response"
            )
        _recorded_usage(p, t.tokens, rt)
        out.append(p)
    # A failed call has no output to go by: the largest output of the run's answered turns.
    longest = max(
        (
            p.usage.get("output_tokens", 0)
            for p in out
            if p.usage and p.usage.get("output_tokens", 0) >= 0
        ),
        default=0,
    )
    for p in out:
        if p.usage is not None and p.usage.get("output_tokens") == -1:
            p.usage["output_tokens"] = longest
    return out


def _recorded_usage(p: Planned, tk: Any, rt: Any) -> None:
    """``p``'s recorded usage (``tk``: its turn's tokens, ``rt``: its round trip): as reported,
    as estimated, or for a failed call the input from the request's size (the output an output
    of -1, filled in by :func:`plan_requests`)."""
    if tk.source == "reported":
        p.usage = _price_usage(rt.family, rt.response.usage if rt.response is not None else None)
    elif tk.source == "estimated" and tk.input is not None:
        p.usage, p.usage_estimated = (
            {"input_tokens": tk.input, "output_tokens": tk.output or 0},
            True,
        )
    elif tk.segments is not None:
        # a failed call: the input from the request's size; the output below
        sg = tk.segments
        p.usage, p.usage_estimated = (
            {
                "input_tokens": sg.system + sg.tools + sg.user + sg.assistant + sg.tool_results,
                "output_tokens": -1,
            },
            True,
        )


def upstream_bases(items: list[str]) -> dict[str, str]:
    """Where each API's requests go: the vendor's base URL, or ``--upstream NAME=URL`` instead;
    raises ``ValueError`` for an item of another form."""
    bases = {name: up for name, (up, _v, _s) in providers.REVERSE_UPSTREAMS.items()}
    for item in items:
        name, sep, url = str(item).partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise ValueError(f"--upstream wants NAME=http(s)://host[:port], not {item[:80]!r}")
        bases[name.strip().lower()] = url.strip().rstrip("/")
    return bases


def send_list(
    planned: list[Planned], include_errors: bool = False
) -> tuple[list[Planned], list[str]]:
    """(the turns to send, the turns skipped as ``seq 3 (recorded 429)``): a turn the recording
    shows failing is not sent unless ``include_errors``."""
    if include_errors:
        return planned, []
    return [p for p in planned if p.recorded_error is None], [
        f"seq {p.seq} ({p.recorded_error})" for p in planned if p.recorded_error is not None
    ]


def where_sent(
    p: Planned, live: Callable[[str, str, bytes], str | None], model: str | None
) -> tuple[str | None, str | None]:
    """(the URL the turn would be sent to, with the model rewrite applied; what the rewrite
    changed): ``None`` when no upstream serves its API."""
    base = live(p.ex.method, p.ex.url, p.ex.request_body)
    if base is None:
        return None, None
    target, _body, note = _with_model(p.ex, p.ex.request_body, model)
    return base + target, note


def _with_model(ex: Exchange, body: bytes, model: str | None) -> tuple[str, bytes, str | None]:
    """(the recorded request's path and query, ``body``, what changed) with ``model`` asked for
    (:func:`~cassettes.replay.forking.cursor.with_model`)."""
    u = urlsplit(ex.url)
    return with_model(ex.method, u.path + (f"?{u.query}" if u.query else ""), body, model)


def estimate_costs(
    planned: list[Planned],
    live: Callable[[str, str, bytes], str | None],
    model: str | None,
    urls: list[str | None] | None = None,
) -> None:
    """Price each turn for the candidate (``model``, else the model the turn recorded): its own
    price in genai-prices' offline data (the provider the target URL names, else the API family's,
    else the model's name alone), applied to the recorded usage. Sets ``estimate`` and
    ``price_note``. ``urls``: each turn's target (:func:`where_sent`) when the caller has them."""
    for i, p in enumerate(planned):
        name = model or p.model
        if not name:
            p.price_note = "no price: the recorded request names no model"
            continue
        adapter = providers.by_family(p.family)
        ref = adapter.profile.price_model(name) if adapter is not None else name
        url = urls[i] if urls is not None else where_sent(p, live, model)[0]
        try:
            provider_id: str | None = provider_for_url(url or p.ex.url)
        except LookupError:
            provider_id = adapter.profile.price_provider if adapter is not None else None
        # the provider's own price, else by the name alone
        for pid in dict.fromkeys((provider_id, None)):
            try:
                _price_of({"input_tokens": 1}, (pid, ref), p.price_context)
            except LookupError:
                continue
            except (ValueError, ArithmeticError):
                pass
            p.price_ref = (pid, ref)
            break
        if p.price_ref is None:
            p.price_note = f"no price: genai-prices {PRICES_VERSION} knows no model {ref!r}" + (
                f" at {provider_id}" if provider_id else ""
            )
            continue
        if p.usage is None:
            p.price_note = "no price: the recording has no usage for this turn"
            continue
        try:
            p.estimate, where = _price_of(p.usage, p.price_ref, p.price_context)
        except (LookupError, ValueError, ArithmeticError) as exc:
            p.price_note = f"no price: genai-prices {PRICES_VERSION} rejected the usage: {exc}"
            continue
        p.price_note = f"genai-prices {PRICES_VERSION}: {where}" + (
            "" if p.price_ref[0] else ", by the model's name"
        )


def _price_of(
    usage: dict[str, int], ref: tuple[str | None, str], context: dict[str, str]
) -> tuple[Decimal, str]:
    """(the price of ``usage`` for the model ``ref`` names, "provider/model"); raises as
    genai-prices does."""
    total, prov, model_id = calc_price(
        usage, ref[1], provider_id=ref[0], price_context=context or None
    )
    return total, f"{prov}/{model_id}"


def check_budget(
    planned: list[Planned],
    samples: int,
    max_requests: int | None,
    max_cost: Decimal | None,
    allow_unknown: bool = False,
    model: str | None = None,
) -> list[str]:
    """What the comparison will cost (lines); raises :class:`BudgetError` when over a limit. The
    estimate is the candidate's price (:func:`estimate_costs`) on the recorded usage, K times;
    a turn the candidate has no price for makes ``--max-cost`` refuse unless ``allow_unknown``."""
    n = len(planned) * samples
    known = [p for p in planned if p.estimate is not None]
    unknown = [p for p in planned if p.estimate is None]
    cost = sum((p.estimate for p in known if p.estimate is not None), Decimal(0)) * samples
    who = model or "the recorded model"
    lines = [
        f"{count(n, 'request')} ({count(len(planned), 'turn')} × {count(samples, 'sample')}); "
        + _estimate_said(known, samples, cost, who)
    ]
    if unknown:
        why = Counter(p.price_note for p in unknown).most_common(1)[0][0]
        lines.append(
            f"the cost of {len(unknown)} of {count(len(planned), 'turn')} is unknown: {why}"
            + (" (the estimate is a lower bound)" if known else "")
        )
    if max_requests is not None and n > max_requests:
        raise BudgetError(
            f"{count(n, 'request')} would be sent, over --max-requests {max_requests}: nothing "
            "sent",
            lines,
        )
    if max_cost is not None:
        if unknown and not allow_unknown:
            raise BudgetError(
                f"the candidate's price is unknown for {count(len(unknown), 'turn')}, so "
                "--max-cost "
                f"{max_cost} cannot be kept: nothing sent (--allow-unknown-price sends anyway; "
                "--max-cost then bounds the turns with a price)",
                lines,
            )
        if cost > max_cost:
            raise BudgetError(
                f"estimated {money(cost)} at {who}'s price, "
                f"over --max-cost {max_cost}: nothing sent",
                lines,
            )
    return lines


def _estimate_said(known: list[Planned], samples: int, cost: Decimal, who: str) -> str:
    """The estimated cost of the turns with a price, as :func:`check_budget` says it: how it was
    priced, and beside what the recording cost for as many."""
    notes = Counter(p.price_note for p in known).most_common(2)
    line = (
        "estimated cost "
        f"{money(cost, any(p.price_ref is not None and p.price_ref[0] is None for p in known))} at "
        f"{who}'s own price on the recorded usage"
    )
    if notes:
        line += f" ({'; '.join(note for note, _ in notes)})"
    if any(p.usage_estimated for p in known):
        line += (
            f" ({count(sum(p.usage_estimated for p in known), 'turn')} on "
            "usage looptap estimated: the call reported none)"
        )
    rec = [p.cost for p in known if p.cost is not None]
    if rec and sum(rec, Decimal(0)) > 0:
        recorded = sum(rec, Decimal(0)) * samples
        line += (
            "; the recording cost "
            f"{money(recorded, any(p.cost_estimated for p in known if p.cost is not None))} for as "
            "many (×"
            f"{float(sum((p.estimate or Decimal(0) for p in known if p.cost is not None), Decimal(0)) * samples / recorded):.2f}"  # noqa: E501
            ")"
        )
    return line


def _headers_sent(
    ex: Exchange, headers: Headers, said_once: set[str] | None = None
) -> tuple[Headers, list[str]]:
    """The headers a recorded request is sent with: of the recorded ones only what says what the
    body is and which API version it speaks
    (:func:`cassettes.net.recorded_request_headers`: never a recorded
    credential, cookie or connection header), then the user's ``--header`` values. A recorded header
    that cannot be sent (CR, LF, NUL …) is dropped, and a line on stderr names it (once per round
    trip; never its value)."""
    adapter = request_key(ex.method, ex.url, ex.request_headers, ex.request_body).adapter
    said: list[str] = []
    safe: Headers = []
    for k, v in ex.request_headers:
        why = header_problem(k, v)
        if why is None:
            safe.append((k, v))
            continue
        said.append(f"recorded header {said_name(k)} of round trip {ex.seq} not sent: {why}")
        # once per recorded round trip, not per sample
        if said_once is None or k.lower() not in said_once:
            if said_once is not None:
                said_once.add(k.lower())
            print(f"looptap compare: {said[-1]}", file=sys.stderr)
    names = {k.lower() for k, _ in headers}
    recorded = recorded_request_headers(
        safe, adapter.profile.replay_headers if adapter is not None else ()
    )
    return [(k, v) for k, v in recorded if k.lower() not in names] + [
        (k, v) for k, v in headers if header_problem(k, v) is None
    ], said


async def _send(
    base: str, p: Planned, model: str | None, headers: Headers
) -> tuple[Exchange, float]:
    ex = p.ex
    target, body, _ = _with_model(ex, p.body if p.body is not None else ex.request_body, model)
    sent, said = _headers_sent(ex, headers, p.said)
    t0 = time.monotonic()
    out = Exchange(ex.method, base + target, sent, body)
    out.notes.extend(said)
    try:
        response = await Upstream(base).send(ex.method, target, sent, body)
        out.status = response.status
        out.response_headers, own = without_own(list(response.headers))
        if own:
            out.notes.append(
                "marks: the candidate's response carried looptap's own headers "
                f"({', '.join(own)}); dropped"
            )
        out.response_chunks = [(time.monotonic() - t0, piece) async for piece in response.pieces()]
    except UpstreamError as exc:
        out.transport_error = str(exc)
    return out, time.monotonic() - t0


#: Statuses that say the setup is wrong, not the model: the credentials (401, 403, 407) or the
#: model or path (404). Every further request would fail the same way: the comparison stops.
_FATAL = {
    401: "the credentials were refused",
    403: "the credentials were refused",
    407: "the proxy refused the credentials",
    404: "the model or the path is not served there",
}


def _fatal(ex: Exchange, s: Sample) -> str | None:
    """Why the sample in ``ex`` is the setup's failure, not an answer (``None``: it is an answer or
    an A error). A transport failure before any status (cannot connect, closed or reset before
    answering) is the setup's; one after the status (a stream that broke off) is the candidate's."""
    if ex.transport_error is not None and ex.status is None:
        return (
            f"the upstream {ex.url.split('/', 3)[2] if ex.url.count('/') >= 2 else ex.url} failed: "
            f"{ex.transport_error}"
        )
    if ex.status in _FATAL:
        return f"HTTP {ex.status} from {ex.url}: {_FATAL[ex.status]} ({(s.error or '')[:160]})"
    return None


def _self_contained(run: Any, planned: list[Planned]) -> None:
    """Each planned request that continues a recorded answer by its id (the Responses API's
    ``previous_response_id``: its adapter says how its requests chain) gets :attr:`Planned.body`,
    the request self-contained: the history that answer stood for as its input, the id removed.
    The candidate never gave the recorded answers, so the id alone would be refused
    (``previous_response_not_found``); teacher-forced means the recorded history, sent whole."""
    threads = None
    for p in planned:
        doc = p.ex.request_json()
        chain = chaining_of(p.ex.method, p.ex.url, doc)
        if chain is None:
            continue
        if threads is None:
            threads = threads_of(run.exchanges)
        sent, _note = self_contained(threads, chain, doc, ())
        if sent is not doc:
            p.body = orjson.dumps(sent)


def compare_run(
    run: Any,
    planned: list[Planned],
    live: Any,
    model: str | None,
    samples: int,
    headers: Headers,
    skipped: list[str] | None = None,
) -> Comparison:
    """Send every planned turn ``samples`` times (one after another) and compare; ``live`` maps a
    request to the base URL of its API (:func:`cassettes.replay.forking.cursor.live_router`). A
    transport or credential failure stops it there (:attr:`Comparison.stopped`): the turn it
    happened in is left out, nothing more is sent."""
    recorded_tools = {c.name for t in run.analysis.turns.values() for c in t.e.tool_calls}
    recorded_finish = {t.a.finish_reason_raw for t in run.analysis.turns.values()}
    turns: list[TurnComparison] = []
    result = Comparison(
        str(getattr(run, "source", "")), model, samples, turns, skipped=list(skipped or [])
    )

    _self_contained(run, planned)

    async def go() -> None:
        for p in planned:
            base = live(p.ex.method, p.ex.url, p.ex.request_body)
            if base is None:
                result.stopped = (
                    f"seq {p.seq}: no upstream serves this API (give one with --upstream NAME=URL)"
                )
                return
            tools = offered_tools(p.ex)
            tc = TurnComparison(
                p.seq,
                p.conversation,
                p.turn,
                _sample(p.ex, _recorded_latency(p.ex), tools),
                recorded_cost=p.cost,
                estimate=p.estimate,
                recorded_estimated=p.cost_estimated,
                candidate_estimated=p.price_ref is not None and p.price_ref[0] is None,
            )
            for k in range(samples):
                ex, latency = await _send(base, p, model, headers)
                s = _sample(ex, latency, tools)
                why = _fatal(ex, s)
                if why is not None:
                    result.stopped = (
                        f"at seq {p.seq}, sample {k + 1} of {samples}: {why}; nothing more sent"
                    )
                    return
                if s.usage is not None and p.price_ref is not None:
                    try:
                        s.cost, _ = _price_of(s.usage, p.price_ref, p.price_context)
                    except (LookupError, ValueError, ArithmeticError):
                        s.cost = None
                tc.samples.append(s)
            new = {n for s in tc.samples for n, _ in s.calls} - recorded_tools
            offered = {t.name for t in tools}
            tc.new_to_client += [
                f"the tool {n} (never called in the recording"
                + (
                    ")"
                    if n in offered
                    else "; not even offered by the request: the client has no handler for it)"
                )
                for n in sorted(new)
            ]
            tc.new_to_client += [
                f"finish reason {f} (never seen in the recording)"
                for f in sorted({s.finish for s in tc.samples if s.finish} - recorded_finish)
            ]
            turns.append(tc)

    asyncio.run(go())
    return result


def _recorded_latency(ex: Exchange) -> float:
    """The recorded call's duration: measured, else the last chunk's arrival (0: unknown)."""
    if ex.duration is not None:
        return ex.duration
    offsets = [t for t, _ in ex.response_chunks if t is not None]
    return max(offsets) if offsets else 0.0
