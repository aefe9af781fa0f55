"""Provider evidence first (docs/threading.md, "Provider evidence first"): the continuity tokens an
API gives in its answers for the client to send back as they were — a thought signature, a
thinking block's signature or redacted data, encrypted reasoning, an output item's id, a tool
call's id. Which ``provider_details`` keys are tokens is the family's data
(:attr:`~cassettes.providers._profile.Profile.continuity`); this step reads them the same way for
every family.

Evidence only: a token counts where a request carries, verbatim, a token that exactly one earlier
answer of the recording produced. A token two answers produced (an upstream or a framework that
numbers its ids per run) names no turn and is set aside for good."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator

from ...models import Message, Part
from .._message_keys import _ROLE, stable
from ..spill import SpillMap
from ._data import Link, Request, Threads
from ._history import describe

#: The shortest token read: a shorter value (``0``, ``call_1``) is a counter, no evidence.
MIN_TOKEN = 8
#: What is read of a request: its last messages (the newest answers it carries back) and the
#: first parts of each; of an answer, its first parts.
SCAN_MESSAGES = 64
SCAN_PARTS = 64
#: A token's value set aside: two answers produced it.
TWICE = -1


def _tokens(parts: list[Part], keys: frozenset[str], results: bool) -> Iterator[int]:
    """The tokens among ``parts``, as stable hashes: the values of the family's continuity keys,
    tool calls' ids, and (``results``) the ids tool results answer."""
    for p in parts[:SCAN_PARTS]:
        details = p.provider_details
        if details and keys:
            for key in keys:
                v = details.get(key)
                if isinstance(v, str) and len(v) >= MIN_TOKEN:
                    yield stable(v.encode("utf-8", "surrogatepass"))
        call = p.tool_call
        if call is not None and isinstance(v := call.id, str) and len(v) >= MIN_TOKEN:
            yield stable(v.encode("utf-8", "surrogatepass"))
        if results:
            res = p.tool_result
            if res is not None and isinstance(v := res.call_id, str) and len(v) >= MIN_TOKEN:
                yield stable(v.encode("utf-8", "surrogatepass"))


class Remembered:
    """What :func:`carried` read of the request threaded last: its last messages (``window``,
    held, so that an ``id`` names no other), how many came before them, the continuity keys they
    were read with, each one's tokens and the latest turn among theirs (:data:`TWICE`: none); and
    the tokens :func:`register` set since (``touched``, the only entries of ``by_token`` that
    changed: a remembered message's latest turn is read again only where one of its tokens is
    among them)."""

    __slots__ = ("before", "hashes", "keys", "latest", "touched", "window")

    def __init__(self) -> None:
        self.window: list[Message] = []
        self.before = 0
        self.keys = frozenset[str]()
        self.hashes: list[tuple[int, ...]] = []
        self.latest: list[int] = []
        self.touched: set[int] = set()


def register(
    s: Threads, parts: list[Part], keys: frozenset[str], tid: int, memo: Remembered
) -> None:
    """Turn ``tid``'s answer produced these tokens (a token another answer produced too is
    set aside); each is ``touched`` in ``memo``."""
    for h in set(_tokens(parts, keys, results=False)):
        s.by_token[h] = tid if s.by_token.get(h) is None else TWICE
        memo.touched.add(h)


def _latest(by_token: SpillMap[int, int], hashes: tuple[int, ...]) -> int:
    """The latest turn that produced one of ``hashes`` (:data:`TWICE`, -1: none)."""
    best = TWICE
    for h in hashes:
        tid = by_token.get(h)
        if tid is not None and tid > best:  # (TWICE, -1, is never the best)
            best = tid
    return best


