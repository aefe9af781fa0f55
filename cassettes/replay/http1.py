"""The one HTTP/1.1 request reader of looptap's loopback servers: the replay server, and the test
suite's fake upstream (``tests/support/upstream.py``).

:func:`read_request` reads one request from an ``asyncio`` stream: the head (request line and
headers, at most the stream's buffer limit: ``asyncio.start_server(limit=…)``), then the body by
``Content-Length`` or ``Transfer-Encoding: chunked`` (at most ``max_body`` bytes), answering
``Expect: 100-continue`` on the way. The body is returned as sent (no ``Content-Encoding`` is
undone). A request that cannot be read raises :class:`BadRequest`, which :func:`refuse` answers
with a short plain-text 400 (413, 431) before the connection is closed: a malformed or oversized
request never reaches a handler, and never turns into a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

from cassettes.errors import CassetteError
from cassettes.wire.exchange import Headers, header

__all__ = ["MAX_BODY", "MAX_TRAILERS", "BadRequest", "Request", "read_request", "refuse"]

#: The largest request body read (bytes), unless a server says otherwise.
MAX_BODY = 1 << 30
#: The most trailer lines after a chunked body.
MAX_TRAILERS = 100


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
    """A request that cannot be read; ``status`` is what to answer (400, 413 or 431)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, max_body: int = MAX_BODY) -> Request | None:
    """The next request on the connection, or ``None`` when the client closed it between requests.
    Raises :class:`BadRequest`; ``asyncio.IncompleteReadError`` for a client that went away
    within a request, ``ConnectionError`` for a broken connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise
        return None
    except asyncio.LimitOverrunError:
        raise BadRequest("the request head is too large", 431) from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise BadRequest(f"bad request line {lines[0][:200]!r}")
    method, target, _version = parts
    headers: Headers = []
    for ln in lines[1:]:
        if ":" in ln:
            k, v = ln.split(":", 1)
            headers.append((k.strip(), v.strip()))
    req = Request(method.upper(), target, headers, b"")
    if target.startswith(("http://", "https://")):  # absolute form: sent as to a proxy
        u = urlsplit(target)
        req.target = u.path + (f"?{u.query}" if u.query else "")
    chunked = (req.header("transfer-encoding") or "").lower() == "chunked"
    length = 0 if chunked else _content_length(req.header("content-length"), max_body)
    if (req.header("expect") or "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    if chunked:
        req.body = await _chunked(reader, max_body)
    else:
        req.body = await reader.readexactly(length) if length else b""
    return req


def _content_length(value: str | None, max_body: int) -> int:
    if value is None:
        return 0
    try:
        n = int(value)
    except ValueError:
        raise BadRequest(f"bad Content-Length {value[:40]!r}") from None
    if n < 0:
        raise BadRequest(f"bad Content-Length {value[:40]!r}")
    if n > max_body:
        raise BadRequest(f"the request body ({n:,} bytes) is larger than {max_body:,} bytes", 413)
    return n


async def _line(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise BadRequest("a chunk-size or trailer line is too long") from None


async def _chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        line = await _line(reader)
        try:
            size = int(line.split(b";")[0].strip(), 16)
        except ValueError:
            raise BadRequest(f"bad chunk size {line[:40]!r}") from None
        if size < 0:
            raise BadRequest(f"bad chunk size {line[:40]!r}")
        if size == 0:
            for _ in range(MAX_TRAILERS + 1):
                if await _line(reader) == b"\r\n":
                    return b"".join(chunks)
            raise BadRequest(f"more than {MAX_TRAILERS} trailer lines")
        total += size
        if total > max_body:
            raise BadRequest(f"the request body is larger than {max_body:,} bytes", 413)
        chunks.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
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
        await writer.drain()
