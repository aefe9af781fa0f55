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
import os
import re
import ssl
import struct
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self
from urllib.parse import urlsplit

import orjson

from cassettes.matching.rules import Rules
from cassettes.matching.volatile import VolatileSpans
from cassettes.net import BackgroundServer, BadRequest, Request, Watchdog, read_request, refuse
from cassettes.providers import REVERSE_UPSTREAMS, Provider
from cassettes.replay.matching.indexed import IndexedRecordings
from cassettes.replay.matching.jsondiff import clip
from cassettes.replay.matching.matcher import Matcher, Miss, Recorded, request_key, tolerated_notes
from cassettes.replay.serving.faults import Fault, FaultPlan
from cassettes.replay.serving.plan import (
    MISS_CODE,
    MISS_STATUS,
    NOT_REPLAYED,
    Fallback,
    FaultStatus,
    Forward,
    Missed,
    Planner,
    Play,
    Reset,
    Rewritten,
    Router,
)
from cassettes.replay.serving.wsserve import WebSocketReplay
from cassettes.wire.decoding import decode_chunks
from cassettes.wire.exchange import Exchange, Headers
from cassettes.wire.replay_miss import HEADER as MISS_HEADER
from cassettes.wire.replay_miss import NOTE_HEADER

if TYPE_CHECKING:
    from typing import Any

    from cassettes.net import Answer, Trust, Upstream, UpstreamResponse
    from cassettes.providers import Rendered

__all__ = [
    "IDLE_TIMEOUT",
    "MISS_CODE",
    "MISS_STATUS",
    "READ_TIMEOUT",
    "RETAIN_BODIES",
    "WRITE_TIMEOUT",
    "ReplayServer",
    "parse_pace",
    "replay_env",
]

#: Seconds a connection may wait between requests (or WebSocket frames) before it is closed.
IDLE_TIMEOUT = 120.0
#: Seconds a request head may take to arrive, and the longest a request body may pause.
READ_TIMEOUT = 30.0
#: Seconds a client may leave an answer unread (no byte of it taken) before its connection is
#: dropped.
WRITE_TIMEOUT = 60.0
#: Bytes of request bodies the server keeps in :attr:`ReplayServer.served` beyond those equal
#: to a recorded request (which are shared with the recording, free): past it, a served
#: exchange keeps the body's size in a note instead of the body.
RETAIN_BODIES = 64 << 20
#: Unplayed round trips the report names one by one (then how many more): a run of a million
#: round trips stopped after a few gets a short report, not a million lines.
UNPLAYED_LISTED = 100

#: A looptap cassette at least this large is served from its offset index; a smaller one is
#: held in memory (about 16 bytes per byte of the file: 8 MB costs ~130 MB, and answers ~3x
#: faster than reading each played round trip again from disk).
IN_MEMORY_BELOW = 8 << 20


