"""A round trip for people: :func:`summary_lines` (``looptap show``), and the phrases the
inspector and the HTML page share with it (a status, an error, a tool's HTTP call, how a turn was
linked). The analysis as text (counts, findings, growth tables) is :mod:`cassettes.views._layers`;
a fork's edits as shown, :mod:`cassettes.views._edits`; the same round trip for tools, the
``looptap.roundtrip/1`` object, :mod:`cassettes.views._roundtrip_object` and the analysis'
additions to it, :mod:`cassettes.views._turn_object`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..analysis.codes import DIVERGED_FROM_RECORDING as DIVERGED
from ..errors import problem_lines
from ..hints import count
from ._edits import CONTINUED, edit_text, reconstructed_said
from ._layers import finding_line

__all__ = ["LINK_MEANINGS", "error_phrase", "link_text", "status_text", "summary_lines"]


def _clip(text: str, n: int = 100) -> str:
    """``text`` squashed (whitespace runs one space) and cut to ``n`` characters. A long text's
    squashed head is the head of it squashed: when the head alone is longer than ``n``, the rest
    is not read."""
    if len(text) > 8 * n:
        head = " ".join(text[: 8 * n].split())
        if len(head) > n:
            return head[: n - 1] + "…"
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _tokens(v: dict[str, Any]) -> str:
    u = v["usage"]
    if all(x is None for x in u.values()):
        return "usage not reported"
    said = {k: "?" if u[k] is None else u[k] for k in ("input", "output")}
    bits = [f"in {said['input']}", f"out {said['output']}"] + [
        f"{k.replace('_', ' ')} {u[k]}" for k in ("cache_read", "cache_write", "reasoning") if u[k]
    ]
    return ", ".join(bits)


def summary_lines(
    views: Iterable[dict[str, Any]],
    problems: list[str] | None = None,
    title: str | None = None,
    *,
    total: int | None = None,
    families: Mapping[str, int] | None = None,
    tool_http: tuple[int, int, int] | None = None,
) -> Iterator[str]:
    """A readable per-round-trip summary, a line at a time. ``views`` may be a one-pass stream when
    ``total`` (round trips) and ``families`` (round trips by family) are given. ``tool_http``: the
    tools' HTTP calls recorded, those linked to the model's call they served, and those made while
    no call awaited its result (the agent's own)."""
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
    tools = ""
    if tool_http and tool_http[0]:
        recorded, linked, own = tool_http
        if recorded > own:
            tools = f", {count(recorded - own, 'tool HTTP call')} ({linked} linked)"
        if own:
            tools += f", {count(own, 'HTTP call')} of the agent's own (no tool call awaiting)"
    yield (
        f"{count(total, 'round trip')}, {sum(fams.values())} to LLM APIs ({fam_text}){mcp}{tools}"
    )
    for p in problem_lines(problems or []):
        yield f"! {p}"
    # The model's tool calls seen so far (id → where), so an MCP tools/call names the call it ran
    # (bounded: a run's tool-call ids, a few dozen bytes each).
    calls: dict[str, str] = {}
    for v in views:
        yield from _roundtrip_lines(v, calls)
        where = (
            f"#{v['seq']} {v['conversation']}/turn {v['turn']}"
            if v.get("conversation")
            else f"#{v['seq']}"
        )
        for tc in v.get("tool_calls") or []:
            if tc.get("id") and len(calls) < 100_000:
                calls[str(tc["id"])] = where


def _mcp_lines(v: dict[str, Any], calls: Mapping[str, str]) -> list[str]:
    """An MCP tool server's round trip: the method, and for tools/call the tool, its arguments,
    the model's call it ran (by the tool-use id the client sent) and what came back."""
    m = v.get("mcp") or {}
    head = (
        f"#{v['seq']}  mcp {m.get('method', '?')}  "
        f"{status_text(v['status'], v.get('transport_error'))}  {v['method']} "
        f"{v['host']}{v['path']}"
    )
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
                f"    runs the model's call id={use} from #{link['model_seq']} "
                f"{link['conversation']}/turn {link['turn']}{how}"
            )
        elif use:
            out.append(
                f"    runs the model's call id={use}"
                + (f" from {calls[use]}" if use in calls else " (not in this run's model calls)")
            )
        elif link.get("candidates"):
            out.append(
                f"    runs one of {link['candidates']} equal model calls awaiting a result (not "
                "linked: nothing on the wire tells which)"
            )
        if m.get("error"):
            out.append(
                f"    JSON-RPC error {m['error'].get('code')}: "
                f"{_clip(m['error'].get('message') or '', 200)}"
            )
        elif m.get("answered"):
            out.append(
                f"    {'error result' if m.get('is_error') else 'result'}: "
                f"{_clip(m.get('result') or '', 200)}"
            )
        else:
            out.append("    no reply recorded")
    elif m.get("tools") is not None:
        out.append(
            f"    tools: {', '.join(str(t) for t in m['tools'][:30])}"
            + (" …" if len(m["tools"]) > 30 else "")
        )
    return out


