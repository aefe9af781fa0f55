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

Attributes (GenAI semconv, development status): ``gen_ai.provider.name`` (from the adapter's
hook: the vendor of a known host, else the family's format), ``gen_ai.operation.name``,
``gen_ai.request.*`` (model and sampling parameters), ``gen_ai.response.{id,model,finish_reasons}``,
``gen_ai.usage.*`` (input and output, cache read and creation, reasoning; the inclusive convention
the semconv asks for), ``gen_ai.conversation.id``, and — unless ``content=False`` — the JSON
strings ``gen_ai.system_instructions``, ``gen_ai.input.messages``, ``gen_ai.output.messages`` and
``gen_ai.tool.definitions`` with parts ``text``, ``tool_call``, ``tool_call_response`` and
``reasoning``. looptap's own view rides along as ``looptap.*`` attributes (the E/A/C views, token
source, the input's split as ``show`` prints it — ``looptap.tokens.split.*`` — and cost with its
``estimated`` flags) and every finding as a ``looptap.finding`` span event.

The payload is OTLP/JSON (:func:`iter_requests`: hex ids, int64 as strings, per the OTLP
spec); :mod:`cassettes.interop.otlp` encodes the same dict as OTLP protobuf for OTLP/HTTP.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import SplitResult, urlsplit

import orjson

from cassettes import providers
from cassettes._version import __version__
from cassettes.analysis import Finding, Turn
from cassettes.analysis.model import Conversation, TokenCount
from cassettes.models import FinishReason, Message, NormalisedRequest, NormalisedResponse, Part
from cassettes.parsing.roundtrip import RoundTrip
from cassettes.reading.run import Run
from cassettes.reading.timeline import timeline
from cassettes.views.growth import SPLIT, growth_bars

__all__ = ["iter_requests"]

SCOPE_NAME = "looptap"
SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_ERROR = 2

AttrValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]

#: Normalised finish classes → the semconv output-message ``finish_reason`` values.
_FINISH = {
    FinishReason.COMPLETE: "stop",
    FinishReason.TOOL_CALL: "tool_call",
    FinishReason.TRUNCATED_LENGTH: "length",
    FinishReason.TRUNCATED_CONTEXT: "length",
    FinishReason.FILTERED: "content_filter",
    FinishReason.PROMPT_BLOCKED: "content_filter",
    FinishReason.ERROR: "error",
}

#: Sampling parameters as request bodies spell them → ``gen_ai.request.*`` (name, kind).
_PARAMS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("gen_ai.request.temperature", "double", ("temperature",)),
    ("gen_ai.request.top_p", "double", ("top_p", "topP")),
    ("gen_ai.request.top_k", "double", ("top_k", "topK")),
    ("gen_ai.request.frequency_penalty", "double", ("frequency_penalty", "frequencyPenalty")),
    ("gen_ai.request.presence_penalty", "double", ("presence_penalty", "presencePenalty")),
    (
        "gen_ai.request.max_tokens",
        "int",
        (
            "max_tokens",
            "max_completion_tokens",
            "max_output_tokens",
            "maxOutputTokens",
            "maxTokens",
            "num_predict",
        ),
    ),
    ("gen_ai.request.seed", "int", ("seed",)),
    ("gen_ai.request.choice.count", "int", ("n", "candidateCount")),
    ("gen_ai.request.stop_sequences", "strings", ("stop", "stop_sequences", "stopSequences")),
)


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


def _json(v: Any) -> str:
    return orjson.dumps(v).decode()


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


# -- messages (semconv parts) --------------------------------------------------------------------


def _part(p: Part) -> dict[str, Any]:
    if p.kind in ("text", "reasoning", "refusal"):
        return {"type": p.kind, "content": p.text or ""}
    if p.kind == "tool_call" and p.tool_call is not None:
        tc = p.tool_call
        out: dict[str, Any] = {"type": "tool_call", "id": tc.id, "name": tc.name or ""}
        out["arguments"] = tc.arguments if tc.arguments is not None else tc.arguments_raw
        if tc.kind != "function":
            out["tool_kind"] = tc.kind
        return out
    if p.kind == "tool_result" and p.tool_result is not None:
        tr = p.tool_result
        res: dict[str, Any] = {
            "type": "tool_call_response",
            "id": tr.call_id,
            "response": tr.content,
        }
        if tr.is_error is not None:
            res["is_error"] = tr.is_error
        return res
    if p.kind == "media":
        return {"type": "media", "mime_type": p.media_type}
    # A block looptap has no kind for (a cache point, a server tool's result …): kept as sent.
    return (
        {"type": "other", "details": p.provider_details}
        if p.provider_details
        else {"type": "other"}
    )


