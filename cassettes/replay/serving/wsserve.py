"""The replay server's WebSocket sessions (Responses over a WebSocket): the upgrade, the frames,
and each turn decided by the same :class:`~cassettes.replay.serving.plan.Planner` as an HTTP
request and spoken as WebSocket messages by the same
:class:`~cassettes.replay.serving.player.Player`.

Each message that opens a turn (its API's ``ws_turns``) is planned like an HTTP request to the
session's path; the recorded turn's events go back one message each, paced as recorded. Over a
WebSocket the API's failures are messages: a miss or a status fault is the API's error message
(the session goes on), a stream fault acts on the turn's event messages, a reset closes the
connection.

Past a fork's cursor (:mod:`cassettes.replay.forking.cursor`) the session goes live, relayed both
ways to its end by :mod:`~cassettes.replay.serving.wsrelay` (docs/fork.md).
"""

from __future__ import annotations

import asyncio
import struct
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import orjson

from cassettes import bounds, net, providers
from cassettes.net import Request
from cassettes.replay.serving.plan import Forward, Planner, Router
from cassettes.replay.serving.player import Player
from cassettes.replay.serving.wsrelay import WsRelay

if TYPE_CHECKING:
    from cassettes.net import MessageReader, Trust
    from cassettes.providers import Provider, WsTurns
    from cassettes.replay.serving.wsrelay import Live

__all__ = ["WebSocketReplay"]


class WebSocketReplay:
    """The WebSocket sessions of one replay server, a collaborator it holds: the server hands each
    upgrade request to :meth:`serve`. What it needs is given here: the ``planner`` that decides
    every turn, the ``player`` that speaks it (and writes through its sender, logs in its log),
    the ``idle_timeout`` of the server, the CA store a session sent live verifies (``trust``)."""

    def __init__(
        self,
        planner: Planner,
        player: Player,
        *,
        idle_timeout: float | None = None,
        trust: Trust | None = None,
        router: Router | None = None,
    ) -> None:
        self.planner = planner
        self.player = player
        #: A fork's router (its cursor), the one the planner asks: a session past it goes live.
        self.router = router
        self.idle_timeout = idle_timeout
        self._log = player.log
        self._sender = player.sender
        #: Sessions past the fork's cursor, relayed to the live upstream.
        self.relay = WsRelay(player, router=router, trust=trust)

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
        remember = rules.thread is not None and self.router is not None
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
                    await (
                        self.relay.live_turn(live, turn, msg, rules, None)
                        if opened
                        else live.sock.send(net.TEXT, data)
                    )
                    continue
                if not opened:
                    continue  # a session message opens no turn: nothing is answered for it
                answer = self.planner.plan(turn, websocket=True)
                if isinstance(answer, Forward):
                    live = await self.relay.go_live(req, turn, msg, answer, writer, adapter, rules)
                elif not await self.player.turn(
                    turn,
                    answer,
                    writer,
                    adapter,
                    partial(self.relay.remember, rules, msg) if remember else None,
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
            refusal = f"looptap replay: no WebSocket session is replayed at {req.target}".encode()
            self._log(req, 400, [], [(0.0, refusal)], "refused WebSocket")
            headers = [
                ("content-type", "text/plain"),
                ("content-length", str(len(refusal))),
                ("connection", "close"),
            ]
            await self._sender.send_whole(writer, 400, headers, refusal, req=req)
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
                writer.write(
                    net.frame(net.CLOSE, struct.pack("!H", exc.code) + str(exc).encode()[:120])
                )
                await self._sender.drain(writer)
                return None
            except TimeoutError:
                writer.write(
                    net.frame(
                        net.CLOSE, struct.pack("!H", 1001) + f"no frame for {idle:g} s".encode()
                    )
                )
                await self._sender.drain(writer)
                return None
            if op == net.PING:
                writer.write(net.frame(net.PONG, data))
                await self._sender.drain(writer)
            elif op == net.CLOSE:
                writer.write(net.frame(net.CLOSE, data[:2]))
                await self._sender.drain(writer)
                return None
            elif op != net.PONG:
                return bytes(data)
