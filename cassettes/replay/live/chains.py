"""Answers a live upstream never gave: a fork's request that continues an answer replayed from the
recording (the Responses API's ``previous_response_id``) sent self-contained, over HTTP and over a
WebSocket alike (docs/fork.md).

Past a fork's cursor requests go to a live upstream that never saw the answers replayed before
it, so a request naming one of them would be refused there (the Responses API's
``previous_response_not_found``). The API's adapter says how its requests chain
(``Provider.chaining``); :class:`Chains` keeps (in :class:`Threads`), for every answer, the
answer it continued and the items its turn added (its input, the answer's output), and
:meth:`Chains.standalone` gives the request carrying that history itself, without the id. A request
continuing an answer the live upstream gave goes as the client sent it. Nothing here names an API.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from ... import bounds, providers
from ...hints import count
from ...wire import decode_chunks, frame, header

if TYPE_CHECKING:
    from ...providers import Chaining
    from ...wire import Chunk, Exchange

__all__ = [
    "Chains",
    "Threads",
    "as_sent_live",
]

#: Answers remembered (the oldest forgotten first), and the longest chain of answers walked.
MAX_ANSWERS = 10_000


class Threads:
    """Every answer known: its id → the answer it continued and the items the turn added (its
    input, the answer's output). A chain, not a copy of each history: memory grows with the
    turns, not with their square."""

    def __init__(self, limit: int = MAX_ANSWERS) -> None:
        self.limit = limit
        self._answers: OrderedDict[str, tuple[str | None, list[Any]]] = OrderedDict()

    def add(self, rid: str | None, prev: str | None, items: list[Any]) -> None:
        if rid is None:
            return
        self._answers[rid] = (prev, items)
        self._answers.move_to_end(rid)
        while len(self._answers) > self.limit:
            self._answers.popitem(last=False)

    def __contains__(self, rid: object) -> bool:
        return rid in self._answers

    def history(self, rid: str) -> list[Any] | None:
        """The conversation's items up to and with answer ``rid`` (``None``: an answer not known,
        or a chain that leads to one)."""
        parts: list[list[Any]] = []
        at: str | None = rid
        for _ in range(len(self._answers) + 1):  # each answer once; more is a loop
            if at is None:
                break
            got = self._answers.get(at)
            if got is None:
                return None
            at, items = got
            parts.append(items)
        else:
            return None  # a chain longer than the answers kept: a loop
        return [item for items in reversed(parts) for item in items]


def chaining_of(method: str, target: str, doc: Any) -> Chaining | None:
    """How the request (its JSON ``doc``) chains to earlier answers, as its API's adapter says;
    ``None``: an API whose requests carry their whole history (or no API known)."""
    if not isinstance(doc, dict):
        return None
    adapter = providers.detect(method.upper(), urlsplit(target), doc)
    return adapter.chaining() if adapter is not None else None


def answer_of(chunks: list[Chunk], content_type: str | None) -> Any:
    """The answer a response body stands for, as JSON: the body sent whole, or a stream's last
    event (the closing one, carrying the response); ``None`` when it is neither."""
    framed = frame(chunks, content_type)
    if framed.kind == "json":
        return framed.value
    for ev in reversed(framed.events[-4:]):
        doc = bounds.loads_or_none(ev.data.encode("utf-8", "surrogateescape"))
        if isinstance(doc, dict):
            return doc
    return None


def threads_of(exchanges: Iterable[Exchange]) -> Threads:
    """The answers of a recording's round trips (HTTP and WebSocket turns) whose API chains them."""
    threads = Threads()
    for ex in exchanges:
        if ex.status is None or ex.status >= 400:
            continue
        doc = ex.request_json()
        chain = chaining_of(ex.method, ex.url, doc)
        if chain is not None:
            answer = answer_of(ex.response_chunks, ex.response_header("content-type"))
            prev, rid, items = chain.thread(doc, answer)
            threads.add(rid, prev, items)
    return threads


def as_sent_live(
    exchanges: Iterable[Exchange], by_seq: Callable[[int], Exchange], starts: Iterable[int]
) -> Callable[[int], Exchange]:
    """``by_seq`` with the recorded turns ``starts`` (their seqs: a fork's at its cursor, or every
    turn ``looptap compare`` sends) as they are sent live (:meth:`Chains.sent`, no answer the live
    upstream gave). So a branch's first live turn is compared with what it was sent as, not with
    the shorthand."""
    at = set(starts)
    chains = Chains(lambda: exchanges)
    made: dict[int, Exchange] = {}  # only the rewritten ones: a turn held would pin its bodies

    def lookup(seq: int) -> Exchange:
        ex = by_seq(seq)
        if seq not in at or seq in made:
            return made.get(seq, ex)
        body, _ = chains.sent(ex.method, ex.url, ex.request_body)
        if body is None:
            return ex
        made[seq] = out = copy.copy(ex)
        out.request_body = body
        out.forget_request_json()
        return out

    return lookup


