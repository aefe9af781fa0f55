"""A run as OpenTelemetry spans, following the GenAI semantic conventions.

Layout: one **trace per conversation**, holding a root span for the conversation (``looptap
conversation c1``, kind INTERNAL) and **one CLIENT span per round trip** (its turns), named
``{gen_ai.operation.name} {model}``. Round trips that belong to no conversation (count-tokens
calls, non-LLM traffic, unparsed bodies) share one more trace, a span each.

Identity: trace and span ids are hashes of the cassette's header (or, for an input without one,
of its requests), the conversation id and the round trip's ``seq``, so exporting the same file
twice gives the same ids, and exporting a recording that has grown since keeps the ids it had.

Time: spans start when the round trip started and last its recorded duration. Imports carry no
wall-clock start: their round trips are laid out one after the other from the cassette's creation
time, each lasting its recorded duration, and say so in ``looptap.timing = "synthetic"``.

Attributes: :mod:`cassettes.interop._span_attributes`; every finding rides along as a
``looptap.finding`` span event.

The payload is OTLP/JSON (:func:`iter_requests`: hex ids, int64 as strings, per the OTLP
spec); :mod:`cassettes.interop._otlp` encodes the same dict as OTLP protobuf for OTLP/HTTP.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import orjson

from .._version import __version__
from ..analysis import Conversation, Finding, TokenCount, Turn
from ..parsing import RoundTrip
from ..reading import Run, timeline
from ..recording import valid_agent
from ..wire import Exchange
from . import _genai_names as genai
from ._span_attributes import AttrValue, span_attributes

__all__ = ["iter_requests"]

SCOPE_NAME = "looptap"
SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_ERROR = 2

# -- OTLP/JSON values ----------------------------------------------------------------------------


def any_value(v: Any) -> dict[str, Any]:
    """An OTLP ``AnyValue`` in OTLP/JSON form (int64 as a decimal string)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _attrs(d: dict[str, AttrValue | None]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in d.items() if v is not None]


def _ns(seconds: float) -> int:
    """Seconds → integer nanoseconds. Offsets are added as integers to a start converted once, so
    a 0.25 s offset lands on ...250000000, not on whatever the float sum rounds to."""
    return round(seconds * 1_000_000_000)


def _agent(header: dict[str, Any]) -> str:
    """The service the spans are of: the agent the run names (``looptap run --agent``, or the
    service of the trace it was imported from), else the OTel SDKs' "nobody named it"."""
    meta = header.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    return valid_agent(meta.get("agent")) or valid_agent(meta.get("service")) or genai.AGENT_UNNAMED


# -- identity ------------------------------------------------------------------------------------


def _identity(run: Run) -> bytes:
    h = hashlib.sha256()
    if run.header:
        h.update(orjson.dumps(run.header, option=orjson.OPT_SORT_KEYS))
    else:  # no header (vcrpy YAML): the requests identify the run
        for ex in run.exchanges:
            h.update(f"{ex.method} {ex.url}\n".encode())
            h.update(ex.request_body)
    return h.digest()


def _hex_id(identity: bytes, *parts: str, size: int) -> str:
    h = hashlib.sha256(identity)
    for p in parts:
        h.update(b"\0" + p.encode())
    digest = h.digest()[:size]
    if not any(digest):  # an all-zero id is invalid in OTLP
        digest = b"\x01" + digest[1:]
    return digest.hex()


# -- spans ---------------------------------------------------------------------------------------


def _finding_event(f: Finding, t_ns: int) -> dict[str, Any]:
    return {
        "timeUnixNano": str(t_ns),
        "name": "looptap.finding",
        "attributes": _attrs(
            {
                "looptap.finding.code": f.code,
                "looptap.finding.layer": f.layer,
                "looptap.finding.severity": f.severity.value,
                "looptap.finding.message": f.message,
                "looptap.finding.path": f.path,
                "looptap.finding.tool_call_id": f.tool_call_id,
                "looptap.finding.related_turn": f.related_turn,
            }
        ),
    }


