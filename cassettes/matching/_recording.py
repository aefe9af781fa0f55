"""The recording a :class:`~cassettes.matching.Matcher` serves from, as plain data: the round
trips by position (in memory, or read again from disk: :class:`Recordings`), their request keys'
hashes in sorted order (a lookup is a bisection), the paths recorded, a few keys and exchanges
kept at hand, and once labelled each round trip's conversation and turn (:class:`Index`); with
the functions that read it (:func:`exchange_at`, :func:`key_at`, :func:`candidates`,
:func:`label_turns`) and the one that reads a client's base path under the recording's
(:func:`rebased`); and :class:`Recorded`, one round trip as the matcher hands it out (a view of
the index and of the matcher's play counts)."""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import orjson

from ..providers import InferredFields, inferred_fields, reduced
from ..wire import Exchange, client_body
from ._requestkey import AsRecorded, RequestKey, request_key, tool_host
from ._rules import Rules
from ._volatile import VolatileSpans

if TYPE_CHECKING:
    from ..analysis import McpCall

__all__ = [
    "EXCHANGE_CACHE",
    "InMemory",
    "Plays",
    "Recorded",
    "Recordings",
    "candidates",
    "exchange_at",
    "index_of",
    "key_at",
    "label_turns",
    "rebased",
]

#: Request keys of a recording read from disk kept at hand (the most recently used).
KEY_CACHE = 256
#: Recorded exchanges read again from disk kept at hand (the most recently played).
EXCHANGE_CACHE = 32


class Recordings(Protocol):
    """What a :class:`~cassettes.matching.Matcher` serves from: the recorded exchanges by
    position, read again when asked for (:class:`~cassettes.matching.IndexedRecordings`), or a
    list in memory."""

    def __len__(self) -> int: ...
    def exchange(self, i: int) -> Exchange: ...
    def seq(self, i: int) -> int: ...
    def scan(self) -> Iterator[Exchange]: ...
    def labels(self) -> Iterator[tuple[int, str, int]]: ...
    def tool_links(self) -> dict[int, McpCall]: ...


class InMemory:
    """Exchanges held in a list (the pytest plugin, a fork, a run imported from another format)."""

    def __init__(self, exchanges: Sequence[Exchange], first_turn: int = 0) -> None:
        self.exchanges = exchanges
        self.first_turn = first_turn

    def __len__(self) -> int:
        return len(self.exchanges)

    def exchange(self, i: int) -> Exchange:
        return self.exchanges[i]

    def seq(self, i: int) -> int:
        s = self.exchanges[i].seq
        return s if s is not None else i

    def scan(self) -> Iterator[Exchange]:
        return iter(self.exchanges)

    def labels(self) -> Iterator[tuple[int, str, int]]:
        """(position, conversation, turn) of every round trip the run analysis places in a turn."""
        from ..analysis import analyse

        analysis = analyse(self.exchanges, first_index=self.first_turn)
        for i, ex in enumerate(self.exchanges):
            turn = analysis.turns.get(ex.seq if ex.seq is not None else i)
            if turn is not None:
                yield i, turn.conversation, turn.index

    def tool_links(self) -> dict[int, McpCall]:
        """seq → the model's tool call each tool's HTTP call served (the run analysis's links)."""
        from ..analysis import analyse

        calls = analyse(self.exchanges, first_index=self.first_turn).mcp_calls
        return {seq: c for seq, c in calls.items() if c.via == "http"}


def client_key(
    ex: Exchange,
    volatile: VolatileSpans | None = None,
    rules: Rules | None = None,
    redacted: AsRecorded | None = None,
) -> RequestKey | None:
    """The key of the request the client sent, where a fork's what-if edit rewrote what was
    recorded as sent upstream; ``None`` when the marks do not give it back."""
    body = client_body(ex.request_json(), ex.edits or [])
    if body is None:
        return None
    return request_key(
        ex.method, ex.url, ex.request_headers, orjson.dumps(body), body, volatile, rules, redacted
    )


def recorded_key(
    ex: Exchange,
    volatile: VolatileSpans | None = None,
    rules: Rules | None = None,
    redacted: AsRecorded | None = None,
) -> RequestKey:
    """The key a recorded round trip is matched by: its request's, or, for a fork's edited
    request, the one the agent sends (:mod:`cassettes.wire._edit_marks`)."""
    edited = client_key(ex, volatile, rules, redacted) if ex.edits else None
    if edited is not None:
        return edited
    inferred = inferred_fields(ex)  # a rebuilt request: what looptap inferred is not compared
    if inferred is not None:
        body = reduced(ex.request_json(), inferred)
        url = ex.url.split("?", 1)[0] if inferred.query else ex.url
        return request_key(
            ex.method, url, ex.request_headers, orjson.dumps(body), body, volatile, rules, redacted
        )
    key = request_key(
        ex.method,
        ex.url,
        ex.request_headers,
        ex.request_body,
        ex.request_json(),
        volatile,
        rules,
        redacted,
    )
    if ex.tool:
        key.host = tool_host(ex.url)
    return key


