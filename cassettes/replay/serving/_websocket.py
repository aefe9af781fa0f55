"""The replay server's WebSocket sessions (Responses over a WebSocket): the upgrade, the frames,
and each turn decided by the same :class:`~cassettes.replay.serving.plan.Planner` as an HTTP
request and spoken as WebSocket messages by the same
:class:`~cassettes.replay.serving._player.Player`.

Each message that opens a turn (its API's ``ws_turns``) is planned like an HTTP request to the
session's path; the recorded turn's events go back one message each, paced as recorded. Over a
WebSocket the API's failures are messages: a miss or a status fault is the API's error message
(the session goes on), a stream fault acts on the turn's event messages, a reset closes the
connection.

Past a fork's cursor (:mod:`cassettes.replay.forking.cursor`, docs/fork.md), at the session's first
turn at or past it, the server opens a WebSocket of its own to the live upstream
(:class:`cassettes.net.LiveSocket`) and from then on relays the session both ways, each turn sent
self-contained when it continues an answer the live upstream never gave, with the fork's model and
edits.
"""

from __future__ import annotations

import asyncio
import struct
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from ... import bounds, net, providers
from ...matching import Miss
from ...net import Request
from ...wire import Exchange
from ..live.chains import Chains
from ._player import Player
from .plan import Forward, Planner

if TYPE_CHECKING:
    from ...matching import Recorded
    from ...net import LiveSocket, MessageReader, Trust
    from ...providers import Provider, WsTurns

__all__ = ["WebSocketReplay"]


class Live:
    """A session past the cursor: its connection to the live upstream, the task relaying the
    upstream's messages, and the turn they are logged with (the one last sent)."""

    def __init__(self, sock: LiveSocket) -> None:
        self.sock = sock
        self.pump: asyncio.Task[None] | None = None
        self.sent: list[tuple[float | None, bytes]] = []
        self.logged: Exchange | None = None
        self.request: Any = None
        self.t0 = 0.0

    def turn(self, sent: list[tuple[float | None, bytes]], logged: Exchange, request: Any) -> None:
        self.sent, self.logged, self.request = sent, logged, request
        self.t0 = asyncio.get_running_loop().time()

    def stop(self) -> None:
        """The client's session ended: close the live one (1000) and stop relaying."""
        if self.pump is not None:
            self.pump.cancel()
        if not self.sock.writer.is_closing():
            self.sock.writer.write(net.frame(net.CLOSE, struct.pack("!H", 1000), masked=True))
        self.sock.close()


