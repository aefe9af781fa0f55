"""E — what the model made of what it saw: a tool's error ignored, a claim with no source.

Findings (layer E, read against the request the answer was made from):

============================  ========  ==========================================================
``E.ignored_tool_error``      warning   a tool answered the previous turn's call with an error, and
                                        the model called the same tool with the same arguments
                                        again, or answered (text, no call) with words that claim
                                        success and none that own the failure
``E.ungrounded_claim``        warning   an answer made from a request with no new input (the
                                        model called again after its final answer: a group chat
                                        re-prompting a speaker) brings URLs, quotes or numbers that
                                        no message, tool result, call or system prompt of the
                                        request holds: each such span is listed. Small integers
                                        (under 100: counts, enumerations) and years are not
                                        counted, nor is a number written otherwise in a source
                                        (``1,200`` for ``1200``)
============================  ========  ==========================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from cassettes.analysis._context import Check, TurnContext, short
from cassettes.analysis._model import Finding, Severity
from cassettes.analysis._repeats import canonical_call
from cassettes.analysis.dispatch import is_error_result, reprompted, result_texts
from cassettes.hints import count
from cassettes.models import FinishReason

__all__ = ["CHECKS", "unsourced"]

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
                f"{short(content, 100)!r}): it did not act on the error.",
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
        f"({p.call_id or 'no id'}) answered with an error ({short(content, 100)!r}), and says "
        "nothing of it: the answer claims a success the tools did not report.",
        tool_call_id=p.call_id,
        related_turn=prev.index,
        tool=p.name,
        claim=claim.group(0),
        error=content[:300],
    )


#: The spans of an answer that carry facts: URLs, quotes of three words or more, and numbers
#: (with their currency sign or percent).
URL = re.compile(r"https?://[^\s)\]>\"'`]+")
QUOTE = re.compile(r"[\"“]([^\"“”\n]{12,300})[\"”]")
NUMBER = re.compile(r"(?<![\w.,/-])[$€£]?\d[\d,]*(?:\.\d+)?%?(?![\w-]|[.,/]\d)")


def _digits(span: str) -> str:
    """A number's digits as compared: no sign, no separators, no trailing decimal zeros."""
    n = span.strip("$€£%").replace(",", "")
    return n.rstrip("0").rstrip(".") if "." in n else n


def _counts(span: str) -> bool:
    """A number that carries a fact: not a small integer (a count, an item's number), nor a year."""
    n = _digits(span)
    if span[0] in "$€£" or span.endswith("%") or "." in n:
        return True
    return n.isdigit() and int(n) >= 100 and not (n.startswith(("19", "20")) and len(n) == 4)


def unsourced(answer: str, sources: str) -> list[str]:
    """The spans of ``answer`` (URLs, quotes, numbers) found nowhere in ``sources``."""
    low = " ".join(sources.split()).lower()
    digits = {_digits(n) for n in re.findall(r"\d+(?:\.\d+)?", low.replace(",", ""))}
    out: list[str] = []
    text = URL.sub(lambda m: _url(m.group(0).rstrip(".,;:!?"), low, out), answer)
    for q in QUOTE.finditer(text):
        words = " ".join(q.group(1).split()).lower()
        if len(words.split()) >= 3 and words.strip(" .,;:!?") not in low:
            out.append(q.group(0))
    for m in NUMBER.finditer(QUOTE.sub(" ", text)):
        span = m.group(0).rstrip(",")
        if _counts(span) and _digits(span) not in digits:
            out.append(span)
    return list(dict.fromkeys(out))


def _url(url: str, low: str, out: list[str]) -> str:
    if url.lower().rstrip("/") not in low:
        out.append(url)
    return " "


def _sources(ctx: TurnContext) -> str:
    """Every text the model was given: system prompt, messages (calls' arguments and results
    included) and the tools' descriptions."""
    req = ctx.request
    bits = [p.text or "" for p in (req.system if req is not None else [])]
    for m in ctx.messages:
        for p in m.parts:
            bits.append(p.text or "")
            if p.tool_call is not None:
                bits.append(p.tool_call.arguments_raw or "")
            if p.tool_result is not None:
                bits.append(p.tool_result.content)
    bits += [t.description or "" for t in ctx.tools]
    return "\n".join(bits)


def check_ungrounded_claim(ctx: TurnContext) -> Iterator[Finding]:
    """E.ungrounded_claim — re-prompted with nothing new, the model brings facts from nowhere."""
    text = ctx.turn.e.text or ""
    if not text or not reprompted(ctx):
        return
    spans = unsourced(text, _sources(ctx))
    if spans:
        yield ctx.finding(
            "E.ungrounded_claim",
            Severity.WARNING,
            f"Called again with nothing new, the model answered with {count(len(spans), 'span')}"
            " found in no message, tool result or prompt it was given: "
            + ", ".join(repr(short(s, 60)) for s in spans[:5])
            + ("…" if len(spans) > 5 else "")
            + ".",
            related_turn=ctx.prev.index if ctx.prev is not None else None,
            spans=spans,
        )


CHECKS: tuple[Check, ...] = (check_ignored_tool_error, check_ungrounded_claim)
