"""A WebSocket session sent live part-way (past a fork's cursor): the client side of the
connection to the live upstream, and what the session's earlier answers stood for.

The replay server answers a session's turns from the recording until a turn reaches the cursor;
from then on it relays the session to a live upstream (the recorder's listener, which records
it). A turn there may continue an answer the live upstream never gave (a ``previous_response_id``
of an answer replayed from the recording): :class:`Threads` keeps, for every answer the server
gave or relayed, the items it left in its conversation, so that turn can be sent self-contained
(the API's adapter says how: its turn rules' ``standalone``).

The connection is RFC 6455's client side: the opening handshake (no extension offered, so the
upstream sends plain frames), masked frames out, the upstream's unmasked frames in. Connecting
and the handshake are bounded; an upstream that refuses or breaks off raises
:class:`~cassettes.replay.forward.UpstreamError`.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cassettes.replay.forward import CONNECT_TIMEOUT, READ_TIMEOUT, UpstreamError
from cassettes.replay.http1 import HOP_BY_HOP

if TYPE_CHECKING:
    from cassettes.providers import WsTurns
    from cassettes.wire.exchange import Exchange

__all__ = ["LiveSocket", "Threads", "as_sent_live", "threads_of"]

#: Answers remembered (the oldest forgotten first), and the longest chain of answers walked.
MAX_ANSWERS = 10_000
_LINE = 1 << 16


class Threads:
    """Every answer given or relayed over the server's WebSocket sessions: its id → the answer it
    continued and the items the turn added (its input, the answer's output). A chain, not a copy
    of each history: memory grows with the turns, not with their square."""

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


class LiveSocket:
    """One WebSocket connection to a live upstream, as its client. ``known``: the answers this
    upstream gave on this connection (a turn continuing one of them is sent as it is)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from cassettes.replay.wsframes import MessageReader

        self.writer = writer
        self.incoming = MessageReader(reader, from_server=True)
        self.known: set[str] = set()

    @classmethod
    async def open(cls, base: str, target: str, headers: list[tuple[str, str]], connect_timeout: float = CONNECT_TIMEOUT,
                   read_timeout: float = READ_TIMEOUT, said: list[str] | None = None) -> LiveSocket:
        """Open the session at ``base`` + ``target`` with the client's handshake headers (those of
        the connection and of the WebSocket handshake itself are this client's own)."""
        import h11

        from cassettes.replay.outgoing import Ask, Unsendable
        from cassettes.replay.wsframes import accept_key
        from cassettes.untrusted import clean_line

        u = urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UpstreamError(f"a live upstream is http(s)://host[:port], not {base[:80]!r}")
        tls = u.scheme == "https"
        try:
            async with asyncio.timeout(connect_timeout):
                reader, writer = await asyncio.open_connection(u.hostname, u.port or (443 if tls else 80), ssl=ssl.create_default_context() if tls else None, limit=_LINE)
        except TimeoutError:
            raise UpstreamError(f"connecting to {base[:80]} took longer than {connect_timeout:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError(f"cannot connect to {base[:80]}: {exc}") from None
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        keep = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and not k.lower().startswith("sec-websocket-")]
        # The handshake is h11's (cassettes.replay.outgoing: a header that cannot be sent is dropped);
        # the answer's head is read up to its empty line (no frame after it is taken) and parsed by h11.
        ask = Ask(_LINE)
        try:
            message = ask.request("GET", f"{u.path.rstrip('/')}{target}", [("Host", u.netloc), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                  ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13"), *keep], b"", said)
        except Unsendable as exc:
            writer.close()
            raise UpstreamError(str(exc)) from None
        try:
            writer.write(message)
            async with asyncio.timeout(read_timeout):
                await writer.drain()
                ask.conn.receive_data(await reader.readuntil(b"\r\n\r\n"))
                event = ask.conn.next_event()
        except TimeoutError:
            writer.close()
            raise UpstreamError(f"the upstream did not answer the WebSocket handshake within {read_timeout:g} s") from None
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
            writer.close()
            raise UpstreamError(f"the upstream broke off the WebSocket handshake: {exc}") from None
        except h11.RemoteProtocolError as exc:
            writer.close()
            raise UpstreamError(f"the upstream's WebSocket handshake is not HTTP/1.1: {clean_line(str(exc))[:120]}") from None
        status = getattr(event, "status_code", None)
        got = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in getattr(event, "headers", [])}
        if status != 101 or got.get("sec-websocket-accept") != accept_key(key):
            writer.close()
            raise UpstreamError(f"the upstream did not open the WebSocket: {status}")
        return cls(reader, writer)

    async def send(self, opcode: int, payload: bytes) -> None:
        from cassettes.replay.wsframes import frame

        self.writer.write(frame(opcode, payload, masked=True))
        await self.writer.drain()

    async def next(self) -> tuple[int, bytes]:
        """The upstream's next message or control frame (see :class:`MessageReader`)."""
        return await self.incoming.next()

    def close(self) -> None:
        self.writer.close()


def _ws_rules(ex: Exchange) -> WsTurns | None:
    """The turn rules of a recorded WebSocket turn's API (``None``: not one, or an API whose
    turns carry their whole history)."""
    from cassettes import providers

    if not any(n.startswith("websocket") for n in ex.notes):
        return None
    adapter = providers.detect("POST", urlsplit(ex.url), {"input": ""})
    rules = adapter.ws_turns() if adapter is not None else None
    return rules if rules is not None and rules.thread is not None and rules.standalone is not None else None


def _closing(ex: Exchange, rules: WsTurns) -> Any:
    """The recorded turn's closing message (its last event), or ``None``."""
    import orjson

    from cassettes import bounds
    from cassettes.wire.framing import frame

    events = frame(ex.response_chunks, ex.response_header("content-type")).events
    if not events:
        return None
    try:
        doc = bounds.loads(events[-1].data.encode("utf-8", "surrogateescape"))
    except (orjson.JSONDecodeError, ValueError):
        return None
    return doc if rules.closes(doc) else None


def threads_of(exchanges: Iterable[Exchange]) -> Threads:
    """The answers of a recording's WebSocket turns, as the replay server keeps them."""
    threads = Threads()
    for ex in exchanges:
        rules = _ws_rules(ex)
        if rules is not None and rules.thread is not None:
            prev, rid, items = rules.thread(ex.request_json(), _closing(ex, rules))
            threads.add(rid, prev, items)
    return threads


def as_sent_live(exchanges: Iterable[Exchange], by_seq: Callable[[int], Exchange], starts: Iterable[int]) -> Callable[[int], Exchange]:
    """``by_seq`` with the recorded turns at a fork's cursor (``starts``: their seqs) as the fork
    sent them over a WebSocket: a turn that continued an earlier answer (replayed, so the live
    upstream never gave it) self-contained, its input the history that answer stood for. So a
    branch's first live turn is compared with what it was sent as, not with the shorthand."""
    at = set(starts)
    made: dict[int, Exchange] = {}
    threads: list[Threads] = []

    def lookup(seq: int) -> Exchange:
        ex = by_seq(seq)
        if seq not in at:
            return ex
        if seq in made:
            return made[seq]
        rules = _ws_rules(ex)
        msg = ex.request_json()
        prev = rules.thread(msg, None)[0] if rules is not None and rules.thread is not None else None
        if rules is None or rules.standalone is None or prev is None:
            return ex
        if not threads:
            threads.append(threads_of(exchanges))
        history = threads[0].history(prev)
        if history is None:
            return ex
        import copy

        import orjson

        doc = rules.standalone(msg, history)
        out = copy.copy(ex)
        out.request_body = orjson.dumps(doc)
        out.set_request_json(doc)
        made[seq] = out
        return out

    return lookup
