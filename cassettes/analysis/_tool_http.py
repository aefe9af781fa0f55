"""Which model tool call each tool's HTTP call served: the state a run's tool exchanges are linked
with (round trips the recorder's forward proxy took to hosts that are not LLM APIs', marked
``tool`` in the cassette: docs/recorder.md, "The tools' HTTP").

A model's client tool calls await their result from the model's answer until the conversation's
next request (which sends the results back, or goes on without them). A tool's HTTP call read
while calls await is linked to one of them: the one whose arguments the URL (path and query,
percent-decoded) and the request body carry most of (``arguments``), or, when none of any awaiting
call's arguments is seen there, the only call awaiting (``awaiting``). Two calls that fit equally
(parallel calls with the same arguments, or several awaiting calls none of whose arguments is
seen) leave it unlinked, their number kept: a wrong link is worse than none. What is read is
bounded: the first 64 KiB of a body, 32 argument values of at most 200 characters each, the newest
10,000 awaiting calls.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, NamedTuple
from urllib.parse import unquote_plus, urlsplit

import orjson

from ..models import NormalisedResponse
from ..wire import Exchange
from ._mcp import put
from ._model import McpCall, ToolHttp, Turn

__all__ = ["Awaiting", "Served", "ToolHttpLinker", "tool_http"]

#: Bytes of a request body searched for the arguments.
_BODY = 64 << 10
#: Argument values a call is known by, and the longest kept.
_VALUES, _VALUE_CHARS = 32, 200
#: Characters of a body's start and of a path kept for the views.
CLIP = 300


class Awaiting(NamedTuple):
    """A model's client tool call awaiting its result."""

    seq: int
    conversation: str
    turn: int
    name: str
    #: The arguments' leaf values as text, casefolded (strings of 2 characters or more, numbers).
    values: tuple[str, ...]
    #: When the model request whose answer made it started (epoch seconds), when known: a tool's
    #: HTTP call that started before it is not its.
    since: float | None = None
    #: The model's call id.
    id: str = ""


def key(conversation: str, call_id: str) -> str:
    """A call's key in the linker's tables: its id within its conversation (two conversations
    that number their calls alike, ``call_1_0`` in both, never cross)."""
    return f"{conversation}\x1f{call_id}"


#: How many calls whose wait ended are kept, for a tool's HTTP call that started while they
#: awaited and was read after (a slow call that outlived its turn).
_ENDED = 1024


def _values(arguments: Any) -> tuple[str, ...]:
    """The leaf values of a call's arguments a URL or a body may carry (bounded, depth 8)."""
    out: list[str] = []

    def walk(v: Any, depth: int) -> None:
        if len(out) >= _VALUES or depth > 8:
            return
        if isinstance(v, dict):
            for x in v.values():
                walk(x, depth + 1)
        elif isinstance(v, list):
            for x in v:
                walk(x, depth + 1)
        elif isinstance(v, str):
            text = v.strip()
            if 2 <= len(text) <= _VALUE_CHARS:
                out.append(text.casefold())
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out.append(str(v))

    walk(arguments, 0)
    return tuple(dict.fromkeys(out))


#: What an answer says of the thing asked for (lower case): that it is not there (:data:`MISSING`);
#: that something was wrong or invalid (:data:`FAULT`).
MISSING = re.compile(
    r"not[ _\-]?found|no such|does ?n[o']?t exist|not exist|\"(?:found|exists)\" ?: ?false"
)
FAULT = re.compile(r"unknown|invalid|error|fail|\"(?:ok|success)\" ?: ?false")


def denial(body: bytes) -> int:
    """2: an answer's first 64 KiB say the thing asked for is not there (:data:`MISSING`); 1: that
    something was wrong (:data:`FAULT`); 0: neither."""
    text = _text(body).casefold()
    return 2 if MISSING.search(text) else 1 if FAULT.search(text) else 0


#: Keys of a JSON answer whose values echo the request or say what went wrong: a value found
#: only under them is not data the tool holds.
_ECHO = frozenset(
    "query q search term terms keyword keywords input request requested params parameters url "
    "path filter filters message msg error errors error_message errormessages detail details "
    "reason description title".split()
)


def _leaves(body: Any, out: list[str], key: str = "", depth: int = 0) -> None:
    """The text of a JSON answer's values but those under :data:`_ECHO` keys (bounded)."""
    if depth > 8 or len(out) >= 4096:
        return
    if isinstance(body, dict):
        for k, v in list(body.items())[:512]:
            if str(k).casefold() not in _ECHO:
                _leaves(v, out, str(k), depth + 1)
    elif isinstance(body, list):
        for v in body[:512]:
            _leaves(v, out, key, depth + 1)
    elif isinstance(body, str | int | float) and not isinstance(body, bool):
        out.append(str(body).casefold())


def _token(value: str, text: str) -> bool:
    """``value`` in ``text`` with no letter or digit either side (both casefolded)."""
    return re.search(rf"(?<![a-z0-9]){re.escape(value)}(?![a-z0-9])", text) is not None