def _request(like: dict[str, Any], spans: list[dict[str, Any]]) -> dict[str, Any]:
    rs = like["resourceSpans"][0]
    ss = rs["scopeSpans"][0]
    return {
        "resourceSpans": [
            {"resource": rs["resource"], "scopeSpans": [{"scope": ss["scope"], "spans": spans}]}
        ]
    }


def iter_requests(
    run: Run, content: bool = True, project: str | None = None, spans_per_request: int = 1000
) -> Iterator[dict[str, Any]]:
    """The run as OTLP/JSON ``ExportTraceServiceRequest`` objects of at most ``spans_per_request``
    round-trip spans each (one round trip read at a time), the last ones with the conversations'
    root spans (as many to a request), whose times and totals are known only at the end."""
    identity = _identity(run)
    run_tag = identity.hex()[:12]
    resource: dict[str, AttrValue | None] = {
        genai.SERVICE_NAME: _agent(run.header),
        "looptap.cassette": run.name,
        "looptap.run": run_tag,
        "openinference.project.name": project,
    }
    shell = {
        "resourceSpans": [
            {
                "resource": {"attributes": _attrs(resource)},
                "scopeSpans": [
                    {"scope": {"name": SCOPE_NAME, "version": __version__}, "spans": []}
                ],
            }
        ]
    }
    turns = run.analysis.turns
    spans: list[dict[str, Any]] = []
    bounds: dict[str, tuple[int, int]] = {}  # each conversation's first start and last end
    totals = _Totals(run)
    for (ex, rt), (start, length, synthetic) in zip(
        run.pairs, timeline(run.epoch, run.exchanges), strict=True
    ):
        seq = ex.seq if ex.seq is not None else 0
        turn = turns.get(seq)
        if turn is not None:
            totals.note(seq, turn)
        conv = turn.conversation if turn is not None else None
        span = _round_trip_span(
            ex,
            rt,
            seq,
            conv,
            turn,
            (_ns(start), _ns(start) + _ns(length), synthetic),
            identity,
            content,
        )
        if conv is not None:
            start_ns, end_ns = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
            lo, hi = bounds.get(conv, (start_ns, end_ns))
            bounds[conv] = (min(lo, start_ns), max(hi, end_ns))
        spans.append(span)
        if len(spans) >= spans_per_request:
            yield _request(shell, spans)
            spans = []
    # The conversations' root spans, at most spans_per_request to a request (a run of a million
    # conversations is not one request of a million roots).
    roots = (
        _conversation_span(run, conv_rec, bounds[conv_rec.id], identity, totals)
        for conv_rec in run.analysis.conversations
        if conv_rec.id in bounds
    )
    chunk: list[dict[str, Any]] = []
    first = True
    for root in roots:
        chunk.append(root)
        if len(chunk) >= spans_per_request:
            yield _request(shell, spans + chunk if first else chunk)
            spans, chunk, first = [], [], False
    if first or chunk:
        yield _request(shell, spans + chunk if first else chunk)


def _round_trip_span(
    ex: Exchange,
    rt: RoundTrip,
    seq: int,
    conv: str | None,
    turn: Turn | None,
    when: tuple[int, int, bool],
    identity: bytes,
    content: bool,
) -> dict[str, Any]:
    """One round trip's span, a child of its conversation's root span."""
    start_ns, end_ns, synthetic = when
    run_tag = identity.hex()[:12]
    attrs = span_attributes(
        rt, turn, f"looptap-{run_tag}-{conv}" if conv else None, content, ex
    )
    attrs[genai.TIMING] = "synthetic" if synthetic else "recorded"
    model = (rt.request.model if rt.request else None) or (
        rt.response.model if rt.response else None
    )
    op = attrs.get(genai.OPERATION)
    name = (
        f"{op} {model}"
        if op and model
        else (str(op) if op else f"{rt.method} {urlsplit(rt.url).path or '/'}")
    )
    span: dict[str, Any] = {
        "traceId": _hex_id(identity, "trace", conv if conv is not None else "", size=16),
        "spanId": _hex_id(identity, "span", str(seq), size=8),
        "name": name,
        "kind": SPAN_KIND_CLIENT,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": _attrs(attrs),
    }
    if conv is not None:
        span["parentSpanId"] = _hex_id(identity, "conversation", conv, size=8)
    events: list[dict[str, Any]] = []
    if rt.ttft is not None:
        events.append(
            {"timeUnixNano": str(start_ns + _ns(max(rt.ttft, 0.0))), "name": "looptap.first_token"}
        )
    for f in turn.findings if turn is not None else []:
        events.append(_finding_event(f, end_ns))
    if events:
        span["events"] = events
    error = _error_message(rt)
    if error is not None:
        span["status"] = {"code": STATUS_ERROR, "message": error}
    return span


