"""LLM-aware request matching: which recorded round trip answers a live request, and if none
does, why not — the closest recorded turn, a JSON-path diff and the layer it implicates.

A request is reduced to a :class:`RequestKey`: method, path, query (credentials dropped) and the
body. JSON bodies compare semantically (key order ignored, list order kept) after the volatile
values are normalised: ids the provider adapter names as made up per run (tool-call ids …) become
``<id:1>``, ``<id:2>`` … in order of first appearance, so a run whose ids differ but pair the same
way still matches; ISO-8601 timestamps become ``<timestamp>``; a multipart boundary becomes
``<boundary>``. Headers are ignored (SDK telemetry, user agents, keys) except, in strict mode,
the few an adapter names as changing what the API does.

The recording is indexed per conversation and turn (the run analysis), so a miss names the turn
the agent most likely meant: the unplayed turn whose request is closest, preferring the next turn
of a conversation already under way.
"""

from __future__ import annotations

import re
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, overload
from urllib.parse import SplitResult, parse_qsl, urlsplit

import orjson

from cassettes import bounds, providers
from cassettes.errors import ReplayMiss
from cassettes.recording.redact import Redactor
from cassettes.replay.jsondiff import ECHO, Change, clip, format_path, json_diff, short
from cassettes.untrusted import clean_line
from cassettes.wire.exchange import Exchange, Headers, header

__all__ = ["Matcher", "Miss", "Recorded", "Recordings", "RequestKey", "Verdict", "attribute", "request_key"]

#: Request keys of a recording read from disk kept at hand (the most recently used).
KEY_CACHE = 256
#: Recorded exchanges read again from disk kept at hand (the most recently played).
EXCHANGE_CACHE = 32

#: Query parameters that carry credentials, never compared.
_SECRET_QUERY = frozenset({"key", "api-key", "api_key", "token", "access_token", "x-goog-api-key"})
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
_BOUNDARY = re.compile(r"boundary=\"?([^\";]+)\"?", re.I)


@dataclass
class RequestKey:
    """A request reduced to what matching compares."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    #: The normalised JSON body, or the body bytes (boundary normalised) when it is not JSON.
    body: Any
    is_json: bool
    #: The body as sent (JSON), for the layer attribution of a diff.
    raw: Any
    #: ``<id:N>`` placeholder → the id it replaced.
    ids: dict[str, str]
    url: SplitResult
    adapter: providers.Provider | None
    headers: Headers = field(default_factory=list)

    @property
    def digest(self) -> bytes:
        body = orjson.dumps(self.body, option=orjson.OPT_SORT_KEYS) if self.is_json else self.body
        return b"\0".join([self.method.encode(), self.path.encode(), repr(self.query).encode(), body])

    @property
    def target(self) -> str:
        return self.path + ("?" + "&".join(f"{k}={v}" for k, v in self.query) if self.query else "")

    def history_key(self) -> str | None:
        if self.adapter is None or not isinstance(self.raw, dict):
            return None
        return self.adapter.history_key(self.raw)


#: Content types of a lone text part that is the same as the bare string (``"content": "x"``).
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
#: Fields that take a string or a list of content parts.
_CONTENT_FIELDS = frozenset({"content", "system"})


def _normalise(
    value: Any,
    ids: set[str],
    placeholders: dict[str, str],
    drop: frozenset[str] = frozenset(),
    free: frozenset[str] | None = None,
) -> Any:
    """The body as compared. With ``free`` (an adapter's free-form fields: the API's semantics
    are known), what the API treats as the same request is written one way: a ``null`` field is
    an absent one, and a content list that is one plain text part is its string; inside a
    free-form field (a tool's schema, a call's input) nothing is rewritten but the ids."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in drop or (free is not None and v is None):
                continue
            inner = None if free is None or k in free else free
            nv = _normalise(v, ids, placeholders, drop, inner)
            if inner is not None and k in _CONTENT_FIELDS:
                nv = _bare_text(nv)
            out[k] = nv
        return out
    if isinstance(value, list):
        return [_normalise(v, ids, placeholders, drop, free) for v in value]
    if isinstance(value, str):
        if value in ids:
            ph = placeholders.get(value)
            if ph is None:
                ph = placeholders[value] = f"<id:{len(placeholders) + 1}>"
            return ph
        if _TIMESTAMP.match(value):
            return "<timestamp>"
    return value


