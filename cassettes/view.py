"""Views of round trips for people and for tools.

:func:`roundtrip_json` is the stable, documented per-round-trip object of ``looptap show --json``
(schema ``looptap.roundtrip/1``, documented in ``docs/show-json.md``); it is also stored as the
``derived`` part of each cassette record so ``jq`` can read a cassette directly. Its schema is the
model :class:`RoundTripJson`, from which the doc's field table and ``docs/roundtrip.schema.json``
are generated (``python -m cassettes.view --doc``).
:func:`summary_lines` is the human summary of ``looptap show``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from cassettes.analysis.model import Finding, McpCall, RunAnalysis, Turn
from cassettes.errors import problem_lines
from cassettes.exchange import Exchange
from cassettes.models import FinishReason, Part
from cassettes.roundtrip import RoundTrip, side_call

__all__ = [
    "SCHEMA",
    "SEVERITY_MARK",
    "ErrorJson",
    "FinishReasonJson",
    "RequestJson",
    "RoundTripJson",
    "TimingJson",
    "ToolCallJson",
    "UsageJson",
    "analysis_lines",
    "error_phrase",
    "finding_json",
    "mcp_link_json",
    "roundtrip_json",
    "summary_lines",
    "turn_json",
]

SCHEMA = "looptap.roundtrip/1"
_HTTP = "the HTTP request (query string not included; it is redacted in the cassette)"


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _joined(parts: list[Part], kind: str) -> str | None:
    texts = [p.text for p in parts if p.kind == kind and p.text is not None]
    return "".join(texts) if texts else None


# -- the looptap.roundtrip/1 object ------------------------------------------------------------
#
# The models below are the schema: the field table of docs/show-json.md and
# docs/roundtrip.schema.json are generated from them (``python -m cassettes.view --doc``; a test
# keeps both in sync). Fields are declared in output order, every one always present.


class _Object(BaseModel):
    """An object of the schema. Its fields say what the JSON holds; ``roundtrip_json`` builds the
    JSON itself (:func:`_object`), so these models are instantiated only to validate it."""

    model_config = ConfigDict(frozen=True)


class FinishReasonJson(_Object):
    """Why the generation stopped (`finish_reason`)."""

    raw: str | None = Field(
        description="exactly as sent (`stop`, `tool_use`, `MAX_TOKENS`, `incomplete:max_output_tokens` …)"
    )
    normalised: FinishReason | None = Field(
        description="one of " + ", ".join(f"`{r.value}`" for r in FinishReason)
    )


class UsageJson(_Object):
    """Token counts, inclusive (`usage`; null = not reported, never 0)."""

    input: int | None = Field(
        description="**all** input tokens, cached or not (Anthropic's `input_tokens + cache_creation + cache_read`; OpenAI's `prompt_tokens`)"
    )
    output: int | None = Field(description="output tokens including reasoning")
    cache_read: int | None = Field(description="input tokens read from the prompt cache")
    cache_write: int | None = Field(description="input tokens written to the prompt cache")
    reasoning: int | None = Field(description="reasoning/thinking tokens (a part of `output`)")
    total: int | None = Field(description="as reported")


class ToolCallJson(_Object):
    """A call the model emitted (an item of `tool_calls`)."""

    id: str | None = Field(description="the call's id; null when the wire has none")
    name: str | None = Field(description="the tool the model called")
    arguments: Any = Field(description="parsed (usually an object); null if unparseable")
    arguments_raw: str | None = Field(
        description="the string as sent, or the compact JSON of the object the wire carried"
    )
    arguments_error: str | None = Field(description="why `arguments_raw` is not valid JSON, else null")


class ErrorJson(_Object):
    """An error the API reported (`error`)."""

    status: int | None = Field(description="the HTTP status it came with")
    type: str | None = Field(description="the error type, as sent")
    code: str | None = Field(description="the error code, as sent")
    message: str | None = Field(description="the error message, as sent")
    in_stream: bool = Field(description="true for an error event inside a 200 stream")


class TimingJson(_Object):
    """Seconds from the start of the request (`timing`)."""

    ttfb: float | None = Field(description="to the response headers")
    ttft: float | None = Field(description="to the first stream event")
    duration: float | None = Field(description="to the end of the response")


class RequestJson(_Object):
    """What the client sent, as parsed (`request`)."""

    messages: int = Field(description="how many messages the request holds")
    tools: list[str] = Field(description="the names of the tools offered")
    tool_choice: str | None = Field(description="`auto`, `none`, `required`, `tool:<name>` …")
    previous_response_id: str | None = Field(description="as sent (Responses API)")
    # A plain mapping, not a model: its keys come in the order the cassette stored them.
    history: dict[str, int | bool] | None = Field(
        description='`{"base": seq, "keep": n, "appended": m, "rewritten"?: true}` when the body was delta-encoded '
        "against an earlier request, else null"
    )


class RoundTripJson(_Object):
    """One round trip: a line of `looptap show --json` (without the analysis additions) and the `derived` part of a cassette record."""

    model_config = ConfigDict(
        frozen=True,
        title=SCHEMA,
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    schema_: Literal["looptap.roundtrip/1"] = Field(alias="schema", description='`"looptap.roundtrip/1"`')
    seq: int | None = Field(
        description="position in the run, from 0 (null only for a round trip parsed outside a run)"
    )
    started: str | None = Field(description="ISO-8601 UTC start time (null for imports, which record none)")
    family: str = Field(
        description="`openai_chat` (incl. OpenAI-compatible servers), `openai_responses`, `anthropic`, `gemini`, `ollama`, "
        "`bedrock`; `unknown` for LLM-looking traffic no adapter claims; `none` for other HTTP traffic"
    )
    operation: str | None = Field(
        description="`generate` for model calls; otherwise what the endpoint does (`count_tokens`, `retrieve`, …); "
        "only `generate` round trips are fully parsed"
    )
    method: str = Field(description=_HTTP)
    host: str = Field(description=_HTTP)
    path: str = Field(description=_HTTP)
    model_requested: str | None = Field(
        description="from the body, or the URL (Gemini, Vertex, Bedrock, Azure deployments)"
    )
    model_served: str | None = Field(description="what the API says served the call")
    stream: bool = Field(
        description="the response was streamed (SSE, NDJSON, JSON array or AWS event-stream)"
    )
    transport: Literal["http", "websocket"] = Field(
        description="`http`, or `websocket` for a turn recorded from a WebSocket session "
        "(Responses over a WebSocket: one `response.create` and its events)"
    )
    status: int | None = Field(description="HTTP status (null if no response arrived)")
    finish_reason: FinishReasonJson = Field(description="why the generation stopped, as sent and normalised")
    usage: UsageJson = Field(description="token counts as the API reported them (null where not reported)")
    tool_calls: list[ToolCallJson] = Field(description="calls the model emitted, in order")
    text: str | None = Field(description="the assistant's text, concatenated")
    reasoning: str | None = Field(description="reasoning/thinking text when the API returned it")
    refusal: str | None = Field(description="refusal text (OpenAI `refusal`, …)")
    error: ErrorJson | None = Field(
        description="an error the API reported: an HTTP error body, or an error event inside a stream"
    )
    complete: bool | None = Field(
        description="the response's terminal marker was seen (`[DONE]`, `message_stop`, `response.completed`, a `finishReason`, "
        "`done: true`, `messageStop`); non-streamed bodies are complete; false on a transport error"
    )
    truncated: bool = Field(description="`complete` is false: the stream ended without its terminal event")
    timing: TimingJson = Field(
        description="seconds from the start of the request, each null when not recorded"
    )
    request: RequestJson | None = Field(
        description="the request as parsed (null when there is none to parse)"
    )
    transport_error: str | None = Field(
        description="the exchange is partial (upstream reset, client disconnected)"
    )
    analysis_errors: list[str] = Field(
        description="what could not be parsed, and why; the raw round trip is always kept"
    )
    notes: list[str] = Field(
        description="facts about the bytes: lying Content-Encoding, invalid UTF-8, a cut stream tail, …"
    )
    mcp: dict[str, Any] | None = Field(
        description="for a round trip to an MCP tool server (family `mcp`, operation `mcp <method>`): `method`, `id`, `answered`; "
        "for `tools/call` also `tool`, `arguments`, `tool_use_id` (the model's call it ran, when the client sends it in "
        "`_meta`), `result` (text) and `is_error`, or `error` (`code`, `message`); for `tools/list` the `tools` names; "
        "`linked` (from the analysis, `tools/call` only): `call_id`, `by` (`id` or `name_arguments`), `model_seq`, "
        "`conversation`, `turn` of the model's call it ran, or `candidates` (how many equal awaiting calls it could have "
        "run, when not linked)"
    )


#: Each model's JSON keys, in order.
_KEYS: dict[type[BaseModel], tuple[str, ...]] = {
    m: tuple(f.alias or name for name, f in m.model_fields.items())
    for m in (RoundTripJson, FinishReasonJson, UsageJson, ToolCallJson, ErrorJson, TimingJson, RequestJson)
}


def _object(model: type[BaseModel], **values: Any) -> dict[str, Any]:
    """``values``, checked to be the JSON keys of ``model`` in its order: what
    ``model.model_validate(values).model_dump(mode="json", by_alias=True)`` gives for values that
    are JSON values of the field types already (the tests check it on every corpus round trip).

    Not that pydantic call itself: each recorded round trip is turned into this object once, by
    the recorder's writer, and validating and dumping it doubles the cost of the whole function
    (``model_construct`` and dumping triple it; this check adds a third). Keywords keep the order
    they are passed in, so the check is a tuple comparison."""
    if tuple(values) != _KEYS[model]:
        raise TypeError(
            f"{model.__name__} takes {', '.join(_KEYS[model])} in this order, not {', '.join(values)}"
        )
    return values


def roundtrip_json(rt: RoundTrip, ex: Exchange | None = None) -> dict[str, Any]:
    """``rt`` (and its exchange, when at hand) as a :class:`RoundTripJson` object, in JSON values."""
    resp = rt.response
    req = rt.request
    usage = resp.usage if resp else None
    err = resp.error if resp else None
    url = urlsplit(rt.url)
    complete = rt.complete
    return _object(
        RoundTripJson,
        **{"schema": SCHEMA},  # (the key is the field's alias: ``schema`` is a BaseModel method)
        seq=rt.seq,
        started=_iso(ex.started) if ex is not None else None,
        family=rt.family,
        operation=rt.operation,
        method=rt.method,
        host=url.netloc,
        path=url.path,
        model_requested=req.model if req else None,
        model_served=resp.model if resp else None,
        stream=rt.stream,
        # A turn recorded from a WebSocket session (cassettes.websocket) says so in its notes.
        transport="websocket"
        if ex is not None and any(n.startswith("websocket ") for n in ex.notes)
        else "http",
        status=rt.status,
        finish_reason=_object(
            FinishReasonJson,
            raw=resp.finish_reason_raw if resp else None,
            normalised=resp.finish_reason.value if resp and resp.finish_reason else None,
        ),
        usage=_object(
            UsageJson,
            input=usage.input_tokens if usage else None,
            output=usage.output_tokens if usage else None,
            cache_read=usage.cache_read_tokens if usage else None,
            cache_write=usage.cache_write_tokens if usage else None,
            reasoning=usage.reasoning_tokens if usage else None,
            total=usage.total_tokens if usage else None,
        ),
        tool_calls=[
            _object(
                ToolCallJson,
                id=tc.id,
                name=tc.name,
                arguments=tc.arguments,
                arguments_raw=tc.arguments_raw,
                arguments_error=tc.arguments_error,
            )
            for tc in (resp.tool_calls if resp else [])
        ],
        text=_joined(resp.parts, "text") if resp else None,
        reasoning=_joined(resp.parts, "reasoning") if resp else None,
        refusal=_joined(resp.parts, "refusal") if resp else None,
        error=None
        if err is None
        else _object(
            ErrorJson,
            status=err.status,
            type=err.type,
            code=err.code,
            message=err.message,
            in_stream=err.in_stream,
        ),
        complete=complete,
        truncated=complete is False,
        timing=_object(TimingJson, ttfb=rt.ttfb, ttft=rt.ttft, duration=rt.duration),
        request=None
        if req is None
        else _object(
            RequestJson,
            messages=len(req.messages),
            tools=[t.name for t in req.tools],
            tool_choice=req.tool_choice_mode,
            previous_response_id=req.previous_response_id,
            history=ex.history_delta if ex is not None else None,
        ),
        transport_error=rt.transport_error,
        analysis_errors=list(rt.analysis_errors),
        notes=list(rt.notes),
        mcp=side_call(ex, rt) if ex is not None else None,
    )


def count(n: int, noun: str) -> str:
    """``1 turn``, ``2 turns``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _clip(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _tokens(v: dict[str, Any]) -> str:
    u = v["usage"]
    if all(x is None for x in u.values()):
        return "usage not reported"
    bits = [
        f"in {u['input'] if u['input'] is not None else '?'}",
        f"out {u['output'] if u['output'] is not None else '?'}",
    ]
    if u["cache_read"]:
        bits.append(f"cache read {u['cache_read']}")
    if u["cache_write"]:
        bits.append(f"cache write {u['cache_write']}")
    if u["reasoning"]:
        bits.append(f"reasoning {u['reasoning']}")
    return ", ".join(bits)


def summary_lines(
    views: Iterable[dict[str, Any]],
    problems: list[str] | None = None,
    title: str | None = None,
    *,
    total: int | None = None,
    families: Mapping[str, int] | None = None,
) -> Iterator[str]:
    """A readable per-round-trip summary, a line at a time. ``views`` may be a one-pass stream when
    ``total`` (round trips) and ``families`` (round trips by family) are given."""
    if total is None or families is None:
        views = list(views)
        total = len(views)
        families = {}
        for v in views:
            families[v["family"]] = families.get(v["family"], 0) + 1
    if title:
        yield title
    fams = {k: n for k, n in families.items() if k not in ("none", "mcp")}
    fam_text = ", ".join(f"{k} {n}" for k, n in sorted(fams.items())) or "none"
    mcp = f", {families['mcp']} to MCP tool servers" if families.get("mcp") else ""
    yield f"{count(total, 'round trip')}, {sum(fams.values())} to LLM APIs ({fam_text}){mcp}"
    for p in problem_lines(problems or []):
        yield f"! {p}"
    # The model's tool calls seen so far (id → where), so an MCP tools/call names the call it ran
    # (bounded: a run's tool-call ids, a few dozen bytes each).
    calls: dict[str, str] = {}
    for v in views:
        yield from _roundtrip_lines(v, calls)
        where = (
            f"#{v['seq']} {v['conversation']}/turn {v['turn']}" if v.get("conversation") else f"#{v['seq']}"
        )
        for tc in v.get("tool_calls") or []:
            if tc.get("id") and len(calls) < 100_000:
                calls[str(tc["id"])] = where


def _mcp_lines(v: dict[str, Any], calls: Mapping[str, str]) -> list[str]:
    """An MCP tool server's round trip: the method, and for tools/call the tool, its arguments,
    the model's call it ran (by the tool-use id the client sent) and what came back."""
    m = v.get("mcp") or {}
    head = f"#{v['seq']}  mcp {m.get('method', '?')}  {v['status']}  {v['method']} {v['host']}{v['path']}"
    out = ["", head]
    if m.get("method") == "tools/call":
        import orjson

        args = orjson.dumps(m.get("arguments")).decode() if m.get("arguments") is not None else ""
        out.append(f"    tool: {m.get('tool')}({_clip(args, 200)})")
        link = m.get("linked") or {}
        use = link.get("call_id") or m.get("tool_use_id")
        if link.get("model_seq") is not None:
            how = "" if link.get("by") == "id" else " (by tool and arguments)"
            out.append(
                f"    runs the model's call id={use} from #{link['model_seq']} {link['conversation']}/turn {link['turn']}{how}"
            )
        elif use:
            out.append(
                f"    runs the model's call id={use}"
                + (f" from {calls[use]}" if use in calls else " (not in this run's model calls)")
            )
        elif link.get("candidates"):
            out.append(
                f"    runs one of {link['candidates']} equal model calls awaiting a result (not linked: nothing on the wire tells which)"
            )
        if m.get("error"):
            out.append(
                f"    JSON-RPC error {m['error'].get('code')}: {_clip(m['error'].get('message') or '', 200)}"
            )
        elif m.get("answered"):
            out.append(
                f"    {'error result' if m.get('is_error') else 'result'}: {_clip(m.get('result') or '', 200)}"
            )
        else:
            out.append("    no reply recorded")
    elif m.get("tools") is not None:
        out.append(
            f"    tools: {', '.join(str(t) for t in m['tools'][:30])}"
            + (" …" if len(m["tools"]) > 30 else "")
        )
    return out


def _roundtrip_lines(v: dict[str, Any], calls: Mapping[str, str] | None = None) -> list[str]:
    if v["family"] == "mcp":
        return _mcp_lines(v, calls or {})
    if v["family"] == "none":
        return ["", f"#{v['seq']}  {v['method']} {v['host']}{v['path']}  → {v['status']}  (not an LLM call)"]
    c = (v.get("layers") or {}).get("C") or {}
    return [
        "",
        _head_line(v),
        *_finish_lines(v),
        *_request_lines(v, c),
        *_result_lines(c),
        *_answer_lines(v),
        *_trouble_lines(v),
    ]


def _head_line(v: dict[str, Any]) -> str:
    model = v["model_served"] or v["model_requested"] or "?"
    mode = "stream" if v["stream"] else "json"
    if v.get("transport") == "websocket":
        mode = f"websocket {mode}"
    op = "" if v["operation"] in (None, "generate") else f" [{v['operation']}]"
    where = f"  {v['conversation']}/turn {v['turn']}" if v.get("conversation") else ""
    return f"#{v['seq']}{where}  {v['family']}{op}  {model}  {v['status']}  {mode}  {v['method']} {v['host']}{v['path']}"


def _finish_lines(v: dict[str, Any]) -> list[str]:
    fr = v["finish_reason"]
    if fr["raw"] is not None or fr["normalised"] is not None:
        # The normalised reason says "complete"; the stream's end is worth a word only when missing.
        state = "" if v["complete"] else ("  TRUNCATED" if v["truncated"] else "  (end of response not seen)")
        return [f"    finish: {fr['raw']} ({fr['normalised']}){state}  {_tokens(v)}"]
    return [f"    TRUNCATED  {_tokens(v)}"] if v["truncated"] else []


def _request_lines(v: dict[str, Any], c: dict[str, Any]) -> list[str]:
    req = v["request"]
    if not req:
        return []
    extra = ""
    if c and v.get("turn"):
        # What this turn added to the history its conversation's previous turn sent.
        rewritten = f", {c['rewritten']} rewritten" if c.get("rewritten") else ""
        extra = f" ({c['kept']} as before, {len(c.get('appended') or [])} new{rewritten})"
    return [
        f"    request: {count(req['messages'], 'message')}{extra}, {count(len(req['tools']), 'tool')} offered"
    ]


def _appended_parts(c: dict[str, Any], kind: str) -> Iterator[dict[str, Any]]:
    for m in c.get("appended") or []:
        for part in m.get("parts") or []:
            if part.get(kind):
                yield part[kind]


def _result_lines(c: dict[str, Any]) -> list[str]:
    names = {
        p.get("call_id"): p.get("name") for p in c.get("pairings") or [] if p.get("call_id") and p.get("name")
    }
    for call in _appended_parts(c, "tool_call"):  # the echoed calls name the results that follow them
        if call.get("id") and call.get("name"):
            names.setdefault(call["id"], call["name"])
    out = []
    for tr in _appended_parts(c, "tool_result"):
        name = tr.get("name") or names.get(tr.get("call_id")) or "?"
        flag = " (error)" if tr.get("is_error") else ""
        out.append(
            f"    tool result: {name} id={tr.get('call_id')}{flag} → {_clip(tr.get('content') or '', 80)}"
        )
    return out


def _answer_lines(v: dict[str, Any]) -> list[str]:
    out = [f"    {k}: {_clip(v[k])}" for k in ("reasoning", "text", "refusal") if v[k]]
    for tc in v["tool_calls"]:
        args = tc["arguments_raw"] if tc["arguments_raw"] is not None else ""
        bad = f"  (!) {tc['arguments_error']}" if tc["arguments_error"] else ""
        out.append(f"    tool call: {tc['name']}({_clip(args, 80)}) id={tc['id']}{bad}")
        if tc.get("mcp"):
            out.append(f"      ran by an MCP tool server at #{tc['mcp']['seq']} ({tc['mcp']['tool']})")
    return out


def error_phrase(status: int | None, in_stream: bool, type_: str | None, message: str) -> str:
    """``error (in stream): type message`` / ``error (HTTP 429): …`` (show and textconv)."""
    where = "in stream" if in_stream else f"HTTP {status}"
    return f"error ({where}): {type_ or ''} {message}"


def _trouble_lines(v: dict[str, Any]) -> list[str]:
    out = []
    if v["error"]:
        e = v["error"]
        out.append(
            "    " + error_phrase(e["status"], e["in_stream"], e["type"], _clip(e["message"] or "", 140))
        )
    if v["transport_error"]:
        out.append(f"    transport error: {v['transport_error']}")
    out.extend(f"    (!) analysis: {a}" for a in v["analysis_errors"])
    for f in v.get("findings") or []:
        # A consequence sits under its root cause (details.caused_by), indented.
        under = "  ↳ " if (f.get("details") or {}).get("caused_by") else ""
        out.append(f"    {under}{SEVERITY_MARK[f['severity']]} {f['layer']} {f['code']}: {f['message']}")
    return out


# -- layer analysis ---------------------------------------------------------------------------


def finding_json(f: Finding) -> dict[str, Any]:
    return f.model_dump(mode="json")


def _message_json(m: Any) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for p in m.parts:
        d: dict[str, Any] = {"kind": p.kind}
        if p.text is not None:
            d["text"] = p.text
        if p.tool_call is not None:
            d["tool_call"] = {
                "id": p.tool_call.id,
                "name": p.tool_call.name,
                "arguments": p.tool_call.arguments,
            }
        if p.tool_result is not None:
            d["tool_result"] = {
                "call_id": p.tool_result.call_id,
                "name": p.tool_result.name,
                "content": p.tool_result.content,
                "is_error": p.tool_result.is_error,
            }
        if p.media_type is not None:
            d["media_type"] = p.media_type
        out.append(d)
    return {"role": m.role, "parts": out}


def mcp_link_json(call: McpCall) -> dict[str, Any]:
    """The model's call an MCP tools/call ran (``mcp.linked`` in schema looptap.roundtrip/1)."""
    return {
        "call_id": call.call_id,
        "by": call.linked_by,
        "model_seq": call.model_seq,
        "conversation": call.conversation,
        "turn": call.turn,
        "candidates": call.candidates,
    }


def turn_json(turn: Turn) -> dict[str, Any]:
    """The analysis additions to a round trip's JSON object (schema looptap.roundtrip/1)."""
    c = turn.c
    return {
        "conversation": turn.conversation,
        "turn": turn.index,
        "previous_seq": turn.previous_seq,
        "layers": {
            "E": turn.e.model_dump(mode="json"),
            "A": turn.a.model_dump(mode="json", exclude={"usage"})
            | {"error": turn.a.error.model_dump(mode="json", exclude={"raw"}) if turn.a.error else None},
            "C": c.model_dump(mode="json", exclude={"appended", "params"})
            | {"appended": [_message_json(m) for m in c.appended]},
        },
        "tokens": turn.tokens.model_dump(mode="json"),
        "findings": [finding_json(f) for f in turn.findings],
    }


#: The mark of each finding severity in text output (show, textconv).
SEVERITY_MARK = {"error": "✖", "warning": "▲", "info": "·"}


def _money(v: Any) -> str:
    return "unknown" if v is None else f"${float(v):.4f}"


def analysis_lines(analysis: RunAnalysis) -> list[str]:
    """Findings grouped by layer, then the token-cost growth table of each conversation."""
    out: list[str] = []
    names = {"E": "E — model emission", "A": "A — API", "C": "C — client dispatch"}
    out.append("")
    out.append(
        f"{count(len(analysis.conversations), 'conversation')}, {count(len(analysis.turns), 'turn')}, {count(len(analysis.findings), 'finding')}"
    )
    for layer in ("E", "A", "C"):
        fs = [f for f in analysis.findings if f.layer == layer]
        out.append("")
        counts = {sev: sum(1 for f in fs if f.severity.value == sev) for sev in ("error", "warning", "info")}
        out.append(
            f"{names[layer]}: {counts['error']} errors, {counts['warning']} warnings, {counts['info']} info"
        )
        for f in sorted(fs, key=lambda f: f.seq or 0):
            where = f"#{f.seq} {f.conversation}/turn {f.turn}"
            out.append(f"  {SEVERITY_MARK[f.severity.value]} {f.code:34} {where:18} {f.message}")
    for conv in analysis.conversations:
        turns = [analysis.turns[s] for s in conv.turns]
        if not turns:
            continue
        out.append("")
        branch = ""
        if conv.parent_seq is not None:
            branch = f", {'sub-agent of' if conv.branch == 'sub_agent' else 'side call on' if conv.branch == 'side_call' else 'branched from'} #{conv.parent_seq}"
        title = f" “{conv.label or conv.title}”" if conv.label or conv.title else ""
        out.append(
            f"token growth, conversation {conv.id}{title} ({conv.family}, {count(len(turns), 'turn')}{branch})"
        )
        out.append(
            f"  {'turn':>4} {'#':>4} {'input':>8} {'cached':>7} {'written':>7} {'output':>6} {'reason':>6}  "
            f"{'system':>6} {'tools':>6} {'user':>6} {'history':>7} {'results':>7} {'new':>6}  {'cost':>9} {'cumulative':>10}  source"
        )
        for t in turns:
            k = t.tokens
            seg = k.segments

            def n(v: int | None) -> str:
                return "-" if v is None else str(v)

            split = (
                f"{seg.system:>6} {seg.tools:>6} {seg.user:>6} {seg.assistant:>7} {seg.tool_results:>7} {seg.new:>6}"
                if seg is not None
                else f"{'':>6} {'':>6} {'':>6} {'':>7} {'':>7} {'':>6}"
            )
            out.append(
                f"  {t.index:>4} {t.seq:>4} {n(k.input):>8} {n(k.cache_read):>7} {n(k.cache_write):>7} {n(k.output):>6} "
                f"{n(k.reasoning):>6}  {split}  {('~' if k.price_estimated else '') + _money(k.cost):>9} {_money(k.cumulative_cost):>10}  {k.source}"
            )
        out.append("  (input split by segment: estimated from text size, scaled to the reported input)")
        if any(analysis.turns[s].tokens.price_estimated for s in conv.turns if s in analysis.turns):
            out.append(
                "  (~: estimated cost, the list price of the model by its name; the host is not a provider looptap knows)"
            )
    if analysis.errors:
        out.append("")
        out.extend(f"(!) analysis: {e}" for e in analysis.errors)
    return out


# -- the doc table and the JSON Schema, generated from RoundTripJson ----------------------------

#: The line of docs/show-json.md above the generated table.
DOC_MARK = "<!-- generated from cassettes/view.py (RoundTripJson) by `python -m cassettes.view --doc`: edit the model, not this table -->"


def _type_name(t: Any) -> str:
    if get_origin(t) is list:
        return "list of strings" if get_args(t) == (str,) else "list"
    if get_origin(t) is Literal or (isinstance(t, type) and issubclass(t, str)):  # str, a StrEnum
        return "string"
    if t is bool or t is int:
        return t.__name__
    if t is float:
        return "number"
    if t is dict or get_origin(t) is dict or (isinstance(t, type) and issubclass(t, BaseModel)):
        return "object"
    return "any JSON value"


def _members(annotation: Any) -> tuple[Any, ...]:
    return get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)


