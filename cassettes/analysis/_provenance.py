"""Where a call's arguments came from, and an agent that says it is looping while the loop goes on.

Read against the request the answer was made from: ``E.invented_argument``,
``E.placeholder_argument`` and ``C.loop_reported_not_stopped`` (:mod:`cassettes.analysis.codes`,
docs/findings.md). The first two are weighed again once the call's wait ended, against what the
tool's own HTTP calls for it answered (:func:`weigh_tool_answers`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..lazy import pattern
from . import codes as codes
from ._context import Check, TurnContext, short
from ._model import CallCheck, Finding
from ._repeats import FIRST_REPEAT
from ._tool_http import Awaiting, Served, ToolHttpLinker

__all__ = ["CHECKS", "weigh_tool_answers"]

#: Bounds of the walk over a call's arguments: depth, strings, and a string's length.
_DEPTH, _STRINGS, _LONG = 6, 50, 2000

#: An argument named as an identifier.
_ID_KEY = pattern(
    r"(?:^|[_\-])(?:id|ids|uuid|number|num|no|code|sku|ref|reference)$"
    r"|[a-z](?:Id|ID|Ids|Uuid|Number|Code|Sku|Ref)$",
)
#: An identifier's value: one token, with a digit in it; not a date, a time or a version.
_ID_VALUE = pattern(r"#?[A-Za-z0-9][\w\-#.:]{0,79}")
_NOT_ID = pattern(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|v?\d+(?:\.\d+)+")
#: A placeholder a template leaves for a value.
PLACEHOLDER = pattern(
    r"\bpath_to_\w+|(?:^|[\s'\"])/?path/to/|^<[A-Za-z][\w .\-]{0,40}>$|\bYOUR_[A-Z][A-Z_]{2,}"
    r"|\byour[_\-](?:api[_\-]?key|token|password|username|email|name|project|bucket)\b"
    r"|(?<![\w.\-])example\.(?:com|org|net)\b|^x{3,}$|\bXXX+\b",
)
#: An agent saying it is looping: an orchestrator's ledger (Magentic-One's ``is_in_loop``, an
#: ``answer`` of true or a bare true) or its own words.
LOOPING = pattern(
    r"\"is_in_loop\"\s*:\s*(?:true\b|\{[^{}]{0,2000}?\"answer\"\s*:\s*true\b)"
    r"|\b(?:I|we)(?:'|’)?(?:m| am| are|'re)? (?:stuck in a loop|going (?:round|around) in circles"
    r"|in an? (?:infinite )?loop)\b",
    re.IGNORECASE,
)


def _strings(value: Any, key: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """(argument name, string value) of a call's arguments, bounded."""
    if depth > _DEPTH:
        return
    if isinstance(value, str):
        yield key, value[:_LONG]
    elif isinstance(value, dict):
        for k, v in list(value.items())[:_STRINGS]:
            yield from _strings(v, str(k), depth + 1)
    elif isinstance(value, list):
        for v in value[:_STRINGS]:
            yield from _strings(v, key, depth + 1)


def _given(ctx: TurnContext) -> Iterator[str]:
    """What the model was given before this answer, newest first: every message's text but the
    model's own words, tools' results and the calls it made earlier, then the tools' descriptions
    and the system prompt. Each text is its own (never joined to the others): an argument is
    usually in a recent tool's result, found there without reading the whole history again,
    which each request re-sends."""
    for m in reversed(ctx.messages):
        own = m.role in ("assistant", "model")
        for p in reversed(m.parts):
            if p.tool_call is not None:
                yield p.tool_call.arguments_raw or ""
            elif p.tool_result is not None:
                yield p.tool_result.content
            elif not own:
                yield p.text or ""
    yield from (t.description or "" for t in ctx.tools)
    req = ctx.request
    yield from (p.text or "" for p in (req.system if req is not None else []))


def _seen(value: str, given: Iterable[str]) -> bool:
    """``value`` (its ``#`` aside) in one of the texts, as a whole token (no letter or digit
    either side), in any case. A token holds no line break, so each text answers alone as the
    texts joined by line breaks would."""
    token = re.compile(
        rf"(?<![A-Za-z0-9]){re.escape(value.lstrip('#'))}(?![A-Za-z0-9])", re.IGNORECASE
    )
    return any(token.search(text) for text in given)


