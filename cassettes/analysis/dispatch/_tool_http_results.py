"""C checks against what a tool's own HTTP calls got (the tools' HTTP the recorder kept beside the
model calls, linked to the model's call each served by its arguments): a failure the result sent
back to the model hides, a result cut from a longer answer, a result no HTTP call made."""

from __future__ import annotations

import re
from collections.abc import Iterator

import orjson

from ...models import ToolResult
from .. import codes as codes
from .._context import TurnContext, short
from .._model import Finding
from .._tool_http import Served, ToolHttpLinker, key
from ._shared import _norm

#: Words a result uses to say that something went wrong (lower case; a stem matches longer words).
_FAILURE_WORDS = re.compile(
    r"error|fail|unavailab|not available|time ?out|timed out|refused|reset|not found|no such|"
    r"denied|forbidden|unauthori|invalid|exception|could not|couldn't|cannot|can't|unable|"
    r"rate.?limit|too many requests|bad request|bad gateway|overloaded|unreachable|problem|sorry|"
    r"try again|retry|\bdown\b"
)


def check_tool_http_results(ctx: TurnContext) -> Iterator[Finding]:
    """C.tool_http_error_hidden — each result this request sends back, against the tool's HTTP
    calls that served its call: every one failed (a 4xx or 5xx, or a connection that ended without
    an answer), and the result is not flagged an error and says none of it (no status, no failure
    word, none of the error's text): the model was told a success, or nothing, or another value.
    Only calls linked by their arguments are read, and only when none of the tool's calls for it
    succeeded (a tool that retried, or whose failed call was a side one, is not judged). With
    them, :func:`_cut` (C.tool_result_cut) and :func:`_missing` (C.tool_http_missing)."""
    tools = ctx.tool_http
    if tools is None or not (tools.served or tools.history):
        return
    for m in ctx.turn.c.appended:
        for p in m.parts:
            tr = p.tool_result
            if tr is None or not tr.call_id or tr.is_error is True:
                continue
            calls = tools.served.get(key(ctx.turn.conversation, tr.call_id))
            if not calls:
                yield from _missing(ctx, tools, tr)
                continue
            if not all(_failed(c.status, c.error) for c in calls):
                yield from _cut(ctx, tr, calls[-1])
                continue
            last = calls[-1]
            seq, status, error, got = last.seq, last.status, last.error, last.got
            if _says_failure(tr, status, got):
                continue
            what = (
                f"answered {status}" if status is not None else f"ended without an answer ({error})"
            )
            sent = (tr.content or "").strip()
            told = (
                "nothing (an empty result)"
                if not sent or sent in ("null", "{}", "[]", '""')
                else f"“{short(sent, 100)}”, with no error flag and nothing of the failure"
            )
            yield ctx.finding(
                codes.TOOL_HTTP_ERROR_HIDDEN,
                f"The tool's HTTP call for the model's call {tr.call_id} failed: #{seq} {what}"
                + (f" (“{short(got, 80)}”)" if got and status is not None else "")
                + (f", as did {len(calls) - 1} earlier" if len(calls) > 1 else "")
                + f". The client sent the model {told}.",
                tool_call_id=tr.call_id,
                tool_http_seq=seq,
                status=status,
            )


def _cut(ctx: TurnContext, tr: ToolResult, last: Served) -> Iterator[Finding]:
    """C.tool_result_cut — the result is the start of the longer answer the tool's last linked
    HTTP call got (2xx; compared on the answer's first characters, whitespace and case folded),
    at most 90% of it and 64 bytes or more short, with no word of the cut in it."""
    sent = (tr.content or "").strip()
    size = len(sent.encode())
    if last.status is None or not 200 <= last.status < 300 or not last.got:
        return
    if size > last.got_bytes * 0.9 or last.got_bytes - size < 64 or _CUT_SAID.search(sent[-80:]):
        return
    said, got = _norm(sent), _norm(last.got.removesuffix("…"))
    k = min(len(said), len(got))
    if k < 32 or said[:k] != got[:k]:
        return
    yield ctx.finding(
        codes.TOOL_RESULT_CUT,
        f"The result sent back for the model's call {tr.call_id} is the first {size:,} of the "
        f"{last.got_bytes:,} bytes the tool's HTTP call #{last.seq} got: the model did not see "
        "the rest, and nothing in the result says it was cut.",
        tool_call_id=tr.call_id,
        tool_http_seq=last.seq,
        kept_bytes=size,
        got_bytes=last.got_bytes,
    )


def _missing(ctx: TurnContext, tools: ToolHttpLinker, tr: ToolResult) -> Iterator[Finding]:
    """C.tool_http_missing — the tool's earlier calls (two or more) each made linked HTTP calls
    and none came back without; this one awaited with no tool HTTP call made (none linked to it,
    none left unlinked among candidates it was one of)."""
    k = key(ctx.turn.conversation, tr.call_id or "")
    made = tools.awaiting.get(k)
    if made is None or k in tools.touched:
        return
    with_http, without = tools.history.get(made.name, (0, 0))
    if with_http < 2 or without:
        return
    yield ctx.finding(
        codes.TOOL_HTTP_MISSING,
        f"The tool {made.name} made HTTP calls for each of its {with_http} earlier calls; for the "
        f"model's call {tr.call_id} it made none, and a result came back: it came from elsewhere "
        "(a cache, a default, the client).",
        tool_call_id=tr.call_id,
        tool=made.name,
        earlier_calls=with_http,
    )


#: Words at a result's end that say it was cut.
_CUT_SAID = re.compile(r"…|\.\.\.|truncat|cut|more|omitted|remaining|\[\d+", re.I)


def _failed(status: int | None, error: str | None) -> bool:
    return status >= 400 if status is not None else error is not None


def _says_failure(tr: ToolResult, status: int | None, got: str | None) -> bool:
    """Whether the result tells the model something went wrong: a failure word, the status code,
    or the error's own text (its start, or a message string of a JSON error body)."""
    sent = _norm(tr.content or "")
    if not sent:
        return False
    if _FAILURE_WORDS.search(sent) or (status is not None and re.search(rf"\b{status}\b", sent)):
        return True
    said = _norm(got or "")
    if len(said) >= 8 and said[:60].rstrip("…") in sent:
        return True
    return any(len(v) >= 8 and v in sent for v in _messages(got))


def _messages(got: str | None) -> list[str]:
    """The string values of a JSON error body's first level and of its ``error`` (normalised)."""
    try:
        body = orjson.loads(got or "")
    except orjson.JSONDecodeError:
        return []
    out: list[str] = []
    for level in (body, body.get("error") if isinstance(body, dict) else None):
        if isinstance(level, dict):
            out += [_norm(v) for v in level.values() if isinstance(v, str)]
    return out
