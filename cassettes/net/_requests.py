"""The one HTTP/1.1 request reader of looptap's loopback servers: the replay server, and the test
suite's fake upstream (``tests/support/upstream.py``).

:func:`read_request` reads one request from an ``asyncio`` stream. The protocol is h11's: the head
(request line and headers) and the body's framing (``Content-Length``, ``Transfer-Encoding:
chunked``, its chunk-size lines and trailers) are parsed and checked by an ``h11`` server
connection. What looptap keeps is its own: it takes from the stream only what belongs to this
request (the head up to its empty line, at most the stream's buffer limit:
``asyncio.start_server(limit=…)``; then each chunk-size line, chunk and trailer line, or the
``Content-Length`` bytes, so the next request on the connection stays in the stream, whoever
answers this one), the limits h11 leaves to a server (``max_body`` bytes, :data:`MAX_TARGET`,
:data:`MAX_HEADERS`, :data:`MAX_TRAILERS`, HTTP/1.x only, no obsolete line folding, never both
``Transfer-Encoding`` and ``Content-Length``), and the deadlines. ``Expect: 100-continue`` is
answered on the way. The body is returned as sent (no ``Content-Encoding`` is undone). A request
that cannot be read raises :class:`BadRequest`, which :func:`refuse` answers with a short
plain-text 400 (408, 413, 414, 431, 501, 505) before the connection is closed: a malformed or
oversized request never reaches a handler, and never turns into a traceback.

Timeouts (``idle_timeout``, ``read_timeout``) are progress based: a connection with no request
for ``idle_timeout`` seconds is closed, a head must arrive within ``read_timeout`` and a body may
not pause longer than that (answered 408).

:data:`HOP_BY_HOP` is the one set of headers that belong to a connection, not to a message: no
server or forwarder of looptap passes them on.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..errors import CassetteError
from ..untrusted import clean_line
from ..wire import Headers, header

if TYPE_CHECKING:
    import h11

__all__ = [
    "HOP_BY_HOP",
    "MAX_BODY",
    "BadRequest",
    "Request",
    "read_request",
    "refuse",
]

#: Headers of the connection, not of the message (RFC 9110 7.6.1, and the framing headers a
#: sender sets itself): never relayed or replayed as they came.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
    }
)

#: The largest request body read (bytes), unless a server says otherwise.
MAX_BODY = 1 << 30
#: The most trailer lines after a chunked body.
MAX_TRAILERS = 100
#: The most header lines in a request head (more: 431).
MAX_HEADERS = 256
#: The longest request target (more: 414).
MAX_TARGET = 1 << 16
#: Seconds a refusal may take to reach a client before the connection is closed anyway.
_REFUSE_DRAIN = 10.0
#: How much of a body is read at once (a body arrives in pieces of at most this).
_PIECE = 1 << 20


@dataclass
class Request:
    method: str
    #: Origin form (``/v1/chat/completions?x=1``), also for a request sent in absolute form.
    target: str
    headers: Headers
    body: bytes
    #: The whole URL a request sent in absolute form named (as to a forward proxy), else ``None``.
    absolute: str | None = None

    def header(self, name: str) -> str | None:
        return header(self.headers, name)


class BadRequest(CassetteError, ValueError):
    """A request that cannot be read; ``status`` is what to answer (400, 408, 413, 414, 431, 501,
    505)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _shown(text: str | bytes, n: int = 40) -> str:
    """A piece of the request as an answer names it: escaped, at most ``n`` characters, marked when
    cut."""
    cut = text[:n]
    return repr(cut) + (f"… ({len(text):,} in all)" if len(text) > n else "")


