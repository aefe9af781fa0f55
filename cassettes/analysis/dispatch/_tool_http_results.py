"""C check against what a tool's own HTTP calls got (the tools' HTTP the recorder kept beside the
model calls, linked to the model's call each served by its arguments): a failure the result sent
back to the model hides."""

from __future__ import annotations

import re
from collections.abc import Iterator

import orjson

from ...models import ToolResult
from .. import codes as codes
from .._context import TurnContext, short
from .._model import Finding
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
    succeeded (a tool that retried, or whose failed call was a side one, is not judged)."""
    tools = ctx.tool_http
    if tools is None or not tools.served:
        return
    for m in ctx.turn.c.appended:
        for p in m.parts:
            tr = p.tool_result
            if tr is None or not tr.call_id or tr.is_error is True:
                continue
            calls = tools.served.get(tr.call_id)
            if not calls or not all(_failed(status, error) for _, status, error, _ in calls):
                continue
            seq, status, error, got = calls[-1]
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