def _doc_type(annotation: Any) -> str:
    members = _members(annotation)
    names = [_type_name(t) for t in members if t is not type(None)]
    return " \\| ".join(names + (["null"] if type(None) in members else []))


def _nested(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (alone, or as a list's items), and whether in a list."""
    for t in _members(annotation):
        if get_origin(t) is list:
            (item,) = get_args(t)
            if isinstance(item, type) and issubclass(item, BaseModel):
                return item, True
        elif isinstance(t, type) and issubclass(t, BaseModel):
            return t, False
    return None, False


def _doc_rows(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """(field, type, meaning) of each field, then of the fields of the object it holds."""
    for name, field in model.model_fields.items():
        inner, many = _nested(field.annotation)
        key = f"{prefix}{field.alias or name}{'[]' if many else ''}"
        yield key, _doc_type(field.annotation), (field.description or "").replace("|", "\\|")
        if inner is not None:
            yield from _doc_rows(inner, f"{key}.")


def doc_table() -> str:
    """The field table of docs/show-json.md. Neighbours with the same type and meaning share a row
    (``method``, ``host``, ``path``)."""
    rows: list[tuple[list[str], str, str]] = []
    for key, type_, meaning in _doc_rows(RoundTripJson):
        if rows and rows[-1][1:] == (type_, meaning):
            rows[-1][0].append(key)
        else:
            rows.append(([key], type_, meaning))
    lines = ["| field | type | meaning |", "|---|---|---|"]
    lines += [
        f"| {', '.join(f'`{k}`' for k in keys)} | {type_} | {meaning} |" for keys, type_, meaning in rows
    ]
    return "\n".join(lines) + "\n"


def schema_text() -> str:
    """The JSON Schema of the ``looptap.roundtrip/1`` object, as docs/roundtrip.schema.json holds it."""
    return (
        json.dumps(RoundTripJson.model_json_schema(mode="serialization"), indent=2, ensure_ascii=False) + "\n"
    )


def write_docs(root: Path) -> None:
    """Rewrite the field table of ``root``/docs/show-json.md (the table under :data:`DOC_MARK`)
    and ``root``/docs/roundtrip.schema.json from the model."""
    page = root / "docs" / "show-json.md"
    lines = page.read_text().splitlines(keepends=True)
    start = lines.index(DOC_MARK + "\n") + 1
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = [doc_table()]
    page.write_text("".join(lines))
    (root / "docs" / "roundtrip.schema.json").write_text(schema_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cassettes.view", description="The looptap.roundtrip/1 schema, from its model."
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--doc",
        metavar="ROOT",
        nargs="?",
        const=".",
        help="rewrite ROOT/docs/show-json.md's field table and ROOT/docs/roundtrip.schema.json",
    )
    what.add_argument("--schema", action="store_true", help="print the JSON Schema")
    args = parser.parse_args(argv)
    if args.schema:
        sys.stdout.write(schema_text())
    else:
        write_docs(Path(args.doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