def carried(
    s: Threads, messages: list[Message], keys: frozenset[str], memo: Remembered
) -> int | None:
    """The latest turn whose answer produced a token this request carries back (``None``:
    none): the model's messages of its history, and the results it sends. A message the
    request before carried too (the same object: a request parsed against the one it extends
    shares its messages) is taken from ``memo`` with its tokens and their latest turn, read
    again only where :func:`register` touched one of its tokens since; ``memo`` then holds
    this request's."""
    window = messages[-SCAN_MESSAGES:]
    w, before = len(window), len(messages) - len(window)
    hashes: list[tuple[int, ...] | None] = [None] * w
    latest = [TWICE] * w
    old = memo.window
    if old and keys == memo.keys:
        # Where the request extends the one before, window[j] is old[j + off].
        off = before - memo.before
        j0, j1 = max(0, -off), min(w, len(old) - off)
        if j0 < j1 and all(map(operator.is_, window[j0:j1], old[j0 + off : j1 + off])):
            hashes[j0:j1] = memo.hashes[j0 + off : j1 + off]
            latest[j0:j1] = memo.latest[j0 + off : j1 + off]
        else:  # (another request's messages, some shared: each looked up)
            at = {id(m): i for i, m in enumerate(old)}
            for j, m in enumerate(window):
                i = at.get(id(m))
                if i is not None:
                    hashes[j], latest[j] = memo.hashes[i], memo.latest[i]
        touched = memo.touched
        if touched and not touched.isdisjoint(itertools.chain.from_iterable(filter(None, hashes))):
            for j, got in enumerate(hashes):
                if got and not touched.isdisjoint(got):
                    latest[j] = _latest(s.by_token, got)
    none = frozenset[str]()
    for j in itertools.compress(range(w), map(operator.is_, hashes, itertools.repeat(None))):
        m = window[j]
        model = m.role == "assistant" or _ROLE.get(m.role) == "assistant"
        got = hashes[j] = tuple(_tokens(m.parts, keys if model else none, results=not model))
        latest[j] = _latest(s.by_token, got)
    memo.window, memo.before, memo.keys = window, before, keys
    memo.hashes, memo.latest = hashes, latest  # type: ignore[assignment]  # (each filled above)
    memo.touched.clear()
    best = max(latest, default=TWICE)
    return best if best >= 0 else None


def goes_on(s: Threads, r: Request, link: Link) -> Link:
    """``link`` (what the history says), or the link to the conversation whose token the request
    carries where the history named a turn of another conversation made by the same agent: a
    token names the turn that produced it, a longer matching history does not. The link is
    compared with that conversation's latest turn (what the request kept, whether it echoed)."""
    tid = r.token_turn
    if tid is None or link.previous is None or link.branch is not None or link.how == "header":
        return link
    t = s.turns[tid]
    if t.conversation == s.turns[link.previous].conversation:
        return link
    if t.system != r.system or t.tools != r.tools:
        return link  # another agent's request over that turn: the history's rules say what
    latest = s.last_of.get(t.conversation)
    if latest is None:
        return link
    return describe(s, r, t.conversation, latest, "extends")


#: The most turns a request moves out of a conversation (:func:`moved_out`).
MOVE_BACK = 16


def moved_out(s: Threads, r: Request, link: Link) -> Link:
    """``link``, or, where the request proves that the turns after one of its conversation's
    turns were never that conversation's, the link that moves them out (``rehome``, no branch)
    and goes on from that turn. The proof: the request extends turn ``P``'s history with ``P``'s
    answer word for word (the registration it matched) and carries a continuity token of ``P``'s
    conversation up to ``P`` (none of the turns it would move), while the turn after ``P``
    carried neither ``P``'s answer nor any such token (another agent that opened alike, read as
    this one rewriting its history). On a wire that carries no token (Gemini without thought
    signatures) nothing proves it either way: the turns stay, and whether the request echoed
    their answer is not judged (``echoed`` ``None``)."""
    g = r.extended
    latest = link.previous
    if g is None or latest is None or link.branch is not None:
        return link
    conv, p = g.conversation, s.turns[g.turn]
    if latest == g.turn or s.last_of.get(conv) != latest or link.conversation != conv:
        return link
    if g.length != p.length + 1:
        return link
    chain = [latest]
    while len(chain) <= MOVE_BACK:
        before = s.turns[chain[-1]].previous
        if before is None or s.turns[before].conversation != conv:
            return link
        if before == g.turn:
            break
        chain.append(before)
    else:
        return link
    first = s.turns[chain[-1]]
    if first.proved:
        return link
    if r.token_turn is None:
        link.echoed = None  # (the wire cannot say which of the two the request goes on from)
        return link
    if s.turns[r.token_turn].conversation != conv or r.token_turn in chain:
        return link  # (a token of a turn after P: the request goes on from there, not from P)
    own = s.new_conversation()
    for tid in chain:
        s.turns[tid].conversation = own
        s.moved[tid] = own
    first.opens, first.previous = True, None
    s.last_of[own] = latest
    s.last_of[conv] = g.turn
    if conv in s.recent and s.recent[conv][0] == latest:
        s.recent[own] = s.recent.pop(conv)
    moved = Link(conv, g.turn, "extends", kept=p.length, echoed=True, rehome=(chain[-1], latest))
    moved.rehome_branch, moved.rehomed_to = None, own
    return moved
