"""LLM-aware request matching: which recorded round trip answers a live request, and if none
does, why not — the closest recorded turn, a JSON-path diff and the layer it implicates.

A request is reduced to a :class:`RequestKey`: method, path, query (credentials dropped) and the
body. JSON bodies compare semantically (key order ignored, list order kept) after the volatile
values are normalised: ids the provider adapter names as made up per run (tool-call ids …) become
``<id:1>``, ``<id:2>`` … in order of first appearance, so a run whose ids differ but pair the same
way still matches; ISO-8601 timestamps become ``<timestamp>``; a multipart boundary becomes
``<boundary>``. By default the volatile spans inside the body's text — dates, clocks, durations,
uuids and random ids, temp paths, the working directory and home, loopback ports
(:mod:`cassettes.matching`) — are written as placeholders on both sides too, and every
one that differed between the recording and the request that matched it is kept
(:attr:`Matcher.tolerated`): a tolerated difference, never a silent one, and never a rewrite of
what is served. ``Matcher(…, volatile=False)`` compares them as sent. ``Matcher(…, rules=…)``
adds the user's rules (:mod:`cassettes.matching`: ignored paths, substitutions, volatile
tools), tolerated and kept the same way, each with the rule that tolerated it. Headers are ignored
(SDK telemetry, user agents, keys) except, in strict mode, the few an adapter names as changing what
the API does.

The recording is indexed per conversation and turn (the run analysis), so a miss names the turn
the agent most likely meant: the unplayed turn whose request is closest, preferring the next turn
of a conversation already under way.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, overload

import orjson

from cassettes.errors import ReplayMiss
from cassettes.matching._jsondiff import (
    ECHO,
    Change,
    Shown,
    clip,
    format_path,
    json_diff,
    window,
)
from cassettes.matching._requestkey import RequestKey, request_key
from cassettes.matching._rules import Rules
from cassettes.matching._tolerated import tool_result_changes
from cassettes.matching._verdicts import Verdict, attribute
from cassettes.matching._volatile import Tolerated, VolatileSpans, tolerated
from cassettes.recording.redact import Redactor
from cassettes.untrusted import clean_line
from cassettes.wire.edited import client_body
from cassettes.wire.exchange import Exchange, Headers, header
from cassettes.wire.replay_miss import MissNote, MissVerdict

__all__ = [
    "Matcher",
    "Miss",
    "Recorded",
    "Recordings",
    "RequestKey",
    "Verdict",
    "attribute",
    "request_key",
    "tolerated_notes",
]

#: Request keys of a recording read from disk kept at hand (the most recently used).
KEY_CACHE = 256
#: Recorded exchanges read again from disk kept at hand (the most recently played).
EXCHANGE_CACHE = 32


# ---------------------------------------------------------------------------------------------
# The matcher


class Recorded:
    """One recorded round trip and its place in the run: a view of the matcher's arrays (its
    exchange and request key are read again from the recording when asked for, so a matcher over
    a million round trips holds a few integers per round trip, not the run)."""

    __slots__ = ("_m", "index")

    def __init__(self, matcher: Matcher, index: int) -> None:
        self._m = matcher
        self.index = index

    @property
    def exchange(self) -> Exchange:
        return self._m._exchange(self.index)

    @property
    def key(self) -> RequestKey:
        return self._m._key(self.index)

    @property
    def seq(self) -> int:
        """The recorded seq (its position when it has none)."""
        return self._m._seq(self.index)

    @property
    def plays(self) -> int:
        return self._m._plays[self.index]

    @plays.setter
    def plays(self, n: int) -> None:
        self._m._set_plays(self.index, n)

    @property
    def conversation(self) -> str | None:
        return self._m._conversation(self.index)

    @property
    def turn(self) -> int | None:
        t = self._m._turn[self.index] if self._m._turn else -1
        return t if t >= 0 else None

    @property
    def label(self) -> str:
        seq = self.seq
        if self.conversation is not None and self.turn is not None:
            return f"conversation {self.conversation}, turn {self.turn} (seq {seq})"
        key = self.key
        return f"round trip seq {seq} ({key.method} {key.path})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Recorded) and other._m is self._m and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self._m), self.index))

    def __repr__(self) -> str:
        return f"Recorded({self.index}, seq {self.seq}, plays {self.plays})"


class Recordings(Protocol):
    """What a :class:`Matcher` serves from: the recorded exchanges by position, read again when
    asked for (:class:`~cassettes.matching.IndexedRecordings`), or a list in
    memory."""

    def __len__(self) -> int: ...
    def exchange(self, i: int) -> Exchange: ...
    def seq(self, i: int) -> int: ...
    def scan(self) -> Iterator[Exchange]: ...
    def labels(self) -> Iterator[tuple[int, str, int]]: ...


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
        from cassettes.analysis import analyse

        analysis = analyse(self.exchanges, first_index=self.first_turn)
        for i, ex in enumerate(self.exchanges):
            turn = analysis.turns.get(ex.seq if ex.seq is not None else i)
            if turn is not None:
                yield i, turn.conversation, turn.index


class _RecordedList(Sequence[Recorded]):
    """Every recorded round trip, in recording order (views made on access)."""

    def __init__(self, matcher: Matcher) -> None:
        self._m = matcher

    def __len__(self) -> int:
        return len(self._m._plays)

    @overload
    def __getitem__(self, i: int) -> Recorded: ...
    @overload
    def __getitem__(self, i: slice) -> list[Recorded]: ...
    def __getitem__(self, i: int | slice) -> Recorded | list[Recorded]:
        n = len(self)
        if isinstance(i, slice):
            return [Recorded(self._m, j) for j in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return Recorded(self._m, i)

    def __iter__(self) -> Iterator[Recorded]:
        m = self._m
        return (Recorded(m, i) for i in range(len(self)))


@dataclass
class Miss:
    """Why a request got no recorded answer."""

    method: str
    target: str
    reason: str
    closest: Recorded | None = None
    changes: list[Change] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    #: Knows the credentials of the request that missed (its headers, URL and body), so that
    #: nothing printed about the miss carries them; ``None``: patterns only.
    redactor: Redactor | None = None

    @property
    def headline(self) -> str:
        """One line: where (the closest recorded turn) and what (the first layer verdict)."""
        where = (
            self.closest.label if self.closest is not None else f"{self.method} {clip(self.target)}"
        )
        return self._shown(
            clip(f"{where}: {self.verdicts[0]}" if self.verdicts else f"{where}: {self.reason}")
        )

    def lines(self, max_changes: int = 8) -> list[str]:
        out = [
            "looptap replay: no recorded round trip matches "
            f"{self.method} {self.target}: {self.reason}"
        ]
        if self.closest is not None:
            state = "already played" if self.closest.plays else "not yet played"
            out.append(f"closest recorded turn: {self.closest.label}, {state}")
        out.extend(f"  {v}" for v in self.verdicts)
        if self.changes:
            out.append("  differences (recording → this request):")
            out.extend(f"    {c.describe()}" for c in self.changes[:max_changes])
            if len(self.changes) > max_changes:
                out.append(f"    … and {len(self.changes) - max_changes} more")
        return [self._shown(line) for line in out]

    def _shown(self, line: str) -> str:
        """What the agent sent is printed to a terminal and into test reports: redacted, one line
        each, and bounded (a 9 MB URL is not sent back): scrubbed with a margin, then cut."""
        r = self.redactor or Redactor()
        return clean_line(
            r.scrub(line)
            if len(line) <= ECHO
            else f"{r.scrub(line[: ECHO + 4096])[:ECHO]}… [cut: {len(line):,} characters]"
        )

    def note(self) -> MissNote:
        """The miss as the analysis reads it off the answer (:mod:`cassettes.wire.replay_miss`):
        the closest turn, the verdicts and the differences, shown as :meth:`lines` shows them."""
        return MissNote(
            closest=self.closest.label if self.closest is not None else None,
            reason=self._shown(self.reason),
            verdicts=[
                MissVerdict(v.layer, self._shown(v.message), self._shown(v.path))
                for v in self.verdicts
            ],
            changes=[self._shown(c.describe()) for c in self.changes],
        )

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def error(self) -> ReplayMiss:
        return ReplayMiss(str(self))


def _client_key(
    ex: Exchange, volatile: VolatileSpans | None = None, rules: Rules | None = None
) -> RequestKey | None:
    """The key of the request the client sent, where a fork's what-if edit rewrote what was
    recorded as sent upstream; ``None`` when the marks do not give it back."""
    body = client_body(ex.request_json(), ex.edits or [])
    if body is None:
        return None
    return request_key(
        ex.method, ex.url, ex.request_headers, orjson.dumps(body), body, volatile, rules
    )


class Matcher:
    """Answers live requests from recorded round trips, each played once.

    Default: a request is answered by the first unplayed round trip with an equal key, in
    recording order, whatever the order across conversations (concurrent agents interleave
    differently from run to run). ``strict``: only the next unplayed round trip in recording order
    may answer, and the headers the adapter names as semantic must be equal too.
    """

    def __init__(
        self,
        exchanges: Sequence[Exchange] | Recordings,
        strict: bool = False,
        first_turn: int = 0,
        volatile: bool | VolatileSpans = True,
        rules: Rules | None = None,
    ) -> None:
        """``first_turn``: the number of a conversation's first turn in exchanges held in memory
        (a fork's branch: its origin's turn at the cursor,
        :func:`cassettes.reading.branch.first_turn`; a file read from disk is numbered from its own
        header). ``volatile``: the built-in volatile-span detectors, for this process's working
        directory and home (``True``), for a context given (a
        :class:`~cassettes.matching.VolatileSpans`: the recording's cwd and home when known), or
        none (``False``: the text compared as sent). ``rules``: the user's rules
        (:mod:`cassettes.matching`), applied to both sides as well."""
        self.strict = strict
        #: The user's rules both sides of every comparison go through (``None``: none).
        self.rules: Rules | None = rules or None
        #: The detectors both sides of every comparison go through (``None``: off).
        self.volatile: VolatileSpans | None = (
            VolatileSpans()
            if volatile is True
            else volatile
            if isinstance(volatile, VolatileSpans)
            else None
        )
        #: Per recorded round trip (its position), what its last match tolerated: the volatile
        #: spans whose text differed between the recording and the request it answered.
        self.tolerated: dict[int, list[Tolerated]] = {}
        src: Recordings = (
            exchanges if not isinstance(exchanges, Sequence) else InMemory(exchanges, first_turn)
        )
        self._src = src
        self._labelled = False
        self._lock = threading.Lock()
        # Per recorded round trip: times played, the hash of its request key's digest, and once
        # labelled its conversation (a number) and turn. Keys are kept only for a run held in
        # memory; one read from disk has its keys made again when needed (a small cache).
        self._plays: array[int] = array("q")
        self._hashes: array[int] = array("q")
        self._conv: array[int] = array("l")
        self._turn: array[int] = array("l")
        self._conv_ids: list[str] = []
        self._keys: list[RequestKey] | None = [] if isinstance(src, InMemory) else None
        self._key_cache: OrderedDict[int, RequestKey] = OrderedDict()
        self._ex_cache: OrderedDict[int, Exchange] = OrderedDict()
        self._paths: set[str] = set()
        for ex in src.scan():
            key = _recorded_key(ex, self.volatile, self.rules)
            self._hashes.append(hash(key.digest))
            self._paths.add(key.path)
            if self._keys is not None:
                self._keys.append(key)
        n = len(self._hashes)
        self._plays = array("q", bytes(8 * n))
        # The keys' hashes in order, with their positions (equal hashes: in recording order).
        order = sorted(range(n), key=self._hashes.__getitem__)
        self._order: array[int] = array("q", order)
        self._sorted: array[int] = array("q", (self._hashes[i] for i in order))
        del order
        self._unplayed_from = 0  # no round trip before this one is unplayed
        #: Round trips a request was matched to past a fork's cursor and answered live, not from
        #: the recording (:meth:`went_live`): matched (never offered again), not played.
        self._live: set[int] = set()
        self.recorded: Sequence[Recorded] = _RecordedList(self)
        self.misses: list[Miss] = []
        #: The client's base path → the recording's (``/v1`` → ``/backend-api/codex``), learned
        #: from the first request that matched a recorded one only under that base (``_rebased``).
        self.bases: dict[str, str] = {}

    # -- the recording, by position ------------------------------------------------------------
    def _exchange(self, i: int) -> Exchange:
        if isinstance(self._src, InMemory):
            return self._src.exchanges[i]
        with self._lock:
            hit = self._ex_cache.get(i)
            if hit is not None:
                self._ex_cache.move_to_end(i)
                return hit
            ex = self._src.exchange(i)
            self._ex_cache[i] = ex
            while len(self._ex_cache) > EXCHANGE_CACHE:
                self._ex_cache.popitem(last=False)
            return ex

    def _key(self, i: int) -> RequestKey:
        if self._keys is not None:
            return self._keys[i]
        with self._lock:
            hit = self._key_cache.get(i)
            if hit is not None:
                self._key_cache.move_to_end(i)
                return hit
        key = _recorded_key(self._exchange(i), self.volatile, self.rules)
        with self._lock:
            self._key_cache[i] = key
            while len(self._key_cache) > KEY_CACHE:
                self._key_cache.popitem(last=False)
        return key

    def _seq(self, i: int) -> int:
        return self._src.seq(i)

    def _conversation(self, i: int) -> str | None:
        c = self._conv[i] if self._conv else -1
        return self._conv_ids[c] if c >= 0 else None

    def _candidates(self, digest: bytes) -> Iterator[int]:
        """Positions whose key's digest has the hash of ``digest``, in recording order."""
        h = hash(digest)
        srt, order = self._sorted, self._order
        j = bisect_left(srt, h)
        while j < len(srt) and srt[j] == h:
            yield order[j]
            j += 1

    def _same(self, i: int, digest: bytes) -> bool:
        return self._key(i).digest == digest

    def _first_unplayed(self, digest: bytes, after: int = -1) -> Recorded | None:
        """The first round trip past ``after``, not yet played, whose request key is ``digest``."""
        plays = self._plays
        for i in self._candidates(digest):
            if i > after and not plays[i] and self._same(i, digest):
                return Recorded(self, i)
        return None

    def retried(self, rec: Recorded) -> bool:
        """Whether the same request was recorded again later, not yet played (the SDK retried)."""
        return self._first_unplayed(rec.key.digest, rec.index) is not None

    def _next_unplayed(self) -> Recorded | None:
        plays = self._plays
        i = self._unplayed_from
        while i < len(plays) and plays[i]:
            i += 1
        self._unplayed_from = i
        return Recorded(self, i) if i < len(plays) else None

    def _set_plays(self, i: int, n: int) -> None:
        self._plays[i] = n
        if not n and i < self._unplayed_from:
            self._unplayed_from = i

    def label(self) -> None:
        """Place every recorded round trip in its conversation and turn (the run analysis). Done
        on first need — a miss or a report — so a large cassette starts serving at once."""
        if self._labelled:
            return
        n = len(self._plays)
        conv = array("l", [-1]) * n
        turn = array("l", [-1]) * n
        ids: dict[str, int] = {}
        for i, c, t in self._src.labels():
            conv[i] = ids.setdefault(c, len(ids))
            turn[i] = t
        self._conv_ids = list(ids)
        self._conv, self._turn = conv, turn
        self._labelled = True

    # -- matching ------------------------------------------------------------------------------
    def match(self, method: str, target: str, headers: Headers, body: bytes) -> Recorded | Miss:
        """The recorded round trip answering this request (marked played), or why there is none."""
        live = request_key(method, target, headers, body, volatile=self.volatile, rules=self.rules)
        key = self._rebased(live)
        found = self._find(key)
        if isinstance(found, Recorded):
            found.plays += 1
            tol = tolerated(found.key.spans, key.spans) if key.spans or found.key.spans else []
            if tol:
                self.tolerated[found.index] = tol
            else:
                self.tolerated.pop(found.index, None)
            return found
        if key.path != live.path:
            found.target = live.target
            found.reason += f" (its path read under the recording's base, as {key.path})"
        found.redactor = _learned(method, target, headers, body)
        found.changes = [c.compact() for c in found.changes]  # kept for the report: no large values
        self.misses.append(found)
        return found

    def in_position(
        self,
        method: str,
        target: str,
        headers: Headers,
        body: bytes,
        allowed: Callable[[Recorded], bool],
        miss: Miss | None = None,
    ) -> Recorded | None:
        """A fork's tolerant prefix (:mod:`cassettes.matching`): the recorded turn
        *in position* for a request that matched none — the next unplayed turn of a conversation
        (``allowed``: before the cursor) whose request differs from this one only in tool results'
        text — marked played, with what was tolerated (the changed results, and the volatile spans
        elsewhere) in :attr:`tolerated`; ``miss``, the request's miss, is no longer one. ``None``:
        no turn in position differs only so (the miss stands)."""
        self.label()
        live = self._rebased(request_key(method, target, headers, body, volatile=self.volatile))
        best: tuple[int, Recorded, list[Tolerated]] | None = None
        for i in sorted(self._frontier()):
            rec = Recorded(self, i)
            if not allowed(rec):
                continue
            changes = self._changes(rec.key, live)
            found = tool_result_changes(rec.key, live, changes)
            if found is not None and (best is None or len(changes) < best[0]):
                best = (len(changes), rec, found)
        if best is None:
            return None
        _, rec, found = best
        rec.plays += 1
        items = {t.path[:2] for t in found}
        spans = (
            [t for t in tolerated(rec.key.spans, live.spans) if t.path[:2] not in items]
            if live.spans
            else []
        )
        self.tolerated[rec.index] = spans + found
        if miss is not None:
            self.resolve(miss)
        return rec

    def release(self, rec: Recorded) -> None:
        """The attempt ``rec`` was matched to did not get the recorded answer (a fault failed it):
        the next attempt at the same request gets it."""
        if rec.plays > 0:
            self._set_plays(rec.index, rec.plays - 1)

    def resolve(self, miss: Miss) -> None:
        """A miss answered after all (passed on to a live upstream): no longer one."""
        if miss in self.misses:
            self.misses.remove(miss)

    def _rebased(self, key: RequestKey) -> RequestKey:
        """The request at the recording's base path when the client was pointed at another base.

        A path the recording never used (``/v1/responses``) is read under a recorded base that
        ends the same way (``/backend-api/codex/responses``: Codex signed in with ChatGPT,
        replayed through ``openai_base_url``): the first time only if a round trip not yet played
        then matches it exactly (method, rest of the path, query, body), afterwards by the base so
        learned — one recorded base per client base. A recorded path always means itself."""
        if key.path in self._paths:
            return key
        live = key.path.split("/")
        for base, recorded in self.bases.items():
            if key.path.startswith(base + "/"):
                return replace(key, path=recorded + key.path[len(base) :])
        for path in sorted(self._paths):
            rec = path.split("/")
            tail = 0
            while tail < min(len(rec), len(live)) - 1 and rec[-1 - tail] == live[-1 - tail]:
                tail += 1
            if not tail:
                continue
            base, recorded = "/".join(live[:-tail]), "/".join(rec[:-tail])
            if base in self.bases:
                continue
            alt = replace(key, path=path)
            if self._first_unplayed(alt.digest) is not None:
                self.bases[base] = recorded
                return alt
        return key

    def _find(self, key: RequestKey) -> Recorded | Miss:
        digest = key.digest
        if self.strict:
            nxt = self._next_unplayed()
            same = (
                nxt is not None
                and hash(digest) == self._hashes[nxt.index]
                and self._same(nxt.index, digest)
            )
            if nxt is not None and same and self._headers_match(nxt, key):
                return nxt
            if nxt is not None and same:
                hdrs = ", ".join(
                    h
                    for h in self._semantic(nxt)
                    if header(nxt.key.headers, h) != header(key.headers, h)
                )
                return Miss(
                    key.method,
                    key.target,
                    f"strict: headers differ from the next recorded turn ({hdrs})",
                    nxt,
                )
            return self._miss(key, strict_next=nxt)
        found = self._first_unplayed(digest)
        if found is not None:
            return found
        return self._miss(key)

    def _semantic(self, r: Recorded) -> tuple[str, ...]:
        return r.key.adapter.profile.replay_headers if r.key.adapter is not None else ()

    def _headers_match(self, r: Recorded, key: RequestKey) -> bool:
        return all(header(r.key.headers, h) == header(key.headers, h) for h in self._semantic(r))

    def is_next(self, rec: Recorded) -> bool:
        """Whether ``rec`` is the next unplayed turn of its conversation (what its agent should
        send next)."""
        self.label()
        return rec.index in self._frontier()

    def _frontier(self) -> set[int]:
        """Indexes of the next unplayed turn of every conversation (what the agent should send
        next)."""
        out: set[int] = set()
        seen: set[str | None] = set()
        for r in self.recorded:
            if r.plays or r.conversation in seen:
                continue
            if r.conversation is not None:
                seen.add(r.conversation)
            out.add(r.index)
        return out

    def _miss(self, key: RequestKey, strict_next: Recorded | None = None) -> Miss:
        self.label()
        unplayed = [r for r in self.recorded if not r.plays]
        if not self.recorded:
            return Miss(key.method, key.target, "the cassette holds no round trips")
        # Every recorded turn is a candidate (an exact repeat of a played one is a repeat, said
        # so); on equal distance an unplayed turn wins, then the next turn of a conversation.
        pool = [strict_next] if strict_next is not None else self.recorded
        frontier = self._frontier()
        best: tuple[tuple[int, int, int, int, int], Recorded, list[Change]] | None = None
        for r in pool:
            changes = self._changes(r.key, key)
            score = (
                int((r.key.method, r.key.path) != (key.method, key.path)),
                len(changes),
                int(r.plays > 0),
                int(r.index not in frontier),
                r.index,
            )
            if best is None or score < best[0]:
                best = (score, r, changes)
        assert best is not None
        _, closest, changes = best
        if not unplayed:
            reason = (
                f"the cassette is exhausted (all {len(self.recorded)} "
                "recorded round trips were played)"
            )
        elif strict_next is not None:
            reason = "strict: it is not the next recorded round trip"
        else:
            reason = (
                f"{len(unplayed)} of {len(self.recorded)} recorded "
                "round trips are unplayed, none is this request"
            )
        verdicts = attribute(closest.key, key, changes)
        if not verdicts and closest.plays:
            verdicts = [
                Verdict(
                    "C",
                    f"the request repeats {closest.label}, which was already played (a retry or a "
                    "repeated call the recording does not have)",
                    "(body)",
                )
            ]
        elif not verdicts:
            verdicts = [Verdict("C", "the request differs from the recording", "(body)")]
        return Miss(key.method, key.target, reason, closest, changes, verdicts)

    @staticmethod
    def _changes(recorded: RequestKey, live: RequestKey) -> list[Change]:
        if recorded.is_json and live.is_json:
            return json_diff(recorded.body, live.body)
        if recorded.body == live.body:
            return []
        a, b = window(recorded.body, live.body)  # around where the bodies differ
        return [Change((), "changed", Shown(a), Shown(b))]

    # -- reporting -----------------------------------------------------------------------------
    def unplayed(self) -> list[Recorded]:
        out = [r for r in self.recorded if not r.plays]
        if out:
            self.label()
        return out

    def count_unplayed(self) -> int:
        return sum(1 for p in self._plays if not p)

    def played(self) -> list[Recorded]:
        """The round trips played from the recording (not those that went live past a cursor)."""
        live = self._live
        return [Recorded(self, i) for i, p in enumerate(self._plays) if p and i not in live]

    def went_live(self, rec: Recorded) -> None:
        """The request matched to ``rec`` was sent live (past a fork's cursor): ``rec`` stays
        matched, so neither offered again nor listed unplayed, and is not counted as played; what
        the match tolerated is dropped (:attr:`tolerated` lists the recorded answers served)."""
        with self._lock:
            self._live.add(rec.index)
            self.tolerated.pop(rec.index, None)

    def count_live(self) -> int:
        """Recorded round trips whose request went live past a fork's cursor (:meth:`went_live`)."""
        return len(self._live)


#: How a tolerated difference opens in a served exchange's notes.
TOLERATED = "tolerated:"


def tolerated_notes(found: Sequence[Tolerated]) -> list[str]:
    """One note line per tolerated difference: the detector (and the user rule, when one
    tolerated it), the JSON path, the recorded value and the request's (wire text: one line,
    clipped)."""
    return [
        clean_line(
            f"{TOLERATED} {t.detector}{f' (rule: {clip(t.rule, 200)})' if t.rule else ''} at "
            f"{clip(format_path(t.path), 200)}: recorded {clip(t.recorded, 200)!r}, this request "
            f"{clip(t.live, 200)!r}"
        )
        for t in found
    ]


def _recorded_key(
    ex: Exchange, volatile: VolatileSpans | None = None, rules: Rules | None = None
) -> RequestKey:
    """The key a recorded round trip is matched by: its request's, or, for a fork's edited
    request, the one the agent sends (:mod:`cassettes.wire.edited`)."""
    key = request_key(
        ex.method, ex.url, ex.request_headers, ex.request_body, ex.request_json(), volatile, rules
    )
    if ex.edits:
        key = _client_key(ex, volatile, rules) or key
    return key


def _learned(method: str, target: str, headers: Headers, body: bytes) -> Redactor:
    """A redactor that has seen the request (its credential headers, query and body keys)."""
    r = Redactor()
    try:
        r.exchange(
            Exchange(
                method, target if "://" in target else "http://replay" + target, list(headers), body
            )
        )
    except Exception:  # learning is best effort; the patterns still apply
        pass
    r.forget_seen()  # kept with the miss: what it learned, not the request's text
    return r