class _Totals:
    """What the conversations' root spans need of their turns, noted as the round-trip spans
    read each turn (a turn is restored from the run's store once per export, not again for its
    conversation's totals): the finding codes of each turn that has some, and the tokens of each
    conversation's last turn. Memory: the findings' codes, one row per conversation and the seqs
    read (as many as the conversations' turn lists already hold)."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._lasts = {c.turns[-1] for c in run.analysis.conversations if c.turns}
        self.codes: dict[int, list[str]] = {}
        self.last_tokens: dict[int, TokenCount] = {}
        self._seen: set[int] = set()

    def note(self, seq: int, turn: Turn) -> None:
        if turn.findings:
            self.codes[seq] = [f.code for f in turn.findings]
        if seq in self._lasts:
            self.last_tokens[seq] = turn.tokens
        self._seen.add(seq)

    def of(self, conv_rec: Conversation) -> tuple[list[str], TokenCount | None]:
        """The conversation's finding codes in turn order and its last turn's tokens (a turn the
        pass did not read, if any, is read here)."""
        turns = self._run.analysis.turns
        present = [s for s in conv_rec.turns if s in turns]  # (a turn the pass read is one of them)
        codes = [
            c
            for s in present
            for c in (
                self.codes.get(s, []) if s in self._seen else [f.code for f in turns[s].findings]
            )
        ]
        if not present:
            return codes, None
        last = present[-1]
        return codes, self.last_tokens[last] if last in self.last_tokens else turns[last].tokens


def _conversation_span(
    run: Run, conv_rec: Conversation, bounds: tuple[int, int], identity: bytes, totals: _Totals
) -> dict[str, Any]:
    """A conversation's root span: from its first round trip's start to its last one's end, with
    the totals known only at the end of the run."""
    run_tag = identity.hex()[:12]
    lo, hi = bounds
    codes, last = totals.of(conv_rec)
    root_attrs: dict[str, AttrValue | None] = {
        # A conversation is one agent's run of the loop (Phoenix showed the root as UNKNOWN).
        "openinference.span.kind": "AGENT",
        "session.id": f"looptap-{run_tag}-{conv_rec.id}",
        "gen_ai.conversation.id": f"looptap-{run_tag}-{conv_rec.id}",
        "looptap.conversation": conv_rec.id,
        genai.FAMILY: conv_rec.family,
        "looptap.turns": len(conv_rec.turns),
        "looptap.label": conv_rec.label,
        "looptap.parent_seq": conv_rec.parent_seq,
        "looptap.conversation.kind": conv_rec.kind,
        "looptap.findings.count": len(codes),
        "looptap.findings.codes": codes or None,
        "looptap.tokens.cumulative_input": last.cumulative_input if last else None,
        "looptap.tokens.cumulative_output": last.cumulative_output if last else None,
        "looptap.cost.cumulative_usd": float(last.cumulative_cost)
        if last and last.cumulative_cost is not None
        else None,
    }
    return {
        "traceId": _hex_id(identity, "trace", conv_rec.id, size=16),
        "spanId": _hex_id(identity, "conversation", conv_rec.id, size=8),
        "name": f"looptap conversation {conv_rec.id}",
        "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(lo),
        "endTimeUnixNano": str(hi),
        "attributes": _attrs(root_attrs),
    }


def _error_message(rt: RoundTrip) -> str | None:
    if rt.transport_error:
        return f"transport error: {rt.transport_error}"
    err = rt.response.error if rt.response is not None else None
    if err is not None:
        where = "error event in the stream" if err.in_stream else f"HTTP {err.status or rt.status}"
        return f"{where}: {err.message or err.type or 'no message'}"
    if (rt.status or 0) >= 400:
        return f"HTTP {rt.status}"
    return None
