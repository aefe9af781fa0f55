"""``looptap compare RUN --model NAME``: the recorded requests sent to a candidate model, teacher
forced (each request is the recorded one, with the recorded history, so a divergence does not
compound), ``--samples K`` times each, and the answers compared with the recording by layer.

Per turn: E — which tools were called with which arguments (JSON-equal to the recording or not),
whether the text changed, refusals; A — finish reasons, usage, latency, errors; and whether the
recorded client would be handed something it never handled in the recording (a tool never called,
a finish reason never seen). With K > 1, agreement rates: how often a sample agrees with the
recording (same tool calls, same arguments; or, for a text answer, a text answer) and how often
the samples agree with their own most common answer.

Nothing is sent before the budget is checked: ``--max-requests`` (turns x K) and ``--max-cost``
(the recorded cost of each turn, K times: an estimate; a turn whose cost is unknown makes the
estimate a lower bound and is refused under ``--max-cost``). ``--dry-run`` lists what would be
sent and sends nothing. Credentials are not in a cassette (redacted when recorded): give them with
``--header 'authorization: Bearer …'``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from cassettes.errors import CassetteError
from cassettes.replay.cursor import with_model
from cassettes.wire.exchange import Exchange, Headers

__all__ = ["BudgetError", "Comparison", "Sample", "TurnComparison", "compare_run", "plan_requests"]

#: Request headers not sent to the candidate: the connection's, and what redaction left in place of a secret.
_NOT_SENT = frozenset({"host", "content-length", "connection", "transfer-encoding", "accept-encoding", "keep-alive"})


class BudgetError(CassetteError):
    """The comparison would exceed ``--max-requests`` or ``--max-cost``: nothing was sent."""


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

    @property
    def signature(self) -> str:
        """What counts as the same answer: the calls and their arguments, or 'text' (or the error)."""
        if self.error is not None:
            return f"error {self.status}"
        if self.calls:
            return orjson.dumps(self.calls, option=orjson.OPT_SORT_KEYS).decode()
        return "refusal" if self.refusal else "text"


@dataclass
class TurnComparison:
    seq: int
    conversation: str | None
    turn: int | None
    recorded: Sample
    samples: list[Sample] = field(default_factory=list)
    #: What the recorded client never handled in the run (a tool never called, a finish reason never seen).
    new_to_client: list[str] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        """Share of samples that agree with the recording."""
        return sum(s.signature == self.recorded.signature for s in self.samples) / len(self.samples) if self.samples else 0.0

    @property
    def self_agreement(self) -> float:
        """Share of samples equal to the samples' most common answer."""
        if not self.samples:
            return 0.0
        return Counter(s.signature for s in self.samples).most_common(1)[0][1] / len(self.samples)

    def as_json(self) -> dict[str, Any]:
        def sample(s: Sample) -> dict[str, Any]:
            return {"status": s.status, "calls": [{"name": n, "arguments": a} for n, a in s.calls], "text": s.text[:2000], "refusal": s.refusal,
                    "finish": s.finish, "output_tokens": s.output_tokens, "latency": round(s.latency, 4), "error": s.error}

        return {"seq": self.seq, "conversation": self.conversation, "turn": self.turn, "agreement": self.agreement, "self_agreement": self.self_agreement,
                "new_to_client": self.new_to_client, "recorded": sample(self.recorded), "samples": [sample(s) for s in self.samples]}


@dataclass
class Comparison:
    run: str
    model: str | None
    samples: int
    turns: list[TurnComparison]

    def as_json(self) -> dict[str, Any]:
        return {"run": self.run, "model": self.model, "samples": self.samples, "turns": [t.as_json() for t in self.turns]}

    def lines(self) -> list[str]:
        from cassettes.untrusted import clean_line

        out = [f"looptap compare {self.run} → {self.model or 'the recorded model'}: {len(self.turns)} turns × {self.samples} samples, teacher-forced"]
        for t in self.turns:
            where = f"conversation {t.conversation}, turn {t.turn} (seq {t.seq})" if t.turn is not None else f"seq {t.seq}"
            out.append(f"{where}: agrees with the recording {t.agreement:.0%}, with itself {t.self_agreement:.0%}")
            out.append(f"  E recorded: {_said(t.recorded)}")
            for sig, n in Counter(_said(s) for s in t.samples).most_common(5):
                out.append(f"  E {n}× {sig}")
            out.append(_api_line(t))
            for new in t.new_to_client:
                out.append(f"  C new to the client: {new}")
        return [clean_line(line) for line in out]


def _api_line(t: TurnComparison) -> str:
    """A: finish reasons, errors, output tokens and latency of the samples."""
    finishes = ", ".join(f"{f or '-'} ×{n}" for f, n in Counter(s.finish for s in t.samples).items())
    errors = sum(s.error is not None for s in t.samples)
    toks = [s.output_tokens for s in t.samples if s.output_tokens is not None]
    lat = [s.latency for s in t.samples]
    line = f"  A finish {finishes} (recorded {t.recorded.finish or '-'}); errors {errors}"
    if toks:
        line += f"; output tokens {sum(toks) / len(toks):.0f} avg (recorded {t.recorded.output_tokens if t.recorded.output_tokens is not None else '-'})"
    if lat:
        line += f"; latency {sum(lat) / len(lat):.2f} s avg"
    return line


