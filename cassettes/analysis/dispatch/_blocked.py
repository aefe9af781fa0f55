"""C checks on block pages: a bot check, captcha wall, CDN block or 403 page that reached the model
in place of what was asked for — as a tool's result, as another agent's message (a web-surfing
agent passing on the page it was shown), or pasted into a user turn. The environment failed, not
the model."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...lazy import pattern
from .. import codes as codes
from .._context import TurnContext, short
from .._message_keys import squashed
from .._model import Finding
from ._results import result_texts
from ._shared import speaker

#: What a page that turned a tool away says (a bot check, a captcha wall, a CDN's block page),
#: as one pattern: each phrase is the page's own wording, never a topic word ("captcha" alone).
BLOCK_PAGE = pattern(
    r"verify (?:that )?you are (?:a )?human|are you a robot|prove you(?:'|’)re (?:a )?human"
    r"|checking (?:if the site connection is secure|your browser before accessing)"
    r"|needs to review the security of your connection before proceeding"
    r"|just a moment\.{3}|just a moment…|enable javascript and cookies to continue"
    r"|attention required! \| cloudflare|sorry, you have been blocked|cf-chl-|challenge-platform"
    r"|(?:complete|solve) the (?:security check|captcha)|press (?:&|and) hold"
    r"|unusual traffic from your computer network|incapsula incident id|pardon our interruption"
    r"|you don't have permission to access .{0,200} on this server"
    r"|^\W*(?:<[^>]*>\s*)*(?:http(?: error)? )?403\b.{0,20}forbidden|^\W*error 403\b",
    re.IGNORECASE | re.DOTALL,
)
#: A block page is short: its text (tags, scripts and styles left out) is at most this long; a
#: longer text that says a phrase is an article or a document about it.
_BLOCK_PAGE_LEN = 1500
_MARKUP = pattern(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.IGNORECASE | re.DOTALL)


def _short_page(content: str) -> str | None:
    """The text stripped, or ``None`` when it is too long to be a block page. Taking out the
    markup and squashing the whitespace never lengthens a text: one of at most
    :data:`_BLOCK_PAGE_LEN` characters is short as it is; a text without markup is not run through
    the markup pattern; one surely too long squashed (:func:`_surely_long`) is not squashed."""
    text = content.strip()
    if len(text) <= _BLOCK_PAGE_LEN:
        return text
    if len(text) > 20 * _BLOCK_PAGE_LEN:
        return None
    plain = text if "<" not in text else _MARKUP.sub(" ", text)
    if _surely_long(plain):
        return None
    return text if len(squashed(plain)) <= _BLOCK_PAGE_LEN else None


#: The ASCII characters ``str.split`` (and :func:`squashed`) read as whitespace.
_ASCII_SPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _surely_long(plain: str) -> bool:
    """``plain`` squashed is longer than :data:`_BLOCK_PAGE_LEN`, known without squashing it: a
    text squashed keeps every character that is not whitespace (an ASCII text's whitespace is
    :data:`_ASCII_SPACE`: counted), and its head squashed is no longer than it (the head's words
    are its first ones, the last maybe cut)."""
    if plain.isascii():
        return len(plain) - sum(map(plain.count, _ASCII_SPACE)) > _BLOCK_PAGE_LEN
    head = plain[: 2 * _BLOCK_PAGE_LEN]
    return len(plain) > len(head) and len(squashed(head)) > _BLOCK_PAGE_LEN


def blocked_page(content: str) -> str | None:
    """The phrase that makes a tool result a block page, or ``None``: a short page (its text) that
    says one of :data:`BLOCK_PAGE` (an article that mentions a captcha is not one)."""
    text = _short_page(content)
    m = BLOCK_PAGE.search(text) if text is not None else None
    return m.group(0) if m else None


def blocked_page_in_text(content: str) -> list[str]:
    """The block page's phrases in a message a person or an agent wrote (not a tool's result):
    two different phrases at least, in a short text — one phrase is a person asking about it
    ("what does 'verify you are human' mean?"), a page says several."""
    text = _short_page(content)
    if text is None:
        return []
    found = list(dict.fromkeys(m.group(0).lower() for m in BLOCK_PAGE.finditer(text)))
    return found if len(found) >= 2 else []


def check_tool_result_blocked(ctx: TurnContext) -> Iterator[Finding]:
    """C.tool_result_blocked — a tool's result is a page that turned the tool away."""
    for p, content in result_texts(ctx):
        phrase = blocked_page(content)
        if phrase is not None:
            yield ctx.finding(
                codes.TOOL_RESULT_BLOCKED,
                f"The result of {p.name or 'tool'} ({p.call_id or 'no id'}) is a page that "
                f"blocked the tool ({short(phrase, 60)!r}: a bot check, captcha or block "
                "page): the environment failed, not the model.",
                path=f"{ctx.history_key}[{p.message_index}]",
                tool_call_id=p.call_id,
                tool=p.name,
                phrase=phrase,
            )


def check_message_blocked(ctx: TurnContext) -> Iterator[Finding]:
    """C.message_blocked_page — a message this request appended (another agent's, or the user's)
    carries a block page: the page an agent or a person was shown reached the model as the
    answer to what was asked."""
    start = ctx.turn.c.appended_from
    for k, m in enumerate(ctx.turn.c.appended):
        if m.role != "user" or any(p.tool_result is not None for p in m.parts):
            continue
        text = "\n".join(p.text for p in m.parts if p.kind == "text" and p.text)
        phrases = blocked_page_in_text(text)
        if not phrases:
            continue
        who = speaker(m)
        yield ctx.finding(
            codes.MESSAGE_BLOCKED_PAGE,
            (f"Agent {who!r}'s message" if who else "A user message")
            + f" (history item {start + k}) carries a page that blocked whoever fetched it ("
            + ", ".join(repr(short(p, 60)) for p in phrases[:3])
            + "): a bot check or block page reached the model in place of the content; the "
            "environment failed, not the model.",
            path=f"{ctx.history_key}[{start + k}]",
            speaker=who,
            phrases=phrases[:5],
        )
