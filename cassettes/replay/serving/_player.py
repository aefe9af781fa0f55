"""The replay server's player: a recorded answer spoken as it was recorded (headers, status, a
stream chunk for chunk at the recorded pace or scaled) or as a fault changes it (a status in the
API's error shape, a rewritten answer, a reset, a slow first byte, a stream stalled, cut or ended
by an error event), over HTTP (:meth:`Player.answer`) or as a turn of a WebSocket session
(:meth:`Player.turn`, each event a message). Both transports are paced, stalled and cut by one
loop (:meth:`Player._paced`).

It writes through the server's :class:`~cassettes.replay.serving._sender.Sender` and keeps what it
sent in its :class:`~cassettes.replay.serving._sender.ServedLog`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import orjson

from ... import net
from ...hints import count
from ...matching import Matcher, Miss, Recorded, request_key
from ...net import Request
from ...providers import Provider
from ...wire import NOTE_HEADER, REPLAY_HEADER, Exchange, Headers
from ...wire import frame as frame_stream
from ._sender import Sender, ServedLog
from .faults import Fault
from .plan import (
    MISS_CODE,
    MISS_STATUS,
    NOT_REPLAYED,
    FaultStatus,
    Missed,
    Play,
    Refused,
    Reset,
    Rewritten,
)

__all__ = ["Player"]

#: One server-sent event with the blank line that ends it (the last may lack it).
_SSE_EVENT = re.compile(rb".*?(?:\r\n\r\n|\n\n|\r\r)|.+", re.DOTALL)

#: The faults that act on a stream's pieces (and make an answer chunked).
_STREAM_FAULTS = ("stream_cut", "error_event", "stall")
#: What the player speaks: the planner's answers other than a request sent live.
Played = Play | Rewritten | FaultStatus | Reset | Refused | Missed
#: A piece of an answer as sent: (recorded offset, the bytes the served exchange keeps, the bytes
#: written, before the transport frames them).
Piece = tuple[float | None, bytes, bytes]


def _sse_data(event: bytes) -> bytes:
    """The payload of one server-sent event (its ``data:`` line), as sent over a WebSocket."""
    return b"".join(ln[6:] for ln in event.splitlines() if ln.startswith(b"data: "))


def _events(body: bytes, ctype: str) -> list[bytes]:
    """A streamed body cut into its events (server-sent events or NDJSON lines), delimiters kept."""
    if "ndjson" in ctype:
        return body.splitlines(keepends=True)
    return _SSE_EVENT.findall(body) if "event-stream" in ctype else [body] if body else []


def _ws_error(status: int, obj: object) -> bytes:
    """The API's error (``obj``, its body over HTTP) as the message a WebSocket session gets."""
    return orjson.dumps(
        {"type": "error", "status": status, **(obj if isinstance(obj, dict) else {"error": obj})}
    )


def _sse(name: str | None, payload: bytes) -> bytes:
    """A WebSocket message as the server-sent event it stands for."""
    return (b"event: %s\n" % name.encode() if name else b"") + b"data: " + payload + b"\n\n"


def _chunked(ex: Exchange, chunks: list[tuple[float | None, bytes]], fault: Fault | None) -> bool:
    """Whether a recorded answer is replayed chunked (a stream, several pieces, a stream fault)."""
    ctype = (ex.response_header("content-type") or "").lower()
    return (
        (fault is not None and fault.kind in _STREAM_FAULTS)
        or len(chunks) > 1
        or "event-stream" in ctype
        or "ndjson" in ctype
        or (ex.response_header("transfer-encoding") or "").lower() == "chunked"
    )


