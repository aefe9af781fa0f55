"""``looptap compare RUN --model NAME``: the recorded requests sent to a candidate model, teacher
forced (each request is the recorded one, with the recorded history, so a divergence does not
compound), ``--samples K`` times each, and the answers compared with the recording by layer.

Per turn: E — which tools were called with which arguments: whether they parse as JSON, whether
they satisfy the schema of the tool as the recorded request declared it (``tools``, ``functions``,
``functionDeclarations`` …: whatever the family's adapter reads; checked by
:func:`cassettes.analysis.emission.schema_errors`, the same validator and bounds as the
``E.arguments_schema`` check), whether they are JSON-equal to the recording; whether the text
changed, refusals; A — finish reasons, usage, latency, errors; and whether the
recorded client would be handed something it never handled in the recording (a tool never called
in it, or not even offered by the request; a finish reason never seen). With K > 1, agreement rates: how often a sample agrees with the
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
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from cassettes.errors import CassetteError
from cassettes.models import NormalisedResponse, ToolCall, ToolSpec
from cassettes.replay.cursor import with_model
from cassettes.wire.exchange import Exchange, Headers

__all__ = ["ArgumentCheck", "BudgetError", "Comparison", "Sample", "TurnComparison", "compare_run", "plan_requests"]

#: Recorded headers already said not to be sent: (round trip, name).
_SAID: set[tuple[int, str]] = set()


class BudgetError(CassetteError):
    """The comparison would exceed ``--max-requests`` or ``--max-cost``: nothing was sent."""


@dataclass
class ArgumentCheck:
    """One tool call's arguments against the tool the recorded request declared under its name."""

    name: str
    #: The arguments parse as JSON.
    json: bool
    #: The request offered a tool of that name (``None``: it offered no tools at all).
    offered: bool | None
    #: The offered tool declares a schema that could be checked (a schema that is itself invalid is not).
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
        return {"json": self.json, "offered": self.offered, "schema_valid": self.schema_valid, "schema_errors": self.schema_errors,
                "parse_error": self.parse_error}


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

    @property
    def arguments(self) -> dict[str, int]:
        """The samples' calls tallied: how many, how many with JSON arguments, how many checked
        against a declared schema and valid, how many JSON-equal to a recorded call of that tool,
        how many name a tool the request did not offer."""
        recorded = {_canon(n, a) for n, a in self.recorded.calls}
        out = dict.fromkeys(("calls", "json", "schema_checked", "schema_valid", "equal_to_recording", "not_offered"), 0)
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
        return Counter(f"{c.name}: {e}" for s in self.samples for c in s.checks for e in c.schema_errors).most_common()

    def as_json(self) -> dict[str, Any]:
        def sample(s: Sample) -> dict[str, Any]:
            checks = s.checks if len(s.checks) == len(s.calls) else [None] * len(s.calls)
            return {"status": s.status, "calls": [{"name": n, "arguments": a, **(c.as_json() if c is not None else {})} for (n, a), c in zip(s.calls, checks, strict=True)],
                    "text": s.text[:2000], "refusal": s.refusal, "finish": s.finish, "output_tokens": s.output_tokens, "latency": round(s.latency, 4), "error": s.error}

        return {"seq": self.seq, "conversation": self.conversation, "turn": self.turn, "agreement": self.agreement, "self_agreement": self.self_agreement,
                "arguments": self.arguments, "new_to_client": self.new_to_client, "recorded": sample(self.recorded), "samples": [sample(s) for s in self.samples]}


@dataclass
class Comparison:
    run: str
    model: str | None
    samples: int
    turns: list[TurnComparison]

    def summary(self) -> dict[str, int]:
        """The argument tallies of every turn added up (the E line of the whole comparison)."""
        total: Counter[str] = Counter()
        for t in self.turns:
            total.update(t.arguments)
        return {k: total[k] for k in ("calls", "json", "schema_checked", "schema_valid", "equal_to_recording", "not_offered")}

    def as_json(self) -> dict[str, Any]:
        # "looptap": what marks a saved report (``--report``) for ``looptap mcp``'s ``comparison``.
        return {"looptap": "compare", "run": self.run, "model": self.model, "samples": self.samples, "arguments": self.summary(),
                "turns": [t.as_json() for t in self.turns]}

    def lines(self) -> list[str]:
        from cassettes.untrusted import clean_line

        out = [f"looptap compare {self.run} → {self.model or 'the recorded model'}: {len(self.turns)} turns × {self.samples} samples, teacher-forced"]
        for t in self.turns:
            where = f"conversation {t.conversation}, turn {t.turn} (seq {t.seq})" if t.turn is not None else f"seq {t.seq}"
            out.append(f"{where}: agrees with the recording {t.agreement:.0%}, with itself {t.self_agreement:.0%}")
            out.append(f"  E recorded: {_said(t.recorded)}")
            for sig, n in Counter(_said(s) for s in t.samples).most_common(5):
                out.append(f"  E {n}× {sig}")
            if t.arguments["calls"]:
                out.append(f"  E arguments: {_tally(t.arguments)}")
            for violation, n in t.schema_violations()[:5]:
                out.append(f"  E {n}× off the schema: {violation[:200]}")
            out.append(_api_line(t))
            for new in t.new_to_client:
                out.append(f"  C new to the client: {new}")
        summary = self.summary()
        if summary["calls"]:
            out.append(f"E over all turns: {_tally(summary)}")
        return [clean_line(line) for line in out]


def _tally(a: dict[str, int]) -> str:
    n = a["calls"]
    line = f"{n} calls; JSON {a['json']}/{n}; schema-valid {a['schema_valid']}/{a['schema_checked']}"
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
        return name + "\x00" + orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return name + "\x00" + repr(arguments)


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


