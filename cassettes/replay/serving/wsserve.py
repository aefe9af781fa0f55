"""The replay server's WebSocket sender: a session (Responses over a WebSocket) answered turn by
turn from the recording, each turn decided by the same
:class:`~cassettes.replay.serving.plan.Planner` as an HTTP request and spoken here as WebSocket
messages.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from cassettes import bounds, net, providers
from cassettes.hints import count
from cassettes.net import Request, Watchdog
from cassettes.providers import Provider
from cassettes.replay.serving.plan import (
    MISS_CODE,
    MISS_STATUS,
    NOT_REPLAYED,
    Answer,
    FaultStatus,
    Forward,
    Missed,
    Planner,
    Play,
    Reset,
    Rewritten,
    Router,
)
from cassettes.replay.serving.wsrelay import WsRelay
from cassettes.wire.exchange import Exchange, Headers
from cassettes.wire.framing import frame as frame_stream
from cassettes.wire.replay_miss import HEADER as MISS_HEADER
from cassettes.wire.replay_miss import NOTE_HEADER

if TYPE_CHECKING:
    from cassettes.matching import Miss, Recorded
    from cassettes.net import Answer as HttpAnswer
    from cassettes.net import MessageReader, Trust
    from cassettes.providers import WsTurns
    from cassettes.replay.serving.wsrelay import Live

__all__ = ["WebSocketReplay", "sse_data"]

#: A message of a turn: (recorded offset, SSE event name, payload).
Message = tuple[float | None, str | None, bytes]


def sse_data(event: bytes) -> bytes:
    """The payload of one server-sent event (its ``data:`` line), as sent over a WebSocket."""
    return b"".join(ln[6:] for ln in event.splitlines() if ln.startswith(b"data: "))


@dataclass
class _Turn:
    """A turn as it is to be spoken: status, messages, headers, where a cut falls."""

    status: int | None
    messages: list[Message]
    headers: Headers
    cut: int | None = None
    stall: float | None = None


class WebSocketReplay:
    """The WebSocket sessions of one replay server, a collaborator it holds: the server hands each
    upgrade request to :meth:`serve`. What it needs is given here: the ``planner`` that decides
    every turn, the ``speed`` (0: instant) and ``idle_timeout`` of the server, the CA store a
    session sent live verifies (``trust``), and three of the server's own services: ``log`` (the
    served exchange a turn is recorded as), ``send_head`` (an HTTP head, built by h11) and
    ``drain`` (a write waited for within the server's write deadline)."""

    def __init__(
        self,
        planner: Planner,
        *,
        log: Callable[..., Exchange],
        send_head: Callable[..., Awaitable[HttpAnswer]],
        drain: Callable[[asyncio.StreamWriter, Watchdog | None], Awaitable[None]],
        speed: float = 0.0,
        idle_timeout: float | None = None,
        trust: Trust | None = None,
        router: Router | None = None,
    ) -> None:
        self.planner = planner
        #: A fork's router (its cursor), the one the planner asks: a session past it goes live.
        self.router = router
        self.speed = speed
        self.idle_timeout = idle_timeout
        self._log = log
        self._send_head = send_head
        self._drain = drain
        #: Sessions past the fork's cursor, relayed to the live upstream.
        self.relay = WsRelay(log=log, router=router, trust=trust, send_miss=self._send_miss)

    async def serve(
        self,
        req: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        dog: Watchdog | None = None,
    ) -> None:
        """Answer a WebSocket session from the recorded turns (see the module docstring)."""

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
            out = await self._send_head(
                writer,
                400,
                [
                    ("content-type", "text/plain"),
                    ("content-length", str(len(refusal))),
                    ("connection", "close"),
                ],
                dog,
                req=req,
            )
            writer.write(out.data(refusal) + out.end())
            await self._drain(writer, dog)
            return
        await self._send_head(
            writer,
            101,
            [
                ("upgrade", "websocket"),
                ("connection", "Upgrade"),
                ("sec-websocket-accept", net.accept_key(key)),
            ],
            dog,
            req=req,
        )
        incoming = net.MessageReader(reader)
        live: Live | None = None
        try:
            while True:
                data = await self._next(incoming, writer, dog, live is None)
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
                    live = await self.relay.go_live(
                        req, turn, msg, answer, writer, adapter, rules, dog
                    )
                elif not await self._turn(turn, answer, writer, adapter, rules, msg, dog):
                    return  # a fault closed the connection
        finally:
            if live is not None:
                live.stop()

    async def _next(
        self,
        incoming: MessageReader,
        writer: asyncio.StreamWriter,
        dog: Watchdog | None,
        idles: bool = True,
    ) -> bytes | None:
        """The next data message, answering control frames on the way; ``None`` when the
        session ends (a close; a protocol error answered with its close code, 1002 mostly; no
        frame for ``idle_timeout`` seconds, answered 1001: not while the session is live, when
        the client may wait as long as the live model takes)."""

        idle = self.idle_timeout if idles else None
        while True:
            if dog is not None:
                dog.arm(idle)
            try:
                op, data = await incoming.next()
            except net.WsProtocolError as exc:
                writer.write(
                    net.frame(net.CLOSE, struct.pack("!H", exc.code) + str(exc).encode()[:120])
                )
                await self._drain(writer, dog)
                return None
            except asyncio.CancelledError:
                if dog is None or not dog.expired():
                    raise
                writer.write(
                    net.frame(
                        net.CLOSE, struct.pack("!H", 1001) + f"no frame for {idle:g} s".encode()
                    )
                )
                await self._drain(writer, dog)
                return None
            finally:
                if dog is not None:
                    dog.disarm()
            if op == net.PING:
                writer.write(net.frame(net.PONG, data))
                await self._drain(writer, dog)
            elif op == net.CLOSE:
                writer.write(net.frame(net.CLOSE, data[:2]))
                await self._drain(writer, dog)
                return None
            elif op != net.PONG:
                return bytes(data)

    async def _turn(
        self,
        turn: Request,
        answer: Answer,
        writer: asyncio.StreamWriter,
        adapter: Provider,
        rules: WsTurns,
        msg: Any,
        dog: Watchdog | None,
    ) -> bool:
        """Answer one turn of a WebSocket session as planned; ``False`` when the connection was
        closed."""
        assert not isinstance(answer, Forward)
        if isinstance(answer, Missed):
            await self._send_miss(turn, writer, adapter, answer.miss, dog)
            return True
        if isinstance(answer, Reset):
            self._log(
                turn,
                None,
                [],
                [],
                f"fault {answer.fault.text}",
                "looptap fault: reset (connection closed)",
                origin_of=answer.rec,
            )
            writer.transport.abort()
            return False
        rec = answer.rec
        fault = answer.fault
        if fault is not None and fault.kind == "slow_first_byte":
            await asyncio.sleep(fault.arg or 0.0)
        spoken = self._spoken(answer, adapter)
        label: Recorded | str = f"fault {fault.text}" if fault is not None else rec
        sent: list[tuple[float | None, bytes]] = []
        logged = self._log(turn, spoken.status, spoken.headers, sent, label, origin_of=rec)
        logged.notes.append("websocket replay")
        if isinstance(answer, Play) and answer.note is not None:
            logged.notes.append(answer.note)
        if (
            rules.thread is not None
            and self.router is not None
            and isinstance(answer, Play)
            and spoken.messages
        ):
            self.relay.remember(rules, msg, spoken.messages[-1][2])
        return await self._send(writer, spoken, logged, sent, dog)

    async def _send_miss(
        self,
        turn: Request,
        writer: asyncio.StreamWriter,
        adapter: Provider,
        miss: Miss,
        dog: Watchdog | None,
        status: int | None = None,
    ) -> None:
        status = status or MISS_STATUS
        code = MISS_CODE if status == MISS_STATUS else "looptap_upstream_error"
        body = orjson.dumps(
            {"type": "error", "status": status, **adapter.replay.error(status, str(miss), code)}
        )
        # The served turn carries the marks an HTTP miss sends (the analysis reads it as the
        # client's divergence, not the API's error); over the WebSocket only the message goes.
        marks = (
            [(MISS_HEADER, "miss"), (NOTE_HEADER, miss.note().to_header())]
            if status == MISS_STATUS
            else []
        )
        self._log(turn, status, [("content-type", "application/json"), *marks], [(0.0, body)], miss)
        writer.write(net.frame(net.TEXT, body))
        await self._drain(writer, dog)

    def _spoken(self, answer: Play | Rewritten | FaultStatus, adapter: Provider) -> _Turn:
        """The recorded turn as messages, as the decided answer changes them."""

        ex = answer.rec.exchange
        status = ex.status
        messages: list[Message]
        if status is not None and status >= 400:
            messages = [(ex.ttfb, None, b"".join(c for _, c in ex.response_chunks))]
        else:
            framed = frame_stream(ex.response_chunks, ex.response_header("content-type"))
            messages = [
                (e.offset, e.event, e.data.encode("utf-8", "surrogateescape"))
                for e in framed.events
            ]
        headers: Headers = [(k, v) for k, v in ex.response_headers if k.lower() not in NOT_REPLAYED]
        headers.append(("x-looptap-replay", f"seq={ex.seq}"))
        fault = answer.fault
        if fault is None:
            return _Turn(status, messages, headers)
        headers.append(("x-looptap-fault", fault.describe()))
        if isinstance(answer, FaultStatus):
            obj = answer.body
            body = orjson.dumps(
                {
                    "type": "error",
                    "status": answer.status,
                    **(obj if isinstance(obj, dict) else {"error": obj}),
                }
            )
            return _Turn(answer.status, [(0.0, None, body)], headers)
        if isinstance(answer, Rewritten):
            return _Turn(
                status, [(None, None, sse_data(ev)) for ev in answer.rendered.chunks], headers
            )
        if fault.kind == "stream_cut":
            return _Turn(
                status, messages, headers, cut=min(int(fault.arg or 0), max(0, len(messages) - 1))
            )
        if fault.kind == "error_event":
            half = max(1, len(messages) // 2)
            data = sse_data(adapter.replay.fault_event(fault.kind))
            return _Turn(
                status,
                [*messages[:half], (messages[half - 1][0] if messages else None, "error", data)],
                headers,
            )
        if fault.kind == "stall":
            return _Turn(status, messages, headers, stall=fault.arg or 0.0)
        return _Turn(status, messages, headers)

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        turn: _Turn,
        logged: Exchange,
        sent: list[tuple[float | None, bytes]],
        dog: Watchdog | None,
    ) -> bool:
        """Send a turn's messages at their recorded pace (a stall halfway, a cut closing the
        connection: ``False``), logged as the SSE stream they were recorded as."""

        loop = asyncio.get_running_loop()
        t0 = loop.time()
        error = turn.status is not None and turn.status >= 400
        half = max(1, len(turn.messages) // 2)
        for i, (offset, name, payload) in enumerate(turn.messages):
            if turn.cut is not None and i >= turn.cut:
                logged.transport_error = (
                    f"looptap fault: stream cut after {count(turn.cut, 'message')}"
                )
                writer.transport.abort()
                return False
            if turn.stall is not None and i == half:
                await asyncio.sleep(turn.stall)
            if self.speed and offset is not None:
                delay = t0 + offset / self.speed - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            # logged as recorded: an SSE event per message (the error message as its body)
            shown = (
                payload
                if error
                else (b"event: %s\n" % name.encode() if name else b"")
                + b"data: "
                + payload
                + b"\n\n"
            )
            sent.append((loop.time() - t0, shown))
            writer.write(net.frame(net.TEXT, payload))
            await self._drain(writer, dog)
        return True