def _suspects(
    ctx: TurnContext,
    hit: Callable[[str, str], str | None],
    seen: Callable[[str, Iterable[str]], bool],
) -> Iterator[tuple[CallCheck, str, str, str]]:
    """(call, argument, value, what is suspect) for the first argument of each of the answer's
    calls that ``hit`` finds suspect (by its name and value) and ``seen`` does not find in what
    the model was given (:func:`_given`, read only when needed, newest first, up to the first
    text that holds it)."""
    for c in [c for c in ctx.turn.e.tool_calls if c.kind in ("function", "custom")][:20]:
        for key, value in _strings(c.arguments):
            suspect = hit(key, value)
            if suspect is None:
                continue
            if not seen(suspect, _given(ctx)):
                yield c, key, value, suspect
                break


def _identifier(key: str, value: str) -> str | None:
    """The value, when the argument is named as an identifier and the value is shaped as one."""
    v = value.strip()
    if (
        _ID_KEY.search(key)
        and _ID_VALUE.fullmatch(v)
        and any(ch.isdigit() for ch in v)
        and not _NOT_ID.fullmatch(v.lstrip("#"))
    ):
        return v
    return None


def _placeholder(key: str, value: str) -> str | None:
    m = PLACEHOLDER.search(value)
    return m.group(0).strip() if m else None


def _holds(span: str, given: Iterable[str]) -> bool:
    """``span`` (its quotes aside) in one of the texts, in any case (a placeholder holds no line
    break: each text answers alone as the texts joined by line breaks would)."""
    needle = span.strip(" '\"").lower()
    return any(needle in text.lower() for text in given)


def check_invented_argument(ctx: TurnContext) -> Iterator[Finding]:
    """E.invented_argument — an identifier in a call that nothing earlier holds."""
    for c, key, _, v in _suspects(ctx, _identifier, _seen):
        yield ctx.finding(
            codes.INVENTED_ARGUMENT,
            f"The model called {c.name or 'a tool'} with {key}={short(v, 60)!r}, an "
            "identifier found in no message, tool result or prompt before it: it made the "
            "value up.",
            tool_call_id=c.id,
            tool=c.name,
            argument=key,
            value=v[:120],
        )


def check_placeholder_argument(ctx: TurnContext) -> Iterator[Finding]:
    """E.placeholder_argument — a template's placeholder passed as a value."""
    for c, key, value, found in _suspects(ctx, _placeholder, _holds):
        yield ctx.finding(
            codes.PLACEHOLDER_ARGUMENT,
            f"The model called {c.name or 'a tool'} with {key or 'an argument'}="
            f"{short(value, 80)!r}: {found!r} is a placeholder, not a value it was given.",
            tool_call_id=c.id,
            tool=c.name,
            argument=key,
            placeholder=found,
            value=value[:200],
        )


#: Statuses that say nothing of an argument's value: credentials, a proxy's, a timeout, the rate.
_NOT_ABOUT_VALUE = frozenset({401, 403, 407, 408, 429})
#: The codes weighed against the tool's answers.
_WEIGHED = frozenset({codes.INVENTED_ARGUMENT, codes.PLACEHOLDER_ARGUMENT})


def _rejects(c: Served, value: str, key: str) -> bool:
    """The tool's HTTP call ``c``, which sent ``value``, was told there is no such thing: a 404 or
    410; a 2xx (an API that answers errors with 200) that says it is not there and names the
    value; or a 4xx not about credentials, a proxy, a timeout or the rate that says something was
    wrong or not there and names the value or the argument (:func:`._tool_http.denial`)."""
    if c.status in (404, 410):
        return True
    if c.status is None or not c.denies:
        return False
    if 200 <= c.status < 300:
        return c.denies == 2 and value in c.named
    if 400 <= c.status < 500 and c.status not in _NOT_ABOUT_VALUE:
        return value in c.named or (len(key) >= 2 and key.casefold() in (c.got or "").casefold())
    return False


def tool_verdict(value: str, key: str, calls: Sequence[Served]) -> tuple[str, Served] | None:
    """What the tool's HTTP calls for a model's call (linked by its arguments) say of one of its
    argument values: ``exists`` — a call that sent it got a 2xx answer that holds it as data and
    says nothing is missing or invalid; ``rejected`` — a call that sent it was told there is no
    such thing (:func:`_rejects`); ``None`` when neither, or both, hold (or no call sent it)."""
    v = value.strip().casefold()
    sent = [c for c in calls if v in c.asked]
    rejected = [c for c in sent if _rejects(c, v, key)]
    held = [
        c
        for c in sent
        if c.status is not None and 200 <= c.status < 300 and not c.denies and v in c.held
    ]
    if rejected and not held:
        return "rejected", rejected[-1]
    if held and not rejected:
        return "exists", held[-1]
    return None