def _tool_http_lines(v: dict[str, Any]) -> list[str]:
    """A tool's HTTP call: what it sent and got, and the model's call it served."""
    t = v["tool_http"]
    out = ["", f"#{v['seq']}  tool http  {http_call_text(t)}"]
    link = t.get("linked") or {}
    if link.get("model_seq") is not None:
        how = (
            " (by its arguments)" if link.get("by") == "arguments" else " (the only call awaiting)"
        )
        out.append(
            f"    serves the model's call {link.get('tool')} id={link.get('call_id')} from "
            f"#{link['model_seq']} {link['conversation']}/turn {link['turn']}{how}"
        )
    elif link.get("candidates"):
        out.append(
            f"    serves one of {link['candidates']} model calls awaiting a result that fit "
            "equally (not linked: nothing on the wire tells which)"
        )
    else:
        out.append(
            "    no model tool call was awaiting its result: the agent's own call, not a tool's "
            "(not linked)"
        )
    out.extend(f"    {line}" for line in http_body_lines(t))
    return out


def http_call_text(t: Mapping[str, Any]) -> str:
    """``GET 127.0.0.1:8001/weather?city=Paris → 200  12 ms``: a tool's HTTP call in one line."""
    ms = f"  {t['duration'] * 1000:.0f} ms" if isinstance(t.get("duration"), int | float) else ""
    return (
        f"{t.get('method')} {t.get('host')}{t.get('path')} → "
        f"{status_text(t.get('status'), t.get('transport_error'))}{ms}"
    )


def http_body_lines(t: Mapping[str, Any], width: int = 120) -> list[str]:
    """What a tool's HTTP call sent and got (clipped), and its transport error."""
    out = []
    if t.get("sent"):
        out.append(f"sent: {_clip(t['sent'], width)}")
    if t.get("transport_error"):
        out.append(f"transport error: {_clip(t['transport_error'], width)}")
    if t.get("got"):
        out.append(f"got: {_clip(t['got'], width)}")
    return out


def _roundtrip_lines(v: dict[str, Any], calls: Mapping[str, str] | None = None) -> list[str]:
    if v["family"] == "mcp":
        return _mcp_lines(v, calls or {})
    if v.get("tool_http"):
        return _tool_http_lines(v)
    if v["family"] == "none":
        return [
            "",
            f"#{v['seq']}  {v['method']} {v['host']}{v['path']}  → "
            f"{status_text(v['status'], v.get('transport_error'))}  (not an LLM call)",
        ]
    c = (v.get("layers") or {}).get("C") or {}
    return [
        "",
        _head_line(v) + ("  EDITED" if v.get("edits") else ""),
        *_finish_lines(v),
        *_request_lines(v, c),
        *edit_lines(v),
        *reconstructed_lines(v),
        *_result_lines(c),
        *_answer_lines(v),
        *_trouble_lines(v),
    ]


def status_text(status: int | None, transport_error: str | None) -> str:
    """The round trip's HTTP status as ``show`` writes it: the number, else what stands in its
    place — ``transport-error`` (the connection failed before a status came back: the
    ``transport error:`` line under it says how) or ``-`` (no response recorded) — never
    ``None``."""
    if status is not None:
        return str(status)
    return "transport-error" if transport_error else "-"


def _head_line(v: dict[str, Any]) -> str:
    model = v["model_served"] or v["model_requested"] or "?"
    mode = "stream" if v["stream"] else "json"
    if v.get("transport") == "websocket":
        mode = f"websocket {mode}"
    op = "" if v["operation"] in (None, "generate") else f" [{v['operation']}]"
    where = f"  {v['conversation']}/turn {v['turn']}" if v.get("conversation") else ""
    return (
        f"#{v['seq']}{where}  {v['family']}{op}  {model}  "
        f"{status_text(v['status'], v.get('transport_error'))}  {mode}  {v['method']} "
        f"{v['host']}{v['path']}"
    )


