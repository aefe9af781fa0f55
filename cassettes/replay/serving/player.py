"""The replay server's player: a recorded answer spoken as it was recorded (headers, status, a
stream chunk for chunk at the recorded pace or scaled) or as a fault changes it (a status in the
API's error shape, a rewritten answer, a stream stalled, cut or ended by an error event).

It writes through the server's :class:`~cassettes.replay.serving.sender.Sender` and keeps what it
sent in its :class:`~cassettes.replay.serving.sender.ServedLog`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import orjson

from cassettes.matching import Matcher, Recorded
from cassettes.net import Request, Watchdog
from cassettes.providers import Provider
from cassettes.replay.serving.faults import Fault
from cassettes.replay.serving.plan import NOT_REPLAYED, FaultStatus, Play, Rewritten
from cassettes.replay.serving.sender import Sender, ServedLog
from cassettes.wire.exchange import Exchange, Headers

if TYPE_CHECKING:
    from cassettes.net import Answer

__all__ = ["Player"]

_SSE_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def _events(body: bytes, ctype: str) -> list[bytes]:
    """A streamed body cut into its events (server-sent events or NDJSON lines), delimiters kept."""
    if "ndjson" in ctype:
        return body.splitlines(keepends=True)
    if "event-stream" not in ctype:
        return [body] if body else []
    out, start = [], 0
    for m in _SSE_EVENT_END.finditer(body):
        out.append(body[start : m.end()])
        start = m.end()
    if start < len(body):
        out.append(body[start:])
    return out


def _chunked(ex: Exchange, chunks: list[tuple[float | None, bytes]], fault: Fault | None) -> bool:
    """Whether a recorded answer is replayed chunked (a stream, several pieces, a stream fault)."""
    ctype = (ex.response_header("content-type") or "").lower()
    cutting = fault is not None and fault.kind in ("stream_cut", "error_event", "stall")
    return (
        cutting
        or len(chunks) > 1
        or "event-stream" in ctype
        or "ndjson" in ctype
        or (ex.response_header("transfer-encoding") or "").lower() == "chunked"
    )


class Player:
    """Plays recorded answers (and the faults that change them) at ``speed`` (0: instant; see
    :func:`~cassettes.replay.serving.server.parse_pace`)."""

    def __init__(self, matcher: Matcher, sender: Sender, log: ServedLog, speed: float) -> None:
        self.matcher = matcher
        self.sender = sender
        self.log = log
        self.speed = speed

    async def fault_status(
        self, req: Request, writer: asyncio.StreamWriter, answer: FaultStatus, dog: Watchdog | None
    ) -> bool:
        body = orjson.dumps(answer.body)
        headers: Headers = [
            ("content-type", "application/json"),
            *answer.headers,
            ("x-looptap-fault", answer.fault.describe()),
            ("content-length", str(len(body))),
        ]
        logged = self.log(
            req,
            answer.status,
            headers,
            [(0.0, body)],
            f"fault {answer.fault.text}",
            origin_of=answer.rec,
        )
        await self.sender.send_whole(
            writer, answer.status, headers, body, dog, req=req, logged=logged
        )
        return True

    async def rewritten(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Rewritten,
        t0: float,
        dog: Watchdog | None,
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
            ("x-looptap-fault", answer.fault.describe()),
        ]
        if stream:
            headers.append(("transfer-encoding", "chunked"))
        else:
            headers.append(("content-length", str(sum(len(c) for c in rendered.chunks))))
        sent: list[tuple[float | None, bytes]] = []
        logged = self.log(
            req, 200, headers, sent, f"fault {answer.fault.text}", origin_of=answer.rec
        )
        out = await self.sender.send_head(writer, 200, headers, dog, req=req, logged=logged)
        loop = asyncio.get_running_loop()
        for chunk in rendered.chunks:
            sent.append((loop.time() - t0, chunk))
            writer.write(out.data(chunk))
        writer.write(out.end())
        await self.sender.drain(writer, dog)
        return True

    def _recorded_retry(self, rec: Recorded) -> bool:
        """The recording shows the SDK retrying this error: the same request recorded again
        later."""
        return self.matcher.retried(rec)

    async def play(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Play,
        t0: float,
        dog: Watchdog | None = None,
    ) -> bool:
        rec, fault = answer.rec, answer.fault
        ex = rec.exchange
        loop = asyncio.get_running_loop()
        speed = self.speed

        async def until(offset: float | None) -> None:
            if speed and offset is not None:
                delay = t0 + offset / speed - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)

        if ex.status is None:  # recorded as a transport failure before any response
            await until(ex.duration)
            self.log(req, None, [], [], rec, ex.transport_error or "no response recorded")
            writer.transport.abort()
            return False
        headers = self._play_headers(rec, fault)
        chunks = self._play_chunks(req, rec, fault)
        chunked = _chunked(ex, chunks, fault)
        headers.append(
            ("transfer-encoding", "chunked")
            if chunked
            else ("content-length", str(sum(len(c) for _, c in chunks)))
        )
        await until(ex.ttfb)
        sent: list[tuple[float | None, bytes]] = []
        logged = self.log(
            req,
            ex.status,
            headers,
            sent,
            f"fault {fault.text}" if fault is not None else rec,
            ex.transport_error,
            origin_of=rec,
        )
        if answer.note is not None:
            logged.notes.append(answer.note)
        out = await self.sender.send_head(writer, ex.status, headers, dog, req=req, logged=logged)
        if not chunked:
            await until(chunks[0][0] if chunks else None)
            body = b"".join(c for _, c in chunks)
            sent.append((loop.time() - t0, body))
            writer.write(out.data(body))
            await self.sender.drain(writer, dog)
        elif not await self._send_chunks(
            writer, out, rec, chunks, fault, until, sent, logged, lambda: loop.time() - t0, dog
        ):
            # the stream ended after the error event
            return fault is not None and fault.kind == "error_event"
        if ex.transport_error:  # the recording broke off here: so does the replay
            writer.transport.abort()
            return False
        writer.write(out.end())
        await self.sender.drain(writer, dog)
        return True

    def _play_headers(self, rec: Recorded, fault: Fault | None) -> Headers:
        """The recorded response headers as replayed: hop-by-hop ones dropped, an error's retry
        advice as the adapter gives it, the replay and fault labels added."""
        ex = rec.exchange
        assert ex.status is not None
        headers: Headers = [(k, v) for k, v in ex.response_headers if k.lower() not in NOT_REPLAYED]
        if ex.status >= 400:
            adapter = rec.key.adapter or Provider()
            retry = self._recorded_retry(rec)
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
        (``Provider.replay.chunks``), and cut event by event when a stream fault needs it."""
        ex = rec.exchange
        assert ex.status is not None
        chunks = [(t, c) for t, c in ex.response_chunks if c]
        ctype = (ex.response_header("content-type") or "").lower()
        if rec.key.adapter is not None and rec.key.is_json:
            chunks = rec.key.adapter.replay.chunks(chunks, ctype, rec.key.raw, req.body)
        if (
            fault is None
            or fault.kind not in ("stream_cut", "error_event", "stall")
            or ex.status >= 400
        ):
            return chunks
        events = _events(b"".join(c for _, c in chunks), ctype)
        # a stream recorded in few pieces (vcrpy keeps one): fault it event by event
        if len(events) > len(chunks):
            last = chunks[-1][0] if chunks else None
            return [(last, e) for e in events]
        if len(chunks) == 1 and fault.kind != "stall":
            # one recorded piece (a JSON answer): cut it, or send the error halfway
            body = chunks[0][1]
            return [(chunks[0][0], body[: len(body) // 2]), (chunks[0][0], body[len(body) // 2 :])]
        return chunks

    async def _send_chunks(
        self,
        writer: asyncio.StreamWriter,
        out: Answer,
        rec: Recorded,
        chunks: list[tuple[float | None, bytes]],
        fault: Fault | None,
        until: Callable[[float | None], Awaitable[None]],
        sent: list[tuple[float | None, bytes]],
        logged: Exchange,
        now: Callable[[], float],
        dog: Watchdog | None = None,
    ) -> bool:
        """Send a chunked body at its recorded pace, a stream fault acting halfway or at its cut;
        ``False`` when the stream was ended early (cut, or an error event as its last word)."""
        half = max(1, len(chunks) // 2)
        cut = int(fault.arg or 0) if fault is not None and fault.kind == "stream_cut" else None
        if cut is not None:  # a stream of N events or fewer loses its last one: a cut always cuts
            cut = min(cut, len(chunks) - 1)
        for i, (offset, chunk) in enumerate(chunks):
            if fault is not None and i == half and fault.kind == "stall":
                await asyncio.sleep(fault.arg or 0.0)
            if fault is not None and i == half and fault.kind == "error_event":
                event = (rec.key.adapter or Provider()).replay.fault_event(fault.kind)
                sent.append((now(), event))
                writer.write(out.data(event) + out.end())
                await self.sender.drain(writer, dog)
                return False  # the stream ends after the error, without its terminal event
            if cut is not None and i >= cut:
                logged.transport_error = f"looptap fault: stream cut after {cut} chunks"
                writer.transport.abort()
                return False
            await until(offset)
            sent.append((now(), chunk))
            writer.write(out.data(chunk))
            await self.sender.drain(writer, dog)
        return True