@dataclass
class Index:
    """A recording indexed by request key. Per round trip (its position): the hash of its key's
    digest and, once labelled, its conversation (a number into ``conv_ids``) and turn (-1: none).
    Keys are kept only for a run held in memory; one read from disk has its keys made again when
    needed (a small cache)."""

    src: Recordings
    #: The detectors and the user's rules both sides of every comparison go through.
    volatile: VolatileSpans | None
    rules: Rules | None
    hashes: array[int]
    #: The keys' hashes in order (``sorted``), with their positions (``order``; equal hashes: in
    #: recording order).
    order: array[int]
    sorted: array[int]
    #: Every path recorded.
    paths: set[str]
    keys: list[RequestKey] | None
    key_cache: OrderedDict[int, RequestKey] = field(default_factory=OrderedDict)
    ex_cache: OrderedDict[int, Exchange] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    labelled: bool = False
    conv: array[int] = field(default_factory=lambda: array("l"))
    turn: array[int] = field(default_factory=lambda: array("l"))
    conv_ids: list[str] = field(default_factory=list)
    #: How the rebuilt round trips among them are compared (:mod:`cassettes.providers._inferred`).
    profiles: set[InferredFields] = field(default_factory=set)
    #: The positions of the tools' HTTP calls (``Exchange.tool``): served to the tools' requests
    #: only (:meth:`Matcher.match_tool`), by a matcher made with ``tools=True``.
    tools: list[int] = field(default_factory=list)
    #: seq → the model's tool call each tool's HTTP call served, once asked for (a miss).
    tool_calls: dict[int, McpCall] | None = None
    #: The recorder's redaction both sides go through (``None``: compared as stored).
    redacted: AsRecorded | None = None
    #: The recorded round trips the redaction changed at load (a recording made under fewer
    #: rules): only these are redacted again when their key is made anew (:func:`key_at`); the
    #: rest are as their recording holds them, so the recorded side is redacted once, at load.
    rescrub: frozenset[int] = frozenset()

    def __len__(self) -> int:
        return len(self.hashes)


def index_of(
    src: Recordings,
    volatile: VolatileSpans | None,
    rules: Rules | None,
    redacted: AsRecorded | None = None,
) -> Index:
    """``src`` indexed: every round trip's key made once (kept only when ``src`` is in memory)."""
    hashes: array[int] = array("q")
    paths: set[str] = set()
    keys: list[RequestKey] | None = [] if isinstance(src, InMemory) else None
    profiles: set[InferredFields] = set()
    tools: list[int] = []
    rescrub: set[int] = set()
    for ex in src.scan():
        if ex.tool:
            tools.append(len(hashes))
        key = recorded_key(ex, volatile, rules, redacted)
        if redacted is not None and redacted.changed:
            rescrub.add(len(hashes))
        inferred = inferred_fields(ex)
        if inferred is not None:
            profiles.add(inferred)
        hashes.append(hash(key.digest))
        paths.add(key.path)
        if keys is not None:
            keys.append(key)
    order = sorted(range(len(hashes)), key=hashes.__getitem__)
    return Index(
        src,
        volatile,
        rules,
        hashes,
        array("q", order),
        array("q", (hashes[i] for i in order)),
        paths,
        keys,
        profiles=profiles,
        tools=tools,
        redacted=redacted,
        rescrub=frozenset(rescrub),
    )


def exchange_at(ix: Index, i: int) -> Exchange:
    """The recorded round trip at position ``i`` (read again from disk when not in memory)."""
    if isinstance(ix.src, InMemory):
        return ix.src.exchanges[i]
    with ix.lock:
        hit = ix.ex_cache.get(i)
        if hit is not None:
            ix.ex_cache.move_to_end(i)
            return hit
        ex = ix.src.exchange(i)
        ix.ex_cache[i] = ex
        while len(ix.ex_cache) > EXCHANGE_CACHE:
            ix.ex_cache.popitem(last=False)
        return ex


def key_at(ix: Index, i: int) -> RequestKey:
    """The request key of the round trip at position ``i``."""
    if ix.keys is not None:
        return ix.keys[i]
    with ix.lock:
        hit = ix.key_cache.get(i)
        if hit is not None:
            ix.key_cache.move_to_end(i)
            return hit
    # (redacted once, at load: again only where that changed the recording's request)
    redacted = ix.redacted if i in ix.rescrub else None
    key = recorded_key(exchange_at(ix, i), ix.volatile, ix.rules, redacted)
    with ix.lock:
        ix.key_cache[i] = key
        while len(ix.key_cache) > KEY_CACHE:
            ix.key_cache.popitem(last=False)
    return key