def answer_values(values: tuple[str, ...], body: bytes) -> tuple[tuple[str, ...], ...]:
    """Of a call's argument ``values``: those an answer's first 64 KiB name anywhere (as whole
    tokens), and those it holds as data — a JSON answer's values but those under keys that
    echo the request or carry an error (:data:`_ECHO`); a text answer's whole text."""
    text = _text(body).casefold()
    named = tuple(v for v in values if _token(v, text))
    if not named:
        return (), ()
    try:
        parsed = orjson.loads(body[:_BODY])
    except orjson.JSONDecodeError:
        return named, named
    if not isinstance(parsed, dict | list):
        return named, named
    leaves: list[str] = []
    _leaves(parsed, leaves)
    return named, tuple(v for v in named if any(_token(v, leaf) for leaf in leaves))


def _text(data: bytes) -> str:
    return data[:_BODY].decode("utf-8", "replace")


def _clip(text: str) -> str | None:
    return (text[:CLIP] + "…" if len(text) > CLIP else text) or None


def tool_http(ex: Exchange) -> ToolHttp:
    """What a tool's HTTP round trip sent and got, for the views (bounded)."""
    try:
        url = urlsplit(ex.url)
        host, path = url.netloc, url.path + (f"?{url.query}" if url.query else "")
    except ValueError:
        host, path = "", ex.url
    got = ex.response_body
    return ToolHttp(
        method=ex.method[:16],
        host=host[:CLIP],
        path=_clip(path or "/") or "/",
        status=ex.status,
        transport_error=_clip(ex.transport_error or ""),
        started=ex.started,
        duration=ex.duration,
        sent=_clip(_text(ex.request_body[: CLIP * 4])),
        got=_clip(_text(got[: CLIP * 4])),
        sent_bytes=len(ex.request_body),
        got_bytes=len(got),
    )


class Served(NamedTuple):
    """What one tool HTTP call linked to a model's call by its arguments got."""

    seq: int
    status: int | None
    error: str | None
    #: The answer's start (:data:`CLIP` characters, ``…`` when longer).
    got: str | None
    #: The answer's whole length, in bytes.
    got_bytes: int
    #: The call's argument values (:attr:`Awaiting.values`) the request carried (URL or body).
    asked: tuple[str, ...] = ()
    #: Those the answer names anywhere, and those it holds as data (:func:`answer_values`).
    named: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    #: What the answer says of the thing asked for (:func:`denial`): 2 not there, 1 something
    #: wrong, 0 neither.
    denies: int = 0