def _message(m: Message) -> dict[str, Any]:
    return {"role": m.role, "parts": [_part(p) for p in m.parts]}


def _system_instructions(req: NormalisedRequest) -> list[dict[str, Any]]:
    """System parts sent beside the history (instructions that are history messages are already
    among the input messages, as the semconv wants)."""
    # (by value: a request rebuilt from a history delta holds copies of its history's parts)
    in_history = [p for m in req.messages if m.role in ("system", "developer") for p in m.parts]
    return [_part(p) for p in req.system if p not in in_history]


def _output_messages(resp: NormalisedResponse) -> list[dict[str, Any]]:
    if resp.error is not None and not resp.parts:
        return []
    fr = resp.finish_reason
    finish = _FINISH.get(fr, fr.value) if fr is not None else (resp.finish_reason_raw or "unknown")
    return [{"role": "assistant", "parts": [_part(p) for p in resp.parts], "finish_reason": finish}]


def _tool_definitions(req: NormalisedRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in req.tools:
        d: dict[str, Any] = {"type": t.kind, "name": t.name}
        if t.description is not None:
            d["description"] = t.description
        if t.parameters is not None:
            d["parameters"] = t.parameters
        out.append(d)
    return out


def _params(req: NormalisedRequest) -> dict[str, AttrValue | None]:
    out: dict[str, AttrValue | None] = {}
    for attr, kind, keys in _PARAMS:
        v = next((req.params[k] for k in keys if k in req.params), None)
        if v is None or isinstance(v, bool):
            continue
        if kind == "double" and isinstance(v, (int, float)):
            out[attr] = float(v)
        elif kind == "int" and isinstance(v, int):
            if attr != "gen_ai.request.choice.count" or v != 1:
                out[attr] = v
        elif kind == "strings":
            vals = [v] if isinstance(v, str) else v
            if isinstance(vals, list) and vals and all(isinstance(s, str) for s in vals):
                out[attr] = vals
    return out


# -- spans ---------------------------------------------------------------------------------------


def span_attributes(
    rt: RoundTrip, turn: Turn | None, conversation_id: str | None, content: bool = True
) -> dict[str, AttrValue | None]:
    """The attributes of one round trip's span (``None`` values are left out): the GenAI
    semantic conventions, the content when asked, the HTTP client's, then looptap's own."""
    url = urlsplit(rt.url)
    attrs = _gen_ai_attributes(rt, url, conversation_id)
    if content:
        attrs.update(_content_attributes(rt))
    attrs.update(_http_attributes(rt, url))
    attrs.update(_looptap_attributes(rt, turn))
    return attrs


def _gen_ai_attributes(
    rt: RoundTrip, url: SplitResult, conversation_id: str | None
) -> dict[str, AttrValue | None]:
    adapter = providers.by_family(rt.family)
    req, resp = rt.request, rt.response
    # OpenInference (Phoenix) reads the kind from here; without it a span shows as UNKNOWN.
    attrs: dict[str, AttrValue | None] = {
        "openinference.span.kind": "LLM" if rt.family != "none" else None
    }
    if adapter is not None:
        attrs["gen_ai.operation.name"] = (
            adapter.profile.otel_operation if rt.operation == "generate" else rt.operation
        )
        attrs["gen_ai.provider.name"] = adapter.profile.otel_provider_name(url.hostname or "")
    if req is not None:
        attrs["gen_ai.request.model"] = req.model
        attrs["gen_ai.request.stream"] = rt.stream
        attrs.update(_params(req))
    if resp is not None:
        attrs["gen_ai.response.id"] = resp.id
        attrs["gen_ai.response.model"] = resp.model
        if resp.finish_reason_raw is not None:
            attrs["gen_ai.response.finish_reasons"] = [resp.finish_reason_raw]
        u = resp.usage
        if u is not None:
            attrs["gen_ai.usage.input_tokens"] = u.input_tokens
            attrs["gen_ai.usage.output_tokens"] = u.output_tokens
            attrs["gen_ai.usage.cache_read.input_tokens"] = u.cache_read_tokens
            attrs["gen_ai.usage.cache_creation.input_tokens"] = u.cache_write_tokens
            attrs["gen_ai.usage.reasoning.output_tokens"] = u.reasoning_tokens
    attrs["gen_ai.conversation.id"] = conversation_id
    return attrs


def _content_attributes(rt: RoundTrip) -> dict[str, AttrValue | None]:
    """What was said: system instructions, input and output messages, tool definitions."""
    req, resp = rt.request, rt.response
    attrs: dict[str, AttrValue | None] = {}
    if req is not None:
        system = _system_instructions(req)
        if system:
            attrs["gen_ai.system_instructions"] = _json(system)
        attrs["gen_ai.input.messages"] = _json([_message(m) for m in req.messages])
        if req.tools:
            attrs["gen_ai.tool.definitions"] = _json(_tool_definitions(req))
    if resp is not None:
        out = _output_messages(resp)
        if out:
            attrs["gen_ai.output.messages"] = _json(out)
    return attrs


def _http_attributes(rt: RoundTrip, url: SplitResult) -> dict[str, AttrValue | None]:
    attrs: dict[str, AttrValue | None] = {
        "http.request.method": rt.method,
        "url.full": rt.url,
        "server.address": url.hostname,
    }
    try:
        attrs["server.port"] = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        pass
    attrs["http.response.status_code"] = rt.status
    err = rt.response.error if rt.response is not None else None
    if rt.transport_error:
        attrs["error.type"] = "transport_error"
    elif (rt.status or 0) >= 400:
        attrs["error.type"] = str(rt.status)
    elif err is not None:
        attrs["error.type"] = err.type or "api_error"
    return attrs


def _looptap_attributes(rt: RoundTrip, turn: Turn | None) -> dict[str, AttrValue | None]:
    resp = rt.response
    attrs: dict[str, AttrValue | None] = {
        "looptap.seq": rt.seq,
        "looptap.family": rt.family,
        "looptap.complete": rt.complete,
    }
    if resp is not None and resp.finish_reason is not None:
        attrs["looptap.finish_reason"] = resp.finish_reason.value
    if turn is not None:
        attrs.update(_turn_attributes(turn))
    if rt.analysis_errors:
        attrs["looptap.analysis_errors"] = list(rt.analysis_errors)
    if rt.notes:
        attrs["looptap.notes"] = list(rt.notes)
    return attrs


def _turn_attributes(turn: Turn) -> dict[str, AttrValue | None]:
    e, a, c, k = turn.e, turn.a, turn.c, turn.tokens
    flagged = sorted({f.layer for f in turn.findings if f.severity.value != "info"})
    cost = float(k.cost) if k.cost is not None else None
    cumulative = float(k.cumulative_cost) if k.cumulative_cost is not None else None
    return {
        "looptap.conversation": turn.conversation,
        "looptap.turn": turn.index,
        "looptap.previous_seq": turn.previous_seq,
        "looptap.e.tool_calls": len(e.tool_calls),
        "looptap.e.empty": e.empty,
        "looptap.a.status": a.status,
        "looptap.a.ttfb_s": a.ttfb,
        "looptap.a.ttft_s": a.ttft,
        "looptap.a.duration_s": a.duration,
        "looptap.a.request_id": a.request_id,
        "looptap.c.link": c.link,
        "looptap.c.kept": c.kept,
        "looptap.c.appended": len(c.appended),
        "looptap.c.rewritten": c.rewritten,
        "looptap.c.echoed_assistant": c.echoed_assistant,
        "looptap.c.tools_offered": list(c.tools_offered) or None,
        "looptap.tokens.source": k.source,
        **_split_attributes(turn),
        "looptap.cost.usd": cost,
        "looptap.cost.estimated": k.price_estimated if cost is not None else None,
        "looptap.cost.cumulative_usd": cumulative,
        "looptap.cost.cumulative_estimated": k.cumulative_estimated
        if cumulative is not None
        else None,
        "looptap.layers.flagged": flagged or None,
        "looptap.findings.count": len(turn.findings),
        "looptap.findings.codes": [f.code for f in turn.findings] or None,
    }


def _split_attributes(turn: Turn) -> dict[str, AttrValue | None]:
    """``looptap.tokens.split.{system,tools,history,tool_results,new}``: the turn's input split as
    every view shows it (:func:`cassettes.views.growth.growth_bars`; the parts add up to the input,
    estimated from text size and scaled to it). None for a turn with nothing to split by."""

    (bar,) = growth_bars([turn])
    if bar.unsplit:
        return {}
    return {f"looptap.tokens.split.{name}": getattr(bar, name) for name, _ in SPLIT}


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
        "service.name": "looptap",
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
    for (ex, rt), (start, length, synthetic) in zip(run.pairs, timeline(run), strict=True):
        seq = ex.seq if ex.seq is not None else 0
        turn = turns.get(seq)
        if turn is not None:
            totals.note(seq, turn)
        conv = turn.conversation if turn is not None else None
        span = _round_trip_span(
            run,
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
    run: Run,
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
    attrs = span_attributes(rt, turn, f"looptap-{run_tag}-{conv}" if conv else None, content)
    attrs["looptap.timing"] = "synthetic" if synthetic else "recorded"
    model = (rt.request.model if rt.request else None) or (
        rt.response.model if rt.response else None
    )
    op = attrs.get("gen_ai.operation.name")
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
        "looptap.family": conv_rec.family,
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