def _finish_lines(v: dict[str, Any]) -> list[str]:
    fr = v["finish_reason"]
    if fr["raw"] is not None or fr["normalised"] is not None:
        # The normalised reason says "complete"; the stream's end is worth a word only when missing.
        state = (
            ""
            if v["complete"]
            else ("  TRUNCATED" if v["truncated"] else "  (end of response not seen)")
        )
        # A reason the API did not send is not printed as "None": the normalised one stands alone.
        said = (
            f"{fr['raw']} ({fr['normalised']})"
            if fr["raw"] is not None
            else f"({fr['normalised']})"
        )
        return [f"    finish: {said}{state}  {_tokens(v)}"]
    return [f"    TRUNCATED  {_tokens(v)}"] if v["truncated"] else []


def _request_lines(v: dict[str, Any], c: dict[str, Any]) -> list[str]:
    req = v["request"]
    if not req:
        return []
    # What this turn's request sent, against its conversation's previous one (none on a first).
    said = counts_said(c.get("counts"), v.get("previous_seq")) if c and v.get("turn") else ""
    return [
        f"    request: {count(req['messages'], 'message')}{said}, "
        f"{count(len(req['tools']), 'tool')} offered"
    ]


def counts_said(n: dict[str, Any] | None, previous: int | None) -> str:
    """A request's messages counted once each (the C layer's ``counts``), as ``show`` and the
    inspector say them: `` (1 as before, 4 changed, 2 new; 3 of #5's dropped)``: the parts
    before the semicolon sum to the messages sent. Empty where the counts could not be read."""
    if not isinstance(n, dict):
        return ""
    parts = [f"{n['as_before']:,} as before"]
    if n.get("changed"):
        parts.append(f"{n['changed']:,} changed")
    parts.append(f"{n['new']:,} new")
    dropped = n.get("dropped") or 0
    of = f"#{previous}'s" if previous is not None else "the previous request's"
    tail = f"; {dropped:,} of {of} dropped" if dropped else ""
    return f" ({', '.join(parts)}{tail})"


def reconstructed_lines(v: dict[str, Any]) -> list[str]:
    said = reconstructed_said(v.get("reconstructed"))
    return [] if said is None else [f"    {said}"]


def edit_lines(v: dict[str, Any]) -> list[str]:
    out = []
    for m in v.get("edits") or []:
        sel = f" (from {m['selector']})" if m.get("selector") else ""
        who = CONTINUED if m.get("edit") == "continue" else "client sent"
        was = (
            "the client's text not kept"
            if m.get("before_omitted")
            else f"{who} → {_clip(edit_text(m.get('before')), 80)}"
        )
        out.append(f"    edited: {m['edit']} at {m['item']}{sel}: {was}")
    return out


def _appended_parts(c: dict[str, Any], kind: str) -> Iterator[dict[str, Any]]:
    for m in c.get("appended") or []:
        for part in m.get("parts") or []:
            if part.get(kind):
                yield part[kind]


def _result_lines(c: dict[str, Any]) -> list[str]:
    names = {
        p.get("call_id"): p.get("name")
        for p in c.get("pairings") or []
        if p.get("call_id") and p.get("name")
    }
    # the echoed calls name the results that follow them
    for call in _appended_parts(c, "tool_call"):
        if call.get("id") and call.get("name"):
            names.setdefault(call["id"], call["name"])
    out = []
    for tr in _appended_parts(c, "tool_result"):
        name = tr.get("name") or names.get(tr.get("call_id")) or "?"
        flag = " (error)" if tr.get("is_error") else ""
        out.append(
            f"    tool result: {name}{_id(tr.get('call_id'))}{flag} → "
            f"{_clip(tr.get('content') or '', 80)}"
        )
    return out


