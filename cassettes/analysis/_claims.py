"""E — what the model made of what it saw: a tool's error ignored, a claim with no source.

Read against the request the answer was made from: ``E.ignored_tool_error`` and
``E.ungrounded_claim`` (:mod:`cassettes.analysis.codes`, docs/findings.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..hints import count
from ..lazy import pattern
from ..models import FinishReason
from . import codes as codes
from ._context import Check, TurnContext, short
from ._grounding import may_claim, unsourced
from ._model import Finding, Pairing
from ._repeats import canonical_call
from .dispatch import (
    TEXT_ACTION,
    is_error_result,
    multi_agent,
    reprompted,
    result_texts,
)

__all__ = ["CHECKS", "STATED_EXIT", "claimed_success", "failed_exit", "unsourced"]

#: An answer that says the work is done (tests that pass included) ...
SUCCESS = pattern(
    r"\b(?:successfully|succeeded|(?:has|have) been (?:\w+ed|done|made|sent)|is now \w+ed"
    r"|(?:I(?:'|’)ve|I have) (?:\w+ed|made|sent)|all set|is (?:done|complete|confirmed)"
    r"|tests? (?:now |all |are |are now )?pass(?:es|ed|ing)?|all (?:tests |checks )?green)\b",
    re.IGNORECASE,
)
#: An exit status a result states (Codex's ``Process exited with code 1``, Gemini CLI's
#: ``Exit Code: 1``, Claude Code's ``Exit code 1``, ``[exit code 3]``): one not 0 says the
#: command failed, as a tool's error flag does.
STATED_EXIT = pattern(
    r"(?:exit(?:ed)?(?: with)?[ _-]?(?:code|status)|returned? (?:code )?)[\s:=]*(-?\d+)(?![\d.])",
    re.IGNORECASE,
)
#: ... and one that owns a failure (any of these words: the error was heard).
OWNS_FAILURE = pattern(
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
    results = [(p, content) for p, content in result_texts(ctx) if p.call_turn == prev.index]
    errors = {p.call_id: (p, content) for p, content in results if is_error_result(p, content)}
    if not errors:
        # a command's non-zero exit the result states: a failure the model was told of (a claim
        # of success after it is judged; calling it again is not: a test run is run again). Read
        # only for an answer that ends the turn (the results' text is read by a regex)
        if ctx.turn.e.tool_calls or r.finish_reason is not FinishReason.COMPLETE:
            return
        exited = {p.call_id: (p, c) for p, c in results if failed_exit(c) is not None}
        if exited:
            p, content = next(iter(exited.values()))
            yield from _claimed(ctx, (p, content), f"exit status {failed_exit(content)}")
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
                codes.IGNORED_TOOL_ERROR,
                f"The model called {c.name} again with the same arguments right after it "
                f"answered with an error ({before.id or 'no id'}, turn {prev.index}: "
                f"{short(content, 100)!r}): it did not act on the error.",
                tool_call_id=c.id,
                related_turn=prev.index,
                tool=c.name,
                error=content[:300],
            )
            return
    if not ctx.turn.e.tool_calls and r.finish_reason is FinishReason.COMPLETE:
        yield from _claimed(ctx, next(iter(errors.values())))


def claimed_success(text: str) -> str | None:
    """The words of ``text`` that claim the work succeeded, when none of it owns a failure
    (:data:`SUCCESS`, :data:`OWNS_FAILURE`), else ``None``."""
    claim = SUCCESS.search(text[:100_000])
    return claim.group(0) if claim is not None and not OWNS_FAILURE.search(text) else None


def failed_exit(content: str) -> int | None:
    """The non-zero exit status a tool's result states (its first), else ``None``: a result
    that also states 0 is not read (which command exited how is not told)."""
    stated = {int(m.group(1)) for m in STATED_EXIT.finditer(content[:100_000])}
    failed = sorted(x for x in stated if x != 0)
    return failed[0] if failed and 0 not in stated else None


def _claimed(
    ctx: TurnContext, error: tuple[Pairing, str], exited: str | None = None
) -> Iterator[Finding]:
    """E.ignored_tool_error on an answer that claims success after ``error``, a result that told
    the model its call failed (an error, or the non-zero ``exited`` status it states)."""
    claim = claimed_success(ctx.turn.e.text or "")
    prev = ctx.prev
    if claim is None or prev is None:
        return
    p, content = error
    more: dict[str, Any] = {"exit": failed_exit(content)} if exited else {}
    yield ctx.finding(
        codes.IGNORED_TOOL_ERROR,
        f"The model answered {claim!r} right after {p.name or 'a tool'} "
        f"({p.call_id or 'no id'}) answered with "
        + (f"an {exited}" if exited else "an error")
        + f" ({short(content, 100)!r}), and says nothing of it: the answer claims a success the "
        "tools did not report.",
        tool_call_id=p.call_id,
        related_turn=prev.index,
        tool=p.name,
        claim=claim,
        error=content[:300],
        **more,
    )


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


def _tool_numbers(ctx: TurnContext) -> str | None:
    """What the tools returned, newest first: the numbers an answer's arithmetic may combine
    (:func:`unsourced`'s ``operands``; the first ones are combined, so the newest results).
    ``None`` without any (other agents' messages were the material: all the sources are)."""
    results = [
        p.tool_result.content
        for m in reversed(ctx.messages)
        for p in m.parts
        if p.tool_result is not None
    ]
    return "\n".join(results) if results else None


def _has_material(ctx: TurnContext) -> bool:
    """The request gives the model material to answer from: a tool's result, or other agents'
    messages (a group chat, :func:`multi_agent`). Without any, an answer speaks from the model's
    own knowledge, which is no claim to ground."""
    return bool(ctx.turn.c.pairings) or multi_agent(ctx)


#: A non-text part, as the normaliser describes it (``[document]``, ``[image: …]``,
#: ``[application/pdf]``).
_MEDIA_RESULT = pattern(
    r"\[(?:image|document|file|audio|video|media|input_\w+)\w*\b[^\]\n]{0,80}\]"
    r"|\[(?:application|image|audio|video)/[\w.+-]{1,80}\]"
)


def _unreadable_material(ctx: TurnContext) -> bool:
    """The answer may rest on what looptap cannot read: an image, a document or audio in the
    request (or in a tool's result), a search or other tool the provider runs itself (offered, or
    in the answer)."""
    r = ctx.response
    return (
        (r is not None and any(p.kind not in ("text", "reasoning") for p in r.parts))
        or any(t.kind not in ("function", "custom") for t in ctx.tools)
        or any(
            p.kind in ("media", "other")
            or (p.tool_result is not None and _MEDIA_RESULT.search(p.tool_result.content[:20000]))
            or (p.kind == "text" and _MEDIA_RESULT.fullmatch((p.text or "")[:200].strip()))
            for m in ctx.messages
            for p in m.parts
        )
    )


def check_ungrounded_claim(ctx: TurnContext) -> Iterator[Finding]:
    """E.ungrounded_claim — an answer to the user brings facts found in nothing it was given:
    a warning when the model was called again with nothing new (it had nothing to add), info on
    an answer made from tools' results or other agents' messages."""
    r = ctx.response
    text = ctx.turn.e.text or ""
    if (
        not text
        or r is None
        or r.finish_reason is not FinishReason.COMPLETE
        or ctx.turn.e.tool_calls
        or TEXT_ACTION.search(text[:20000])
        or not may_claim(text)
    ):
        return
    again = reprompted(ctx)
    if not again and not _has_material(ctx):
        return
    if _unreadable_material(ctx):
        return
    spans = unsourced(text, _sources(ctx), _tool_numbers(ctx))
    if not spans:
        return
    listed = ", ".join(repr(short(s, 60)) for s in spans[:5]) + ("…" if len(spans) > 5 else "")
    yield ctx.finding(
        codes.UNGROUNDED_CLAIM,
        (
            "Called again with nothing new, the model answered with "
            if again
            else "The model's answer brings "
        )
        + f"{count(len(spans), 'claim')} found in no message, tool result or prompt it was "
        f"given: {listed}.",
        grade=None if again else "first answer",
        related_turn=ctx.prev.index if again and ctx.prev is not None else None,
        spans=spans,
    )


CHECKS: tuple[Check, ...] = (check_ignored_tool_error, check_ungrounded_claim)