def _said(s: Sample) -> str:
    if s.error is not None:
        return f"error {s.status}: {s.error[:100]}"
    if s.calls:
        return ", ".join(f"{n}({orjson.dumps(a).decode()[:80]})" for n, a in s.calls)
    return "refusal" if s.refusal else f"text {s.text[:60]!r}"


def _sample(ex: Exchange, latency: float) -> Sample:
    from cassettes.parsing.roundtrip import parse_exchange

    rt = parse_exchange(ex)
    r = rt.response
    if r is None or ex.status is None or ex.status >= 400 or r.error is not None:
        why = (r.error.message if r is not None and r.error is not None else None) or ex.transport_error or f"status {ex.status}"
        return Sample(ex.status, [], "", False, None, None, latency, error=str(why)[:500])
    calls = [(c.name or "?", c.arguments if c.arguments is not None else c.arguments_raw) for c in r.tool_calls]
    refusal = any(p.kind == "refusal" for p in r.parts) or (r.finish_reason is not None and str(r.finish_reason.value) == "refusal")
    return Sample(ex.status, calls, r.text, refusal, r.finish_reason_raw, r.usage.output_tokens if r.usage else None, latency)


@dataclass
class Planned:
    """One recorded turn to send: its exchange and its place."""

    ex: Exchange
    seq: int
    conversation: str | None
    turn: int | None
    cost: Decimal | None


def plan_requests(run: Any) -> list[Planned]:
    """The recorded turns of ``run`` (model calls, in recording order)."""
    out: list[Planned] = []
    by_seq = {ex.seq if ex.seq is not None else i: ex for i, ex in enumerate(run.exchanges)}
    for seq, t in sorted(run.analysis.turns.items()):
        ex = by_seq.get(seq)
        if ex is not None:
            out.append(Planned(ex, seq, t.conversation, t.index, t.tokens.cost))
    return out


def check_budget(planned: list[Planned], samples: int, max_requests: int | None, max_cost: Decimal | None) -> list[str]:
    """What the comparison will cost (lines); raises :class:`BudgetError` when over a limit."""
    n = len(planned) * samples
    known = [p.cost for p in planned if p.cost is not None]
    unknown = len(planned) - len(known)
    cost = sum(known, Decimal(0)) * samples
    lines = [f"{n} requests ({len(planned)} turns × {samples} samples); estimated cost ${cost:.4f} at the recorded usage and prices"
             + (f" (at least: {unknown} turns have no known price)" if unknown else "")]
    if max_requests is not None and n > max_requests:
        raise BudgetError(f"{n} requests would be sent, over --max-requests {max_requests}: nothing sent")
    if max_cost is not None:
        if unknown:
            raise BudgetError(f"the cost of {unknown} turns is unknown (no price), so --max-cost {max_cost} cannot be kept: nothing sent")
        if cost > max_cost:
            raise BudgetError(f"estimated ${cost:.4f}, over --max-cost {max_cost}: nothing sent")
    return lines


async def _send(base: str, p: Planned, model: str | None, headers: Headers) -> tuple[Exchange, float]:
    from urllib.parse import urlsplit

    from cassettes.replay.forward import Upstream, UpstreamError

    ex = p.ex
    u = urlsplit(ex.url)
    target = u.path + (f"?{u.query}" if u.query else "")
    target, body, _ = with_model(ex.method, target, ex.request_body, model)
    sent = [(k, v) for k, v in ex.request_headers if k.lower() not in _NOT_SENT and "redacted" not in v.lower()]
    names = {k.lower() for k, _ in headers}
    sent = [(k, v) for k, v in sent if k.lower() not in names] + list(headers)
    t0 = time.monotonic()
    out = Exchange(ex.method, base + target, sent, body)
    try:
        response = await Upstream(base).send(ex.method, target, sent, body)
        out.status = response.status
        out.response_headers = list(response.headers)
        out.response_chunks = [(time.monotonic() - t0, piece) async for piece in response.pieces()]
    except UpstreamError as exc:
        out.transport_error = str(exc)
    return out, time.monotonic() - t0


def compare_run(run: Any, planned: list[Planned], live: Any, model: str | None, samples: int, headers: Headers) -> Comparison:
    """Send every planned turn ``samples`` times (one after another) and compare; ``live`` maps a
    request to the base URL of its API (:func:`cassettes.replay.cursor.live_router`)."""
    recorded_tools = {c.name for t in run.analysis.turns.values() for c in t.e.tool_calls}
    recorded_finish = {t.a.finish_reason_raw for t in run.analysis.turns.values()}
    turns: list[TurnComparison] = []

    async def go() -> None:
        for p in planned:
            base = live(p.ex.method, p.ex.url, p.ex.request_body)
            tc = TurnComparison(p.seq, p.conversation, p.turn, _sample(p.ex, p.ex.duration or 0.0))
            for _ in range(samples):
                if base is None:
                    tc.samples.append(Sample(None, [], "", False, None, None, 0.0, error="no upstream serves this API (give one with --upstream NAME=URL)"))
                    continue
                ex, latency = await _send(base, p, model, headers)
                tc.samples.append(_sample(ex, latency))
            new = {n for s in tc.samples for n, _ in s.calls} - recorded_tools
            tc.new_to_client += [f"the tool {n} (never called in the recording)" for n in sorted(new)]
            tc.new_to_client += [f"finish reason {f} (never seen in the recording)" for f in sorted({s.finish for s in tc.samples if s.finish} - recorded_finish)]
            turns.append(tc)

    asyncio.run(go())
    return Comparison(str(getattr(run, "source", "")), model, samples, turns)
