"""The one HTTP/1.1 request reader of looptap's loopback servers: the replay server, and the test
suite's fake upstream (``tests/support/upstream.py``).

:func:`read_request` reads one request from an ``asyncio`` stream: the head (request line and
headers, at most the stream's buffer limit: ``asyncio.start_server(limit=…)``), then the body by
``Content-Length`` or ``Transfer-Encoding: chunked`` (at most ``max_body`` bytes), answering
``Expect: 100-continue`` on the way. The body is returned as sent (no ``Content-Encoding`` is
undone). A request that cannot be read raises :class:`BadRequest`, which :func:`refuse` answers
with a short plain-text 400 (408, 413, 414, 431, 501, 505) before the connection is closed: a
malformed or oversized request never reaches a handler, and never turns into a traceback.

The head is read as RFC 9112 says a server must: a request line of a method token, a target
(origin, absolute, authority or asterisk form, visible ASCII only) and ``HTTP/1.x``; header lines
``name: value`` with a token name and no whitespace before the colon (no obsolete line folding),
exactly one ``Host`` in HTTP/1.1; ``Content-Length`` ASCII digits only, several values only when
they agree; ``Transfer-Encoding`` only ``chunked``, never with a ``Content-Length``; chunk sizes
hex digits only. Timeouts (``idle_timeout``, ``read_timeout``) are progress based: a connection
with no request for ``idle_timeout`` seconds is closed, a head must arrive within
``read_timeout`` and a body may not pause longer than that (answered 408). They are kept by one
:class:`Watchdog` per connection (a deadline moved per phase, one timer), not a timer per read.

:data:`HOP_BY_HOP` is the one set of headers that belong to a connection, not to a message: no
server or forwarder of looptap passes them on.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import NoReturn
from urllib.parse import urlsplit

from cassettes.errors import CassetteError
from cassettes.wire.exchange import Headers, header

__all__ = ["HOP_BY_HOP", "MAX_BODY", "MAX_HEADERS", "MAX_TARGET", "MAX_TRAILERS", "BadRequest", "Request", "Watchdog", "read_request", "refuse"]

#: Headers of the connection, not of the message (RFC 9110 7.6.1, and the framing headers a
#: sender sets itself): never relayed or replayed as they came.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "content-length", "host"}
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

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(r"HTTP/([0-9])\.([0-9])")
_DIGITS = re.compile(r"[0-9]{1,19}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass
class Request:
    method: str
    #: Origin form (``/v1/chat/completions?x=1``), also for a request sent in absolute form.
    target: str
    headers: Headers
    body: bytes

    def header(self, name: str) -> str | None:
        return header(self.headers, name)


class BadRequest(CassetteError, ValueError):
    """A request that cannot be read; ``status`` is what to answer (400, 408, 413, 414, 431, 501, 505)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Watchdog:
    """The deadlines of one connection, kept by one timer: each phase (idle, a head, a body piece,
    a write) moves the deadline (a float, no timer made or cancelled for it); the timer, when it
    fires, cancels the connection's task if the deadline has passed, else waits on until it. A
    phase that catches the cancellation asks :meth:`expired` whether it was this watchdog's (then
    it is taken back: the task goes on) or someone else's (a server stopping: let it through)."""

    def __init__(self, task: asyncio.Task[object] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        task = task if task is not None else asyncio.current_task()
        assert task is not None
        self._task = task
        self._deadline: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._fired = False

    def arm(self, seconds: float | None) -> None:
        """From now, the phase may last ``seconds`` (``None``: no limit)."""
        if seconds is None:
            self._deadline = None
            return
        self._deadline = deadline = self._loop.time() + seconds
        if self._handle is not None and self._handle.when() > deadline:  # an earlier deadline than the timer's
            self._handle.cancel()
            self._handle = None
        if self._handle is None:
            self._handle = self._loop.call_at(deadline, self._check)

    def disarm(self) -> None:
        self._deadline = None

    def _check(self) -> None:
        self._handle = None
        if self._deadline is None:
            return
        if self._loop.time() >= self._deadline:
            self._deadline = None
            self._fired = True
            self._task.cancel()
        else:
            self._handle = self._loop.call_at(self._deadline, self._check)

    def expired(self) -> bool:
        """Whether the cancellation being handled came from this watchdog (taken back if so)."""
        if not self._fired:
            return False
        self._fired = False
        self._task.uncancel()
        return True

    def close(self) -> None:
        self._deadline = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def _shown(text: str | bytes, n: int = 40) -> str:
    """A piece of the request as an answer names it: escaped, at most ``n`` characters, marked when cut."""
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
    watchdog: Watchdog | None = None,
) -> Request | None:
    """The next request on the connection, or ``None`` when the client closed it between requests
    or sent nothing for ``idle_timeout`` seconds. Raises :class:`BadRequest` (a head that took
    longer than ``read_timeout``, or a body that paused longer: 408); ``ConnectionError`` for a
    broken connection. ``started`` is called when the request's first byte has arrived (until
    then the connection is idle: a server may close it). ``watchdog``: the connection's (a server
    keeps one per connection); without it, one for this request."""
    own = watchdog is None
    dog = Watchdog() if watchdog is None else watchdog
    try:
        return await _read_request(reader, writer, dog, max_body, idle_timeout, read_timeout, started)
    finally:
        dog.disarm()
        if own:
            dog.close()


