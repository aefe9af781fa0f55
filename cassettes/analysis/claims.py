"""E — what the model made of what it saw: a tool's error ignored.

Findings (layer E, read against the request the answer was made from):

============================  ========  ==========================================================
``E.ignored_tool_error``      warning   a tool answered the previous turn's call with an error, and
                                        the model called the same tool with the same arguments
                                        again, or answered (text, no call) with words that claim
                                        success and none that own the failure
============================  ========  ==========================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from cassettes.analysis.context import Check, TurnContext
from cassettes.analysis.dispatch.results import is_error_result, result_texts
from cassettes.analysis.emission import canonical_call
from cassettes.analysis.model import Finding, Severity
from cassettes.models import FinishReason

__all__ = ["CHECKS", "check_ignored_tool_error"]

#: An answer that says the work is done ...
SUCCESS = re.compile(
    r"\b(?:successfully|succeeded|(?:has|have) been (?:\w+ed|done|made|sent)|is now \w+ed"
    r"|(?:I(?:'|’)ve|I have) (?:\w+ed|made|sent)|all set|is (?:done|complete|confirmed))\b",
    re.IGNORECASE,
)
#: ... and one that owns a failure (any of these words: the error was heard).
OWNS_FAILURE = re.compile(
    r"\b(?:error|errors|fail\w*|unable|could(?:n(?:'|’)t| not)|can(?:n(?:'|’)t|not)|sorry"
    r"|unfortunately|not (?:able|possible|found|exist)|problem|issue|did(?:n(?:'|’)t| not)"
    r"|was(?:n(?:'|’)t| not)|however|instead)\b",
    re.IGNORECASE,
)


def check_ignored_tool_error(ctx: TurnContext) -> Iterator[Finding]:
    """E.ignored_tool_error — the model went on as if a tool's error had not happened."""
    prev, r = ctx.prev, ctx.response
    if prev is None or r is None or r.error is not None or r.complete is False:
        return
    errors = {
        p.call_id: (p, content)
        for p, content in result_texts(ctx)
        if p.call_turn == prev.index and is_error_result(p, content)
    }
    if not errors:
        return
    failed = {
        canonical_call(c.name, c.arguments, c.arguments_raw): c
        for c in prev.turn.e.tool_calls
        if c.id in errors and c.parse_error is None
    }
    for c in ctx.turn.e.tool_calls:
        before = failed.get(canonical_call(c.name, c.arguments, c.arguments_raw))
        if before is not None:
            p, content = errors[before.id]
            yield ctx.finding(
                "E.ignored_tool_error",
                Severity.WARNING,
                f"The model called {c.name} again with the same arguments right after it "
                f"answered with an error ({before.id or 'no id'}, turn {prev.index}: "
                f"{_quote(content)}): it did not act on the error.",
                tool_call_id=c.id,
                related_turn=prev.index,
                tool=c.name,
                error=content[:300],
            )
            return
    text = ctx.turn.e.text or ""
    claim = SUCCESS.search(text)
    if ctx.turn.e.tool_calls or r.finish_reason is not FinishReason.COMPLETE or claim is None:
        return
    if OWNS_FAILURE.search(text):
        return
    p, content = next(iter(errors.values()))
    yield ctx.finding(
        "E.ignored_tool_error",
        Severity.WARNING,
        f"The model answered {claim.group(0)!r} right after {p.name or 'a tool'} "
        f"({p.call_id or 'no id'}) answered with an error ({_quote(content)}), and says "
        "nothing of it: the answer claims a success the tools did not report.",
        tool_call_id=p.call_id,
        related_turn=prev.index,
        tool=p.name,
        claim=claim.group(0),
        error=content[:300],
    )


def _quote(text: str, n: int = 100) -> str:
    t = " ".join(text.split())
    return repr(t if len(t) <= n else t[: n - 1] + "…")


CHECKS: tuple[Check, ...] = (check_ignored_tool_error,)
