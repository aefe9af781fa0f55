"""LLM-aware request matching: which recorded round trip answers a live request, and if none
does, why not — the closest recorded turn, a JSON-path diff and the layer it implicates.

A request is compared by its :class:`RequestKey` (:mod:`cassettes.matching._requestkey` says what
it keeps and how the volatile values, the built-in detectors' spans and the user's rules are written
on both sides); every span whose text differed between the recording and the request that matched
it is kept (:attr:`Matcher.tolerated`): a tolerated difference, never a silent one, and never a
rewrite of what is served.

The recording is indexed per conversation and turn (the run analysis), so a miss names the turn
the agent most likely meant: the unplayed turn whose request is closest, preferring the next turn
of a conversation already under way.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import overload
from urllib.parse import urlsplit

import orjson

from ..providers import INFERRED, inferred_fields, reduced, versioned_path
from ..untrusted import clean_line
from ..wire import Exchange, Headers, header
from ._jsondiff import Change, Shown, clip, format_path
from ._miss import Miss, body_changes, learned, miss_of
from ._recording import (
    InMemory,
    Recorded,
    Recordings,
    candidates,
    index_of,
    key_at,
    label_turns,
    rebased,
)
from ._requestkey import AsRecorded, RequestKey, request_key, tool_host
from ._rules import Rules
from ._tolerated import tool_result_changes
from ._verdicts import attribute
from ._volatile import Tolerated, VolatileSpans, tolerated

__all__ = [
    "Matcher",
    "Miss",
    "RequestKey",
    "attribute",
    "request_key",
    "tolerated_notes",
]

# ---------------------------------------------------------------------------------------------
# The matcher


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
        tools: bool = False,
    ) -> None:
        """``tools``: the tools' HTTP calls recorded (``Exchange.tool``) are served to the
        tools' requests (:meth:`match_tool`), each once, and left unplayed when none asked for
        them; without, they are neither offered nor unplayed. ``first_turn``: the number of a
        conversation's first turn in exchanges held in memory (a fork's branch: its origin's
        turn at the cursor,
        :func:`cassettes.reading.first_turn`; a file read from disk is numbered from its own
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
        #: The recording, indexed by request key.
        #: The recorder's redaction, run on both sides of every comparison.
        self.redacted = AsRecorded()
        self.index = index_of(src, self.volatile, self.rules, self.redacted)
        #: Per recorded round trip (its position): times played.
        self._plays: array[int] = array("q", bytes(8 * len(self.index)))
        self._unplayed_from = 0  # no round trip before this one is unplayed
        #: Round trips a request was matched to past a fork's cursor and answered live, not from
        #: the recording (:meth:`went_live`): matched (never offered again), not played.
        self._live: set[int] = set()
        #: Whether the tools' HTTP calls are served (``tools``); their positions.
        self.tools = tools
        self._tool_ix = frozenset(self.index.tools)
        if not tools:
            for i in self.index.tools:  # a tool's HTTP call: matched already, never offered
                self._plays[i] = 1
                self._live.add(i)
        self.recorded: Sequence[Recorded] = _RecordedList(self)
        self.misses: list[Miss] = []
        #: The client's base path → the recording's (``/v1`` → ``/backend-api/codex``), learned
        #: from the first request that matched a recorded one only under that base (``_rebased``).
        self.bases: dict[str, str] = {}

    def _first_unplayed(self, digest: bytes, after: int = -1) -> Recorded | None:
        """The first round trip past ``after``, not yet played, whose request key is ``digest``."""
        plays = self._plays
        for i in candidates(self.index, digest):
            if i > after and not plays[i] and key_at(self.index, i).digest == digest:
                return Recorded(self, i)
        return None

    def retried(self, rec: Recorded) -> bool:
        """Whether the same request was recorded again later, not yet played (the SDK retried)."""
        return self._first_unplayed(rec.key.digest, rec.index) is not None

    def _next_unplayed(self) -> Recorded | None:
        plays, tools = self._plays, self._tool_ix
        i = self._unplayed_from
        while i < len(plays) and plays[i]:
            i += 1
        self._unplayed_from = i
        while i < len(plays) and (plays[i] or i in tools):  # a tool's call is never a turn
            i += 1
        return Recorded(self, i) if i < len(plays) else None

    def _set_plays(self, i: int, n: int) -> None:
        self._plays[i] = n
        if not n and i < self._unplayed_from:
            self._unplayed_from = i

    def label(self) -> None:
        """Place every recorded round trip in its conversation and turn (the run analysis). Done
        on first need — a miss or a report — so a large cassette starts serving at once."""
        label_turns(self.index)

    # -- matching ------------------------------------------------------------------------------
    def match(self, method: str, target: str, headers: Headers, body: bytes) -> Recorded | Miss:
        """The recorded round trip answering this request (marked played), or why there is none."""
        live = request_key(
            method, target, headers, body, None, self.volatile, self.rules, self.redacted
        )
        key = self._rebased(live)
        found = self._find(key)
        inferred: list[Tolerated] = []
        if isinstance(found, Miss) and self.index.profiles:
            hit = self._rebuilt(method, target, headers, live)
            if hit is not None:
                found, key, inferred = hit
        if isinstance(found, Recorded):
            found.plays += 1
            tol = tolerated(found.key.spans, key.spans) if key.spans or found.key.spans else []
            tol += inferred
            if tol:
                self.tolerated[found.index] = tol
            else:
                self.tolerated.pop(found.index, None)
            return found
        if key.path != live.path:
            found.target = live.target
            found.reason += f" (its path read under the recording's base, as {key.path})"
        found.redactor = learned(method, target, headers, body)
        found.changes = [c.compact() for c in found.changes]  # kept for the report: no large values
        self.misses.append(found)
        return found

    def match_tool(self, method: str, url: str, headers: Headers, body: bytes) -> Recorded | Miss:
        """The recorded tool's HTTP call answering a tool's request to ``url`` (absolute: its
        host is compared too), marked played, or why there is none: the closest recorded call to
        that host and the model's tool call it served. Matched as a model call is (the same key,
        volatile spans and rules), in any order."""
        key = request_key(
            method, url, headers, body, None, self.volatile, self.rules, self.redacted
        )
        key.host = tool_host(url)
        found = self._first_unplayed(key.digest) if self.tools else None
        if found is not None and found.index in self._tool_ix:
            found.plays += 1
            tol = tolerated(found.key.spans, key.spans) if key.spans or found.key.spans else []
            if tol:
                self.tolerated[found.index] = tol
            else:
                self.tolerated.pop(found.index, None)
            return found
        miss = self._tool_miss(key, url)
        miss.redactor = learned(method, url, headers, body)
        miss.target = miss.redactor.scrub(url)  # a tool's key in its query never printed
        miss.changes = [c.compact() for c in miss.changes]
        self.misses.append(miss)
        return miss

    def _tool_miss(self, key: RequestKey, url: str) -> Miss:
        """Why no recorded tool's HTTP call answers ``key``: the closest one (same host, method
        and path; unplayed first; then the fewest query parameters and body paths that differ;
        else the same host), what differs, and the model's tool call it served."""
        if not self.tools:
            return Miss(key.method, url, "the tools' HTTP calls are not replayed here")
        best: tuple[tuple[int, ...], Recorded] | None = None
        for i in self.index.tools:
            k = key_at(self.index, i)
            if k.host != key.host:
                continue
            same = k.method == key.method and k.path == key.path
            apart = len(set(k.query) ^ set(key.query)) + (len(body_changes(k, key)) if same else 0)
            rank = (not same, self._plays[i] > 0, apart, i)
            if best is None or rank < best[0]:
                best = (rank, Recorded(self, i))
        if best is None:
            hosts = self.tool_hosts()
            said = ", ".join(hosts[:5]) + (f" and {len(hosts) - 5} more" if len(hosts) > 5 else "")
            return Miss(
                key.method,
                url,
                f"no tool HTTP call to {key.host} was recorded"
                + (f" (the recording's tools called {said})" if hosts else " (none was)"),
            )
        rec = best[1]
        near = rec.key
        changes: list[Change] = []
        if near.method != key.method or near.path != key.path:
            why = f"no recorded tool HTTP call to {key.host} is a {key.method} {key.path}"
        else:
            changes = body_changes(near, key)
            if near.query != key.query:
                was, now = Shown(near.target), Shown(key.target)
                changes.insert(0, Change(("query",), "changed", was, now))
            why = "no recorded tool HTTP call matches it"
        state = "already served" if rec.plays else "not yet served"
        call = self.tool_call(rec)
        why += f"; the closest ({state}) served {call}" if call else f"; the closest is {state}"
        return Miss(key.method, url, why, rec, changes)

    def tool_hosts(self, scheme: str | None = None) -> list[str]:
        """The hosts (``host:port``) the recording's tools called (over ``scheme`` only, when
        given: ``https``)."""
        keys = (key_at(self.index, i) for i in self.index.tools)
        return sorted({k.host for k in keys if scheme is None or k.url.scheme == scheme})

    def tool_call(self, rec: Recorded) -> str | None:
        """The model's tool call a recorded tool's HTTP call served, in words (``get_weather
        id=call_1 of conversation c1, turn 0``), or ``None`` when the analysis did not link it."""
        ix = self.index
        if ix.tool_calls is None:
            ix.tool_calls = ix.src.tool_links()
        c = ix.tool_calls.get(rec.seq)
        if c is None or c.call_id is None:
            if c is not None and c.candidates > 1:
                return f"one of {c.candidates} tool calls awaiting a result that fit equally"
            return None
        where = f" of conversation {c.conversation}, turn {c.turn}" if c.turn is not None else ""
        name, cid = clip(c.tool or "?", 80), clip(c.call_id, 80)
        return clean_line(f"the tool call {name} id={cid}{where}")

    def _rebuilt(
        self, method: str, target: str, headers: Headers, live: RequestKey
    ) -> tuple[Recorded, RequestKey, list[Tolerated]] | None:
        """A rebuilt round trip (``looptap import``) answering a request that differs from it only
        in what looptap inferred (:mod:`cassettes.providers._inferred`); with the key it matched
        by and what was left out of the comparison, on the record."""
        if not live.is_json or not isinstance(live.raw, dict):
            return None
        # (rebuilt at the API's own path: a trace keeps no base URL, so a client whose base
        # leaves out the version segment, the AI SDK's Anthropic provider, is read at its path)
        target = _versioned(target, headers)
        for p in sorted(self.index.profiles, key=repr):
            doc = reduced(live.raw, p)
            raw = orjson.dumps(doc)
            asked = target.split("?", 1)[0] if p.query else target
            key = self._rebased(
                request_key(
                    method, asked, headers, raw, doc, self.volatile, self.rules, self.redacted
                )
            )
            found = self._first_unplayed(key.digest)
            if found is not None and inferred_fields(found.exchange) == p:
                rec = found.exchange.request_json()
                rec = rec if isinstance(rec, dict) else {}

                def text(v: object) -> str:
                    return clip(orjson.dumps(v).decode(), 200)

                left = [
                    Tolerated((k,), INFERRED, text(rec[k]) if k in rec else "(not in the trace)",
                              text(v))
                    for k, v in live.raw.items()
                    if k not in doc or doc[k] != v
                ]  # fmt: skip
                if asked != target:  # the URL's query (a Gemini body has no "query" key)
                    query = "?" + target.split("?", 1)[1]
                    left.append(Tolerated(("query",), INFERRED, "(not in the trace)", query))
                return found, key, left
        return None

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
        live = self._rebased(
            request_key(method, target, headers, body, None, self.volatile, None, self.redacted)
        )
        best: tuple[int, Recorded, list[Tolerated]] | None = None
        for i in sorted(self._frontier()):
            rec = Recorded(self, i)
            if not allowed(rec):
                continue
            changes = body_changes(rec.key, live)
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
        """``key`` read under the recording's base path (:func:`rebased`)."""
        return rebased(
            self.index.paths, self.bases, key, lambda k: self._first_unplayed(k.digest) is not None
        )

    def _find(self, key: RequestKey) -> Recorded | Miss:
        digest = key.digest
        if self.strict:
            nxt = self._next_unplayed()
            same = (
                nxt is not None
                and hash(digest) == self.index.hashes[nxt.index]
                and key_at(self.index, nxt.index).digest == digest
            )
            if nxt is not None and same and _headers_match(nxt.key, key):
                return nxt
            if nxt is not None and same:
                hdrs = ", ".join(
                    h
                    for h in _semantic(nxt.key)
                    if header(nxt.key.headers, h) != header(key.headers, h)
                )
                return Miss(
                    key.method,
                    key.target,
                    f"strict: headers differ from the next recorded turn ({hdrs})",
                    nxt,
                )
            self.label()
            return miss_of(key, self.recorded, self._frontier(), nxt)
        found = self._first_unplayed(digest)
        if found is not None:
            return found
        self.label()
        return miss_of(key, self.recorded, self._frontier())

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
            if r.plays or r.conversation in seen or r.index in self._tool_ix:
                continue
            if r.conversation is not None:
                seen.add(r.conversation)
            out.add(r.index)
        return out

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
        with self.index.lock:
            self._live.add(rec.index)
            self.tolerated.pop(rec.index, None)


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


def _semantic(key: RequestKey) -> tuple[str, ...]:
    """The headers the key's adapter names as changing what the API does (strict mode)."""
    return key.adapter.profile.replay_headers if key.adapter is not None else ()


def _headers_match(recorded: RequestKey, key: RequestKey) -> bool:
    return all(header(recorded.headers, h) == header(key.headers, h) for h in _semantic(recorded))


def _versioned(target: str, headers: Headers) -> str:
    """``target`` (a path, or a URL) with the API's version segment its client's base left out
    put back (:func:`~cassettes.providers.versioned_path`), else as it was."""
    parts = urlsplit(target)
    path = f"{parts.path}?{parts.query}" if parts.query else parts.path
    fixed = versioned_path(path, (k for k, _ in headers))
    if fixed is None:
        return target
    return f"{parts.scheme}://{parts.netloc}{fixed}" if parts.scheme else fixed