def _answer_lines(v: dict[str, Any]) -> list[str]:
    out = [f"    {k}: {_clip(v[k])}" for k in ("reasoning", "text", "refusal") if v[k]]
    for tc in v["tool_calls"]:
        args = tc["arguments_raw"] if tc["arguments_raw"] is not None else ""
        bad = f"  (!) {tc['arguments_error']}" if tc["arguments_error"] else ""
        if tc.get("ran_by") == "server":
            out.append(
                f"    server tool call: {tc['name']}({_clip(args, 80)}){_id(tc['id'])}{bad}"
                "  (run by the API: no result due from the client)"
            )
            continue
        out.append(f"    tool call: {tc['name']}({_clip(args, 80)}){_id(tc['id'])}{bad}")
        if tc.get("mcp"):
            out.append(
                f"      ran by an MCP tool server at #{tc['mcp']['seq']} ({tc['mcp']['tool']})"
            )
        for h in tc.get("http") or []:
            out.append(f"      tool http #{h['seq']}: {http_call_text(h)}")
            out.extend(f"        {line}" for line in http_body_lines(h, 100))
    return out


def error_phrase(status: int | None, in_stream: bool, type_: str | None, message: str) -> str:
    """``error (in stream): type message`` / ``error (HTTP 429): …`` (show and textconv)."""
    where = (
        "in stream" if in_stream else (f"HTTP {status}" if status is not None else "no HTTP status")
    )
    return f"error ({where}): {type_ or ''} {message}"


def _id(call_id: Any) -> str:
    """`` id=…`` of a call or result that has an id; nothing for one without (Gemini's, a
    rebuilt call's): never ``id=None``."""
    return f" id={call_id}" if call_id not in (None, "") else ""


def _read_lines(v: dict[str, Any]) -> list[str]:
    """How looptap read the round trip, when not all of it (issue 92): what it could not read; no
    finding rests on that."""
    if v.get("read") not in ("partial", "unread"):
        return []
    said = [u for u in v.get("unread") or [] if u not in v["analysis_errors"]]
    what = "; ".join(_clip(u, 100) for u in said[:4])
    if len(said) > 4:
        what += f" (+{len(said) - 4} more)"
    return [f"    read: {v['read']}" + (f": {what}" if what else " (the analysis line says why)")]


def _trouble_lines(v: dict[str, Any]) -> list[str]:
    out = []
    # A replay miss is looptap's answer, not the API's error: its C finding below says what
    # diverged.
    if v["error"] and not any(f.get("code") == DIVERGED for f in v.get("findings") or []):
        e = v["error"]
        out.append(
            "    "
            + error_phrase(e["status"], e["in_stream"], e["type"], _clip(e["message"] or "", 140))
        )
    if v["transport_error"]:
        out.append(f"    transport error: {v['transport_error']}")
    out.extend(_read_lines(v))
    out.extend(f"    (!) analysis: {a}" for a in v["analysis_errors"])
    # the analysis' order: root causes first, a consequence indented under its cause
    for f in v.get("findings") or []:
        out.append("  " + finding_line(f))
        if f.get("code") == DIVERGED:  # the replay's diff, as the pytest failure prints it
            changes = [
                x for x in (f.get("details") or {}).get("changes") or [] if isinstance(x, str)
            ]
            out += (
                [
                    "      differences (recording → this request):",
                    *(f"        {x}" for x in changes),
                ]
                if changes
                else []
            )
    return out


#: What each way a turn was threaded into its conversation (``Dispatch.link``) means, as the
#: inspector's C pane and the HTML page write it after the kind (docs/reading.md, "How a turn
#: was linked"; the rules are cassettes/analysis/threading/'s).
LINK_MEANINGS: dict[str, str] = {
    "start": "a new conversation",
    "extends": "the history of {prev}, plus new messages",
    "rewritten": "the history of {prev}, changed (trimmed, summarised, edited)",
    "previous_response_id": "names the response of {prev} by its id",
    "header": "the X-Looptap-Conversation request header puts it after {prev}",
    "retry": "the request of {prev}, sent again",
}


def link_text(link: str, previous_seq: int | None) -> str:
    """``header — the X-Looptap-Conversation request header puts it after #3``: the link kind and
    what it means, naming the turn it links to."""
    meaning = LINK_MEANINGS.get(link)
    if meaning is None:
        return link
    if previous_seq is None and "{prev}" in meaning:  # (a header naming a new conversation)
        return f"{link} — a new conversation" + (
            ", named by the X-Looptap-Conversation request header" if link == "header" else ""
        )
    return f"{link} — {meaning.format(prev=f'#{previous_seq}')}"