def _sample(ex: Exchange, latency: float, tools: list[ToolSpec]) -> Sample:
    """The answer in ``ex``, its calls checked against ``tools`` (those the recorded request declared)."""
    from cassettes.parsing.roundtrip import parse_exchange

    rt = parse_exchange(ex)
    r = rt.response
    if r is None or ex.status is None or ex.status >= 400 or r.error is not None:
        return Sample(ex.status, [], "", False, None, None, latency, error=_failure(ex, r)[:500])
    calls = [c for c in r.tool_calls if c.name or c.id or (c.arguments_raw or "").strip() or c.arguments]  # not a zero-valued placeholder
    return Sample(ex.status, [(c.name or "?", c.arguments if c.arguments is not None else c.arguments_raw) for c in calls], r.text, _refused(r),
                  r.finish_reason_raw, r.usage.output_tokens if r.usage else None, latency, checks=[_check(c, tools) for c in calls])


def _failure(ex: Exchange, r: NormalisedResponse | None) -> str:
    """Why a sample has no answer: the API's error message, else the transport error, else its status."""
    why = (r.error.message if r is not None and r.error is not None else None) or ex.transport_error or f"status {ex.status}"
    return str(why)


def _refused(r: NormalisedResponse) -> bool:
    """Whether the model refused: a refusal part, or a refusal finish."""
    return any(p.kind == "refusal" for p in r.parts) or (r.finish_reason is not None and str(r.finish_reason.value) == "refusal")


def _check(c: ToolCall, tools: list[ToolSpec]) -> ArgumentCheck:
    """``c``'s arguments: JSON? valid against the declared schema of its tool? (jsonschema is
    imported with the check, when a comparison first needs it.)"""
    from cassettes.analysis.emission import schema_errors

    spec = next((t for t in tools if t.name == c.name), None) if c.name else None
    parsed = c.arguments_error is None and (c.arguments is not None or not (c.arguments_raw or "").strip())
    out = ArgumentCheck(c.name or "?", json=parsed, offered=(spec is not None) if tools else None, parse_error=c.arguments_error)
    if parsed and spec is not None and spec.parameters and c.kind == "function":
        out.checked = True
        out.schema_errors = schema_errors(c.arguments if c.arguments is not None else {}, spec.parameters)
    return out


def _offered(ex: Exchange) -> list[ToolSpec]:
    """The tools the recorded request declared (as its family's adapter reads them)."""
    from cassettes.parsing.roundtrip import parse_exchange

    req = parse_exchange(ex).request
    return list(req.tools) if req is not None else []


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


def _headers_sent(ex: Exchange, headers: Headers) -> tuple[Headers, list[str]]:
    """The headers a recorded request is sent with: of the recorded ones only what says what the
    body is and which API version it speaks (:func:`cassettes.replay.outgoing.recorded_request_headers`:
    never a recorded credential, cookie or connection header), then the user's ``--header``
    values. A recorded header that cannot be sent (CR, LF, NUL …) is dropped, and a line on
    stderr names it (once per round trip; never its value)."""
    from cassettes.replay.matcher import request_key
    from cassettes.replay.outgoing import header_problem, recorded_request_headers, said_name

    adapter = request_key(ex.method, ex.url, ex.request_headers, ex.request_body).adapter
    said: list[str] = []
    safe: Headers = []
    for k, v in ex.request_headers:
        why = header_problem(k, v)
        if why is None:
            safe.append((k, v))
            continue
        said.append(f"recorded header {said_name(k)} of round trip {ex.seq} not sent: {why}")
        if (id(ex), k.lower()) not in _SAID:  # once per recorded round trip, not per sample
            _SAID.add((id(ex), k.lower()))
            print(f"looptap compare: {said[-1]}", file=sys.stderr)
    names = {k.lower() for k, _ in headers}
    recorded = recorded_request_headers(safe, adapter.replay_headers() if adapter is not None else ())
    return [(k, v) for k, v in recorded if k.lower() not in names] + [(k, v) for k, v in headers if header_problem(k, v) is None], said


async def _send(base: str, p: Planned, model: str | None, headers: Headers) -> tuple[Exchange, float]:
    from urllib.parse import urlsplit

    from cassettes.replay.forward import Upstream, UpstreamError

    ex = p.ex
    u = urlsplit(ex.url)
    target = u.path + (f"?{u.query}" if u.query else "")
    target, body, _ = with_model(ex.method, target, ex.request_body, model)
    sent, said = _headers_sent(ex, headers)
    t0 = time.monotonic()
    out = Exchange(ex.method, base + target, sent, body)
    out.notes.extend(said)
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
            tools = _offered(p.ex)
            tc = TurnComparison(p.seq, p.conversation, p.turn, _sample(p.ex, p.ex.duration or 0.0, tools))
            for _ in range(samples):
                if base is None:
                    tc.samples.append(Sample(None, [], "", False, None, None, 0.0, error="no upstream serves this API (give one with --upstream NAME=URL)"))
                    continue
                ex, latency = await _send(base, p, model, headers)
                tc.samples.append(_sample(ex, latency, tools))
            new = {n for s in tc.samples for n, _ in s.calls} - recorded_tools
            offered = {t.name for t in tools}
            tc.new_to_client += [f"the tool {n} (never called in the recording" + (")" if n in offered else "; not even offered by the request: the client has no handler for it)")
                                 for n in sorted(new)]
            tc.new_to_client += [f"finish reason {f} (never seen in the recording)" for f in sorted({s.finish for s in tc.samples if s.finish} - recorded_finish)]
            turns.append(tc)

    asyncio.run(go())
    return Comparison(str(getattr(run, "source", "")), model, samples, turns)
