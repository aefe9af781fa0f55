"""E.tool_call_as_text — the model wrote a tool call as text, in an open model's own tool-call
syntax, and the API passed it on as the answer: tools were offered, the turn ended with a natural
stop and carries no tool call. The client will never run it (the serving stack's tool parser was
off, or did not know the syntax).

The syntaxes are data (:data:`SYNTAXES`): the opening markers the tool parsers of vLLM and SGLang
look for, one per family of chat template. The wire proves a call only where the text holds a
marker *and*, after it, the name of a tool the request offered, as a whole word within
:data:`_WINDOW` characters (an answer that merely mentions the syntax names no offered tool).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..models import FinishReason
from . import codes as codes
from ._context import Check, TurnContext
from ._model import Finding

__all__ = ["CHECKS", "SYNTAXES", "text_call"]

#: (syntax, its opening marker): the markers vLLM's and SGLang's tool parsers start a call at.
SYNTAXES: tuple[tuple[str, str], ...] = (
    ("Hermes / Qwen / GLM (<tool_call>)", "<tool_call>"),
    ("Mistral ([TOOL_CALLS])", "[TOOL_CALLS]"),
    ("Llama 3.1 JSON (<|python_tag|>)", "<|python_tag|>"),
    ("Llama 4 pythonic (<|python_start|>)", "<|python_start|>"),
    ("DeepSeek V3 (<｜tool▁calls▁begin｜>)", "<｜tool▁calls▁begin｜>"),
    ("DeepSeek V3 (<｜tool▁call▁begin｜>)", "<｜tool▁call▁begin｜>"),
    ("Kimi K2 (<|tool_calls_section_begin|>)", "<|tool_calls_section_begin|>"),
    ("Kimi K2 (<|tool_call_begin|>)", "<|tool_call_begin|>"),
    ("Granite (<|tool_call|>)", "<|tool_call|>"),
    ("Granite 20B FC (<function_call>)", "<function_call>"),
    ("InternLM2 (<|action_start|><|plugin|>)", "<|action_start|><|plugin|>"),
    ("Jamba / MiniMax (<tool_calls>)", "<tool_calls>"),
    ("MiniMax M2 (<minimax:tool_call>)", "<minimax:tool_call>"),
    ("Phi-4 mini (functools[)", "functools["),
    ("Seed-OSS (<seed:tool_call>)", "<seed:tool_call>"),
    ("Step-3 (<｜tool_calls_begin｜>)", "<｜tool_calls_begin｜>"),
    ("gpt-oss harmony (to=functions.)", "to=functions."),
    ("Qwen3-Coder / Llama 4 (<function=)", "<function="),
)
#: How far after a marker the tool's name may stand (a JSON object's ``"name"`` key, a
#: function-call opening, a harmony recipient: all come first).
_WINDOW = 400
#: How much of an answer is searched (bounded: the text is untrusted).
_MAX_TEXT = 200_000


def text_call(text: str, offered: set[str]) -> tuple[str, str, int] | None:
    """The first tool call written as text: (its syntax, the offered tool it names, where it
    starts), or ``None`` when no marker is followed by an offered tool's name."""
    if not offered:
        return None
    head = text[:_MAX_TEXT]
    best: tuple[str, str, int] | None = None
    for syntax, marker in SYNTAXES:
        at = head.find(marker)
        while at >= 0 and (best is None or at < best[2]):
            after = head[at + len(marker) : at + len(marker) + _WINDOW]
            name = _named(after, offered)
            if name is not None:
                best = (syntax, name, at)
                break
            at = head.find(marker, at + 1)
    return best


def _named(after: str, offered: set[str]) -> str | None:
    """The offered tool named first in ``after``, as a whole word (``get_weather`` is not named by
    ``get_weather_now``)."""
    found: tuple[int, str] | None = None
    for name in offered:
        m = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", after)
        if m is not None and (found is None or m.start() < found[0]):
            found = (m.start(), name)
    return found[1] if found else None


def check_tool_call_as_text(ctx: TurnContext) -> Iterator[Finding]:
    r = ctx.response
    if (
        r is None
        or r.finish_reason is not FinishReason.COMPLETE
        or r.complete is False
        or r.error is not None
        or not (200 <= (ctx.rt.status or 0) < 300)
        or not ctx.tools
        or ctx.turn.e.tool_calls
        or not ctx.turn.e.text
    ):
        return
    offered = {t.name for t in ctx.tools if t.name}
    found = text_call(ctx.turn.e.text, offered)
    if found is None:
        return
    syntax, name, at = found
    snippet = ctx.turn.e.text[at : at + 120]
    yield ctx.finding(
        codes.TOOL_CALL_AS_TEXT,
        f"The model wrote a call of `{name}` as text in the {syntax} tool-call syntax "
        f"({snippet!r}…) and the turn ended with finish reason {r.finish_reason_raw!r} and no "
        "tool call: the client takes it as the answer and will never run the call. The serving "
        "stack's tool-call parser is off or does not know this model's syntax.",
        tool=name,
        syntax=syntax,
        finish_reason=r.finish_reason_raw,
    )


CHECKS: tuple[Check, ...] = (check_tool_call_as_text,)