async def _read_request(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    dog: Watchdog,
    max_body: int,
    idle_timeout: float | None,
    read_timeout: float | None,
    started: Callable[[], object] | None,
) -> Request | None:
    dog.arm(idle_timeout)
    try:
        first = await reader.readexactly(1)
        for _ in range(4):  # RFC 9112 2.2: ignore empty lines before the request line
            if first not in (b"\r", b"\n"):
                break
            first = await reader.readexactly(1)
    except asyncio.IncompleteReadError:
        return None
    except asyncio.CancelledError:
        if dog.expired():
            return None
        raise
    if started is not None:
        started()
    dog.arm(read_timeout)
    try:
        head = first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise BadRequest(f"the request ended before its head did ({len(exc.partial) + 1:,} bytes)") from None
    except asyncio.LimitOverrunError:
        raise BadRequest("the request head is too large", 431) from None
    except asyncio.CancelledError:
        if dog.expired():
            raise BadRequest(f"the request head did not arrive within {read_timeout:g} s", 408) from None
        raise
    req, codings, lengths = _parse_head(head)
    if req.target.startswith(("http://", "https://")):  # absolute form: sent as to a proxy
        try:
            u = urlsplit(req.target)
        except ValueError:
            raise BadRequest(f"bad request target {_shown(req.target)}") from None
        req.target = (u.path or "/") + (f"?{u.query}" if u.query else "")
    chunked, length = _framing(codings, lengths, max_body)
    if (req.header("expect") or "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    if chunked:
        req.body = await _chunked(reader, max_body, read_timeout, dog)
    elif length:
        req.body = await _exactly(reader, length, read_timeout, "the request body", dog)
    return req


#: A request line and a block of header lines as RFC 9112 allows them: one regular expression
#: each checks the common case; a head that does not match is read line by line for the reason.
_REQUEST_LINE = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP/1\.[0-9]")
_FIELD_LINES = re.compile(r"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\x00-\x08\x0a-\x1f\x7f]*\r\n)*")
_FIELD = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):([^\x00-\x08\x0a-\x1f\x7f]*)\r\n")


def _parse_head(head: bytes) -> tuple[Request, list[str], list[str]]:
    """The request of ``head`` (ending with the empty line), with its Transfer-Encoding and
    Content-Length values."""
    text = head[:-2].decode("latin-1")
    eol = text.index("\r\n")
    line, block = text[:eol], text[eol + 2 :]
    m = _REQUEST_LINE.fullmatch(line)
    if m is None:
        _bad_line(line)
    method, target = m.group(1), m.group(2)
    if len(target) > MAX_TARGET:
        raise BadRequest(f"the request target is {len(target):,} characters long, over {MAX_TARGET:,}", 414)
    if not (target[0] == "/" or target.startswith(("http://", "https://")) or method == "CONNECT" or (target == "*" and method == "OPTIONS")):
        raise BadRequest(f"bad request target {_shown(target)}")
    if block.count("\r\n") > MAX_HEADERS:
        raise BadRequest(f"more than {MAX_HEADERS} header lines", 431)
    if _FIELD_LINES.fullmatch(block) is None:
        _bad_fields(block)
    headers: Headers = []
    hosts = 0
    codings: list[str] = []
    lengths: list[str] = []
    for name, value in _FIELD.findall(block):
        value = value.strip(" \t")
        headers.append((name, value))
        lname = name.lower()
        if lname == "host":
            hosts += 1
        elif lname == "transfer-encoding":
            codings.append(value)
        elif lname == "content-length":
            lengths.append(value)
    if line.endswith("1.1") and hosts != 1:
        raise BadRequest("an HTTP/1.1 request needs exactly one Host header")
    return Request(method.upper(), target, headers, b""), codings, lengths


def _bad_line(line: str) -> NoReturn:
    """Why a request line is refused (it does not match :data:`_REQUEST_LINE`)."""
    parts = line.split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
        raise BadRequest(f"bad request line {_shown(line, 200)}")
    _method, target, version = parts
    v = _VERSION.fullmatch(version)
    if v is None:
        raise BadRequest(f"bad request line {_shown(line, 200)}")
    if v.group(1) != "1":
        raise BadRequest(f"HTTP version {version} is not supported (HTTP/1.1 is)", 505)
    if len(target) > MAX_TARGET:
        raise BadRequest(f"the request target is {len(target):,} characters long, over {MAX_TARGET:,}", 414)
    raise BadRequest(f"bad request target {_shown(target)}: visible ASCII only")


