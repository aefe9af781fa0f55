"""Two runs of one agent lined up, and a turn's answer as the layers see it: the one reading of
how two runs differ that ``looptap diff`` (:mod:`~cassettes.replay.forking.rundiff`), ``looptap
rules propose`` (:mod:`~cassettes.replay.forking.propose`), ``looptap run --repeat``
(:mod:`~cassettes.replay.forking.repeat`) and ``looptap compare``
(:mod:`~cassettes.replay.forking.compare`) share.

- Conversations are paired in the order they started, turns by their index in the conversation
  (:func:`conversation_pairs`); a branch is lined up with its origin from the cursor instead
  (:func:`cassettes.replay.forking.rundiff.branch_diff`).
- Two requests are compared as replay matches them (:class:`Comparing`: ids and timestamps
  normalised, the detectors and the rules it is given).
- A turn's answer: what the model emitted (layer E: :func:`emitted`) and what the API reported
  (layer A: :func:`reported`), and the kind of answer two answers must share to agree
  (:func:`answer_kind`: the calls with their arguments, a refusal, a text, or the error).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from cassettes.analysis import Conversation, RunAnalysis, Turn
from cassettes.matching import RequestKey, Rules, VolatileSpans, request_key
from cassettes.wire.exchange import Exchange

__all__ = [
    "Comparing",
    "answer_kind",
    "conversation_pairs",
    "emitted",
    "reported",
    "turn_answer",
]


@dataclass(frozen=True)
class Comparing:
    """How the requests of run A and run B are compared: the detectors both sides' text goes
    through (``None``: compared as sent) and the user's rules (``None``: none) — what a replay or
    a fork's prefix matches by (:mod:`cassettes.matching`), so that a difference the replay would
    tolerate is listed as tolerated, and anything else is a divergence.
    :func:`~cassettes.replay.forking.rundiff.comparing` makes it for two cassettes."""

    volatile: VolatileSpans | None = None
    rules: Rules | None = None

    def key(self, ex: Exchange) -> RequestKey:
        return request_key(
            ex.method,
            ex.url,
            ex.request_headers,
            ex.request_body,
            ex.request_json(),
            volatile=self.volatile,
            rules=self.rules,
        )


def conversation_pairs(
    ra: RunAnalysis, rb: RunAnalysis
) -> Iterator[tuple[Conversation | None, Conversation | None, int]]:
    """Each conversation of run A with run B's that started in the same place (``None`` where a
    run has no such conversation), and the turn number of its first turn as A numbers it (a
    branch: its origin's numbers; 0 when A has none). Only the number is kept: a turn held for a
    whole diff would pin what it refers to (a huge run's bodies) in memory."""
    for i in range(max(len(ra.conversations), len(rb.conversations))):
        ca = ra.conversations[i] if i < len(ra.conversations) else None
        cb = rb.conversations[i] if i < len(rb.conversations) else None
        yield ca, cb, _first_index(ra, ca)


def _first_index(ra: RunAnalysis, conv: Conversation | None) -> int:
    """The turn number of ``conv``'s first turn, as ``ra`` numbers it. A function of its own: the
    turn it reads is let go on return, not held by :func:`conversation_pairs`' frame while the
    caller diffs the conversation (a diff of a huge run held 190 MB more)."""
    head = ra.turns.get(conv.turns[0]) if conv is not None and conv.turns else None
    return head.index if head is not None else 0


def _calls(t: Turn) -> list[tuple[str | None, Any]]:
    """(tool name, arguments) of each call the model made at ``t``, in order (the raw text where
    the arguments did not parse)."""
    return [
        (c.name, c.arguments if c.arguments is not None else c.arguments_raw)
        for c in t.e.tool_calls
    ]


def emitted(t: Turn) -> dict[str, Any]:
    """What the model emitted at ``t`` (layer E), as two runs' turns are compared."""
    return {
        "text": t.e.text or "",
        "refusal": t.e.refusal,
        "tool_calls": [{"name": n, "arguments": a} for n, a in _calls(t)],
    }


def reported(t: Turn) -> dict[str, Any]:
    """What the API reported at ``t`` (layer A), as two runs' turns are compared."""
    err = t.a.error
    return {
        "status": t.a.status,
        "finish_reason": t.a.finish_reason_raw,
        "complete": t.a.complete,
        "error": {"type": err.type, "message": err.message} if err is not None else None,
    }


def answer_kind(
    status: int | None, failed: bool, calls: Sequence[tuple[str | None, Any]], refusal: bool
) -> str:
    """The kind of an answer: its calls with their arguments (canonical JSON), 'refusal', 'text',
    or the error (``failed``: its status). Two answers agree only when their kinds are equal (and,
    for two texts, ``looptap compare`` asks the texts to be similar)."""
    if failed:
        return f"error {status}"
    if calls:
        return orjson.dumps(calls, option=orjson.OPT_SORT_KEYS).decode()
    return "refusal" if refusal else "text"


def turn_answer(t: Turn) -> str:
    """:func:`answer_kind` of a recorded turn (the analysis' view of it)."""
    return answer_kind(t.a.status, t.a.error is not None, _calls(t), bool(t.e.refusal))
