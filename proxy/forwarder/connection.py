"""One client connection of a reverse listener: its HTTP/1.1 requests forwarded, one after the
other (keep-alive and pipelining), each response streamed to the client chunk by chunk as it
arrives, and each round trip recorded.

**Reading.** The request is read into the connection's own buffer (so its bytes can still go to
mitmproxy whole) and parsed by an ``h11`` server state, fresh per request: what follows the request
(a pipelined one) stays in the buffer. Bounded: the head by :data:`MAX_HEAD`, the body by
:data:`MAX_BODY`; beyond either, or for anything the forwarder does not handle itself
(:func:`_spliced`), the connection from this request on is spliced to mitmproxy
(:mod:`proxy.forwarder.splice`), which answers or records it as it always did, its ``400`` for a
request it cannot read included.

**Forwarding.** As mitmproxy's reverse mode does: the ``Host`` header names the upstream (its first
value replaced in place, others dropped, appended when missing), the API's version segment is put
back when the client's base URL lacked it (:func:`cassettes.providers.versioned_path`), the other
headers and the body go on as they came. An upstream that cannot be reached is mitmproxy's to
answer too: nothing was sent yet, the request goes to it whole.

**Streaming.** Each piece of the body is passed on as it arrives (re-framed as one chunk when the
response is chunked, as mitmproxy does) after a timestamped copy is kept; the round trip is handed
to the writer before its last byte goes to the client (the last piece of a ``Content-Length``
body, the terminating chunk of a chunked one), so a ``flush`` after the client got its answer
finds it stored. The upstream's own looptap marks are dropped (:mod:`cassettes.wire.own`).

**Failures pass on as they happened** (:mod:`proxy.failures`, the addon's rules): an upstream that
resets or closes the connection, before its answer or in the middle of it, is a reset or a close
to the client, and ``transport_error`` says it in mitmproxy's words; a client that goes away while
its answer is pending or streaming is ``Client disconnected.``, and the upstream connection is
dropped. Nothing here raises into the event loop: a broken connection ends that connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import h11

from cassettes.providers import versioned_path
from cassettes.wire import edited
from cassettes.wire.exchange import Exchange
from cassettes.wire.own import OWN_RESPONSE_HEADERS
from proxy import messages
from proxy.failures import CLOSED, RESET
from proxy.forwarder.capture import Capture, decoded
from proxy.forwarder.splice import reset, splice
from proxy.forwarder.upstream import READ, Pool, Target, UpstreamConn

__all__ = ["MAX_BODY", "MAX_HEAD", "ClientConn", "Route", "Sink"]

#: The largest request head the forwarder reads (a larger one goes to mitmproxy).
MAX_HEAD = 1 << 16
#: The largest request body the forwarder holds (a larger one goes to mitmproxy, which holds it as
#: it always did).
MAX_BODY = 64 << 20
#: Request headers that send the connection to mitmproxy (a protocol switch, an interim answer, a
#: fork's edit marks: the addon's to take).
_SPLICED_HEADERS = frozenset(
    {b"upgrade", b"expect", edited.HEADER.encode(), edited.AUTH_HEADER.encode()}
)
_OWN = frozenset(name.encode() for name in OWN_RESPONSE_HEADERS)
#: Said after a transport error when the upstream's connection ended with a reset (the addon's
#: words).
_RESET_SAID = " (the upstream reset the connection)"


class Sink(Protocol):
    """Where round trips go (:class:`proxy.handoff.Handoff`)."""

    @property
    def running(self) -> bool: ...

    def hand_over(self, item: object, *, receipt: bool = False) -> object: ...

    def not_recorded(self, what: str) -> None: ...


@dataclass
class Route:
    """A reverse listener as the forwarder serves it."""

    name: str
    target: Target
    pool: Pool
    sink: Sink
    #: mitmproxy's internal listener for this route (the splice's other end).
    splice_host: str
    splice_port: int


@dataclass
class _Parsed:
    request: h11.Request
    body: bytes
    #: The request's bytes as they came (spliced whole if the upstream cannot be reached).
    raw: bytes
    started: float


class _Splice(Exception):
    """The connection goes to mitmproxy from the request being read."""


class _ClientGone(Exception):
    pass


def _spliced(req: h11.Request) -> bool:
    """Whether a request is mitmproxy's to handle (see the module's docstring)."""
    if req.http_version != b"1.1" or not req.target.startswith(b"/"):
        return True
    if not req.method.isalpha() or not req.method.isupper():
        return True
    for name, value in req.headers:  # h11 gives names lower-cased
        if name in _SPLICED_HEADERS:
            return True
        if name == b"connection" and b"upgrade" in value.lower():
            return True
    return False


def _with_host(raw: list[tuple[bytes, bytes]], authority: bytes) -> list[tuple[bytes, bytes]]:
    """``Host`` set to ``authority`` as mitmproxy sets it (``Headers.set_all``): the first one's
    value replaced where it stands, any other dropped, appended when there is none."""
    out: list[tuple[bytes, bytes]] = []
    done = False
    for k, v in raw:
        if k.lower() == b"host":
            if not done:
                out.append((k, authority))
                done = True
        else:
            out.append((k, v))
    if not done:
        out.append((b"Host", authority))
    return out


def _content_length(raw: list[tuple[bytes, bytes]]) -> int | None:
    """The announced length of a response body (not chunked), as the addon reads it."""
    length = te = None
    for k, v in raw:
        lk = k.lower()
        if lk == b"content-length" and length is None:
            length = v
        elif lk == b"transfer-encoding" and te is None:
            te = v
    if length is None or (te is not None and b"chunked" in te.lower()):
        return None
    try:
        n = int(length)
    except ValueError:
        return None
    return n if n >= 0 else None


class ClientConn:
    """Serves one client connection until it closes, is spliced, or fails."""

    def __init__(
        self, route: Route, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.route = route
        self.reader = reader
        self.writer = writer
        self.buf = bytearray()
        #: A request's answer is pending or streaming: the client going away now cancels it.
        self._watching = False
        self._gone = False
        self._task: asyncio.Task[Any] | None = None
        self._watch_protocol()

    # -- the client going away ------------------------------------------------------------------
    def _watch_protocol(self) -> None:
        """Learn at once when the client closes or resets its connection (its asyncio protocol's
        callbacks, wrapped): a pending answer is then cancelled, as mitmproxy cancels it."""
        try:
            proto: Any = self.writer.transport.get_protocol()
            eof: Callable[[], Any] = proto.eof_received
            lost: Callable[[Exception | None], Any] = proto.connection_lost
        except Exception:
            return

        def eof_received() -> Any:
            self._went()
            return eof()

        def connection_lost(exc: Exception | None) -> Any:
            self._went()
            return lost(exc)

        try:
            proto.eof_received = eof_received
            proto.connection_lost = connection_lost
        except Exception:
            pass

    def _went(self) -> None:
        if self._gone:
            return
        self._gone = True
        if self._watching and self._task is not None:
            self._task.cancel()

    # -- the connection ---------------------------------------------------------------------------
    async def run(self) -> None:
        self._task = asyncio.current_task()
        try:
            while True:
                try:
                    parsed = await self._read()
                except _Splice:
                    await self._splice(bytes(self.buf))
                    return
                if parsed is None:
                    return
                if not await self._forward(parsed):
                    return
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if not self.writer.transport.is_closing():
                self.writer.close()

    async def _splice(self, already: bytes) -> None:
        await splice(
            self.reader, self.writer, already, self.route.splice_host, self.route.splice_port
        )

    async def _read(self) -> _Parsed | None:
        """The next request, or ``None`` when the client closed the connection (between requests,
        or within one: mitmproxy drops such a half request too). Raises :class:`_Splice`."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        if self.buf:
            conn.receive_data(bytes(self.buf))
        request: h11.Request | None = None
        started = 0.0
        body: list[bytes] = []
        size = 0
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                raise _Splice from None  # mitmproxy answers it (its 400), as it always did
            if event is h11.NEED_DATA:
                data = await self.reader.read(READ)
                if not data:
                    return None
                if not self.buf and not (0x21 <= data[0] <= 0x7E):
                    self.buf += data  # a TLS ClientHello, a binary protocol: not HTTP/1.1 text
                    raise _Splice
                self.buf += data
                if len(self.buf) > MAX_HEAD + MAX_BODY:
                    raise _Splice
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                started = time.time()
                if _spliced(event):
                    raise _Splice
                length = next((v for k, v in event.headers if k == b"content-length"), None)
                if length is not None and int(length) > MAX_BODY:
                    raise _Splice
                request = event
            elif isinstance(event, h11.Data):
                body.append(bytes(event.data))
                size += len(event.data)
                if size > MAX_BODY:
                    raise _Splice
            elif isinstance(event, h11.EndOfMessage):
                if event.headers or request is None:
                    raise _Splice  # trailers: mitmproxy's
                rest = conn.trailing_data[0]
                raw = bytes(self.buf[: len(self.buf) - len(rest)])
                self.buf = bytearray(rest)
                return _Parsed(request, b"".join(body), raw, started)
            else:  # ConnectionClosed, PAUSED: nothing more for the forwarder
                return None

    async def _forward(self, p: _Parsed) -> bool:
        """Forward one request and stream its answer back; ``False`` when the connection is over."""
        route = self.route
        req = p.request
        raw = _with_host(list(req.headers.raw_items()), route.target.authority.encode())
        path = req.target.decode("utf-8", "surrogateescape")
        headers = decoded(raw)
        fixed = versioned_path(path, [k for k, _ in headers])
        cap = Capture(
            method=req.method.decode("ascii"),
            origin=route.target.origin,
            path=fixed if fixed is not None else path,
            request_headers=headers,
            request_body=p.body,
            started=p.started,
            client_path=path if fixed is not None else None,
        )
        try:
            up = await route.pool.get()
        except OSError:
            # Unreachable: mitmproxy says so to the client and records it, as it always did.
            await self._splice(p.raw + bytes(self.buf))
            return False
        target = cap.path.encode("utf-8", "surrogateescape") if fixed is not None else req.target
        try:
            out = up.h11.send(h11.Request(method=req.method, target=target, headers=raw))
            if p.body:
                out = (out or b"") + (up.h11.send(h11.Data(data=p.body)) or b"")
            out = (out or b"") + (up.h11.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            up.abort()
            await self._splice(p.raw + bytes(self.buf))
            return False
        done = _Done(route.sink, cap)
        self._watching = True
        try:
            if self._gone:
                raise _ClientGone
            up.writer.write(out)
            return await self._relay(up, cap, done, req.method == b"HEAD")
        except (asyncio.CancelledError, _ClientGone, ConnectionError) as exc:
            # (a ConnectionError out of the relay is the client's: the upstream's are read there)
            if isinstance(exc, asyncio.CancelledError):
                if not self._gone:
                    raise  # the recorder stopping
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    task.uncancel()
            up.abort()
            done(None if done.given else "Client disconnected.")
            return False
        finally:
            self._watching = False

    async def _relay(self, up: UpstreamConn, cap: Capture, done: _Done, head: bool) -> bool:
        """The upstream's answer, streamed to the client; ``True`` when both connections go on."""
        h = up.h11
        w = self.writer
        how: str | None = None
        before = bytearray()  # what came before the response head (for the error's words)
        length: int | None = None
        chunked = False
        got = 0
        while True:
            try:
                event = h.next_event()
            except h11.RemoteProtocolError as exc:
                return self._upstream_failed(up, cap, done, how, before, exc)
            if event is h11.NEED_DATA:
                try:
                    data = await up.reader.read(READ)
                except ConnectionResetError:
                    how, data = RESET, b""
                except OSError:
                    how, data = CLOSED, b""
                if not data:
                    how = how or CLOSED
                elif cap.status is None and len(before) < 200:
                    before += data[:200]
                h.receive_data(data)
            elif isinstance(event, h11.Response):
                cap.response_started = time.time()
                fields = list(event.headers.raw_items())
                kept = [(k, v) for k, v in fields if k.lower() not in _OWN]
                if len(kept) != len(fields):
                    present = {k.lower() for k, _ in fields}
                    cap.marks_refused = [n for n in OWN_RESPONSE_HEADERS if n.encode() in present]
                cap.status = event.status_code
                cap.reason = event.reason.decode("latin-1")
                cap.response_headers = decoded(kept)
                length = _content_length(kept)
                te = next((v for k, v in kept if k.lower() == b"transfer-encoding"), b"")
                chunked = b"chunked" in te.lower()
                w.write(
                    b"HTTP/%s %d %s\r\n%s\r\n"
                    % (
                        event.http_version,
                        event.status_code,
                        event.reason,
                        b"".join(b"%s: %s\r\n" % kv for kv in kept),
                    )
                )
            elif isinstance(event, h11.Data):
                data = bytes(event.data)
                if not data:
                    continue
                cap.chunk(data)
                if length:
                    got += len(data)
                    if got >= length:
                        done(None)  # before the last byte goes on
                w.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                await w.drain()
            elif isinstance(event, h11.EndOfMessage):
                cap.response_ended = time.time()
                done(None)
                if chunked and not head:
                    w.write(b"0\r\n\r\n")
                keep = h.our_state is h11.DONE and h.their_state is h11.DONE
                if keep:
                    self.route.pool.put(up)
                else:
                    up.abort()
                await w.drain()
                return keep
            elif isinstance(event, h11.InformationalResponse):
                continue  # an interim answer: not the response
            else:  # ConnectionClosed before a response: h11 raised above
                return self._upstream_failed(up, cap, done, how or CLOSED, before, None)

    def _upstream_failed(
        self,
        up: UpstreamConn,
        cap: Capture,
        done: _Done,
        how: str | None,
        before: bytes | bytearray,
        exc: Exception | None,
    ) -> bool:
        """The upstream's connection ended (or its answer could not be read) before the answer
        did: recorded in mitmproxy's words, and passed on to the client as it happened."""
        up.abort()
        if cap.status is not None:
            said = f"HTTP/1 protocol error: {exc}"
        elif how is None:
            said = f"Cannot parse HTTP response: {exc}"
        elif before:
            said = f"unexpected server response: {bytes(before)!r}"
        else:
            said = "server closed connection"
        done(said + (_RESET_SAID if how == RESET else ""))
        if how == RESET:
            reset(self.writer)
        else:
            self.writer.close()
        return False


class _Done:
    """Hands a round trip to the writer, once (fails open: a capture error is counted and said,
    the traffic goes on)."""

    __slots__ = ("cap", "given", "sink")

    def __init__(self, sink: Sink, cap: Capture) -> None:
        self.sink = sink
        self.cap = cap
        self.given = False

    def __call__(self, error: str | None) -> None:
        if self.given:
            return
        self.given = True
        if not self.sink.running:
            return
        try:
            ex: Exchange = self.cap.exchange(error)
            self.sink.hand_over(ex)
        except Exception as exc:
            messages.learn_headers(self.cap.request_headers)  # the text may carry a credential
            self.sink.not_recorded(
                messages.safe(
                    f"could not capture {self.cap.method} {self.cap.origin}{self.cap.path}: "
                    f"{type(exc).__name__}: {exc}"
                )
            )