def _size(path: str | Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return IN_MEMORY_BELOW  # let the index reader say what is wrong with it


def _recorded_places(path: str | Path) -> VolatileSpans:
    """The volatile detectors for replaying the looptap cassette at ``path`` here: this process's
    cwd and home and those its header says the run was recorded in (cassettes.matching.places).
    Only the first line is read (at most 1 MiB); a header that cannot be read adds nothing (the
    readers that follow say what is wrong with the file)."""
    from cassettes.errors import CassetteError
    from cassettes.matching.places import volatile_for
    from cassettes.storage.store import open_regular, read_header

    try:
        with open_regular(path) as f:
            first = f.readline(1 << 20)
        header = read_header(path, first.rstrip(b"\r\n"))[0]
    except (CassetteError, OSError, ValueError):
        header = None
    return volatile_for(header)


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
        raise ValueError(
            f"pace must be 'recorded', 'instant' or xN (a speed factor), not {value!r}"
        ) from None
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


async def _each(chunks: Sequence[bytes]) -> AsyncIterator[bytes]:
    """The pieces of a body already read, as a relay sends pieces that arrive."""
    for chunk in chunks:
        yield chunk


def _joined_headers(rendered: Rendered, why: str, parts: int) -> Headers:
    """The headers of an answer a continuation joined (``parts`` continuation requests)."""
    stream = len(rendered.chunks) > 1 or rendered.content_type == "text/event-stream"
    return [
        ("content-type", rendered.content_type),
        ("x-looptap-replay", why),
        ("x-looptap-continued", str(parts)),
        ("transfer-encoding", "chunked")
        if stream
        else ("content-length", str(sum(len(c) for c in rendered.chunks))),
    ]


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


class ReplayServer:
    """Serve a cassette on ``host:port`` (0: a free port). See the module docstring."""

    label = "the replay server"

    def _preload(self) -> None:
        # the HTTP/1.1 reader and writer (cassettes.net)
        import h11  # noqa: F401
        import wsproto.connection  # WebSocket sessions (cassettes.net)
        import wsproto.events  # noqa: F401

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
        write_timeout: float | None = WRITE_TIMEOUT,
        retain_bodies: int = RETAIN_BODIES,
        cursor: Router | None = None,
        volatile: bool | VolatileSpans = True,
        rules: Rules | None = None,
        trust: Trust | None = None,
    ) -> None:
        recordings: Sequence[Exchange] | IndexedRecordings
        # a fork's branch held in memory keeps its origin's turn numbers (cassettes.reading.branch)
        first = 0
        if isinstance(cassette, (str, Path)):
            # Any format a run is opened from (a looptap cassette, vcrpy, a mitmproxy flow file).
            # A large looptap cassette is served from its offset index (a played round trip is
            # read again from disk: memory flat in the run's size); a small one, and the other
            # formats (small by nature), are held in memory, which answers ~3x faster.
            from cassettes.reading.run import detect, open_run

            self.source = str(cassette)
            looptap = detect(cassette) == "looptap"
            if looptap and volatile is True:
                volatile = _recorded_places(cassette)
            if looptap and _size(cassette) >= IN_MEMORY_BELOW:
                recordings = IndexedRecordings(cassette)
            else:
                from cassettes.reading.branch import first_turn, origin_in

                run = open_run(cassette, whole=True)
                self.problems = run.problems
                recordings = list(run.exchanges)
                first = first_turn(origin_in(run.header))
        else:
            self.source = "<exchanges>"
            self.problems = []
            recordings = cassette
        if not isinstance(recordings, IndexedRecordings):
            for i, ex in enumerate(recordings):
                if ex.seq is None:
                    ex.seq = i
        self.speed = parse_pace(pace)
        self.matcher = Matcher(
            recordings, strict=strict, first_turn=first, volatile=volatile, rules=rules
        )
        if isinstance(recordings, IndexedRecordings):
            self.problems = recordings.problems  # (known once the file is read)
        #: Faults to inject (``--fault``); ``faults.fired`` lists what was injected.
        self.faults = faults
        if faults is not None and faults.needs_turns:
            self.matcher.label()
        if cursor is not None:
            # placed in the recording's turns (refused if it selects none, saying what the run has)
            cursor.bind(self.matcher, self.source if self.source != "<exchanges>" else "the run")
        #: The CA store requests sent live verify TLS against (``None``: the environment's when
        #: connecting).
        self.trust = trust
        #: Decides every answer (the senders below only speak it).
        self.planner = Planner(self.matcher, faults, fallback, cursor)
        #: Answers the WebSocket sessions, turn by turn, as the planner decides.
        self.websockets = WebSocketReplay(
            self.planner,
            log=self._log,
            send_head=self._send_head,
            drain=self._drain,
            speed=self.speed,
            idle_timeout=idle_timeout,
            trust=trust,
        )
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
        #: Connections dropped because the client left its answer unread for ``write_timeout``.
        self.write_timeouts = 0
        #: Headers not sent because they cannot be (a recorded name or value with CR, LF, NUL …):
        #: how many, and the first lines saying which (names only, never values).
        self.headers_dropped = 0
        self.drops: list[str] = []
        #: ``None``: no limit (see :data:`IDLE_TIMEOUT`, :data:`READ_TIMEOUT`,
        #: :data:`WRITE_TIMEOUT`).
        self.idle_timeout = idle_timeout
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        #: What is left of :data:`RETAIN_BODIES` for request bodies kept in :attr:`served`.
        self.retain_left = retain_bodies
        #: Connections waiting for their next request (closed first when out of descriptors).
        self._idle: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._lock = threading.Lock()
        #: Listens and runs the connections (in the caller's event loop or a thread of its own).
        self._server = BackgroundServer(
            self._handle,
            host=host,
            port=port,
            label=self.label,
            read_limit=self.read_limit,
            preload=self._preload,
            shed_idle=self._shed_idle,
        )

    # -- lifecycle -----------------------------------------------------------------------------
    async def start_async(self) -> None:
        await self._server.start_async()

    async def stop_async(self) -> None:
        await self._server.stop_async()

    def start(self) -> Self:
        """Serve from a thread of its own; returns once listening."""
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- public view ---------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return self._server.host

    @property
    def port(self) -> int:
        """The port listened on (the one bound, once listening)."""
        return self._server.port

    @property
    def accept_pauses(self) -> int:
        """Times accepting was paused for want of file descriptors (or memory)."""
        return self._server.accept_pauses

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return replay_env(self.url)

    @property
    def fallback(self) -> Fallback | None:
        return self.planner.fallback

    @property
    def misses(self) -> list[Miss]:
        return list(self.matcher.misses)

    def unplayed(self) -> list[Recorded]:
        return self.matcher.unplayed()

    def keep_sent(self, path: Path) -> None:
        """What the client sent (with the answers it got, misses included), as a cassette at
        ``path``, redacted as every cassette is, with this machine's cwd and home in its header: the
        evidence ``looptap rules propose`` reads against the recording. Raises :class:`OSError`,
        :class:`~cassettes.errors.CassetteError`."""
        from cassettes.matching.places import here
        from cassettes.recording.pipeline import CassetteWriter
        from cassettes.storage.paths import check_target, staged

        with (
            staged(check_target(path, "the failed run's cassette", force=True)) as s,
            CassetteWriter(s.path, meta=here()) as w,
        ):
            for ex in list(self.served):
                w.append(ex)

    def report_lines(self) -> list[str]:
        from cassettes.hints import count

        rec = self.matcher.recorded
        # from the recording: a fork's requests past its cursor went live
        played = len(self.matcher.played())
        out = [
            f"looptap replay {self.source}: played {played:,} of "
            f"{count(len(rec), 'recorded round trip')}"
        ]
        cursor = self.planner.cursor
        if cursor is not None:
            out[0] += f", {count(cursor.sent, 'request')} went live past the cursor"
        out[0] += f", {count(len(self.matcher.misses), 'unmatched request')}"
        if self.internal_errors:
            out[0] += f", {count(len(self.internal_errors), 'internal error')}"
        if self.refused:
            out[0] += f", {count(self.refused, 'unreadable request')} refused"
        if self.write_timeouts:
            out[0] += (
                f", {count(self.write_timeouts, 'connection')} dropped (answer unread for "
                f"{self.write_timeout:g} s)"
            )
        if self.accept_pauses:
            out[0] += (
                f", accepting paused {count(self.accept_pauses, 'time')} (out of file descriptors)"
            )
        if self.headers_dropped:
            out[0] += (
                f", {count(self.headers_dropped, 'header')} not "
                "sent (they would have split the message)"
            )
        unplayed = self.matcher.count_unplayed()
        if unplayed:
            self.matcher.label()
        shown = 0
        for r in self.matcher.recorded if unplayed else ():
            if shown == UNPLAYED_LISTED:
                out.append(f"  … and {count(unplayed - shown, 'more unplayed round trip')}")
                break
            if not r.plays:
                shown += 1
                out.append(f"  unplayed: {r.label}: {r.key.method} {clip(r.key.target)}")
        if self.matcher.tolerated:
            from cassettes.replay.matching.tolerated import report_lines, turn_entries
            from cassettes.untrusted import clean_line

            n = len(self.matcher.tolerated)
            out.append(
                f"  {n} recorded round trip{'s' if n != 1 else ''} answered a request that "
                "differed only in what was tolerated (also in the served exchanges' notes):"
            )
            out += [clean_line(line) for line in report_lines(turn_entries(self.matcher), "    ")]
        for m in self.matcher.misses:
            out.append(f"  unmatched: {m.method} {clip(m.target)}: {clip(m.reason)}")
        for e in self.internal_errors[:20]:
            out.append(f"  internal error (a looptap bug, answered 500): {clip(e)}")
        for why in self.refusals:
            out.append(f"  refused: {why}")
        for line in self.drops:
            out.append(f"  dropped: {line}")
        return out

    # -- HTTP/1.1 ------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        dog = Watchdog(task)
        try:
            await self._serve(reader, writer, task, dog)
        except asyncio.CancelledError:
            # a stop (ends the connection quietly, as before), or a write that timed out
            if dog.expired():
                self.write_timeouts += 1  # the only deadline left armed outside a read: a write
                writer.transport.abort()
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ValueError,
            ssl.SSLError,
        ):
            pass
        finally:
            dog.close()
            self._idle.pop(task, None)
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        task: asyncio.Task[None],
        dog: Watchdog,
    ) -> None:
        while True:
            try:
                self._idle[task] = writer
                req = await self._read_request(
                    reader, writer, lambda: self._idle.pop(task, None), dog
                )
            except BadRequest as exc:
                self.refused += 1
                if len(self.refusals) < 20:
                    self.refusals.append(f"{exc.status}: {clip(str(exc))}")
                await refuse(writer, exc)
                return
            if req is None:
                return
            websocket = (req.header("upgrade") or "").lower() == "websocket"
            try:
                if websocket:
                    await self.websockets.serve(req, reader, writer, dog)
                    return
                keep = await self._respond(req, writer, dog)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                raise
            except Exception as exc:  # a bug here must reach the test as an error, not a hang
                self.internal_errors.append(
                    f"{req.method} {clip(req.target)}: {type(exc).__name__}: {clip(str(exc))}"
                )
                await self._send_internal_error(writer, exc, websocket=websocket)
                return
            if not keep or (req.header("connection") or "").lower() == "close":
                return

    def _shed_idle(self) -> int:
        idle = list(self._idle.values())
        self._idle.clear()
        for w in idle:
            with contextlib.suppress(Exception):
                w.close()
        return len(idle)

    async def _drain(self, writer: asyncio.StreamWriter, dog: Watchdog | None) -> None:
        """Wait until the client has taken what was written (at most ``write_timeout`` with no
        progress: then the connection is dropped, see :meth:`_handle`)."""
        if dog is None:
            await writer.drain()
            return
        dog.arm(self.write_timeout)
        try:
            await writer.drain()
        finally:
            dog.disarm()

    async def _read_request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        started: Callable[[], object] | None = None,
        dog: Watchdog | None = None,
    ) -> Request | None:
        req = await read_request(
            reader,
            writer,
            max_body=self.max_body,
            idle_timeout=self.idle_timeout,
            read_timeout=self.read_timeout,
            started=started,
            watchdog=dog,
        )
        if req is not None:
            enc = req.header("content-encoding")
            if enc and req.body:
                try:
                    req.body = b"".join(c for _, c in decode_chunks([(None, req.body)], enc).chunks)
                except (ValueError, MemoryError) as exc:
                    raise BadRequest(
                        f"the request body could not be decoded ({clip(enc, 40)}): "
                        f"{clip(str(exc), 200)}"
                    ) from None
        return req

    async def _send_head(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        headers: Headers,
        dog: Watchdog | None = None,
        *,
        req: Request | None = None,
        logged: Exchange | None = None,
    ) -> Answer:
        """The status line and headers, built by h11
        (:class:`~cassettes.net.Answer`); the answer to write the body with.
        A header that cannot be sent (a recorded name or value holding CR, LF, NUL …) is dropped:
        ``logged`` (the served exchange) then lists only what was sent, and a note and
        :meth:`report_lines` name the header, never its value."""
        from cassettes.net import Answer

        answer = Answer(
            req.method if req is not None else "GET",
            close=req is not None and (req.header("connection") or "").lower() == "close",
            upgrade=req is not None and (req.header("upgrade") or "").lower() == "websocket",
        )
        said: list[str] = []
        head = answer.head(status, headers, said)
        if said:
            self._said(said, logged)
        writer.write(head)
        await self._drain(writer, dog)
        return answer

    def _said(self, said: list[str], logged: Exchange | None) -> None:
        """Headers dropped from a message (see :meth:`_send_head`), kept for the report."""
        from cassettes.net import header_problem

        where = (
            f" (round trip {logged.seq})" if logged is not None and logged.seq is not None else ""
        )
        with self._lock:
            self.headers_dropped += len(said)
            self.drops.extend(f"{line}{where}" for line in said[: max(0, 20 - len(self.drops))])
        if logged is not None:
            logged.notes.extend(f"looptap: {line}" for line in said)
            logged.response_headers = [
                (k, v) for k, v in logged.response_headers if header_problem(k, v) is None
            ]

    async def _send_whole(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        headers: Headers,
        body: bytes,
        dog: Watchdog | None,
        *,
        req: Request | None = None,
        logged: Exchange | None = None,
    ) -> None:
        """A whole answer at once (the caller has put its content-length in ``headers``)."""
        answer = await self._send_head(writer, status, headers, dog, req=req, logged=logged)
        writer.write(answer.data(body) + answer.end())
        await self._drain(writer, dog)

    def _log(
        self,
        req: Request,
        status: int | None,
        headers: Headers,
        chunks: list[tuple[float | None, bytes]],
        answer: Recorded | Miss | str,
        transport_error: str | None = None,
        origin_of: Recorded | None = None,
    ) -> Exchange:
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
        if isinstance(answer, Recorded) and answer.index in self.matcher.tolerated:
            from cassettes.recording.redact import Redactor

            # a changed tool result is the client's text: no secret in a note
            scrub = Redactor().scrub
            ex.notes.extend(scrub(n) for n in tolerated_notes(self.matcher.tolerated[answer.index]))
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
        ex.notes.append(
            f"request body of {len(body):,} bytes not kept: over the replay server's budget for "
            "request bodies that differ from the recording"
        )
        return b""

    # -- the HTTP sender: speaks what the planner decided ------------------------------------------
    async def _respond(
        self, req: Request, writer: asyncio.StreamWriter, dog: Watchdog | None = None
    ) -> bool:
        t0 = asyncio.get_running_loop().time()
        if req.method == "CONNECT":
            msg = (
                f"looptap replay refuses CONNECT {req.target}: the run is replayed offline from "
                f"{self.source}; point the client's base URL at the replay server instead"
            ).encode()
            self._log(req, 403, [], [(0.0, msg)], "refused CONNECT")
            await self._send_whole(
                writer,
                403,
                [
                    ("content-type", "text/plain"),
                    ("content-length", str(len(msg))),
                    ("connection", "close"),
                ],
                msg,
                dog,
                req=req,
            )
            return False
        answer = self.planner.plan(req)
        if isinstance(answer, Play):
            if answer.fault is not None and answer.fault.kind == "slow_first_byte":
                await asyncio.sleep(answer.fault.arg or 0.0)
                t0 = asyncio.get_running_loop().time()
            return await self._play(req, writer, answer, t0, dog)
        if isinstance(answer, Missed):
            return await self._send_miss(req, writer, answer.miss, dog)
        if isinstance(answer, Forward):
            return await self._forward(req, writer, answer, dog)
        if isinstance(answer, Reset):
            self._log(
                req,
                None,
                [],
                [],
                f"fault {answer.fault.text}",
                f"looptap fault: {answer.fault.describe()} (connection closed before any response)",
                origin_of=answer.rec,
            )
            writer.transport.abort()
            return False
        if isinstance(answer, FaultStatus):
            return await self._send_fault_status(req, writer, answer, dog)
        return await self._send_rewritten(req, writer, answer, t0, dog)

    async def _send_fault_status(
        self, req: Request, writer: asyncio.StreamWriter, answer: FaultStatus, dog: Watchdog | None
    ) -> bool:
        body = orjson.dumps(answer.body)
        headers: Headers = [
            ("content-type", "application/json"),
            *answer.headers,
            ("x-looptap-fault", answer.fault.describe()),
            ("content-length", str(len(body))),
        ]
        logged = self._log(
            req,
            answer.status,
            headers,
            [(0.0, body)],
            f"fault {answer.fault.text}",
            origin_of=answer.rec,
        )
        await self._send_whole(writer, answer.status, headers, body, dog, req=req, logged=logged)
        return True

    async def _send_rewritten(
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
        logged = self._log(
            req, 200, headers, sent, f"fault {answer.fault.text}", origin_of=answer.rec
        )
        out = await self._send_head(writer, 200, headers, dog, req=req, logged=logged)
        loop = asyncio.get_running_loop()
        for chunk in rendered.chunks:
            sent.append((loop.time() - t0, chunk))
            writer.write(out.data(chunk))
        writer.write(out.end())
        await self._drain(writer, dog)
        return True

    async def _send_internal_error(
        self, writer: asyncio.StreamWriter, exc: Exception, websocket: bool = False
    ) -> None:
        if websocket:  # the session is open: close it as an internal error (1011)
            from cassettes import net as ws

            with contextlib.suppress(Exception):
                writer.write(
                    ws.frame(
                        ws.CLOSE,
                        struct.pack("!H", 1011)
                        + clip(
                            f"looptap replay: internal error: {type(exc).__name__}", 100
                        ).encode(),
                    )
                )
                await writer.drain()
            return
        body = orjson.dumps(
            Provider.replay.error(
                500,
                f"looptap replay: internal error: {type(exc).__name__}: {clip(str(exc))}",
                "looptap_replay_error",
            )
        )
        with contextlib.suppress(Exception):
            await self._send_whole(
                writer,
                500,
                [
                    ("content-type", "application/json"),
                    ("x-should-retry", "false"),
                    ("content-length", str(len(body))),
                    ("connection", "close"),
                ],
                body,
                None,
            )

    async def _send_miss(
        self, req: Request, writer: asyncio.StreamWriter, miss: Miss, dog: Watchdog | None = None
    ) -> bool:
        key = request_key(req.method, req.target, req.headers, req.body)
        adapter = (
            key.adapter
            or (miss.closest.key.adapter if miss.closest is not None else None)
            or Provider()
        )
        body = orjson.dumps(adapter.replay.error(MISS_STATUS, str(miss), MISS_CODE))
        headers: Headers = [
            ("content-type", "application/json"),
            *adapter.replay.error_headers(retry=False),
            (MISS_HEADER, "miss"),
            # what the analysis reads (layer C, never the API's error)
            (NOTE_HEADER, miss.note().to_header()),
            ("content-length", str(len(body))),
        ]
        logged = self._log(req, MISS_STATUS, headers, [(0.0, body)], miss)
        await self._send_whole(writer, MISS_STATUS, headers, body, dog, req=req, logged=logged)
        return True

    def _recorded_retry(self, rec: Recorded) -> bool:
        """The recording shows the SDK retrying this error: the same request recorded again
        later."""
        return self.matcher.retried(rec)

    async def _play(
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
            self._log(req, None, [], [], rec, ex.transport_error or "no response recorded")
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
        logged = self._log(
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
        out = await self._send_head(writer, ex.status, headers, dog, req=req, logged=logged)
        if not chunked:
            await until(chunks[0][0] if chunks else None)
            body = b"".join(c for _, c in chunks)
            sent.append((loop.time() - t0, body))
            writer.write(out.data(body))
            await self._drain(writer, dog)
        elif not await self._send_chunks(
            writer, out, rec, chunks, fault, until, sent, logged, lambda: loop.time() - t0, dog
        ):
            # the stream ended after the error event
            return fault is not None and fault.kind == "error_event"
        if ex.transport_error:  # the recording broke off here: so does the replay
            writer.transport.abort()
            return False
        writer.write(out.end())
        await self._drain(writer, dog)
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
                await self._drain(writer, dog)
                return False  # the stream ends after the error, without its terminal event
            if cut is not None and i >= cut:
                logged.transport_error = f"looptap fault: stream cut after {cut} chunks"
                writer.transport.abort()
                return False
            await until(offset)
            sent.append((now(), chunk))
            writer.write(out.data(chunk))
            await self._drain(writer, dog)
        return True

    # -- passed on: new episodes, or past a fork's cursor ---------------------------------------
    async def _forward(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Forward,
        dog: Watchdog | None = None,
    ) -> bool:
        """Send the request on to ``answer.base`` and relay its answer as it arrives (chunked);
        an upstream that cannot be reached or breaks off is said in the API's error shape (a
        miss for new episodes) or by breaking the connection off the same way. Under a fork's
        ``--edit continue`` the answer is read whole first, and handed over joined when the
        token cap cut it (:meth:`_continued`)."""
        from cassettes.net import Upstream, UpstreamError

        upstream = Upstream(answer.base, trust=self.trust)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        said: list[str] = []
        target = answer.target or req.target
        try:
            response = await upstream.send(
                req.method,
                target,
                answer.headers if answer.headers is not None else req.headers,
                answer.body,
                said,
            )
        except UpstreamError as exc:
            if answer.miss is not None:
                answer.miss.reason += f"; forwarding to {answer.base} failed: {exc}"
                return await self._send_miss(req, writer, answer.miss, dog)
            return await self._send_upstream_error(req, writer, answer, str(exc), dog)
        if answer.miss is not None:
            # answered after all: recorded as a new episode (or continued)
            self.matcher.resolve(answer.miss)
        notes = list(answer.notes)
        status, broke, rendered, parts = response.status, None, None, 0
        own: list[str] = []
        pieces: AsyncIterator[bytes] = (data async for data in response.pieces() if data)
        if answer.cont is not None:
            first: list[bytes] = []
            try:
                first += [data async for data in pieces]
            except UpstreamError as exc:
                broke = str(exc)
            continued = (
                await self._continued(req, answer, upstream, response, first, said, notes)
                if broke is None
                else None
            )
            if continued is not None:
                rendered, parts = continued
            pieces = _each(first if rendered is None else rendered.chunks)
        if rendered is None:  # the answer as it comes
            out = upstream.relayed_headers(response, own) + [
                ("transfer-encoding", "chunked"),
                ("x-looptap-replay", answer.why),
            ]
        else:
            status, out = 200, _joined_headers(rendered, answer.why, parts)
        sent: list[tuple[float | None, bytes]] = []
        logged = self._log(req, status, out, sent, answer.why, origin_of=answer.rec)
        self._relay_notes(logged, notes, own, said)
        relay = await self._send_head(writer, status, out, dog, req=req, logged=logged)
        try:
            async for data in pieces:
                sent.append((loop.time() - t0, data))
                writer.write(relay.data(data))
                await self._drain(writer, dog)
        except UpstreamError as exc:
            broke = str(exc)
        if broke is not None:
            logged.transport_error = broke
            writer.transport.abort()
            return False
        if self.planner.cursor is not None:  # a later request continuing this answer goes as it is
            self.planner.cursor.relayed(req.method, target, answer.body, status, sent, out)
        writer.write(relay.end())
        await self._drain(writer, dog)
        return True

    def _relay_notes(
        self, logged: Exchange, notes: list[str], own: list[str], said: list[str]
    ) -> None:
        """A relayed answer's notes: the plan's and the continuation's, looptap's own marks the
        upstream's answer carried (dropped), the headers that could not be sent upstream."""
        logged.notes.extend(notes)
        if own:
            logged.notes.append(
                f"marks: the upstream's response carried looptap's own headers ({', '.join(own)}) "
                "that this replay did not write; dropped"
            )
        if said:
            self._said(said, None)
            logged.notes.extend(f"looptap: {line} upstream" for line in said)

    async def _continued(
        self,
        req: Request,
        answer: Forward,
        upstream: Upstream,
        response: UpstreamResponse,
        first: list[bytes],
        said: list[str],
        notes: list[str],
    ) -> tuple[Rendered, int] | None:
        """A fork's ``--edit continue`` (:mod:`cassettes.replay.live.continuation`) on the
        upstream's answer (``first``, read whole): when the token cap cut it, the model asked to go
        on (each request through the same recorder, marked as the fork's), and the one answer
        joining the parts, in the format the client asked for, with how many continuation requests
        it took; ``None`` when there is nothing to join (the answer is relayed as it came). What
        happened goes to ``notes``."""
        from cassettes.hints import count
        from cassettes.net import Upstream, UpstreamError
        from cassettes.replay.live.continuation import cut_text, joined, parsed, rendered_for

        cont = answer.cont
        assert cont is not None
        target = answer.target or req.target
        url = upstream.base + target
        sent_headers = answer.headers if answer.headers is not None else req.headers
        cut = parsed(
            cont.adapter, req.method, url, answer.body, response.status, response.headers, first
        )
        so_far = cut_text(cut) if cut is not None else None
        parts: list[tuple[str, Any]] = []
        while so_far is not None and cont.sent < cont.rounds:
            made = cont.request(answer.body, so_far, sent_headers)
            if made is None:
                notes.append(
                    "fork: continue: this API has no form to "
                    "continue this answer; relayed as it came"
                )
                break
            body, headers, continues = made
            try:
                more_response = await Upstream(answer.base, trust=self.trust).send(
                    req.method, target, headers, body, said
                )
                got = [d async for d in more_response.pieces() if d]
            except UpstreamError as exc:
                notes.append(
                    f"fork: continue: continuation request {cont.sent} failed ({exc}); the answer "
                    "so far handed to the client"
                )
                break
            more = parsed(
                cont.adapter,
                req.method,
                url,
                body,
                more_response.status,
                more_response.headers,
                got,
            )
            if more is None:
                notes.append(
                    f"fork: continue: continuation request {cont.sent} got status "
                    f"{more_response.status}, no answer; the answer so far handed to the client"
                )
                break
            parts.append((continues, more))
            still = cut_text(more)
            so_far = continues + still if still is not None else None
        rendered = (
            rendered_for(cont.adapter, target, cont.client_body, joined(cut, parts))
            if cut is not None and parts
            else None
        )
        if rendered is None:
            return None
        cont.done(len(parts))
        notes.append(
            "fork: the answer was cut at the token cap; looptap continued it "
            f"({count(len(parts), 'continuation request')}, --edit continue) and handed the client "
            "one answer joining the parts"
        )
        return rendered, len(parts)

    async def _send_upstream_error(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Forward,
        why: str,
        dog: Watchdog | None,
    ) -> bool:
        """The live upstream past the cursor failed: a 502 in the API's error shape."""
        key = request_key(req.method, req.target, req.headers, req.body)
        adapter = key.adapter or Provider()
        body = orjson.dumps(
            adapter.replay.error(
                502, f"looptap: the live upstream failed: {why}", "looptap_upstream_error"
            )
        )
        headers: Headers = [
            ("content-type", "application/json"),
            ("x-looptap-replay", answer.why),
            ("content-length", str(len(body))),
        ]
        logged = self._log(req, 502, headers, [(0.0, body)], answer.why, why, origin_of=answer.rec)
        logged.notes.extend(answer.notes)
        await self._send_whole(writer, 502, headers, body, dog, req=req, logged=logged)
        return True