def _faulted(
    chunks: list[tuple[float | None, bytes]], ctype: str, fault: Fault
) -> list[tuple[float | None, bytes]]:
    """A stream's pieces as a stream ``fault`` acts on them: event by event, or one recorded
    piece halved (to cut it, or send the error halfway)."""
    events = _events(b"".join(c for _, c in chunks), ctype)
    if len(events) > len(chunks):  # a stream recorded in few pieces (vcrpy keeps one)
        last = chunks[-1][0] if chunks else None
        return [(last, e) for e in events]
    if len(chunks) == 1 and fault.kind != "stall":  # one recorded piece (a JSON answer)
        body = chunks[0][1]
        return [(chunks[0][0], body[: len(body) // 2]), (chunks[0][0], body[len(body) // 2 :])]
    return chunks


def _miss_marks(miss: Miss) -> Headers:
    """What marks a served exchange as a miss (the analysis reads it as the client's divergence,
    layer C, never the API's error)."""
    return [(REPLAY_HEADER, "miss"), (NOTE_HEADER, miss.note().to_header())]


async def _first_byte(fault: Fault | None) -> bool:
    """Wait before the first byte when ``fault`` is a slow first byte (then ``True``)."""
    if fault is None or fault.kind != "slow_first_byte":
        return False
    await asyncio.sleep(fault.arg or 0.0)
    return True


def _cut_messages(n: int) -> str:
    return f"looptap fault: stream cut after {count(n, 'message')}"


class _Clock:
    """The recorded pace from ``t0`` (loop time) at ``speed`` (0: instant)."""

    def __init__(self, speed: float, t0: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.speed = speed
        self.t0 = t0

    async def until(self, offset: float | None) -> None:
        if self.speed and offset is not None:
            delay = self.t0 + offset / self.speed - self.loop.time()
            if delay > 0:
                await asyncio.sleep(delay)

    def now(self) -> float:
        return self.loop.time() - self.t0


@dataclass
class _Turn:
    """A WebSocket turn as it is to be spoken: status, messages (recorded offset, SSE event name,
    payload), headers, what ends it early."""

    status: int | None
    messages: list[tuple[float | None, str | None, bytes]]
    headers: Headers
    fault: Fault | None = None


class Player:
    """Plays recorded answers (and the faults that change them) at ``speed`` (0: instant; see
    :func:`~cassettes.replay.serving.server.parse_pace`)."""

    def __init__(self, matcher: Matcher, sender: Sender, log: ServedLog, speed: float) -> None:
        self.matcher = matcher
        self.sender = sender
        self.log = log
        self.speed = speed

    # -- over HTTP ------------------------------------------------------------------------------
    async def answer(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Played,
        t0: float,
    ) -> bool:
        """Speak ``answer`` to ``req`` (``t0``: when the request was read, the recorded pace's
        origin); ``False`` when the connection was closed."""
        if isinstance(answer, Missed):
            return await self.miss(req, writer, answer.miss)
        if isinstance(answer, Refused):  # past a fork's limit: not sent
            body = orjson.dumps(answer.error)
            return await self.json(
                req, writer, answer.status, answer.headers, body, answer.rec, None, [answer.note]
            )
        if isinstance(answer, Reset):
            why = f"{answer.fault.describe()} (connection closed before any response)"
            return self._reset(req, writer, f"looptap fault: {why}", answer.rec)
        if isinstance(answer, FaultStatus):
            headers = [*answer.headers, ("x-looptap-fault", answer.fault.describe())]
            body = orjson.dumps(answer.body)
            return await self.json(req, writer, answer.status, headers, body, answer.rec)
        if isinstance(answer, Rewritten):
            return await self._rewritten(req, writer, answer, t0)
        if await _first_byte(answer.fault):
            t0 = asyncio.get_running_loop().time()
        return await self._play(req, writer, answer, _Clock(self.speed, t0))

    async def miss(self, req: Request, writer: asyncio.StreamWriter, miss: Miss) -> bool:
        """A request no recorded round trip answers, failed closed in the API's error shape."""
        key = request_key(req.method, req.target, req.headers, req.body)
        adapter = (
            key.adapter
            or (miss.closest.key.adapter if miss.closest is not None else None)
            or Provider()
        )
        body = orjson.dumps(adapter.replay.error(MISS_STATUS, str(miss), MISS_CODE))
        headers = [*adapter.replay.error_headers(retry=False), *_miss_marks(miss)]
        return await self.json(req, writer, MISS_STATUS, headers, body, None)

    async def refuse(
        self, req: Request, writer: asyncio.StreamWriter, status: int, text: str
    ) -> bool:
        """A request looptap does not serve (``CONNECT``, a WebSocket it has no session for):
        ``text`` as a plain-text answer, the connection closed after it (``False``)."""
        msg = text.encode()
        self.log(req, status, [], [(0.0, msg)])
        headers = [
            ("content-type", "text/plain"),
            ("content-length", str(len(msg))),
            ("connection", "close"),
        ]
        await self.sender.send_whole(writer, status, headers, msg, req=req)
        return False

    async def json(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        status: int,
        headers: Headers,
        body: bytes,
        rec: Recorded | None,
        error: str | None = None,
        notes: Sequence[str] = (),
        content_type: str = "application/json",
    ) -> bool:
        """A whole JSON answer (a miss, an injected API error, a live upstream's failure; a
        tool's answer an edit changed: of ``content_type``) with ``headers`` between its content
        type and length, kept with ``rec``'s origin, ``error`` as its transport error and
        ``notes``."""
        headers = [
            ("content-type", content_type),
            *headers,
            ("content-length", str(len(body))),
        ]
        logged = self.log(req, status, headers, [(0.0, body)], error, rec)
        logged.notes.extend(notes)
        await self.sender.send_whole(writer, status, headers, body, req=req, logged=logged)
        return True

    def _reset(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        why: str,
        rec: Recorded,
        played: bool = False,
    ) -> bool:
        """The connection closed before any answer (``why``: the served exchange's error)."""
        self.log(req, None, [], [], why, origin_of=rec, played=played)
        writer.transport.abort()
        return False

    async def _rewritten(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Rewritten,
        t0: float,
    ) -> bool:
        """The recorded answer rewritten by a fault (cut, filtered, refused, a broken tool call),
        streamed when the request streams."""
        rendered, ex = answer.rendered, answer.rec.exchange
        stream = (
            rendered.content_type in ("text/event-stream", "application/x-ndjson")
            or len(rendered.chunks) > 1
        )
        headers: Headers = [
            ("content-type", rendered.content_type),
            ("x-looptap-replay", f"seq={ex.seq}"),
        ]
        if answer.fault is not None:
            headers.append(("x-looptap-fault", answer.fault.describe()))
        if stream:
            headers.append(("transfer-encoding", "chunked"))
        else:
            headers.append(("content-length", str(sum(len(c) for c in rendered.chunks))))
        sent: list[tuple[float | None, bytes]] = []
        logged = self.log(req, 200, headers, sent, origin_of=answer.rec)
        if answer.note is not None:
            logged.notes.append(answer.note)
        out = await self.sender.send_head(writer, 200, headers, req=req, logged=logged)
        pieces = [(None, chunk, chunk) for chunk in rendered.chunks]
        await self._paced(writer, out.data, pieces, None, _Clock(self.speed, t0), logged, sent)
        writer.write(out.end())
        await self.sender.drain(writer)
        return True

    async def _play(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Play,
        clock: _Clock,
    ) -> bool:
        rec, fault = answer.rec, answer.fault
        ex = rec.exchange
        if ex.status is None:  # recorded as a transport failure before any response
            await clock.until(ex.duration)
            why = ex.transport_error or "no response recorded"
            return self._reset(req, writer, why, rec, played=True)
        headers = self._play_headers(rec, fault)
        chunks = self._play_chunks(req, rec, fault)
        chunked = _chunked(ex, chunks, fault)
        headers.append(
            ("transfer-encoding", "chunked")
            if chunked
            else ("content-length", str(sum(len(c) for _, c in chunks)))
        )
        await clock.until(ex.ttfb)
        sent: list[tuple[float | None, bytes]] = []
        played = fault is None
        logged = self.log(req, ex.status, headers, sent, ex.transport_error, rec, played)
        if answer.note is not None:
            logged.notes.append(answer.note)
        out = await self.sender.send_head(writer, ex.status, headers, req=req, logged=logged)
        ended = fault is not None and fault.kind == "error_event" and len(chunks) > 1
        if not chunked and not chunks:
            chunks = [(None, b"")]  # an empty body is written (and kept) as one piece too
        pieces = [(offset, chunk, chunk) for offset, chunk in chunks]
        if not await self._paced(writer, out.data, pieces, fault, clock, logged, sent):
            return False
        if ex.transport_error and not ended:  # the recording broke off here: so does the replay
            writer.transport.abort()
            return False
        writer.write(out.end())
        await self.sender.drain(writer)
        return True

    def _play_headers(self, rec: Recorded, fault: Fault | None) -> Headers:
        """The recorded response headers as replayed: hop-by-hop ones dropped, an error's retry
        advice as the adapter gives it, the replay and fault labels added."""
        ex = rec.exchange
        assert ex.status is not None
        headers: Headers = [(k, v) for k, v in ex.response_headers if k.lower() not in NOT_REPLAYED]
        if ex.status >= 400:
            adapter = rec.key.adapter or Provider()
            retry = self.matcher.retried(rec)  # the recording shows the SDK retrying this error
            headers += adapter.replay.error_headers(retry=retry)
            if retry:
                headers += [("retry-after", "0"), ("retry-after-ms", "0")]
            else:
                headers += [
                    (k, v)
                    for k, v in ex.response_headers
                    if k.lower() in ("retry-after", "retry-after-ms")
                ]
        headers.append(("x-looptap-replay", f"seq={ex.seq}"))
        if fault is not None:
            headers.append(("x-looptap-fault", fault.describe()))
        return headers

    def _play_chunks(
        self, req: Request, rec: Recorded, fault: Fault | None
    ) -> list[tuple[float | None, bytes]]:
        """The recorded body's pieces as replay sends them: echoing what the request carries
        (``Provider.replay.chunks``), cut event by event when a stream fault needs it, an error
        event halfway."""
        ex = rec.exchange
        assert ex.status is not None
        chunks = [(t, c) for t, c in ex.response_chunks if c]
        ctype = (ex.response_header("content-type") or "").lower()
        if rec.key.adapter is not None and rec.key.is_json:
            chunks = rec.key.adapter.replay.chunks(chunks, ctype, rec.key.raw, req.body)
        if fault is not None and fault.kind in _STREAM_FAULTS and ex.status < 400:
            chunks = _faulted(chunks, ctype, fault)
        if fault is not None and fault.kind == "error_event" and len(chunks) > 1:
            # the stream ends after an error event halfway, without its terminal event
            half = len(chunks) // 2
            event = (rec.key.adapter or Provider()).replay.fault_event(fault.kind)
            chunks = [*chunks[:half], (chunks[half - 1][0], event)]
        return chunks

    # -- over a WebSocket session ---------------------------------------------------------------
    async def turn(
        self,
        turn: Request,
        answer: Played,
        writer: asyncio.StreamWriter,
        adapter: Provider,
        played: Callable[[bytes], None] | None = None,
    ) -> bool:
        """Answer one turn of a WebSocket session, each event a message paced as recorded (an
        error status: its body as one message); ``played`` is given the last message of a
        recorded answer. ``False`` when the connection was closed."""
        if isinstance(answer, Missed):
            await self.ws_miss(turn, writer, adapter, answer.miss)
            return True
        if isinstance(answer, Refused):
            await self.ws_refused(turn, writer, answer)
            return True
        if isinstance(answer, Reset):
            return self._reset(turn, writer, "looptap fault: reset (connection closed)", answer.rec)
        rec, fault = answer.rec, answer.fault
        await _first_byte(fault)
        spoken = _spoken(answer, adapter)
        sent: list[tuple[float | None, bytes]] = []
        logged = self.log(turn, spoken.status, spoken.headers, sent, None, rec, fault is None)
        logged.notes.append("websocket replay")
        if isinstance(answer, Play) and answer.note is not None:
            logged.notes.append(answer.note)
        if played is not None and isinstance(answer, Play) and spoken.messages:
            played(spoken.messages[-1][2])
        # kept as recorded: an SSE event per message (an error status: the message as its body)
        error = spoken.status is not None and spoken.status >= 400
        pieces = [(o, p if error else _sse(name, p), p) for o, name, p in spoken.messages]
        clock = _Clock(self.speed, asyncio.get_running_loop().time())
        frame = partial(net.frame, net.TEXT)
        return await self._paced(
            writer, frame, pieces, spoken.fault, clock, logged, sent, _cut_messages
        )

    async def ws_miss(
        self,
        turn: Request,
        writer: asyncio.StreamWriter,
        adapter: Provider,
        miss: Miss,
        status: int | None = None,
    ) -> None:
        """A turn no recorded one answers (or, with ``status``, one that could not be sent live):
        the API's error message; the session goes on."""
        status = status or MISS_STATUS
        code = MISS_CODE if status == MISS_STATUS else "looptap_upstream_error"
        body = _ws_error(status, adapter.replay.error(status, str(miss), code))
        # The served turn carries the marks an HTTP miss sends; over the WebSocket only the
        # message goes.
        marks = _miss_marks(miss) if status == MISS_STATUS else []
        self.log(turn, status, [("content-type", "application/json"), *marks], [(0.0, body)])
        writer.write(net.frame(net.TEXT, body))
        await self.sender.drain(writer)

    async def ws_refused(
        self, turn: Request, writer: asyncio.StreamWriter, refused: Refused
    ) -> None:
        """A turn a fork does not send past its limit of live requests: the API's error message;
        the session goes on."""
        body = _ws_error(refused.status, refused.error)
        self.log(turn, refused.status, [("content-type", "application/json")], [(0.0, body)])
        writer.write(net.frame(net.TEXT, body))
        await self.sender.drain(writer)

    async def _paced(
        self,
        writer: asyncio.StreamWriter,
        wire: Callable[[bytes], bytes],
        pieces: Sequence[Piece],
        fault: Fault | None,
        clock: _Clock,
        logged: Exchange,
        sent: list[tuple[float | None, bytes]],
        cut_note: Callable[[int], str] = "looptap fault: stream cut after {} chunks".format,
    ) -> bool:
        """Send ``pieces`` at their recorded pace, each framed by ``wire`` and kept in ``sent``
        (``logged``'s chunks): a stall halfway, a cut closing the connection at its piece
        (``False``, ``cut_note`` of it as ``logged``'s transport error)."""
        half, cut = max(1, len(pieces) // 2), None
        if fault is not None and fault.kind == "stream_cut":
            # a stream of N pieces or fewer loses its last one: a cut always cuts
            cut = min(int(fault.arg or 0), max(0, len(pieces) - 1))
        for i, (offset, shown, payload) in enumerate(pieces):
            if fault is not None and i == half and fault.kind == "stall":
                await asyncio.sleep(fault.arg or 0.0)
            if cut is not None and i >= cut:
                logged.transport_error = cut_note(cut)
                writer.transport.abort()
                return False
            await clock.until(offset)
            sent.append((clock.now(), shown))
            writer.write(wire(payload))
            await self.sender.drain(writer)
        return True


def _spoken(answer: Play | Rewritten | FaultStatus, adapter: Provider) -> _Turn:
    """A recorded turn as WebSocket messages, as the decided answer changes them."""

    ex = answer.rec.exchange
    status = ex.status
    messages: list[tuple[float | None, str | None, bytes]]
    if status is not None and status >= 400:
        messages = [(ex.ttfb, None, b"".join(c for _, c in ex.response_chunks))]
    else:
        framed = frame_stream(ex.response_chunks, ex.response_header("content-type"))
        messages = [
            (e.offset, e.event, e.data.encode("utf-8", "surrogateescape")) for e in framed.events
        ]
    headers: Headers = [(k, v) for k, v in ex.response_headers if k.lower() not in NOT_REPLAYED]
    headers.append(("x-looptap-replay", f"seq={ex.seq}"))
    fault = answer.fault
    if fault is None:
        return _Turn(status, messages, headers)
    headers.append(("x-looptap-fault", fault.describe()))
    if isinstance(answer, FaultStatus):
        return _Turn(answer.status, [(0.0, None, _ws_error(answer.status, answer.body))], headers)
    if isinstance(answer, Rewritten):
        messages = [(None, None, _sse_data(ev)) for ev in answer.rendered.chunks]
        return _Turn(status, messages, headers)
    if fault.kind == "error_event":
        half = max(1, len(messages) // 2)
        data = _sse_data(adapter.replay.fault_event(fault.kind))
        error = (messages[half - 1][0] if messages else None, "error", data)
        return _Turn(status, [*messages[:half], error], headers)
    stream_fault = fault.kind in ("stream_cut", "stall")
    return _Turn(status, messages, headers, fault if stream_fault else None)