class WebSocketReplay:
    """The WebSocket sessions of one replay server, a collaborator it holds: the server hands each
    upgrade request to :meth:`serve`. What it needs is given here: the ``planner`` that decides
    every turn (and holds the fork's cursor: the model and edits of a turn sent live), the
    ``player`` that speaks it (and writes through its sender, logs in its log), the
    ``idle_timeout`` of the server, the CA store a session sent live verifies (``trust``)."""

    def __init__(
        self,
        planner: Planner,
        player: Player,
        *,
        idle_timeout: float | None = None,
        trust: Trust | None = None,
    ) -> None:
        self.planner = planner
        self.player = player
        self.idle_timeout = idle_timeout
        self._log = player.log
        self._sender = player.sender
        self.trust = trust
        #: What every answer served or relayed over this server's sessions stood for (the live
        #: upstream's answers: each session's own, ``Live.sock.known``).
        self.chains = Chains(tuple)

    async def serve(
        self,
        req: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Answer a WebSocket session from the recorded turns (see the module docstring)."""
        session = await self._upgrade(req, writer)
        if session is None:
            return
        adapter, rules = session
        incoming = net.MessageReader(reader)
        # a fork remembers what each recorded answer stood for (a later turn may go live)
        remember = rules.chaining is not None and self.planner.cursor is not None
        live: Live | None = None
        try:
            while True:
                data = await self._next(incoming, writer, live is None)
                if data is None:
                    return  # closed, or broken by the client
                try:
                    msg = bounds.loads(data)
                except (orjson.JSONDecodeError, ValueError):
                    msg = None
                opened = rules.opens(msg)
                turn = Request("POST", req.target, req.headers, data)
                if live is not None:  # past the cursor: every message goes on to the live upstream
                    cursor = self.planner.cursor
                    if not opened:
                        await live.sock.send(net.TEXT, data)
                    elif cursor is None or cursor.admit(f"{turn.method} {turn.target} (a turn)"):
                        await self.live_turn(live, turn, msg, rules, None)
                    else:  # past the fork's limit of live requests: not sent
                        await self.player.ws_refused(turn, writer, cursor.refused(turn, None))
                    continue
                if not opened:
                    continue  # a session message opens no turn: nothing is answered for it
                answer = self.planner.plan(turn, websocket=True)
                if isinstance(answer, Forward):
                    live = await self._go_live(req, turn, msg, answer, writer, adapter, rules)
                elif not await self.player.turn(
                    turn,
                    answer,
                    writer,
                    adapter,
                    partial(self.remember, rules, msg) if remember else None,
                ):
                    return  # a fault closed the connection
        finally:
            if live is not None:
                live.stop()

    async def _upgrade(
        self, req: Request, writer: asyncio.StreamWriter
    ) -> tuple[Provider, WsTurns] | None:
        """Accept the upgrade to a session the recording can answer (its API and how its turns
        open), or refuse it with a 400 (``None``)."""
        key = req.header("sec-websocket-key")
        adapter = providers.detect("POST", urlsplit(req.target), {"input": ""})
        rules = adapter.ws_turns() if adapter is not None else None
        if (
            req.method != "GET"
            or not key
            or adapter is None
            or rules is None
            or rules.gathers is not None
        ):
            refusal = f"looptap replay: no WebSocket session is replayed at {req.target}"
            await self.player.refuse(req, writer, 400, refusal)
            return None
        accept = net.accept_key(key)
        headers = [
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-accept", accept),
        ]
        await self._sender.send_head(writer, 101, headers, req=req)
        return adapter, rules

    async def _next(
        self,
        incoming: MessageReader,
        writer: asyncio.StreamWriter,
        idles: bool = True,
    ) -> bytes | None:
        """The next data message, answering control frames on the way; ``None`` when the
        session ends (a close; a protocol error answered with its close code, 1002 mostly; no
        frame for ``idle_timeout`` seconds, answered 1001: not while the session is live, when
        the client may wait as long as the live model takes)."""

        idle = self.idle_timeout if idles else None
        while True:
            try:
                async with asyncio.timeout(idle):
                    op, data = await incoming.next()
            except net.WsProtocolError as exc:
                op, data = net.CLOSE, struct.pack("!H", exc.code) + str(exc).encode()[:120]
            except TimeoutError:
                op, data = net.CLOSE, struct.pack("!H", 1001) + f"no frame for {idle:g} s".encode()
            else:
                data = data[:2] if op == net.CLOSE else data  # the client's close: its code echoed
            if op == net.PING:
                writer.write(net.frame(net.PONG, data))
                await self._sender.drain(writer)
            elif op == net.CLOSE:
                writer.write(net.frame(net.CLOSE, data))
                await self._sender.drain(writer)
                return None
            elif op != net.PONG:
                return bytes(data)

    def remember(
        self, rules: WsTurns, msg: Any, closing: bytes, known: set[str] | None = None
    ) -> None:
        """Remember what the answer closing a turn (``closing``, a message) stood for."""
        chain = rules.chaining
        try:
            doc = bounds.loads(closing)
        except (orjson.JSONDecodeError, ValueError):
            return
        if chain is not None and rules.closes(doc):
            self.chains.answered(chain, msg, doc, known)

    async def _go_live(
        self,
        req: Request,
        turn: Request,
        msg: Any,
        answer: Forward,
        writer: asyncio.StreamWriter,
        adapter: Provider,
        rules: WsTurns,
    ) -> Live | None:
        """The session reaches the cursor: open it at the live upstream (the recorder's listener)
        and send this turn; from now on the session is relayed both ways. An upstream that cannot
        be reached is the API's error message (the session goes on, not live)."""

        try:
            sock = await net.LiveSocket.open(answer.base, req.target, req.headers, trust=self.trust)
        except net.UpstreamError as exc:
            why = f"past the fork's cursor; opening the live session at {answer.base} failed: {exc}"
            miss = answer.miss or Miss(turn.method, turn.target, why, answer.rec)
            await self.player.ws_miss(turn, writer, adapter, miss, status=502)
            return None
        if answer.miss is not None:  # a turn that differs from the recording, answered live
            self.planner.matcher.resolve(answer.miss)
        live = Live(sock)
        live.pump = asyncio.create_task(self._pump(live, writer, rules))
        await self.live_turn(live, turn, msg, rules, answer.rec)
        return live

    async def live_turn(
        self, live: Live, turn: Request, msg: Any, rules: WsTurns, rec: Recorded | None
    ) -> None:
        """Send one turn to the live upstream: self-contained if it continues an answer the
        upstream never gave (one replayed from the recording), with the fork's model and edits."""
        notes: list[str] = []
        body = turn.body
        chain = rules.chaining
        if chain is not None:  # as an HTTP request past the cursor is
            doc, notes = self.chains.standalone(chain, msg, live.sock.known)
            body = orjson.dumps(doc) if doc is not msg else body
        cursor = self.planner.cursor
        if cursor is not None:
            if rec is None:  # a later turn of the live session: the cursor routed only the first
                cursor.note_lived(None)
            _, body, more, _ = cursor.outgoing(
                Request(turn.method, turn.target, turn.headers, body)
            )
            notes += more
        sent: list[tuple[float | None, bytes]] = []
        logged = self._log(turn, 200, [], sent, origin_of=rec)
        logged.notes += ["websocket live", *notes]
        live.turn(sent, logged, bounds.loads(body) if body is not turn.body else msg)
        await live.sock.send(net.TEXT, body)

    async def _pump(self, live: Live, writer: asyncio.StreamWriter, rules: WsTurns) -> None:
        """The live upstream's messages to the client as they come, each logged with its turn;
        the upstream's close closes the client's session, an upstream that breaks off breaks it."""

        loop = asyncio.get_running_loop()
        try:
            while True:
                op, data = await live.sock.next()
                if op == net.PING:
                    await live.sock.send(net.PONG, data)
                    continue
                if op == net.PONG:
                    continue
                if op == net.CLOSE:
                    writer.write(net.frame(net.CLOSE, data[:2]))
                    await writer.drain()
                    return
                live.sent.append((loop.time() - live.t0, b"data: " + data + b"\n\n"))
                writer.write(net.frame(op, data))
                await writer.drain()
                if rules.chaining is not None:
                    self.remember(rules, live.request, data, live.sock.known)
        except (net.WsProtocolError, asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            if live.logged is not None:
                live.logged.transport_error = f"the live upstream broke off the session: {exc}"
            writer.transport.abort()
