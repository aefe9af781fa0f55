"""Two runs of one agent lined up, and a turn's answer as the layers see it: the one reading of
how two runs differ that ``looptap diff`` (:mod:`~cassettes.replay.forking.rundiff`), ``looptap
rules propose`` (:mod:`~cassettes.replay.forking.proposal`), ``looptap run --repeat``
(:mod:`~cassettes.replay.forking.repeat`) and ``looptap compare``
(:mod:`~cassettes.replay.forking.compare`) share.

- Conversations are paired in the order they started, turns by their index in the conversation
  (:func:`conversation_pairs`); a branch is lined up with its origin from the cursor instead
  (:func:`lined_up`: each branch conversation continues the origin's whose
  request at the cursor its first is closest to).
- Two requests are compared as replay matches them (:class:`Comparing`: ids and timestamps
  normalised, the detectors and the rules it is given).
- A turn's answer: what the model emitted (layer E: :func:`emitted`) and what the API reported
  (layer A: :func:`reported`), and the kind of answer two answers must share to agree
  (:func:`answer_kind`: the calls with their arguments, a refusal, a text, or the error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ...analysis import Conversation, RunAnalysis, Turn
from ...matching import RequestKey, Rules, VolatileSpans, json_diff, request_key
from ...reading import with_notes
from ...wire import Exchange
from ..live.chains import as_sent_live

if TYPE_CHECKING:
    from ...reading import Run

__all__ = [
    "Comparing",
    "Lineup",
    "answer_kind",
    "canonical",
    "conversation_pairs",
    "emitted",
    "lined_up",
    "reported",
    "turn_answer",
    "turns_of",
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
        return canonical(calls)
    return "refusal" if refusal else "text"


def canonical(value: Any) -> str:
    """``value`` as canonical JSON (keys sorted): two calls, or two answers' calls, are JSON-equal
    when these are (a value JSON cannot hold: its ``repr``)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def turn_answer(t: Turn) -> str:
    """:func:`answer_kind` of a recorded turn (the analysis' view of it)."""
    return answer_kind(t.a.status, t.a.error is not None, _calls(t), bool(t.e.refusal))


#: How a branch lines up with its origin (:func:`_pair_fork`).
Lineup = tuple[list[tuple[str, list[int], int, Any]], list[Any], dict[str, tuple[list[int], int]]]


def _pair_fork(
    ra: RunAnalysis,
    rb: RunAnalysis,
    exa: Callable[[int], Exchange],
    exb: Callable[[int], Exchange],
    origin: dict[str, Any],
    compare: Comparing,
) -> Lineup:
    """How a branch lines up with its origin: (origin conversation, its seqs from the cursor, turn
    index there, branch conversation) per pair; the branch conversations no origin conversation
    continues; the origin conversations at the cursor the branch has no turn of."""
    starts = origin.get("starts") if isinstance(origin.get("starts"), dict) else {}
    # origin conversation → (its seqs from the cursor, turn index there)
    at: dict[str, tuple[list[int], int]] = {}
    for ca in ra.conversations:
        seq = starts.get(str(ca.id)) if isinstance(starts, dict) else None
        if isinstance(seq, int) and seq in ca.turns:
            i = ca.turns.index(seq)
            at[str(ca.id)] = (ca.turns[i:], i)
    pairs: list[tuple[str, list[int], int, Any]] = []
    lone: list[Any] = []
    free = dict(at)
    for cb in rb.conversations:
        kb = compare.key(exb(cb.turns[0]))
        best: tuple[int, str] | None = None
        for cid, (seqs, _) in free.items():
            ka = compare.key(exa(seqs[0]))
            n = (
                len(json_diff(ka.body, kb.body))
                if ka.is_json and kb.is_json
                else (0 if ka.body == kb.body else 1)
            )
            if best is None or n < best[0]:
                best = (n, cid)
        if best is None:
            lone.append(cb)
            continue
        seqs, turn = free.pop(best[1])
        pairs.append((best[1], seqs, turn, cb))
    return pairs, lone, free


def turns_of(lineup: Lineup) -> list[tuple[str, int, int | None, int]]:
    """Every branch turn of ``lineup``: (origin conversation, turn index, the origin's seq of that
    turn or ``None`` when the origin stopped before it, the branch's seq)."""
    return [
        (cid, turn + k, seqs[k] if k < len(seqs) else None, sb)
        for cid, seqs, turn, cb in lineup[0]
        for k, sb in enumerate(cb.turns)
    ]


def lined_up(
    a: Run, b: Run, path_b: str | Path, meta: dict[str, Any], compare: Comparing
) -> tuple[dict[str, Any], Callable[[int], Exchange], Lineup]:
    """The branch ``b`` lined up with its origin ``a`` from the cursor: the fork's origin with its
    notes, the origin's exchanges with its turns at the cursor as the fork sent them, and how the
    conversations pair (:func:`~cassettes.replay.forking.rundiff.branch_diff`)."""
    origin = with_notes(path_b, meta)
    starts = origin.get("starts")
    exa = as_sent_live(
        a.exchanges,
        a.exchange_by_seq,
        [s for s in starts.values() if isinstance(s, int)] if isinstance(starts, dict) else [],
    )
    lineup = _pair_fork(a.analysis, b.analysis, exa, b.exchange_by_seq, origin, compare)
    return origin, exa, lineup
