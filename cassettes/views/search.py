"""Search across a run's turns: every text a person would look for, with where it was found."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..analysis import Turn

__all__ = ["SearchHit", "search_turns"]


@dataclass(frozen=True)
class SearchHit:
    seq: int
    conversation: str
    turn: int
    #: Where in the turn: ``E text``, ``E tool call``, ``C appended``, ``finding`` …
    where: str
    #: The matching text around the match, on one line.
    snippet: str


def turn_fields(turn: Turn) -> Iterator[tuple[str, str]]:
    """``(where, text)`` of everything searchable in a turn."""
    e, a, c = turn.e, turn.a, turn.c
    if e.text:
        yield "E text", e.text
    if e.reasoning:
        yield "E reasoning", e.reasoning
    if e.refusal:
        yield "E refusal", e.refusal
    for call in e.tool_calls:
        yield "E tool call", f"{call.name or ''}({call.arguments_raw or ''})"
    if a.error is not None and a.error.message:
        yield "A error", a.error.message
    for model in {a.model_requested, a.model_served} - {None}:
        assert model is not None
        yield "A model", model
    for m in c.appended:
        for p in m.parts:
            if p.text:
                yield f"C appended {m.role}", p.text
            if p.tool_result is not None:
                yield "C tool result", p.tool_result.content
            if p.tool_call is not None:
                yield "C tool call", f"{p.tool_call.name or ''}({p.tool_call.arguments_raw or ''})"
    for f in turn.findings:
        yield "finding", f"{f.code}: {f.message}"


def snippet_of(text: str, at: int, n: int, width: int = 70) -> str:
    """Around the match, cut at word boundaries (a word is never shown in part), the match whole."""
    start = max(0, at - width // 3)
    end = max(start + width, at + n)
    if start > 0:  # back to the start of the word the window begins in (a few characters at most)
        lo = max(0, start - 20)
        space = text.rfind(" ", lo, start + 1)
        start = space + 1 if space >= 0 else (0 if lo == 0 else start)
        if start > at:
            start = at
    if end < len(text):
        space = text.find(" ", end - 1, end + 20)
        end = space if space >= 0 else (len(text) if end + 20 >= len(text) else end)
        end = max(end, at + n)
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


def search_turns(turns: Iterable[Turn], query: str, limit: int = 500) -> list[SearchHit]:
    """Case-insensitive substring search, in turn order; one hit per field that matches."""
    q = query.casefold()
    hits: list[SearchHit] = []
    if not q:
        return hits
    for turn in turns:
        for where, text in turn_fields(turn):
            at = text.casefold().find(q)
            if at >= 0:
                hits.append(
                    SearchHit(
                        turn.seq, turn.conversation, turn.index, where, snippet_of(text, at, len(q))
                    )
                )
                if len(hits) >= limit:
                    return hits
    return hits