def _bad_fields(block: str) -> NoReturn:
    """Why a block of header lines is refused (it does not match :data:`_FIELD_LINES`)."""
    for ln in block.split("\r\n"):
        if ln[:1] in (" ", "\t"):
            raise BadRequest("a header line is folded (obsolete line folding is not accepted)")
        name, colon, value = ln.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise BadRequest(f"bad header line {_shown(ln)}")
        if _BAD_VALUE.search(value):
            raise BadRequest(f"header {_shown(name)} holds a control character")
    raise BadRequest("bad header lines")


def _framing(codings: list[str], lengths: list[str], max_body: int) -> tuple[bool, int]:
    """(chunked, Content-Length) of the body, read as RFC 9112 section 6 says."""
    if codings:
        if lengths:
            raise BadRequest("a request with both Transfer-Encoding and Content-Length")
        codings = [c.strip().lower() for v in codings for c in v.split(",")]
        if codings != ["chunked"]:
            raise BadRequest(f"Transfer-Encoding {_shown(', '.join(codings))} is not supported (only chunked is)", 501)
        return True, 0
    if not lengths:
        return False, 0
    if len(lengths) > 1 or "," in lengths[0]:
        lengths = [c.strip() for v in lengths for c in v.split(",")]
    for value in lengths:
        if not _DIGITS.fullmatch(value):
            raise BadRequest(f"bad Content-Length {_shown(value)}: digits only")
    if len({int(x) for x in lengths}) > 1:
        raise BadRequest(f"conflicting Content-Length values {_shown(', '.join(lengths))}")
    n = int(lengths[0])
    if n > max_body:
        raise BadRequest(f"the request body ({n:,} bytes) is larger than {max_body:,} bytes", 413)
    return False, n


async def _exactly(reader: asyncio.StreamReader, n: int, timeout: float | None, what: str, dog: Watchdog) -> bytes:
    """``n`` bytes, read in pieces, none of which may take longer than ``timeout`` seconds."""
    parts: list[bytes] = []
    left = n
    while left:
        dog.arm(timeout)
        try:
            data = await reader.read(min(left, _PIECE))
        except asyncio.CancelledError:
            if dog.expired():
                raise BadRequest(f"{what} stalled: nothing for {timeout:g} s after {n - left:,} of {n:,} bytes", 408) from None
            raise
        if not data:
            raise BadRequest(f"{what} ended after {n - left:,} of {n:,} bytes")
        parts.append(data)
        left -= len(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def _line(reader: asyncio.StreamReader, timeout: float | None, dog: Watchdog) -> bytes:
    dog.arm(timeout)
    try:
        return await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise BadRequest("a chunk-size or trailer line is too long") from None
    except asyncio.IncompleteReadError:
        raise BadRequest("the chunked request body ended before its last chunk") from None
    except asyncio.CancelledError:
        if dog.expired():
            raise BadRequest(f"the chunked request body stalled: nothing for {timeout:g} s", 408) from None
        raise


async def _chunked(reader: asyncio.StreamReader, max_body: int, timeout: float | None, dog: Watchdog) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        line = await _line(reader, timeout, dog)
        size_text = line[:-2].split(b";")[0].rstrip(b" \t")
        if not _HEX.fullmatch(size_text):
            raise BadRequest(f"bad chunk size {_shown(line)}")
        size = int(size_text, 16)
        if size == 0:
            for _ in range(MAX_TRAILERS + 1):
                if await _line(reader, timeout, dog) == b"\r\n":
                    return b"".join(chunks)
            raise BadRequest(f"more than {MAX_TRAILERS} trailer lines")
        total += size
        if total > max_body:
            raise BadRequest(f"the request body is larger than {max_body:,} bytes", 413)
        chunks.append(await _exactly(reader, size, timeout, "a chunk of the request body", dog))
        if await _exactly(reader, 2, timeout, "a chunk of the request body", dog) != b"\r\n":
            raise BadRequest("a chunk does not end with CRLF")


async def refuse(writer: asyncio.StreamWriter, exc: BadRequest) -> None:
    """Answer a request that could not be read (the connection is to be closed after it)."""
    body = f"{exc}\n".encode()
    try:
        reason = HTTPStatus(exc.status).phrase
    except ValueError:
        reason = "Bad Request"
    head = (
        f"HTTP/1.1 {exc.status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    with contextlib.suppress(Exception):
        writer.write(head.encode("latin-1") + body)
        async with asyncio.timeout(_REFUSE_DRAIN):  # a client that does not read its answer
            await writer.drain()