@dataclass
class Chains:
    """What a fork knows of the answers its requests may continue: every recorded answer
    (``recorded``, read when a request first needs it), what a request served in position stood
    for, and the answers the live upstream gave (:attr:`live_ids`: a request continuing one goes
    as it is). Over HTTP the cursor's (:meth:`sent`, :meth:`served`, :meth:`relayed`); over a
    WebSocket the relay's (:mod:`cassettes.replay.serving._websocket`: :meth:`answered` and
    :meth:`standalone`, with no recorded answers but the turns it served, and each session's own
    live answers)."""

    recorded: Callable[[], Iterable[Exchange]]
    live_ids: set[str] = field(default_factory=set)
    #: Requests sent self-contained (they continued an answer replayed from the recording).
    made: int = 0
    _threads: Threads | None = None

    @property
    def threads(self) -> Threads:
        if self._threads is None:
            self._threads = threads_of(self.recorded())
        return self._threads

    def answered(
        self, chain: Chaining, request: Any, answer: Any, known: set[str] | None = None
    ) -> None:
        """What ``answer`` (to ``request``, both JSON) stood for in this run; its id joins
        ``known`` (the answers the live upstream gave) when given."""
        prev, rid, items = chain.thread(request, answer)
        self.threads.add(rid, prev, items)
        if known is not None and rid is not None:
            known.add(rid)

    def standalone(
        self, chain: Chaining, request: Any, known: Collection[str]
    ) -> tuple[Any, list[str]]:
        """``request`` (JSON) as it goes live, and its note: when it continues an answer the live
        upstream never gave (not in ``known``), self-contained (counted in :attr:`made`), its
        input the history that answer stood for; else ``request`` itself."""
        prev, _, _ = chain.thread(request, None)
        if prev is None or prev in known:
            return request, []
        history = self.threads.history(prev)
        if history is None:
            return request, [
                f"fork: continues {prev[:80]}, an answer this replay server never saw: sent as "
                "it is"
            ]
        made = chain.standalone(request, history)
        self.made += made is not request
        return made, [
            f"fork: sent self-contained: it continued {prev[:80]}, an answer the live upstream "
            f"never gave; the {count(len(history), 'item')} that answer stood for are its input "
            "instead"
        ]

    def sent(self, method: str, target: str, body: bytes) -> tuple[bytes | None, list[str]]:
        """The body of a request sent live as it goes (``None``: as the client sent it), and its
        note: self-contained when it continues an answer replayed from the recording, which the
        live upstream never gave (the same rule as over a WebSocket)."""
        doc = bounds.loads_or_none(body)
        chain = chaining_of(method, target, doc)
        if chain is None or chain.thread(doc, None)[0] is None:
            return None, []
        made, notes = self.standalone(chain, doc, self.live_ids)
        return (orjson.dumps(made) if made is not doc else None), notes

    def served(self, method: str, target: str, body: bytes, answer: Exchange) -> None:
        """The recorded ``answer`` stood, in this run, for the request as the client sent it
        (``body``: a tolerant prefix's changed tool results), not as recorded: a later request
        continuing it is made self-contained from what the client really sent."""
        doc = bounds.loads_or_none(body)
        chain = chaining_of(method, target, doc)
        if chain is not None:
            content_type = answer.response_header("content-type")
            self.answered(chain, doc, answer_of(answer.response_chunks, content_type))

    def relayed(
        self,
        method: str,
        target: str,
        sent: bytes,
        chunks: list[tuple[float | None, bytes]],
        headers: list[tuple[str, str]],
    ) -> None:
        """An answer the live upstream gave (``headers``, ``chunks`` as relayed) to a request sent
        live (``sent``: its body as sent): a later request continuing it goes as it is."""
        doc = bounds.loads_or_none(sent)
        chain = chaining_of(method, target, doc)
        if chain is not None:
            body = decode_chunks(chunks, header(headers, "content-encoding")).chunks
            answer = answer_of(body, header(headers, "content-type"))
            self.answered(chain, doc, answer, self.live_ids)
