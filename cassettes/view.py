"""Views of round trips for people and for tools.

:func:`roundtrip_json` is the stable, documented per-round-trip object of ``looptap show --json``
(schema ``looptap.roundtrip/1``, documented in ``docs/show-json.md``); it is also stored as the
``derived`` part of each cassette record so ``jq`` can read a cassette directly.
:func:`summary_lines` is the human summary of ``looptap show``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from cassettes.exchange import Exchange
from cassettes.models import Part
from cassettes.roundtrip import RoundTrip

__all__ = ["SCHEMA", "roundtrip_json", "summary_lines"]

SCHEMA = "looptap.roundtrip/1"


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _joined(parts: list[Part], kind: str) -> str | None:
    texts = [p.text for p in parts if p.kind == kind and p.text is not None]
    return "".join(texts) if texts else None


def roundtrip_json(rt: RoundTrip, ex: Exchange | None = None) -> dict[str, Any]:
    resp = rt.response
    req = rt.request
    usage = resp.usage if resp else None
    err = resp.error if resp else None
    url = urlsplit(rt.url)
    complete = rt.complete
    return {
        "schema": SCHEMA,
        "seq": rt.seq,
        "started": _iso(ex.started) if ex is not None else None,
        "family": rt.family,
        "operation": rt.operation,
        "method": rt.method,
        "host": url.netloc,
        "path": url.path,
        "model_requested": req.model if req else None,
        "model_served": resp.model if resp else None,
        "stream": rt.stream,
        "status": rt.status,
        "finish_reason": {
            "raw": resp.finish_reason_raw if resp else None,
            "normalised": resp.finish_reason.value if resp and resp.finish_reason else None,
        },
        "usage": {
            "input": usage.input_tokens if usage else None,
            "output": usage.output_tokens if usage else None,
            "cache_read": usage.cache_read_tokens if usage else None,
            "cache_write": usage.cache_write_tokens if usage else None,
            "reasoning": usage.reasoning_tokens if usage else None,
            "total": usage.total_tokens if usage else None,
        },
        "tool_calls": [
            {
                "id": tc.id,
                "name": tc.name,
                "arguments": tc.arguments,
                "arguments_raw": tc.arguments_raw,
                "arguments_error": tc.arguments_error,
            }
            for tc in (resp.tool_calls if resp else [])
        ],
        "text": _joined(resp.parts, "text") if resp else None,
        "reasoning": _joined(resp.parts, "reasoning") if resp else None,
        "refusal": _joined(resp.parts, "refusal") if resp else None,
        "error": None
        if err is None
        else {"status": err.status, "type": err.type, "code": err.code, "message": err.message, "in_stream": err.in_stream},
        "complete": complete,
        "truncated": complete is False,
        "timing": {"ttfb": rt.ttfb, "ttft": rt.ttft, "duration": rt.duration},
        "request": None
        if req is None
        else {
            "messages": len(req.messages),
            "tools": [t.name for t in req.tools],
            "tool_choice": req.tool_choice_mode,
            "previous_response_id": req.previous_response_id,
            "history": ex.history_delta if ex is not None else None,
        },
        "transport_error": rt.transport_error,
        "analysis_errors": list(rt.analysis_errors),
        "notes": list(rt.notes),
    }


def _clip(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _tokens(v: dict[str, Any]) -> str:
    u = v["usage"]
    if all(x is None for x in u.values()):
        return "usage not reported"
    bits = [f"in {u['input'] if u['input'] is not None else '?'}", f"out {u['output'] if u['output'] is not None else '?'}"]
    if u["cache_read"]:
        bits.append(f"cache read {u['cache_read']}")
    if u["cache_write"]:
        bits.append(f"cache write {u['cache_write']}")
    if u["reasoning"]:
        bits.append(f"reasoning {u['reasoning']}")
    return ", ".join(bits)


def summary_lines(views: list[dict[str, Any]], problems: list[str] | None = None, title: str | None = None) -> list[str]:
    """A readable per-round-trip summary."""
    out: list[str] = []
    llm = [v for v in views if v["family"] != "none"]
    if title:
        out.append(title)
    fams: dict[str, int] = {}
    for v in llm:
        fams[v["family"]] = fams.get(v["family"], 0) + 1
    fam_text = ", ".join(f"{k} {n}" for k, n in sorted(fams.items())) or "none"
    out.append(f"{len(views)} round trips, {len(llm)} to LLM APIs ({fam_text})")
    for p in problems or []:
        out.append(f"! {p}")
    for v in views:
        out.append("")
        if v["family"] == "none":
            out.append(f"#{v['seq']}  {v['method']} {v['host']}{v['path']}  → {v['status']}  (not an LLM call)")
            continue
        model = v["model_served"] or v["model_requested"] or "?"
        mode = "stream" if v["stream"] else "json"
        op = "" if v["operation"] in (None, "generate") else f" [{v['operation']}]"
        out.append(f"#{v['seq']}  {v['family']}{op}  {model}  {v['status']}  {mode}  {v['method']} {v['host']}{v['path']}")
        fr = v["finish_reason"]
        if fr["raw"] is not None or fr["normalised"] is not None:
            state = "complete" if v["complete"] else ("TRUNCATED" if v["truncated"] else "?")
            out.append(f"    finish: {fr['raw']} ({fr['normalised']})  {state}  {_tokens(v)}")
        elif v["truncated"]:
            out.append(f"    TRUNCATED  {_tokens(v)}")
        req = v["request"]
        if req:
            hist = req.get("history") or {}
            extra = f", +{hist['appended']} appended to #{hist['base']}" if hist else ""
            out.append(f"    request: {req['messages']} messages, {len(req['tools'])} tools{extra}")
        if v["reasoning"]:
            out.append(f"    reasoning: {_clip(v['reasoning'])}")
        if v["text"]:
            out.append(f"    text: {_clip(v['text'])}")
        if v["refusal"]:
            out.append(f"    refusal: {_clip(v['refusal'])}")
        for tc in v["tool_calls"]:
            args = tc["arguments_raw"] if tc["arguments_raw"] is not None else ""
            bad = f"  (!) {tc['arguments_error']}" if tc["arguments_error"] else ""
            out.append(f"    tool call: {tc['name']}({_clip(args, 80)}) id={tc['id']}{bad}")
        if v["error"]:
            e = v["error"]
            where = "in stream" if e["in_stream"] else f"HTTP {e['status']}"
            out.append(f"    error ({where}): {e['type'] or ''} {_clip(e['message'] or '', 140)}")
        if v["transport_error"]:
            out.append(f"    transport error: {v['transport_error']}")
        for a in v["analysis_errors"]:
            out.append(f"    (!) analysis: {a}")
    return out