class ToolHttpLinker:
    """Every table is keyed by a call's :func:`key` (its conversation and id)."""

    def __init__(self) -> None:
        #: The model's client tool calls awaiting their result.
        self.awaiting: OrderedDict[str, Awaiting] = OrderedDict()
        #: Calls whose wait ended, with when it ended (the start of the request that ended it):
        #: a tool's HTTP call is linked by when it *started*, and a slow one is read after.
        self.ended: OrderedDict[str, tuple[Awaiting, float]] = OrderedDict()
        #: What the tool's HTTP calls linked by their arguments got, by the model's call id (the
        #: C check of the request that sends its result back reads it): per call, (seq, status,
        #: transport error, the answer's start, the answer's length in bytes), the first 16.
        self.served: OrderedDict[str, list[Served]] = OrderedDict()
        #: The awaiting calls while which some tool HTTP call was made (linked or not), by id.
        self.touched: OrderedDict[str, bool] = OrderedDict()
        #: Per tool name, how many of its calls whose wait ended had a tool HTTP call linked by
        #: their arguments, and how many had none at all (:meth:`model_turn`).
        self.history: OrderedDict[str, tuple[int, int]] = OrderedDict()
        #: Tool HTTP calls linked to the only call awaiting (none of its arguments seen) before
        #: anything showed that call runs over HTTP at all, by its key: kept linked when its wait
        #: ends only if it did by then (:meth:`_runs_over_http`), else unlinked (an MCP call over
        #: stdio awaiting while the agent fetched something of its own: opencode's npm check).
        self.tentative: OrderedDict[str, list[McpCall]] = OrderedDict()
        #: :attr:`awaiting`'s keys by conversation, each in its order: an index, not kept with a
        #: continued analysis (:meth:`reindex` makes it again), so that a turn finds its
        #: conversation's calls without reading every call awaiting (up to 10,000).
        self._waiting: dict[str, dict[str, None]] = {}

    def reindex(self) -> None:
        """Make :attr:`_waiting` again from :attr:`awaiting` (restored as it was kept)."""
        self._waiting = {}
        for k, a in self.awaiting.items():
            self._waiting.setdefault(a.conversation, {})[k] = None

    def _await(self, k: str, made: Awaiting) -> None:
        """``awaiting[k] = made``, the newest; the oldest dropped past 10,000 calls."""
        waiting = self._waiting
        of = waiting.setdefault(made.conversation, {})
        of.pop(k, None)
        of[k] = None
        for old, gone in put(self.awaiting, k, made):
            of = waiting[gone.conversation]
            del of[old]
            if not of:
                del waiting[gone.conversation]

    def clear(self) -> None:
        self.awaiting.clear()
        self._waiting.clear()
        self.ended.clear()
        self.served.clear()
        self.touched.clear()
        self.history.clear()
        self.tentative.clear()

    def _runs_over_http(self, cid: str, made: Awaiting) -> bool:
        """Whether the wire shows that the call ``cid`` (``made``) is one the agent runs over HTTP:
        a tool HTTP call was linked to it by its arguments, or to an earlier call of its tool."""
        return cid in self.served or self.history.get(made.name, (0, 0))[0] > 0

    def model_turn(
        self, turn: Turn, response: NormalisedResponse | None, at: float | None = None
    ) -> list[tuple[str, Awaiting]]:
        """A turn was analysed (its request started ``at``): its conversation's earlier calls are
        no longer awaited (their results were sent back, or the client went on without them); its
        answer's are. Returns the calls whose wait ended, each with its key."""
        ended: list[tuple[str, Awaiting]] = []
        for cid in self._waiting.pop(turn.conversation, ()):
            made = self.awaiting.pop(cid)
            ended.append((cid, made))
            for call in self.tentative.pop(cid, []):
                if not self._runs_over_http(cid, made):  # nothing showed it runs over HTTP
                    call.call_id = call.linked_by = call.tool = None
                    call.model_seq = call.conversation = call.turn = None
            if at is not None:
                put(self.ended, cid, (made, at))
                while len(self.ended) > _ENDED:
                    self.ended.popitem(last=False)
            name = made.name
            with_http, without = self.history.get(name, (0, 0))
            if cid in self.served:
                with_http += 1
            elif cid not in self.touched:
                without += 1
            put(self.history, name, (with_http, without))
            self.touched.pop(cid, None)
        for tc in response.tool_calls if response is not None else []:
            if tc.id and tc.name and tc.kind == "function":
                made = Awaiting(
                    turn.seq, turn.conversation, turn.index, tc.name, _values(tc.arguments), at,
                    tc.id,
                )  # fmt: skip
                self._await(key(turn.conversation, tc.id), made)
        return ended

    def _awaiting_at(self, started: float | None) -> dict[str, Awaiting]:
        """The calls awaiting their result when a tool's HTTP call started: made by a request
        that started before it, and not ended before it (a call whose wait has ended since, a
        slow one's, included); all awaiting now when its start is unknown."""
        if started is None:
            return dict(self.awaiting)
        out = {
            k: a for k, (a, until) in self.ended.items()
            if started < until and (a.since is None or a.since <= started)
        }  # fmt: skip
        out.update(
            (k, a) for k, a in self.awaiting.items() if a.since is None or a.since <= started
        )
        return out

    def exchange(self, seq: int, ex: Exchange) -> McpCall:
        """A tool's HTTP round trip, linked to the model's call it served when that can be told:
        of the calls awaiting their result when it *started* (:meth:`_awaiting_at`)."""
        call = McpCall(seq=seq, via="http", http=tool_http(ex))
        awaiting = self._awaiting_at(ex.started)
        if not awaiting:
            return call
        try:
            url = urlsplit(ex.url)
            where = unquote_plus(url.path + "?" + url.query)
        except ValueError:
            where = ex.url
        seen = f"{where}\n{_text(ex.request_body)}".casefold()
        scores = {cid: sum(v in seen for v in a.values) for cid, a in awaiting.items()}
        best = max(scores.values())
        fits = [cid for cid, n in scores.items() if n == best]
        if len(fits) == 1 and (best > 0 or len(scores) == 1):
            cid = fits[0]
            made = awaiting[cid]
            tentative = not best and not self._runs_over_http(cid, made)
            if tentative and cid not in self.awaiting:
                return call  # its wait has ended with nothing showing it runs over HTTP
            call.call_id, call.linked_by, call.tool = (
                made.id or cid,
                "arguments" if best else "awaiting",
                made.name,
            )
            call.model_seq, call.conversation, call.turn = made.seq, made.conversation, made.turn
            if cid not in self.awaiting:  # its wait has ended: its result was judged already
                return call
            if tentative:  # (decided when its wait ends: model_turn)
                got_tentative = self.tentative.get(cid) or []
                if len(got_tentative) < 16:
                    put(self.tentative, cid, [*got_tentative, call])
                while len(self.tentative) > _ENDED:
                    self.tentative.popitem(last=False)
                return call
            put(self.touched, cid, True)
            if best and call.http is not None and not ex.recorder_made:  # (never judged)
                got = self.served.get(cid) or []
                h = call.http
                if len(got) < 16:
                    asked = tuple(v for v in made.values if v in seen)
                    named, held = answer_values(asked, ex.response_body)
                    denies = denial(ex.response_body)
                    made_by = Served(
                        seq, h.status, h.transport_error, h.got, h.got_bytes, asked, named,
                        held, denies,
                    )  # fmt: skip
                    put(self.served, cid, [*got, made_by])
        else:
            call.candidates = len(fits)
            for cid in fits:  # one of them may have made it
                if cid in self.awaiting:
                    put(self.touched, cid, True)
        return call