def _bare_text(content: Any) -> Any:
    """``[{"type": "text", "text": "x"}]`` (nothing else in the part) → ``"x"``."""
    if isinstance(content, list) and len(content) == 1:
        part = content[0]
        if isinstance(part, dict) and part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str) and set(part) == {"type", "text"}:
            return part["text"]
    return content


def _without_defaults(body: Any, defaults: tuple[tuple[str, Any], ...]) -> Any:
    """The body without top-level fields at their documented default (``"stream": false``)."""
    if not defaults or not isinstance(body, dict):
        return body
    at_default = {k for k, v in defaults if k in body and body[k] == v and type(body[k]) is type(v)}
    return {k: v for k, v in body.items() if k not in at_default} if at_default else body


def request_key(method: str, url: str, headers: Headers, body: bytes, parsed: Any = None) -> RequestKey:
    """Normalise one request for matching (``parsed``: the body's JSON when already at hand)."""
    try:
        u = urlsplit(url)
    except ValueError:
        u = urlsplit("")
    query = tuple(sorted((k, v) for k, v in parse_qsl(u.query, keep_blank_values=True) if k.lower() not in _SECRET_QUERY))
    raw = parsed
    if raw is None and body:
        try:
            raw = bounds.loads(body)
        except orjson.JSONDecodeError:
            raw = None
    if raw is None:
        return RequestKey(method.upper(), u.path, query, _opaque_body(headers, body), False, None, {}, u, None, list(headers))
    adapter = providers.detect(method.upper(), u, raw)
    placeholders: dict[str, str] = {}
    norm = _normalised_json(raw, u, adapter, placeholders)
    return RequestKey(method.upper(), u.path, query, norm, True, raw, {v: k for k, v in placeholders.items()}, u, adapter, list(headers))


def _opaque_body(headers: Headers, body: bytes) -> bytes:
    """A body that is not JSON, as compared: a multipart boundary written ``<boundary>``."""
    ctype = header(headers, "content-type") or ""
    m = _BOUNDARY.search(ctype) if ctype.lower().startswith("multipart/") else None
    return body.replace(m.group(1).encode("latin-1", "replace"), b"<boundary>") if m else body


def _normalised_json(raw: Any, u: SplitResult, adapter: providers.Provider | None, placeholders: dict[str, str]) -> Any:
    """A JSON body as compared: the adapter's volatile ids, fields and defaults written one way."""
    if adapter is None:  # an API looptap does not read: compared as sent (only ids and times normalised)
        return _normalise(raw, set(), placeholders)
    try:
        vol = {i for i in adapter.volatile_ids(raw, u) if i}
    except Exception:  # a lenient adapter that still chokes: compare the ids as they are
        vol = set()
    compared = raw
    if adapter.volatile_top_fields and isinstance(raw, dict):
        compared = {k: v for k, v in raw.items() if k not in adapter.volatile_top_fields}
    compared = _without_defaults(compared, adapter.field_defaults)
    return _normalise(compared, vol, placeholders, adapter.volatile_fields, adapter.free_form_fields)


# ---------------------------------------------------------------------------------------------
# Layer attribution of a diff


@dataclass(frozen=True)
class Verdict:
    """What a group of differences means: its layer, a sentence, and the JSON path it is at."""

    layer: str
    message: str
    path: str

    def __str__(self) -> str:
        return f"{self.layer}: {self.message}"


def _item_view(key: RequestKey, hkey: str, item: Any) -> tuple[str, list[str]]:
    """(role, [call ids of the tool results in it]) of one raw history item, via the adapter."""
    if key.adapter is None or not isinstance(key.raw, dict):
        return "?", []
    try:
        req = key.adapter.parse_request({**key.raw, hkey: [item]}, key.url)
    except Exception:
        return "?", []
    if not req.messages:
        return "?", []
    msg = req.messages[0]
    results = [p.tool_result.call_id or p.tool_result.name or "?" for m in req.messages for p in m.parts if p.tool_result is not None]
    return ("tool" if results else msg.role), results


def _system_text(key: RequestKey) -> str | None:
    if key.adapter is None or not isinstance(key.raw, dict):
        return None
    try:
        req = key.adapter.parse_request(key.raw, key.url)
    except Exception:
        return None
    return "".join(p.text or "" for p in req.system)