def candidates(ix: Index, digest: bytes) -> Iterator[int]:
    """Positions whose key's digest has the hash of ``digest``, in recording order."""
    h = hash(digest)
    srt, order = ix.sorted, ix.order
    j = bisect_left(srt, h)
    while j < len(srt) and srt[j] == h:
        yield order[j]
        j += 1


def label_turns(ix: Index) -> None:
    """Place every recorded round trip in its conversation and turn (the run analysis). Done
    on first need — a miss or a report — so a large cassette starts serving at once."""
    if ix.labelled:
        return
    n = len(ix)
    conv = array("l", [-1]) * n
    turn = array("l", [-1]) * n
    ids: dict[str, int] = {}
    for i, c, t in ix.src.labels():
        conv[i] = ids.setdefault(c, len(ids))
        turn[i] = t
    ix.conv_ids = list(ids)
    ix.conv, ix.turn = conv, turn
    ix.labelled = True


def rebased(
    paths: set[str],
    bases: dict[str, str],
    key: RequestKey,
    unplayed: Callable[[RequestKey], bool],
) -> RequestKey:
    """The request at the recording's base path when the client was pointed at another base.

    A path the recording never used (``/v1/responses``) is read under a recorded base that
    ends the same way (``/backend-api/codex/responses``: Codex signed in with ChatGPT,
    replayed through ``openai_base_url``): the first time only if a round trip not yet played
    (``unplayed``) then matches it exactly (method, rest of the path, query, body), afterwards by
    the base so learned (``bases``: the client's base path → the recording's) — one recorded base
    per client base. A recorded path always means itself."""
    if key.path in paths:
        return key
    live = key.path.split("/")
    for base, recorded in bases.items():
        if key.path.startswith(base + "/"):
            return replace(key, path=recorded + key.path[len(base) :])
    for path in sorted(paths):
        rec = path.split("/")
        tail = 0
        while tail < min(len(rec), len(live)) - 1 and rec[-1 - tail] == live[-1 - tail]:
            tail += 1
        if not tail:
            continue
        base, recorded = "/".join(live[:-tail]), "/".join(rec[:-tail])
        if base in bases:
            continue
        alt = replace(key, path=path)
        if unplayed(alt):
            bases[base] = recorded
            return alt
    return key


class Plays(Protocol):
    """What a :class:`Recorded` reads of the matcher it is a view of (a
    :class:`~cassettes.matching.Matcher`; named by what it reads, so that this module needs not
    import the matcher's, which imports it): the indexed recording, and each round trip's plays."""

    index: Index
    _plays: array[int]

    def _set_plays(self, i: int, n: int) -> None: ...


class Recorded:
    """One recorded round trip and its place in the run: a view of the matcher's arrays (its
    exchange and request key are read again from the recording when asked for, so a matcher over
    a million round trips holds a few integers per round trip, not the run)."""

    __slots__ = ("_m", "index")

    def __init__(self, matcher: Plays, index: int) -> None:
        self._m = matcher
        self.index = index

    @property
    def exchange(self) -> Exchange:
        return exchange_at(self._m.index, self.index)

    @property
    def key(self) -> RequestKey:
        return key_at(self._m.index, self.index)

    @property
    def seq(self) -> int:
        """The recorded seq (its position when it has none)."""
        return self._m.index.src.seq(self.index)

    @property
    def plays(self) -> int:
        return self._m._plays[self.index]

    @plays.setter
    def plays(self, n: int) -> None:
        self._m._set_plays(self.index, n)

    @property
    def conversation(self) -> str | None:
        ix = self._m.index
        c = ix.conv[self.index] if ix.conv else -1
        return ix.conv_ids[c] if c >= 0 else None

    @property
    def turn(self) -> int | None:
        turns = self._m.index.turn
        t = turns[self.index] if turns else -1
        return t if t >= 0 else None

    @property
    def label(self) -> str:
        seq = self.seq
        if self.conversation is not None and self.turn is not None:
            return f"conversation {self.conversation}, turn {self.turn} (seq {seq})"
        key = self.key
        if key.host:
            return f"tool HTTP call seq {seq} ({key.method} {key.host}{key.path})"
        return f"round trip seq {seq} ({key.method} {key.path})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Recorded) and other._m is self._m and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self._m), self.index))

    def __repr__(self) -> str:
        return f"Recorded({self.index}, seq {self.seq}, plays {self.plays})"
