"""A cassette as stable, line-oriented text for ``git diff`` (a git *textconv* driver).

One item per line — a turn's header, each message it appended, each part of the response, the
finish reason, usage, each finding — with newlines inside texts escaped, so a diff shows the
message that changed and not a thousand-character JSON line. Nothing that churns between two
recordings of the same run is printed: no timestamps, no latencies, no costs (prices change with
the price library), no writer version.

Each turn lists only what its request *appended* to the conversation (the client-dispatch view);
the history it kept is a count. A change to one message is then one changed line, not one per
later turn. A request that rewrote its history is listed whole.

Ids that change with every recording against a real API (tool-call ids, ``previous_response_id``)
are printed as ``<id:1>``, ``<id:2>`` … in order of first appearance, as ``looptap diff`` compares
them: a re-recording whose calls pair the same way shows no change (``--raw-ids`` prints them).

Register it in a repository (see docs/interop.md) with ``looptap textconv --install``, which
writes the attribute and points git at this very interpreter (so it works whichever environment
looptap lives in)::

    echo '*.jsonl diff=looptap' >> .gitattributes
    git config diff.looptap.textconv "/path/to/python -m cassettes.cli textconv"
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..analysis import Turn, kind_text
from ..hints import count
from ..models import Message, NormalisedRequest, NormalisedResponse, Part
from ..parsing import RoundTrip
from ..reading import Run
from ..views import SEVERITY_MARK, error_phrase, status_text

__all__ = ["render"]

def _one_line(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def _compact(v: Any) -> str:
    try:
        return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(v)


class _Ids:
    """Ids that churn between recordings, as ``<id:N>`` in order of first appearance (``raw``: as
    is)."""

    def __init__(self, raw: bool) -> None:
        self.raw = raw
        self.seen: dict[str, str] = {}

    def __call__(self, value: str | None) -> str | None:
        if value is None or self.raw:
            return value
        ph = self.seen.get(value)
        if ph is None:
            ph = self.seen[value] = f"<id:{len(self.seen) + 1}>"
        return ph

    def in_text(self, text: str) -> str:
        """``text`` with every id seen so far (of 6 characters or more) replaced."""
        if self.raw:
            return text
        for value, ph in self.seen.items():
            if len(value) >= 6 and value in text:
                text = text.replace(value, ph)
        return text


def _part(p: Part, ids: _Ids) -> str:
    if p.kind == "tool_call" and p.tool_call is not None:
        tc = p.tool_call
        args = tc.arguments_raw if tc.arguments is None else _compact(tc.arguments)
        bad = f"  (!) {tc.arguments_error}" if tc.arguments_error else ""
        kind = "" if tc.kind == "function" else f" [{tc.kind}]"
        return f"tool_call {tc.name}{kind} id={ids(tc.id)}: {_one_line(args or '')}{bad}"
    if p.kind == "tool_result" and p.tool_result is not None:
        tr = p.tool_result
        err = " (error)" if tr.is_error else ""
        name = f" {tr.name}" if tr.name else ""
        return f"tool_result{name} id={ids(tr.call_id)}{err}: {_one_line(tr.content)}"
    if p.kind == "media":
        return f"media {p.media_type or '?'}"
    if p.kind == "other":
        block = (p.provider_details or {}).get("type") or (p.provider_details or {}).get(
            "block", {}
        )
        return f"other {_one_line(_compact(block))}" if block else "other"
    return f"{p.kind}: {_one_line(p.text or '')}"


def _messages(msgs: list[Message], first: int, ids: _Ids) -> Iterator[str]:
    for i, m in enumerate(msgs, start=first):
        if not m.parts:
            yield f"  > [{i}] {m.role}: (empty)"
        for p in m.parts:
            yield f"  > [{i}] {m.role} {_part(p, ids)}"


def _turn_lines(rt: RoundTrip, turn: Turn | None, ids: _Ids) -> Iterator[str]:
    url = urlsplit(rt.url)
    where = f" {turn.conversation} turn {turn.index}" if turn is not None else ""
    req, resp = rt.request, rt.response
    model = req.model if req and req.model else "?"
    served = f" → {resp.model}" if resp is not None and resp.model and resp.model != model else ""
    mode = "stream" if rt.stream else "json"
    op = "" if rt.operation in (None, "generate") else f" [{rt.operation}]"
    yield ""
    if rt.family == "none":
        yield (
            f"#{rt.seq} {rt.method} {url.netloc}{url.path} "
            f"{status_text(rt.status, rt.transport_error)} (not an LLM call)"
        )
        return
    yield (
        f"#{rt.seq}{where} {rt.family}{op} {model}{served} {mode} {rt.method} "
        f"{url.netloc}{url.path} {status_text(rt.status, rt.transport_error)}"
    )
    if req is not None:
        yield from _request_lines(req, turn, ids)
    if resp is not None:
        yield from _response_lines(resp, ids)
    if rt.transport_error:
        yield f"  transport error: {_one_line(rt.transport_error)}"
    for a in rt.analysis_errors:
        yield f"  (!) analysis: {_one_line(a)}"
    for f in turn.findings if turn is not None else []:
        yield (
            f"  {SEVERITY_MARK.get(f.severity.value, '?')} {f.layer} {f.code}: "
            f"{_one_line(ids.in_text(f.message))}"
        )


def _request_lines(req: NormalisedRequest, turn: Turn | None, ids: _Ids) -> Iterator[str]:
    for i, p in enumerate(req.system):
        yield f"  system[{i}] {_part(p, ids)}"
    if req.tools:
        yield f"  tools: {', '.join(t.name for t in req.tools)}"
    if req.tool_choice_mode:
        yield f"  tool_choice: {req.tool_choice_mode}"
    for k in sorted(req.params):
        yield f"  param {k}: {_one_line(_compact(req.params[k]))}"
    if req.previous_response_id:
        yield f"  previous_response_id: {ids(req.previous_response_id)}"
    if turn is not None and turn.c.link not in ("start", "rewritten") and not turn.c.rewritten:
        yield f"  history: {turn.c.kept} kept, {len(turn.c.appended)} appended ({turn.c.link})"
        yield from _messages(turn.c.appended, turn.c.appended_from, ids)
        return
    if turn is not None and turn.c.rewritten:
        yield (
            f"  history: rewritten ({turn.c.rewritten} earlier "
            "messages dropped or changed), sent whole"
        )
    yield from _messages(req.messages, 0, ids)


def _response_lines(resp: NormalisedResponse, ids: _Ids) -> Iterator[str]:
    for p in resp.parts:
        yield f"  < {resp.role} {_part(p, ids)}"
    if resp.finish_reason_raw is not None or resp.finish_reason is not None:
        norm = resp.finish_reason.value if resp.finish_reason else None
        yield f"  finish: {resp.finish_reason_raw} ({norm})"
    if resp.complete is False:
        yield "  TRUNCATED (the stream ended without its terminal event)"
    u = resp.usage
    if u is not None:
        pairs = (
            ("input", u.input_tokens),
            ("output", u.output_tokens),
            ("cache_read", u.cache_read_tokens),
            ("cache_write", u.cache_write_tokens),
            ("reasoning", u.reasoning_tokens),
        )
        yield "  usage: " + ", ".join(f"{k} {v}" for k, v in pairs if v is not None)
    if resp.error is not None:
        e = resp.error
        yield (
            "  " + error_phrase(e.status, e.in_stream, e.type, _one_line(e.message or ""))
        ).rstrip()


def render(run: Run, raw_ids: bool = False) -> Iterator[str]:
    """The lines of the rendering (without newlines); ``raw_ids``: tool-call and response ids as
    recorded instead of ``<id:N>``."""
    ids = _Ids(raw_ids)
    a = run.analysis
    version = run.header.get("format_version")
    fmt = f"looptap cassette, format {version}" if version is not None else "imported run"

    yield (
        f"{fmt}: {count(len(run.exchanges), 'round trip')}, "
        f"{count(len(a.conversations), 'conversation')}, {count(len(a.findings), 'finding')}"
    )
    for p in run.problems:
        yield f"! {_one_line(p)}"
    for conv in a.conversations:
        parent = f", {kind_text(conv.kind, conv.parent_seq)}" if conv.parent_seq is not None else ""
        label = f" label={conv.label}" if conv.label else ""
        yield (
            f"conversation {conv.id} ({conv.family}): turns "
            f"{' '.join(f'#{s}' for s in conv.turns)}{parent}{label}"
        )
    for ex, rt in run.pairs:
        yield from _turn_lines(rt, a.turns.get(ex.seq) if ex.seq is not None else None, ids)
    for e in a.errors:
        yield f"(!) analysis: {_one_line(e)}"