def weigh_tool_answers(
    ended: Iterable[tuple[str, Awaiting]],
    tools: ToolHttpLinker,
    findings_of: Callable[[int], list[Finding] | None],
) -> None:
    """``E.invented_argument`` and ``E.placeholder_argument`` of calls whose wait ended, weighed
    against what the tool's HTTP calls for each (linked by its arguments) answered: a value the
    tool holds (``exists``) was no invention — the finding is dropped; a value the tool said it
    does not know (``rejected``) confirms it — its message and details say so. Changed in place,
    in the list the turn's readers hold (``findings_of``)."""
    for cid, made in ended:
        calls = tools.served.get(cid)
        if not calls:
            continue
        findings = findings_of(made.seq)
        if not findings:
            continue
        kept: list[Finding] = []
        for f in findings:
            d = f.details
            value, key = d.get("value"), d.get("argument")
            if f.tool_call_id != made.id or f.code not in _WEIGHED or not isinstance(value, str):
                kept.append(f)
                continue
            verdict = tool_verdict(value, key if isinstance(key, str) else "", calls)
            if verdict is not None and verdict[0] == "exists":
                continue
            if verdict is not None:
                c = verdict[1]
                what = f"answered {c.status}" + (f" (“{short(c.got, 80)}”)" if c.got else "")
                f.message += (
                    f" The tool's HTTP call #{c.seq} for this call {what}: the tool does not "
                    "know the value either."
                )
                d.update(tool_answer="rejected", tool_http_seq=c.seq, tool_status=c.status)
            kept.append(f)
        if len(kept) != len(findings):
            findings[:] = kept


def _says_looping(text: str) -> bool:
    """:data:`LOOPING` in ``text``. Every phrase it finds holds ``loop`` or ``rcle`` (of
    "circles"), letters that match only themselves and their capitals case-insensitively, so a
    text with neither, lower-cased, is answered without the pattern (which tries each of its
    branches at every word: ~30 µs for an answer of 1,400 characters, 2 µs this way)."""
    low = text.lower()
    return ("loop" in low or "rcle" in low) and LOOPING.search(text) is not None


def check_loop_reported(ctx: TurnContext) -> Iterator[Finding]:
    """C.loop_reported_not_stopped — the agent said it is looping, twice in a row, and was called
    again. Counted per conversation (``ConversationState.state``) from each answer's text."""
    prev = ctx.prev
    said = ctx.conv.state.get("C.loop_reported", 0)
    r = ctx.response
    text = (r.text if r is not None else "")[:20000]
    ctx.conv.state["C.loop_reported"] = said + 1 if _says_looping(text) else 0
    if prev is None or said < 2 or ctx.conv.state.get("C.loop_reported_said"):
        return
    ctx.conv.state["C.loop_reported_said"] = True
    loop = _loop_of(ctx)
    yield ctx.finding(
        codes.LOOP_REPORTED_NOT_STOPPED,
        f"The agent said in {said} answers in a row, the last on turn {prev.index}, that it is "
        "stuck or looping, and the client called it again all the same: the loop was not "
        "stopped, replanned or handed to a person.",
        grade="repeated call" if loop else None,
        related_turn=prev.index,
        times=said,
        **loop,
    )


def _loop_of(ctx: TurnContext) -> dict[str, Any]:
    """The loop a report of a loop is a consequence of (docs/findings.md, "Root causes first"):
    the first repeated call of this conversation's task, else the run's first, an earlier one of
    another conversation (an orchestrator reports the loop of the agents it directs), as
    ``details.caused_by``; none when no repeated call was seen before the report."""
    own = ctx.conv.state.get(FIRST_REPEAT)
    if isinstance(own, int):
        return {"caused_by": codes.REPEATED_CALL, "caused_by_seq": own}
    first = ctx.repeats.first
    if first and first[0] < ctx.seq:
        return {
            "caused_by": codes.REPEATED_CALL,
            "caused_by_seq": first[0],
            "caused_by_conversation": first[1],
        }
    return {}


CHECKS: tuple[Check, ...] = (
    check_invented_argument,
    check_placeholder_argument,
    check_loop_reported,
)