async def read_request(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    max_body: int = MAX_BODY,
    idle_timeout: float | None = None,
    read_timeout: float | None = None,
    started: Callable[[], object] | None = None,
) -> Request | None:
    """The next request on the connection, or ``None`` when the client closed it between requests
    or sent nothing for ``idle_timeout`` seconds. Raises :class:`BadRequest` (a head that took
    longer than ``read_timeout``, or a body that paused longer: 408); ``ConnectionError`` for a
    broken connection. ``started`` is called when the request's first byte has arrived (until
    then the connection is idle: a server may close it)."""
    import h11

    first = await _first_byte(reader, idle_timeout)
    if first is None:
        return None
    if started is not None:
        started()
    head = await _head(reader, first, read_timeout)
    # h11 reads the head (and, fed piece by piece below, the body's framing); looptap only takes
    # from the stream what belongs to this request, and adds the limits h11 leaves to a server.
    # h11 would join it; RFC 9112 5.2 lets a server refuse it, as looptap did
    if _FOLDED.search(head):
        raise BadRequest("a header line is folded (obsolete line folding is not accepted)")
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=max(len(head) + 1, _TRAILERS_SIZE))
    event = _event(conn, head)
    assert isinstance(event, h11.Request)
    req = _request(event)
    if req.target.startswith(("http://", "https://")):  # absolute form: sent as to a proxy
        try:
            u = urlsplit(req.target)
        except ValueError:
            raise BadRequest(f"bad request target {_shown(req.target)}") from None
        req.absolute = req.target
        req.target = (u.path or "/") + (f"?{u.query}" if u.query else "")
    chunked = (req.header("transfer-encoding") or "").lower() == "chunked"
    if chunked and req.header("content-length") is not None:
        # RFC 9112 6.1: a smuggling shape
        raise BadRequest("a request with both Transfer-Encoding and Content-Length")
    # h11 checked: digits, equal values
    length = int((req.header("content-length") or "0").split(",")[0])
    if length > max_body:
        raise BadRequest(
            f"the request body ({length:,} bytes) is larger than {max_body:,} bytes", 413
        )
    if conn.they_are_waiting_for_100_continue:
        writer.write(
            conn.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue"))
            or b""
        )
        await writer.drain()
    if chunked:
        req.body = await _chunked(reader, conn, max_body, read_timeout)
    elif length:
        # exactly the length h11 read from the head; the bytes themselves are not h11's business
        # (fed to it, a 50 MB body would be copied twice more)
        req.body = await _exactly(reader, length, read_timeout, "the request body")
    return req


async def _first_byte(reader: asyncio.StreamReader, idle_timeout: float | None) -> bytes | None:
    """The request's first byte, waited for at most ``idle_timeout``; ``None`` when the client
    closed the connection or stayed idle."""
    try:
        async with asyncio.timeout(idle_timeout):
            first = await reader.readexactly(1)
            for _ in range(4):  # RFC 9112 2.2: ignore empty lines before the request line
                if first not in (b"\r", b"\n"):
                    break
                first = await reader.readexactly(1)
    except (asyncio.IncompleteReadError, TimeoutError):
        return None
    return first


async def _head(reader: asyncio.StreamReader, first: bytes, read_timeout: float | None) -> bytes:
    """The request head after its ``first`` byte, up to its empty line, within ``read_timeout``;
    raises :class:`BadRequest` (431 too large, 408 too slow)."""
    try:
        async with asyncio.timeout(read_timeout):
            return first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise BadRequest(
            f"the request ended before its head did ({len(exc.partial) + 1:,} bytes)"
        ) from None
    except asyncio.LimitOverrunError:
        raise BadRequest("the request head is too large", 431) from None
    except TimeoutError:
        raise BadRequest(
            f"the request head did not arrive within {read_timeout:g} s", 408
        ) from None


_FOLDED = re.compile(rb"\r\n[ \t]")
#: What h11 may hold of one incomplete part (the trailer block is fed to it line by line).
_TRAILERS_SIZE = 1 << 20
_H11_BYTES = re.compile(r"bytearray\((b'[^']*'|b\"[^\"]*\")\)")
#: h11's reasons in looptap's words (an h11 reason not listed is shown as h11 gives it).
_REASONS = (
    ("illegal request line: ", "bad request line "),
    ("illegal header line: ", "bad header line "),
    ("illegal chunk header: ", "bad chunk size "),
    ("malformed chunk footer", "a chunk does not end with CRLF"),
    ("Missing mandatory Host", "an HTTP/1.1 request needs exactly one Host header"),
    ("Found multiple Host", "an HTTP/1.1 request needs exactly one Host header"),
    ("bad Content-Length", "bad Content-Length: digits only"),
    ("conflicting Content-Length", "conflicting Content-Length values"),
    ("Only Transfer-Encoding: chunked", "a Transfer-Encoding other than chunked is not supported"),
)


def _said(exc: Exception) -> str:
    """h11's reason for refusing a request, as an answer may show it (bytes shown escaped, cut)."""
    text = _H11_BYTES.sub(lambda m: m.group(1), clean_line(str(exc)))
    for h11_words, ours in _REASONS:
        if text.startswith(h11_words):
            text = ours + text[len(h11_words) :] if ours.endswith(" ") else ours
            break
    return text[:200]