def attribute(recorded: RequestKey, live: RequestKey, changes: Sequence[Change]) -> list[Verdict]:
    """Turn a request diff into sentences by layer. Everything a client sends is its dispatch, so
    request differences are layer C; the wording says which part of the dispatch changed."""
    out = _url_verdicts(recorded, live)
    if not recorded.is_json or not live.is_json:
        if recorded.body != live.body:
            out.append(Verdict("C", "the request body changed (not JSON, compared byte for byte)", "(body)"))
        return out
    hkey = recorded.history_key() or live.history_key()
    added_tail: list[int] = []
    removed_tail: list[int] = []
    out += _change_verdicts(recorded, live, hkey, changes, added_tail, removed_tail)
    if added_tail:
        out.append(_added_verdict(live, hkey, added_tail))
    if removed_tail:
        first = min(removed_tail)
        n = len(removed_tail)
        out.append(Verdict("C", f"the history is {n} item{'s' if n > 1 else ''} shorter than recorded, from {format_path((hkey or '', first))} (dropped or trimmed)", format_path((hkey or "", first))))
    return out


def _url_verdicts(recorded: RequestKey, live: RequestKey) -> list[Verdict]:
    out: list[Verdict] = []
    if (recorded.method, recorded.path) != (live.method, live.path):
        out.append(Verdict("C", f"the agent called {live.method} {live.path}; the recorded turn is {recorded.method} {recorded.path}", "(url)"))
    if recorded.query != live.query:
        out.append(Verdict("C", f"the query string changed (recorded {recorded.target}, got {live.target})", "(url)"))
    return out


def _change_verdicts(
    recorded: RequestKey, live: RequestKey, hkey: str | None, changes: Sequence[Change], added_tail: list[int], removed_tail: list[int]
) -> list[Verdict]:
    """One verdict per changed history item and per changed top-level field; history items added
    or removed at the end are collected in ``added_tail`` / ``removed_tail`` (said once, after)."""
    out: list[Verdict] = []
    seen_items: set[int] = set()
    seen_keys: set[str] = set()
    for ch in changes:
        top = ch.path[0] if ch.path else None
        if hkey is not None and top == hkey and len(ch.path) >= 2 and isinstance(ch.path[1], int):
            i = ch.path[1]
            if len(ch.path) == 2 and ch.kind in ("added", "removed"):
                (added_tail if ch.kind == "added" else removed_tail).append(i)
            elif i not in seen_items:
                seen_items.add(i)
                out.append(_item_verdict(recorded, live, hkey, i, ch))
        elif isinstance(top, str):
            if top not in seen_keys:
                seen_keys.add(top)
                out.append(_field_verdict(recorded, live, top, ch))
        else:
            out.append(Verdict("C", f"the request body changed: {ch.describe()}", ch.where))
    return out


def _added_verdict(live: RequestKey, hkey: str | None, added_tail: list[int]) -> Verdict:
    first = min(added_tail)
    role, results = _item_view(live, hkey or "", live.raw[hkey][first]) if hkey else ("?", [])
    what = f"the tool result for {_orig(live, results[0])}" if results else f"{'an' if role[:1] in 'aeiou' else 'a'} {role} message"
    n = len(added_tail)
    return Verdict(
        "C",
        f"the agent sent a turn the recording never had: {n} more history item{'s' if n > 1 else ''} than recorded, "
        f"starting with {what} at {format_path((hkey or '', first))}",
        format_path((hkey or "", first)),
    )


def _orig(key: RequestKey, ident: str) -> str:
    return key.ids.get(ident, ident)


def _item_verdict(recorded: RequestKey, live: RequestKey, hkey: str, i: int, ch: Change) -> Verdict:
    role, results = _item_view(recorded, hkey, recorded.raw[hkey][i])
    where = ch.where
    if results:
        _, lresults = _item_view(live, hkey, live.raw[hkey][i]) if i < len(live.raw.get(hkey, [])) else ("?", [])
        ids = lresults or results
        cid = _orig(live, ids[0]) if lresults else _orig(recorded, ids[0])
        return Verdict("C", f"the tool result for {cid} changed ({where})", where)
    if role == "assistant":
        return Verdict("C", f"the assistant turn at {format_path((hkey, i))} was not sent back as recorded ({where})", where)
    if role in ("system", "developer"):
        return Verdict("C", f"the system prompt changed ({where})", where)
    if role == "user":
        return Verdict("C", f"the user input at {format_path((hkey, i))} changed ({where})", where)
    return Verdict("C", f"history item {format_path((hkey, i))} ({role}) changed ({where})", where)


