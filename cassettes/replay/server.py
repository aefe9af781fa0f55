"""The replay server: a loopback HTTP/1.1 server that answers an agent from a cassette.

Any agent uses it as its base URL (one port serves every API family; requests are routed by what
they are, not where they go). Recorded responses go out as they were recorded: headers, status,
and streams chunk for chunk (``Transfer-Encoding: chunked``, one HTTP chunk per recorded chunk,
flushed each), instantly, at the recorded pace or scaled (``x2`` is twice as fast).

**Fails closed.** A request no recorded round trip answers, or one that arrives after the cassette
is exhausted, never goes anywhere else: it gets an error in the API's own error shape (so the SDK
raises it with the message intact) saying which recorded turn is closest, what differs (JSON
paths) and which layer that implicates, and the miss is kept for the test that ran the agent.
``CONNECT`` (an agent that ignores the base URL and uses a proxy) is refused.

**Errors once.** A recorded error response is played once, with the header that stops the SDK's
retries, unless the recording itself shows the SDK retrying (the same request recorded again
next): then the SDK is told to retry at once, and its retry gets the next recording.

It runs inside an event loop (``await start_async()``) or in a thread of its own (``start()`` /
``stop()``, or as a context manager) for pytest.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import orjson

from cassettes import bounds, providers
from cassettes.providers import REVERSE_UPSTREAMS, Provider, Rendered
from cassettes.replay.background import BackgroundServer
from cassettes.replay.faults import REWRITE_KINDS, STATUS_KINDS, Fault, FaultPlan, rewrite_answer
from cassettes.replay.http1 import BadRequest, Request, read_request, refuse
from cassettes.replay.jsondiff import clip
from cassettes.replay.matcher import Matcher, Miss, Recorded, request_key
from cassettes.wire.decoding import decode_chunks
from cassettes.wire.exchange import Exchange, Headers, header

if TYPE_CHECKING:
    from cassettes.replay.wsframes import MessageReader

__all__ = ["IDLE_TIMEOUT", "MISS_CODE", "MISS_STATUS", "READ_TIMEOUT", "RETAIN_BODIES", "ReplayServer", "parse_pace", "replay_env"]

#: Seconds a connection may wait between requests (or WebSocket frames) before it is closed.
IDLE_TIMEOUT = 120.0
#: Seconds a request head may take to arrive, and the longest a request body may pause.
READ_TIMEOUT = 30.0
#: Bytes of request bodies the server keeps in :attr:`ReplayServer.served` beyond those equal
#: to a recorded request (which are shared with the recording, free): past it, a served
#: exchange keeps the body's size in a note instead of the body.
RETAIN_BODIES = 64 << 20

#: Status and error code of the answer to a request the cassette cannot answer.
MISS_STATUS = 400
MISS_CODE = "looptap_replay_miss"

#: Recorded response headers that are not replayed: framing and connection (the server frames
#: the body itself), encodings (bodies are stored decoded), and per-connection values.
_DROP = frozenset(
    {
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "date",
        "set-cookie",
        "alt-svc",
        "strict-transport-security",
        "x-should-retry",
        "retry-after",
        "retry-after-ms",
    }
)

#: Where a forwarded request goes when the cassette has no answer (``new_episodes`` recording):
#: the live request (method, target, body) → base URL of a recording proxy, or ``None``.
Fallback = Callable[[str, str, bytes], str | None]


def parse_pace(value: str | float) -> float:
    """``instant`` → 0, ``recorded`` → 1, ``x2``/``2x``/``2`` → 2 (times faster than recorded)."""
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("pace must be >= 0")
        return float(value)
    v = value.strip().lower()
    if v == "instant":
        return 0.0
    if v == "recorded":
        return 1.0
    try:
        speed = float(v.strip("x"))
    except ValueError:
        raise ValueError(f"pace must be 'recorded', 'instant' or xN (a speed factor), not {value!r}") from None
    if speed <= 0:
        raise ValueError(f"pace factor must be positive, not {value!r}")
    return speed


def replay_env(url: str) -> dict[str, str]:
    """The environment variables SDKs read their base URLs from, all pointing at ``url``."""
    env: dict[str, str] = {}
    for _name, (_upstream, variables, suffix) in REVERSE_UPSTREAMS.items():
        for var in variables:
            env[var] = url + suffix
    return env


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


def _sse_data(event: bytes) -> bytes:
    """The payload of one server-sent event (its ``data:`` line), as sent over a WebSocket."""
    return b"".join(ln[6:] for ln in event.splitlines() if ln.startswith(b"data: "))


#: Why a rewriting fault could not be rendered for an API (it has no way to say it).
_NO_FORM = {
    "content_filter": "this API has no content-filter finish to send",
    "refusal": "this API has no refusal field or stop reason to send",
    "bad_arguments": "this API sends tool arguments as a JSON object here, never as text that could fail to parse",
}


class ReplayServer(BackgroundServer):
    """Serve a cassette on ``host:port`` (0: a free port). See the module docstring."""

    label = "the replay server"
    #: The largest request head (and chunk-size line) read; a larger one is answered 431.
    read_limit = 1 << 20
    #: The largest request body read; a larger one is answered 413.
    max_body = 256 << 20

    def __init__(
        self,
        cassette: str | Path | Sequence[Exchange],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        pace: str | float = "instant",
        strict: bool = False,
        fallback: Fallback | None = None,
        faults: FaultPlan | None = None,
        idle_timeout: float | None = IDLE_TIMEOUT,
        read_timeout: float | None = READ_TIMEOUT,
        retain_bodies: int = RETAIN_BODIES,
    ) -> None:
        if isinstance(cassette, (str, Path)):
            # Any format a run is opened from (a looptap cassette, vcrpy, a mitmproxy flow file),
            # held in memory: every recorded round trip is a candidate answer.
            from cassettes.interop.run import open_run

            run = open_run(cassette, whole=True)
            self.source = str(cassette)
            self.problems = run.problems
            exchanges: Sequence[Exchange] = list(run.exchanges)
        else:
            self.source = "<exchanges>"
            self.problems = []
            exchanges = cassette
        for i, ex in enumerate(exchanges):
            if ex.seq is None:
                ex.seq = i
        self.host = host
        self.port = port
        self.speed = parse_pace(pace)
        self.matcher = Matcher(exchanges, strict=strict)
        self.fallback = fallback
        #: Faults to inject (``--fault``); ``faults.fired`` lists what was injected.
        self.faults = faults
        if faults is not None and faults.needs_turns:
            self.matcher.label()
        #: Every request answered, as an exchange: the live request and what was sent back.
        self.served: list[Exchange] = []
        #: Per served exchange: the recorded round trip that answered it, or the miss.
        self.answers: list[Recorded | Miss | str] = []
        #: Failures of the server itself (answered with a 500); empty unless looptap has a bug.
        self.internal_errors: list[str] = []
        #: Requests that could not be read, answered 400 (408, 413 …) and closed: how many, and
        #: the first few reasons.
        self.refused = 0
        self.refusals: list[str] = []
        #: ``None``: no limit (see :data:`IDLE_TIMEOUT`, :data:`READ_TIMEOUT`).
        self.idle_timeout = idle_timeout
        self.read_timeout = read_timeout
        #: What is left of :data:`RETAIN_BODIES` for request bodies kept in :attr:`served`.
        self.retain_left = retain_bodies
        #: Connections waiting for their next request (closed first when out of descriptors).
        self._idle: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._lock = threading.Lock()
        self._init_background()

    # -- public view ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return replay_env(self.url)

    @property
    def misses(self) -> list[Miss]:
        return list(self.matcher.misses)

    def unplayed(self) -> list[Recorded]:
        return self.matcher.unplayed()

    def report_lines(self) -> list[str]:
        rec = self.matcher.recorded
        played = [r for r in rec if r.plays]
        out = [f"looptap replay {self.source}: played {len(played)} of {len(rec)} recorded round trips, {len(self.matcher.misses)} unmatched requests"]
        if self.internal_errors:
            out[0] += f", {len(self.internal_errors)} internal errors"
        if self.refused:
            out[0] += f", {self.refused} unreadable requests refused"
        if self.accept_pauses:
            out[0] += f", accepting paused {self.accept_pauses} times (out of file descriptors)"
        for r in self.unplayed():
            out.append(f"  unplayed: {r.label}: {r.key.method} {clip(r.key.target)}")
        for m in self.matcher.misses:
            out.append(f"  unmatched: {m.method} {clip(m.target)}: {clip(m.reason)}")
        for e in self.internal_errors[:20]:
            out.append(f"  internal error (a looptap bug, answered 500): {clip(e)}")
        for why in self.refusals:
            out.append(f"  refused: {why}")
        return out

    # -- HTTP/1.1 ------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            while True:
                try:
                    self._idle[task] = writer
                    req = await self._read_request(reader, writer, lambda: self._idle.pop(task, None))
                except BadRequest as exc:
                    self.refused += 1
                    if len(self.refusals) < 20:
                        self.refusals.append(f"{exc.status}: {clip(str(exc))}")
                    await refuse(writer, exc)
                    break
                if req is None:
                    break
                try:
                    if (req.header("upgrade") or "").lower() == "websocket":
                        await self._websocket(req, reader, writer)
                        break
                    keep = await self._respond(req, writer)
                except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                    raise
                except Exception as exc:  # a bug here must reach the test as an error, not a hang
                    self.internal_errors.append(f"{req.method} {clip(req.target)}: {type(exc).__name__}: {clip(str(exc))}")
                    await self._send_internal_error(writer, exc, websocket=(req.header("upgrade") or "").lower() == "websocket")
                    break
                if not keep or (req.header("connection") or "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, ssl.SSLError, asyncio.CancelledError):
            pass
        finally:
            self._conns.discard(task)
            self._idle.pop(task, None)
            with contextlib.suppress(Exception):
                writer.close()

    def _shed_idle(self) -> int:
        idle = list(self._idle.values())
        self._idle.clear()
        for w in idle:
            with contextlib.suppress(Exception):
                w.close()
        return len(idle)

    # -- WebSocket sessions (Responses over a WebSocket) ------------------------------------------
    async def _websocket(self, req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer a WebSocket session from the recorded turns: each message that opens a turn
        (its API's ``ws_turns``) is matched like an HTTP request to the session's path, and the
        recorded turn's events are sent back one message each, paced as recorded; a miss gets the
        API's error message (fail-closed), and the session goes on."""
        from cassettes.replay import wsframes as ws

        key = req.header("sec-websocket-key")
        adapter = providers.detect("POST", urlsplit(req.target), {"input": ""})
        rules = adapter.ws_turns() if adapter is not None else None
        if req.method != "GET" or not key or adapter is None or rules is None or rules.gathers is not None:
            msg = f"looptap replay: no WebSocket session is replayed at {req.target}".encode()
            self._log(req, 400, [], [(0.0, msg)], "refused WebSocket")
            await self._send_head(writer, 400, [("content-type", "text/plain"), ("content-length", str(len(msg))), ("connection", "close")])
            writer.write(msg)
            await writer.drain()
            return
        await self._send_head(writer, 101, [("upgrade", "websocket"), ("connection", "Upgrade"), ("sec-websocket-accept", ws.accept_key(key))])
        incoming = ws.MessageReader(reader)
        while True:
            data = await self._ws_next(incoming, writer, self.idle_timeout)
            if data is None:
                return  # closed, or broken by the client
            try:
                opened = rules.opens(bounds.loads(data))
            except (orjson.JSONDecodeError, ValueError):
                opened = False
            if opened and not await self._ws_turn(Request("POST", req.target, req.headers, data), writer, adapter):
                return  # a fault closed the connection
            # (a session message opens no turn: nothing is answered for it)

    @staticmethod
    async def _ws_next(incoming: MessageReader, writer: asyncio.StreamWriter, idle: float | None) -> bytes | None:
        """The next data message, answering control frames on the way; ``None`` when the
        session ends (a close; a protocol error answered with its close code, 1002 mostly; no
        frame for ``idle`` seconds, answered 1001)."""
        from cassettes.replay import wsframes as ws

        while True:
            try:
                async with asyncio.timeout(idle):
                    op, data = await incoming.next()
            except ws.WsProtocolError as exc:
                writer.write(ws.frame(ws.CLOSE, struct.pack("!H", exc.code) + str(exc).encode()[:120]))
                await writer.drain()
                return None
            except TimeoutError:
                writer.write(ws.frame(ws.CLOSE, struct.pack("!H", 1001) + f"no frame for {idle:g} s".encode()))
                await writer.drain()
                return None
            if op == ws.PING:
                writer.write(ws.frame(ws.PONG, data))
                await writer.drain()
            elif op == ws.CLOSE:
                writer.write(ws.frame(ws.CLOSE, data[:2]))
                await writer.drain()
                return None
            elif op != ws.PONG:
                return bytes(data)

    async def _ws_turn(self, turn: Request, writer: asyncio.StreamWriter, adapter: Provider) -> bool:
        """Answer one turn of a WebSocket session; ``False`` when the connection was closed."""
        from cassettes.replay import wsframes as ws

        answer = self.matcher.match("POST", turn.target, turn.headers, turn.body)
        if isinstance(answer, Miss):
            body = orjson.dumps({"type": "error", "status": MISS_STATUS, **adapter.replay_error(MISS_STATUS, str(answer), MISS_CODE)})
            self._log(turn, MISS_STATUS, [("content-type", "application/json")], [(0.0, body)], answer)
            writer.write(ws.frame(ws.TEXT, body))
            await writer.drain()
            return True
        fault = self.faults.decide(answer) if self.faults is not None else None
        if fault is not None and fault.kind == "reset":
            answer.plays -= 1
            self._log(turn, None, [], [], f"fault {fault.text}", "looptap fault: reset (connection closed)", origin_of=answer)
            writer.transport.abort()
            return False
        if fault is not None and fault.kind == "slow_first_byte":
            await asyncio.sleep(fault.arg or 0.0)
        status, messages, headers, cut = self._ws_plan(turn, answer, adapter, fault)
        return await self._ws_send(turn, writer, answer, fault, status, messages, headers, cut)

    def _ws_plan(self, turn: Request, answer: Recorded, adapter: Provider, fault: Fault | None) -> tuple[int | None, list[tuple[float | None, str | None, bytes]], Headers, int | None]:
        """The recorded turn as messages (offset, event name, payload) with its status, headers
        and where a stream cut falls, as ``fault`` changes them: over a WebSocket the API's
        failures are messages — a status fault is its error message with that status, a stream
        fault acts on the turn's event messages."""
        from cassettes.wire.framing import frame as frame_stream

        ex = answer.exchange
        status = ex.status
        messages: list[tuple[float | None, str | None, bytes]]
        if status is not None and status >= 400:
            messages = [(ex.ttfb, None, b"".join(c for _, c in ex.response_chunks))]
        else:
            framed = frame_stream(ex.response_chunks, ex.response_header("content-type"))
            messages = [(e.offset, e.event, e.data.encode("utf-8", "surrogateescape")) for e in framed.events]
        headers: Headers = [(k, v) for k, v in ex.response_headers if k.lower() not in _DROP]
        headers.append(("x-looptap-replay", f"seq={ex.seq}"))
        if fault is None:
            return status, messages, headers, None
        headers.append(("x-looptap-fault", fault.describe()))
        cut: int | None = None
        if fault.kind in STATUS_KINDS:
            answer.plays -= 1
            code, obj = adapter.fault_bodies.get(fault.kind) or Provider.fault_bodies[fault.kind]
            status = code
            messages = [(0.0, None, orjson.dumps({"type": "error", "status": code, **(obj if isinstance(obj, dict) else {"error": obj})}))]
        elif fault.kind in REWRITE_KINDS:
            rendered = self._rewritten(turn, answer, fault, adapter, stream=True)
            if isinstance(rendered, str):
                headers.pop()  # not injected: served as recorded (the plan says why)
            else:
                answer.plays -= 1
                messages = [(None, None, _sse_data(ev)) for ev in rendered.chunks]
        elif fault.kind == "stream_cut":
            answer.plays -= 1
            cut = min(int(fault.arg or 0), max(0, len(messages) - 1))
        elif fault.kind == "error_event":
            answer.plays -= 1
            half = max(1, len(messages) // 2)
            data = _sse_data(adapter.fault_event(fault.kind))
            messages = [*messages[:half], (messages[half - 1][0] if messages else None, "error", data)]
        return status, messages, headers, cut

    async def _ws_send(
        self,
        turn: Request,
        writer: asyncio.StreamWriter,
        answer: Recorded,
        fault: Fault | None,
        status: int | None,
        messages: list[tuple[float | None, str | None, bytes]],
        headers: Headers,
        cut: int | None,
    ) -> bool:
        """Send a turn's messages at their recorded pace (a stall halfway, a cut closing the
        connection: ``False``), logged as the SSE stream they were recorded as."""
        from cassettes.replay import wsframes as ws

        loop = asyncio.get_running_loop()
        t0 = loop.time()
        error = status is not None and status >= 400
        sent: list[tuple[float | None, bytes]] = []
        logged_ex = self._log(turn, status, headers, sent, f"fault {fault.text}" if fault is not None else answer, origin_of=answer)
        logged_ex.notes.append("websocket replay")
        half = max(1, len(messages) // 2)
        for i, (offset, name, payload) in enumerate(messages):
            if cut is not None and i >= cut:
                logged_ex.transport_error = f"looptap fault: stream cut after {cut} messages"
                writer.transport.abort()
                return False
            if fault is not None and fault.kind == "stall" and i == half:
                await asyncio.sleep(fault.arg or 0.0)
            if self.speed and offset is not None:
                delay = t0 + offset / self.speed - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            # logged as recorded: an SSE event per message (the error message as its body)
            logged = payload if error else (b"event: %s\n" % name.encode() if name else b"") + b"data: " + payload + b"\n\n"
            sent.append((loop.time() - t0, logged))
            writer.write(ws.frame(ws.TEXT, payload))
            await writer.drain()
        return True

    def _rewritten(self, req: Request, rec: Recorded, fault: Fault, adapter: Provider, stream: bool | None = None) -> Rendered | str:
        """The recorded answer as a rewriting ``fault`` changes it, rendered in the API's format
        for ``req`` (streamed when ``stream``, else as the request asks); or why it cannot be made
        (the plan notes it, and the recording is served instead)."""
        from cassettes.parsing.roundtrip import parse_exchange

        ex = rec.exchange
        url = urlsplit(req.target)
        try:
            body = bounds.loads(req.body) if req.body else None
        except (orjson.JSONDecodeError, ValueError):
            body = None
        why = "the recorded answer is not a model's answer"
        rt = parse_exchange(ex)
        if ex.status is not None and 200 <= ex.status < 300 and rt.response is not None and rt.response.error is None:
            try:
                request = adapter.parse_request(body, url) if isinstance(body, dict) else None
            except Exception:  # a request the adapter cannot read: only the tool-aware faults need it
                request = None
            new = rewrite_answer(fault, rt.response, request)
            if isinstance(new, str):
                why = new
            else:
                rendered = adapter.render_answer(new, adapter.is_stream(url, body) if stream is None else stream, url, body)
                if rendered is not None:
                    return rendered
                why = _NO_FORM.get(fault.kind, "this API has no form for that answer here")
        if self.faults is not None:
            self.faults.skip(why)
        return why

    async def _read_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, started: Callable[[], object] | None = None) -> Request | None:
        req = await read_request(reader, writer, max_body=self.max_body, idle_timeout=self.idle_timeout, read_timeout=self.read_timeout, started=started)
        if req is not None:
            enc = req.header("content-encoding")
            if enc and req.body:
                try:
                    req.body = b"".join(c for _, c in decode_chunks([(None, req.body)], enc).chunks)
                except (ValueError, MemoryError) as exc:
                    raise BadRequest(f"the request body could not be decoded ({clip(enc, 40)}): {clip(str(exc), 200)}") from None
        return req

    async def _send_head(self, writer: asyncio.StreamWriter, status: int, headers: Headers) -> None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        head = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "replace"))
        await writer.drain()

    def _log(self, req: Request, status: int | None, headers: Headers, chunks: list[tuple[float | None, bytes]], answer: Recorded | Miss | str, transport_error: str | None = None, origin_of: Recorded | None = None) -> Exchange:
        """Record what is being answered *before* any of it reaches the client (``chunks`` is
        the list the sender appends to before each write): a test that inspects the run as soon
        as its client returns must find every byte the client saw."""
        # A replayed round trip keeps the recorded origin: the run's analysis (provider, prices)
        # must see the API that answered, not this loopback server.
        origin = self.url
        source = answer if isinstance(answer, Recorded) else origin_of
        if source is not None:
            u = urlsplit(source.exchange.url)
            origin = f"{u.scheme}://{u.netloc}" if u.scheme and u.netloc else self.url
        ex = Exchange(
            method=req.method,
            url=origin + req.target,
            request_headers=list(req.headers),
            request_body=req.body,
            status=status,
            response_headers=list(headers),
            response_chunks=chunks,
            started=time.time(),
            transport_error=transport_error,
        )
        ex.request_body = self._retained(req.body, source, ex)
        with self._lock:
            ex.seq = len(self.served)
            self.served.append(ex)
            self.answers.append(answer)
        return ex

    def _retained(self, body: bytes, source: Recorded | None, ex: Exchange) -> bytes:
        """The request body as :attr:`served` keeps it: the recorded request's own bytes when it is
        the same (shared, no copy); else itself while :data:`RETAIN_BODIES` lasts; past that,
        nothing (a note gives its size): a flood of large requests costs no memory once answered."""
        if not body:
            return body
        if source is not None and source.exchange.request_body == body:
            return source.exchange.request_body
        with self._lock:
            if len(body) <= self.retain_left:
                self.retain_left -= len(body)
                return body
        ex.notes.append(f"request body of {len(body):,} bytes not kept: over the replay server's budget for request bodies that differ from the recording")
        return b""

    async def _respond(self, req: Request, writer: asyncio.StreamWriter) -> bool:
        t0 = asyncio.get_running_loop().time()
        if req.method == "CONNECT":
            msg = (f"looptap replay refuses CONNECT {req.target}: the run is replayed offline from {self.source}; "
                   "point the client's base URL at the replay server instead").encode()
            self._log(req, 403, [], [(0.0, msg)], "refused CONNECT")
            await self._send_head(writer, 403, [("content-type", "text/plain"), ("content-length", str(len(msg))), ("connection", "close")])
            writer.write(msg)
            await writer.drain()
            return False
        answer = self.matcher.match(req.method, req.target, req.headers, req.body)
        if isinstance(answer, Miss):
            base = self.fallback(req.method, req.target, req.body) if self.fallback is not None else None
            if base is not None:
                return await self._forward(req, base, writer, answer)
            return await self._send_miss(req, writer, answer)
        fault = self.faults.decide(answer) if self.faults is not None else None
        if fault is not None:
            return await self._fault(req, writer, answer, fault, t0)
        return await self._play(req, writer, answer, t0)

    async def _fault(self, req: Request, writer: asyncio.StreamWriter, rec: Recorded, fault: Fault, t0: float) -> bool:
        """Answer with an injected fault. A fault that fails the attempt leaves the recorded answer
        unplayed, so the agent's retry gets it."""
        adapter = rec.key.adapter or Provider()
        label = f"fault {fault.text}"
        if fault.kind == "slow_first_byte":
            await asyncio.sleep(fault.arg or 0.0)
            return await self._play(req, writer, rec, asyncio.get_running_loop().time(), fault=fault)
        if fault.kind == "stall":
            return await self._play(req, writer, rec, t0, fault=fault)
        if fault.kind in REWRITE_KINDS:
            return await self._rewrite(req, writer, rec, fault, adapter, t0)
        rec.plays -= 1  # this attempt fails: the next one gets the recording
        if fault.kind == "reset":
            self._log(req, None, [], [], label, f"looptap fault: {fault.describe()} (connection closed before any response)", origin_of=rec)
            writer.transport.abort()
            return False
        if fault.kind in STATUS_KINDS:
            status, obj = adapter.fault_bodies.get(fault.kind) or Provider.fault_bodies[fault.kind]
            body = orjson.dumps(obj)
            headers: Headers = [
                ("content-type", "application/json"),
                *adapter.fault_headers(fault.kind, fault.arg if fault.arg is not None else 1.0),
                ("x-looptap-fault", fault.describe()),
                ("content-length", str(len(body))),
            ]
            self._log(req, status, headers, [(0.0, body)], label, origin_of=rec)
            await self._send_head(writer, status, headers)
            writer.write(body)
            await writer.drain()
            return True
        return await self._play(req, writer, rec, t0, fault=fault)  # stream_cut, error_event

    async def _rewrite(self, req: Request, writer: asyncio.StreamWriter, rec: Recorded, fault: Fault, adapter: Provider, t0: float) -> bool:
        """Answer with the recorded answer rewritten by ``fault`` (cut, filtered, refused, a broken
        tool call), rendered in the API's format, streamed when the request streams. Where that
        cannot be done, the recorded answer is served and the plan notes why."""
        ex = rec.exchange
        rendered = self._rewritten(req, rec, fault, adapter)
        if isinstance(rendered, str):
            return await self._play(req, writer, rec, t0, note=f"fault {fault.text} not injected: {rendered}; served as recorded")
        rec.plays -= 1  # the next attempt at this request gets the recording
        stream = rendered.content_type in ("text/event-stream", "application/x-ndjson") or len(rendered.chunks) > 1
        headers: Headers = [("content-type", rendered.content_type), ("x-looptap-replay", f"seq={ex.seq}"), ("x-looptap-fault", fault.describe())]
        if stream:
            headers.append(("transfer-encoding", "chunked"))
        else:
            headers.append(("content-length", str(sum(len(c) for c in rendered.chunks))))
        sent: list[tuple[float | None, bytes]] = []
        self._log(req, 200, headers, sent, f"fault {fault.text}", origin_of=rec)
        await self._send_head(writer, 200, headers)
        loop = asyncio.get_running_loop()
        for chunk in rendered.chunks:
            sent.append((loop.time() - t0, chunk))
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if stream else chunk)
        if stream:
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _send_internal_error(self, writer: asyncio.StreamWriter, exc: Exception, websocket: bool = False) -> None:
        if websocket:  # the session is open: close it as an internal error (1011)
            from cassettes.replay import wsframes as ws

            with contextlib.suppress(Exception):
                writer.write(ws.frame(ws.CLOSE, struct.pack("!H", 1011) + clip(f"looptap replay: internal error: {type(exc).__name__}", 100).encode()))
                await writer.drain()
            return
        body = orjson.dumps(Provider().replay_error(500, f"looptap replay: internal error: {type(exc).__name__}: {clip(str(exc))}", "looptap_replay_error"))
        with contextlib.suppress(Exception):
            await self._send_head(writer, 500, [("content-type", "application/json"), ("x-should-retry", "false"), ("content-length", str(len(body))), ("connection", "close")])
            writer.write(body)
            await writer.drain()

    async def _send_miss(self, req: Request, writer: asyncio.StreamWriter, miss: Miss) -> bool:
        key = request_key(req.method, req.target, req.headers, req.body)
        adapter = key.adapter or (miss.closest.key.adapter if miss.closest is not None else None) or Provider()
        body = orjson.dumps(adapter.replay_error(MISS_STATUS, str(miss), MISS_CODE))
        headers: Headers = [
            ("content-type", "application/json"),
            *adapter.replay_error_headers(retry=False),
            ("x-looptap-replay", "miss"),
            ("content-length", str(len(body))),
        ]
        self._log(req, MISS_STATUS, headers, [(0.0, body)], miss)
        await self._send_head(writer, MISS_STATUS, headers)
        writer.write(body)
        await writer.drain()
        return True

    def _recorded_retry(self, rec: Recorded) -> bool:
        """The recording shows the SDK retrying this error: the same request recorded again later."""
        return any(r.index > rec.index and not r.plays and r.key.digest == rec.key.digest for r in self.matcher.recorded)

    async def _play(self, req: Request, writer: asyncio.StreamWriter, rec: Recorded, t0: float, fault: Fault | None = None, note: str | None = None) -> bool:
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
            self._log(req, None, [], [], rec, ex.transport_error or "no response recorded")
            writer.transport.abort()
            return False
        headers = self._play_headers(rec, fault)
        chunks = self._play_chunks(req, rec, fault)
        ctype = (ex.response_header("content-type") or "").lower()
        cutting = fault is not None and fault.kind in ("stream_cut", "error_event", "stall")
        chunked = cutting or len(chunks) > 1 or "event-stream" in ctype or "ndjson" in ctype or (ex.response_header("transfer-encoding") or "").lower() == "chunked"
        if not chunked:
            body = b"".join(c for _, c in chunks)
            headers.append(("content-length", str(len(body))))
        else:
            headers.append(("transfer-encoding", "chunked"))
        await until(ex.ttfb)
        sent: list[tuple[float | None, bytes]] = []
        logged = self._log(req, ex.status, headers, sent, f"fault {fault.text}" if fault is not None else rec, ex.transport_error, origin_of=rec)
        if note is not None:
            logged.notes.append(note)
        await self._send_head(writer, ex.status, headers)
        if not chunked:
            await until(chunks[0][0] if chunks else None)
            body = b"".join(c for _, c in chunks)
            sent.append((loop.time() - t0, body))
            writer.write(body)
            await writer.drain()
        elif not await self._send_chunks(writer, rec, chunks, fault, until, sent, logged, lambda: loop.time() - t0):
            return fault is not None and fault.kind == "error_event"  # the stream ended after the error event
        if ex.transport_error:  # the recording broke off here: so does the replay
            writer.transport.abort()
            return False
        if chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return True

    def _play_headers(self, rec: Recorded, fault: Fault | None) -> Headers:
        """The recorded response headers as replayed: hop-by-hop ones dropped, an error's retry
        advice as the adapter gives it, the replay and fault labels added."""
        ex = rec.exchange
        assert ex.status is not None
        headers: Headers = [(k, v) for k, v in ex.response_headers if k.lower() not in _DROP]
        if ex.status >= 400:
            adapter = rec.key.adapter or Provider()
            retry = self._recorded_retry(rec)
            headers += adapter.replay_error_headers(retry=retry)
            if retry:
                headers += [("retry-after", "0"), ("retry-after-ms", "0")]
            else:
                headers += [(k, v) for k, v in ex.response_headers if k.lower() in ("retry-after", "retry-after-ms")]
        headers.append(("x-looptap-replay", f"seq={ex.seq}"))
        if fault is not None:
            headers.append(("x-looptap-fault", fault.describe()))
        return headers

    def _play_chunks(self, req: Request, rec: Recorded, fault: Fault | None) -> list[tuple[float | None, bytes]]:
        """The recorded body's pieces as replay sends them: echoing what the request carries
        (``Provider.replay_chunks``), and cut event by event when a stream fault needs it."""
        ex = rec.exchange
        assert ex.status is not None
        chunks = [(t, c) for t, c in ex.response_chunks if c]
        ctype = (ex.response_header("content-type") or "").lower()
        if rec.key.adapter is not None and rec.key.is_json:
            chunks = rec.key.adapter.replay_chunks(chunks, ctype, rec.key.raw, req.body)
        if fault is None or fault.kind not in ("stream_cut", "error_event", "stall") or ex.status >= 400:
            return chunks
        events = _events(b"".join(c for _, c in chunks), ctype)
        if len(events) > len(chunks):  # a stream recorded in few pieces (vcrpy keeps one): fault it event by event
            last = chunks[-1][0] if chunks else None
            return [(last, e) for e in events]
        if len(chunks) == 1 and fault.kind != "stall":
            body = chunks[0][1]  # one recorded piece (a JSON answer): cut it, or send the error halfway
            return [(chunks[0][0], body[: len(body) // 2]), (chunks[0][0], body[len(body) // 2 :])]
        return chunks

    async def _send_chunks(
        self,
        writer: asyncio.StreamWriter,
        rec: Recorded,
        chunks: list[tuple[float | None, bytes]],
        fault: Fault | None,
        until: Callable[[float | None], Awaitable[None]],
        sent: list[tuple[float | None, bytes]],
        logged: Exchange,
        now: Callable[[], float],
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
                event = (rec.key.adapter or Provider()).fault_event(fault.kind)
                sent.append((now(), event))
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event))
                await writer.drain()
                return False  # the stream ends after the error, without its terminal event
            if cut is not None and i >= cut:
                logged.transport_error = f"looptap fault: stream cut after {cut} chunks"
                writer.transport.abort()
                return False
            await until(offset)
            sent.append((now(), chunk))
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
        return True

    # -- new episodes: a request the cassette lacks goes to a recording proxy -------------------
    async def _forward(self, req: Request, base: str, writer: asyncio.StreamWriter, miss: Miss) -> bool:
        u = urlsplit(base)
        host, port = u.hostname or "127.0.0.1", u.port or 80
        try:
            r, w = await asyncio.open_connection(host, port, limit=1 << 24)
        except OSError as exc:
            miss.reason += f"; forwarding to the recorder at {base} failed: {exc}"
            return await self._send_miss(req, writer, miss)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        hop = {"host", "connection", "content-length", "transfer-encoding", "keep-alive", "proxy-connection"}
        hdrs = [(k, v) for k, v in req.headers if k.lower() not in hop]
        head = [f"{req.method} {req.target} HTTP/1.1", f"Host: {u.netloc}", *(f"{k}: {v}" for k, v in hdrs), f"Content-Length: {len(req.body)}", "Connection: close"]
        w.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "replace") + req.body)
        await w.drain()
        status_line = (await r.readuntil(b"\r\n")).decode("latin-1")
        status = int(status_line.split(" ")[1])
        rhdrs: Headers = []
        while True:
            ln = (await r.readuntil(b"\r\n")).decode("latin-1").rstrip("\r\n")
            if not ln:
                break
            k, _, v = ln.partition(":")
            rhdrs.append((k.strip(), v.strip()))
        out = [(k, v) for k, v in rhdrs if k.lower() not in ("content-length", "transfer-encoding", "connection", "keep-alive")]
        out += [("transfer-encoding", "chunked"), ("x-looptap-replay", "recorded-now")]
        sent: list[tuple[float | None, bytes]] = []
        self.matcher.misses.remove(miss)  # answered after all: recorded as a new episode
        self._log(req, status, out, sent, "recorded now")
        await self._send_head(writer, status, out)

        async def relay(data: bytes) -> None:
            if data:
                sent.append((loop.time() - t0, data))
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()

        if (header(rhdrs, "transfer-encoding") or "").lower() == "chunked":
            while True:
                size = int((await r.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
                if size == 0:
                    break
                await relay(await r.readexactly(size))
                await r.readexactly(2)
        elif header(rhdrs, "content-length") is not None:
            await relay(await r.readexactly(int(header(rhdrs, "content-length") or 0)))
        else:
            while data := await r.read(65536):
                await relay(data)
        w.close()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