def _event(conn: h11.Connection, data: bytes) -> object:
    """The next event of ``conn`` once ``data`` is fed to it; a request h11 refuses is a
    :class:`BadRequest`."""
    import h11

    if data:
        conn.receive_data(data)
    try:
        return conn.next_event()
    except h11.RemoteProtocolError as exc:
        raise BadRequest(_said(exc), exc.error_status_hint) from None


def _request(event: h11.Request) -> Request:
    """The request h11 read, with the limits it leaves to a server (version, target, header
    count)."""
    method, target = event.method.decode("ascii"), event.target.decode("latin-1")
    if event.http_version[:1] != b"1":
        raise BadRequest(
            f"HTTP version {event.http_version.decode('ascii', 'replace')} "
            "is not supported (HTTP/1.1 is)",
            505,
        )
    if len(target) > MAX_TARGET:
        raise BadRequest(
            f"the request target is {len(target):,} characters long, over {MAX_TARGET:,}", 414
        )
    if not (
        target[0] == "/"
        or target.startswith(("http://", "https://"))
        or method == "CONNECT"
        or (target == "*" and method == "OPTIONS")
    ):
        raise BadRequest(f"bad request target {_shown(target)}")
    raw = event.headers.raw_items()
    if len(raw) > MAX_HEADERS:
        raise BadRequest(f"more than {MAX_HEADERS} header lines", 431)
    return Request(
        method.upper(), target, [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw], b""
    )


async def _exactly(reader: asyncio.StreamReader, n: int, timeout: float | None, what: str) -> bytes:
    """``n`` bytes, read in pieces, none of which may take longer than ``timeout`` seconds."""
    parts: list[bytes] = []
    left = n
    while left:
        try:
            async with asyncio.timeout(timeout):
                data = await reader.read(min(left, _PIECE))
        except TimeoutError:
            raise BadRequest(
                f"{what} stalled: nothing for {timeout:g} s after {n - left:,} of {n:,} bytes", 408
            ) from None
        if not data:
            raise BadRequest(f"{what} ended after {n - left:,} of {n:,} bytes")
        parts.append(data)
        left -= len(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def _line(reader: asyncio.StreamReader, timeout: float | None) -> bytes:
    try:
        async with asyncio.timeout(timeout):
            return await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise BadRequest("a chunk-size or trailer line is too long") from None
    except asyncio.IncompleteReadError:
        raise BadRequest("the chunked request body ended before its last chunk") from None
    except TimeoutError:
        raise BadRequest(
            f"the chunked request body stalled: nothing for {timeout:g} s", 408
        ) from None


async def _chunked(
    reader: asyncio.StreamReader,
    conn: h11.Connection,
    max_body: int,
    timeout: float | None,
) -> bytes:
    """A chunked body: each chunk-size line, chunk and trailer line taken from the stream (never
    beyond the body's end) and fed to h11, which reads the framing."""
    import h11

    chunks: list[bytes] = []
    total = 0
    while True:
        line = await _line(reader, timeout)
        event = _event(conn, line)  # h11 checks the chunk-size line
        size = int(line.split(b";")[0].strip(b" \t\r\n"), 16)  # as h11 read it
        if size == 0:
            for _ in range(MAX_TRAILERS + 1):
                if isinstance(event, h11.EndOfMessage):
                    return b"".join(chunks)
                event = _event(conn, await _line(reader, timeout))
            raise BadRequest(f"more than {MAX_TRAILERS} trailer lines")
        total += size
        if total > max_body:
            raise BadRequest(f"the request body is larger than {max_body:,} bytes", 413)
        event = _event(
            conn, await _exactly(reader, size + 2, timeout, "a chunk of the request body")
        )
        while isinstance(event, h11.Data):
            chunks.append(bytes(event.data))
            event = _event(conn, b"")


async def refuse(writer: asyncio.StreamWriter, exc: BadRequest) -> None:
    """Answer a request that could not be read (the connection is to be closed after it)."""
    from ._messages import Answer

    body = f"{exc}\n".encode()
    answer = Answer("GET", close=True)
    with contextlib.suppress(Exception):
        head = answer.head(
            exc.status,
            [
                ("content-type", "text/plain; charset=utf-8"),
                ("content-length", str(len(body))),
                ("connection", "close"),
            ],
        )
        writer.write(head + answer.data(body) + answer.end())
        async with asyncio.timeout(_REFUSE_DRAIN):  # a client that does not read its answer
            await writer.drain()
