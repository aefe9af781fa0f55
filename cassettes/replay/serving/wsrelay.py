"""A WebSocket session past a fork's cursor (docs/fork.md): at its first turn at or past the cursor
the replay server opens a WebSocket of its own to the live upstream
(:class:`cassettes.net.LiveSocket`) and from then on relays the session both ways, each turn sent
self-contained when it continues an answer the live upstream never gave, with the fork's model and
edits. :class:`~cassettes.replay.serving.wsserve.WebSocketReplay` hands it a session's turns once
the planner sends one live.
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any

import orjson

from cassettes import bounds, net
from cassettes.matching import Miss
from cassettes.net import Request
from cassettes.providers import Chaining, Provider
from cassettes.replay.live.chains import Chains
from cassettes.replay.serving.plan import Forward, Router
from cassettes.replay.serving.player import Player
from cassettes.wire.exchange import Exchange

if TYPE_CHECKING:
    from cassettes.matching import Miss, Recorded
    from cassettes.net import LiveSocket, Trust
    from cassettes.providers import WsTurns

__all__ = ["Live", "WsRelay"]


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


def _miss(turn: Request, why: str, rec: Recorded | None) -> Miss:
    return Miss(turn.method, turn.target, why, rec)


def _chain(rules: WsTurns) -> Chaining | None:
    """How a session's turns chain (``None``: its API's turns carry their whole history)."""
    if rules.thread is None or rules.standalone is None:
        return None
    return Chaining(rules.thread, rules.standalone)


class WsRelay:
    """The live half of one replay server's WebSocket sessions: what every answer given or relayed
    stood for (:attr:`chains`), and each session past the cursor relayed. The ``player``'s log
    keeps the served turns and its ``ws_miss`` says a session that could not be opened live as the
    API's error message; ``router`` is the fork's (its cursor: the model and edits of a turn sent
    live), ``trust`` the CA store a live session verifies."""

    def __init__(self, player: Player, *, router: Router | None, trust: Trust | None) -> None:
        self.log = player.log
        self.router = router
        self.trust = trust
        self.send_miss = player.ws_miss
        #: What every answer served or relayed over this server's sessions stood for (the live
        #: upstream's answers: each session's own, ``Live.sock.known``).
        self.chains = Chains(tuple)

    def remember(
        self, rules: WsTurns, msg: Any, closing: bytes, known: set[str] | None = None
    ) -> None:
        """Remember what the answer closing a turn (``closing``, a message) stood for."""
        chain = _chain(rules)
        try:
            doc = bounds.loads(closing)
        except (orjson.JSONDecodeError, ValueError):
            return
        if chain is not None and rules.closes(doc):
            self.chains.answered(chain, msg, doc, known)

    async def go_live(
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
            rec = answer.rec
            why = f"past the fork's cursor; opening the live session at {answer.base} failed: {exc}"
            await self.send_miss(
                turn,
                writer,
                adapter,
                answer.miss if answer.miss is not None else _miss(turn, why, rec),
                status=502,
            )
            return None
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
        chain = _chain(rules)
        if chain is not None:  # as an HTTP request past the cursor is
            doc, notes = self.chains.standalone(chain, msg, live.sock.known)
            body = orjson.dumps(doc) if doc is not msg else body
        cursor = self.router
        if cursor is not None:
            _, body, more, _ = cursor.outgoing(
                Request(turn.method, turn.target, turn.headers, body)
            )
            notes += more
        sent: list[tuple[float | None, bytes]] = []
        logged = self.log(turn, 200, [], sent, "live past the cursor", origin_of=rec)
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
                if rules.thread is not None:
                    self.remember(rules, live.request, data, live.sock.known)
        except (net.WsProtocolError, asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            if live.logged is not None:
                live.logged.transport_error = f"the live upstream broke off the session: {exc}"
            writer.transport.abort()