def _field_verdict(recorded: RequestKey, live: RequestKey, top: str, ch: Change) -> Verdict:
    where = ch.where
    low = top.lower()
    if low == "model":
        return Verdict("C", f"the model requested changed: recorded {short(ch.expected)}, got {short(ch.actual)}", where)
    if low == "stream":
        return Verdict("C", f"streaming changed: recorded {short(ch.expected)}, got {short(ch.actual)}", where)
    if "tool_choice" in low or low == "toolconfig":
        return Verdict("C", f"the tool choice changed ({where})", where)
    if "tool" in low or "function" in low:
        return Verdict("C", f"the tools offered changed ({where})", where)
    if _system_text(recorded) != _system_text(live):
        return Verdict("C", f"the system prompt changed ({where})", where)
    return Verdict("C", f"request parameter {top} changed ({where}: recorded {short(ch.expected)}, got {short(ch.actual)})", where)


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
    asked for (:class:`~cassettes.replay.indexed.IndexedRecordings`), or a list in memory."""

    def __len__(self) -> int: ...
    def exchange(self, i: int) -> Exchange: ...
    def seq(self, i: int) -> int: ...
    def scan(self) -> Iterator[Exchange]: ...
    def labels(self) -> Iterator[tuple[int, str, int]]: ...


class _InMemory:
    """Exchanges held in a list (the pytest plugin, a fork, a run imported from another format)."""

    def __init__(self, exchanges: Sequence[Exchange]) -> None:
        self.exchanges = exchanges

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

        analysis = analyse(self.exchanges)
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
        where = self.closest.label if self.closest is not None else f"{self.method} {clip(self.target)}"
        return clip(f"{where}: {self.verdicts[0]}" if self.verdicts else f"{where}: {self.reason}")

    def lines(self, max_changes: int = 8) -> list[str]:
        out = [f"looptap replay: no recorded round trip matches {self.method} {self.target}: {self.reason}"]
        if self.closest is not None:
            state = "already played" if self.closest.plays else "not yet played"
            out.append(f"closest recorded turn: {self.closest.label}, {state}")
        out.extend(f"  {v}" for v in self.verdicts)
        if self.changes:
            out.append("  differences (recording → this request):")
            out.extend(f"    {c.describe()}" for c in self.changes[:max_changes])
            if len(self.changes) > max_changes:
                out.append(f"    … and {len(self.changes) - max_changes} more")
        # What the agent sent is printed to a terminal and into test reports: redacted, one line
        # each, and bounded (a 9 MB URL is not sent back): scrubbed with a margin, then cut.
        r = self.redactor or Redactor()
        return [clean_line(r.scrub(line) if len(line) <= ECHO else f"{r.scrub(line[: ECHO + 4096])[:ECHO]}… [cut: {len(line):,} characters]") for line in out]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def error(self) -> ReplayMiss:
        return ReplayMiss(str(self))


def _client_key(ex: Exchange) -> RequestKey | None:
    """The key of the request the client sent, where a fork's what-if edit rewrote what was
    recorded as sent upstream; ``None`` when the marks do not give it back."""
    from cassettes.wire.edited import client_body

    body = client_body(ex.request_json(), ex.edits or [])
    if body is None:
        return None
    return request_key(ex.method, ex.url, ex.request_headers, orjson.dumps(body), body)


class Matcher:
    """Answers live requests from recorded round trips, each played once.

    Default: a request is answered by the first unplayed round trip with an equal key, in
    recording order, whatever the order across conversations (concurrent agents interleave
    differently from run to run). ``strict``: only the next unplayed round trip in recording order
    may answer, and the headers the adapter names as semantic must be equal too.
    """

    def __init__(self, exchanges: Sequence[Exchange] | Recordings, strict: bool = False) -> None:
        self.strict = strict
        src: Recordings = exchanges if not isinstance(exchanges, Sequence) else _InMemory(exchanges)
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
        self._keys: list[RequestKey] | None = [] if isinstance(src, _InMemory) else None
        self._key_cache: OrderedDict[int, RequestKey] = OrderedDict()
        self._ex_cache: OrderedDict[int, Exchange] = OrderedDict()
        self._paths: set[str] = set()
        for ex in src.scan():
            key = _recorded_key(ex)
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
        self.recorded: Sequence[Recorded] = _RecordedList(self)
        self.misses: list[Miss] = []
        #: The client's base path → the recording's (``/v1`` → ``/backend-api/codex``), learned
        #: from the first request that matched a recorded one only under that base (``_rebased``).
        self.bases: dict[str, str] = {}

    # -- the recording, by position ------------------------------------------------------------
    def _exchange(self, i: int) -> Exchange:
        if isinstance(self._src, _InMemory):
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
        key = _recorded_key(self._exchange(i))
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
        live = request_key(method, target, headers, body)
        key = self._rebased(live)
        found = self._find(key)
        if isinstance(found, Recorded):
            found.plays += 1
            return found
        if key.path != live.path:
            found.target = live.target
            found.reason += f" (its path read under the recording's base, as {key.path})"
        found.redactor = _learned(method, target, headers, body)
        found.changes = [c.compact() for c in found.changes]  # kept for the report: no large values
        self.misses.append(found)
        return found

    def release(self, rec: Recorded) -> None:
        """The attempt ``rec`` was matched to did not get the recorded answer (a fault failed it,
        or it went live past a cursor): the next attempt at the same request gets it."""
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
            same = nxt is not None and hash(digest) == self._hashes[nxt.index] and self._same(nxt.index, digest)
            if nxt is not None and same and self._headers_match(nxt, key):
                return nxt
            if nxt is not None and same:
                hdrs = ", ".join(h for h in self._semantic(nxt) if header(nxt.key.headers, h) != header(key.headers, h))
                return Miss(key.method, key.target, f"strict: headers differ from the next recorded turn ({hdrs})", nxt)
            return self._miss(key, strict_next=nxt)
        found = self._first_unplayed(digest)
        if found is not None:
            return found
        return self._miss(key)

    def _semantic(self, r: Recorded) -> tuple[str, ...]:
        return r.key.adapter.replay_headers() if r.key.adapter is not None else ()

    def _headers_match(self, r: Recorded, key: RequestKey) -> bool:
        return all(header(r.key.headers, h) == header(key.headers, h) for h in self._semantic(r))

    def _frontier(self) -> set[int]:
        """Indexes of the next unplayed turn of every conversation (what the agent should send next)."""
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
            score = (int((r.key.method, r.key.path) != (key.method, key.path)), len(changes), int(r.plays > 0), int(r.index not in frontier), r.index)
            if best is None or score < best[0]:
                best = (score, r, changes)
        assert best is not None
        _, closest, changes = best
        if not unplayed:
            reason = f"the cassette is exhausted (all {len(self.recorded)} recorded round trips were played)"
        elif strict_next is not None:
            reason = "strict: it is not the next recorded round trip"
        else:
            reason = f"{len(unplayed)} of {len(self.recorded)} recorded round trips are unplayed, none is this request"
        verdicts = attribute(closest.key, key, changes)
        if not verdicts and closest.plays:
            verdicts = [Verdict("C", f"the request repeats {closest.label}, which was already played (a retry or a repeated call the recording does not have)", "(body)")]
        elif not verdicts:
            verdicts = [Verdict("C", "the request differs from the recording", "(body)")]
        return Miss(key.method, key.target, reason, closest, changes, verdicts)

    @staticmethod
    def _changes(recorded: RequestKey, live: RequestKey) -> list[Change]:
        if recorded.is_json and live.is_json:
            return json_diff(recorded.body, live.body)
        return [] if recorded.body == live.body else [Change((), "changed", short(recorded.body), short(live.body))]

    # -- reporting -----------------------------------------------------------------------------
    def unplayed(self) -> list[Recorded]:
        out = [r for r in self.recorded if not r.plays]
        if out:
            self.label()
        return out

    def count_unplayed(self) -> int:
        return sum(1 for p in self._plays if not p)

    def played(self) -> list[Recorded]:
        return [Recorded(self, i) for i, p in enumerate(self._plays) if p]


def _recorded_key(ex: Exchange) -> RequestKey:
    """The key a recorded round trip is matched by: its request's, or, for a fork's edited
    request, the one the agent sends (:mod:`cassettes.wire.edited`)."""
    key = request_key(ex.method, ex.url, ex.request_headers, ex.request_body, ex.request_json())
    if ex.edits:
        key = _client_key(ex) or key
    return key


def _learned(method: str, target: str, headers: Headers, body: bytes) -> Redactor:
    """A redactor that has seen the request (its credential headers, query and body keys)."""
    r = Redactor()
    try:
        r.exchange(Exchange(method, target if "://" in target else "http://replay" + target, list(headers), body))
    except Exception:  # learning is best effort; the patterns still apply
        pass
    r.forget_seen()  # kept with the miss: what it learned, not the request's text
    return r
