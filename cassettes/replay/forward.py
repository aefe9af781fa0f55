"""The replay server's HTTP/1.1 client: a request passed on to a live upstream, its answer relayed.

Used for new episodes (the cassette lacks the answer: the request goes to a recorder) and past a
fork's cursor. One request per connection (``Connection: close``), ``http`` or ``https`` (the
system's CA store). Every wait is bounded and progress based: connecting within
``connect_timeout``, the status line and headers within ``read_timeout``, and the body may not
pause longer than ``read_timeout``; a status line, header block or chunk size that is not
HTTP/1.1 raises :class:`UpstreamError`, as does an upstream that breaks off.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from cassettes.errors import CassetteError
from cassettes.replay.http1 import HOP_BY_HOP
from cassettes.wire.exchange import Headers, header

__all__ = ["CONNECT_TIMEOUT", "READ_TIMEOUT", "Upstream", "UpstreamError", "UpstreamResponse"]

#: Seconds to connect to the upstream (and finish TLS).
CONNECT_TIMEOUT = 30.0
#: Seconds the upstream may take to start its answer, or pause inside it (a model thinking
#: before its first token can take minutes: generous).
READ_TIMEOUT = 600.0
#: The longest status line, header line or chunk-size line read.
_LINE = 1 << 16
_MAX_HEADERS = 256
_STATUS = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: [^\r\n]*)?\r\n")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class UpstreamError(CassetteError):
    """The upstream could not be reached, or answered something that is not HTTP/1.1."""


@dataclass
class UpstreamResponse:
    status: int
    headers: Headers
    _reader: asyncio.StreamReader
    _writer: asyncio.StreamWriter
    _read_timeout: float | None

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives (a chunk of a chunked body is one piece), framing removed."""
        try:
            if (header(self.headers, "transfer-encoding") or "").lower() == "chunked":
                async for piece in self._chunked():
                    yield piece
            elif (length := header(self.headers, "content-length")) is not None:
                if not length.isascii() or not length.isdigit():
                    raise UpstreamError(f"the upstream sent a bad Content-Length {length[:40]!r}")
                left = int(length)
                while left:
                    data = await self._read(self._reader.read(min(left, 1 << 20)), "its body")
                    if not data:
                        raise UpstreamError(f"the upstream's body ended {left:,} bytes short")
                    left -= len(data)
                    yield data
            elif self.status not in (204, 304) and self.status >= 200:
                while data := await self._read(self._reader.read(1 << 20), "its body"):
                    yield data
        finally:
            self.close()

    async def _chunked(self) -> AsyncIterator[bytes]:
        while True:
            line = await self._line()
            size_text = line[:-2].split(b";")[0].strip()
            if not _HEX.fullmatch(size_text):
                raise UpstreamError(f"the upstream sent a bad chunk size {line[:40]!r}")
            size = int(size_text, 16)
            if size == 0:
                for _ in range(_MAX_HEADERS):
                    if await self._line() == b"\r\n":
                        return
                raise UpstreamError("the upstream sent too many trailer lines")
            data = await self._read(self._reader.readexactly(size + 2), "a chunk")
            yield data[:-2]

    async def _line(self) -> bytes:
        return await self._read(self._reader.readuntil(b"\r\n"), "a line")

    async def _read(self, what: asyncio.Future[bytes] | object, part: str) -> bytes:
        try:
            async with asyncio.timeout(self._read_timeout):
                data: bytes = await what  # type: ignore[misc]
        except TimeoutError:
            raise UpstreamError(f"the upstream sent nothing for {self._read_timeout:g} s ({part})") from None
        except asyncio.IncompleteReadError:
            raise UpstreamError(f"the upstream closed the connection in the middle of {part}") from None
        except asyncio.LimitOverrunError:
            raise UpstreamError(f"the upstream sent a line longer than {_LINE:,} bytes ({part})") from None
        return data

    def close(self) -> None:
        self._writer.close()


class Upstream:
    """Where requests go live: ``base`` (``http(s)://host[:port]``, a path prefix kept)."""

    def __init__(self, base: str, connect_timeout: float | None = CONNECT_TIMEOUT, read_timeout: float | None = READ_TIMEOUT) -> None:
        u = urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"an upstream is http(s)://host[:port], not {base[:80]!r}")
        self.base = base.rstrip("/")
        self.tls = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.tls else 80)
        self.netloc = u.netloc
        self.prefix = u.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout

    async def send(self, method: str, target: str, headers: Headers, body: bytes) -> UpstreamResponse:
        """Send one request; the response once its head has arrived (read its body with
        :meth:`UpstreamResponse.pieces`). The request's hop-by-hop headers are not passed on."""
        ctx = ssl.create_default_context() if self.tls else None
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(self.host, self.port, ssl=ctx, limit=_LINE)
        except TimeoutError:
            raise UpstreamError(f"connecting to {self.base} took longer than {self.connect_timeout:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError(f"cannot connect to {self.base}: {exc.strerror or exc if isinstance(exc, OSError) else exc}") from None
        keep = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]
        head = [f"{method} {self.prefix}{target} HTTP/1.1", f"Host: {self.netloc}", *(f"{k}: {v}" for k, v in keep), f"Content-Length: {len(body)}", "Connection: close"]
        response = UpstreamResponse(0, [], reader, writer, self.read_timeout)
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "replace") + body)
            async with asyncio.timeout(self.read_timeout):
                await writer.drain()
            status_line = await response._line()
            m = _STATUS.fullmatch(status_line)
            if m is None:
                raise UpstreamError(f"the upstream's answer does not start with an HTTP/1.1 status line: {status_line[:60]!r}")
            response.status = int(m.group(1))
            for _ in range(_MAX_HEADERS):
                line = await response._line()
                if line == b"\r\n":
                    break
                k, colon, v = line.decode("latin-1").partition(":")
                if not colon:
                    raise UpstreamError(f"the upstream sent a bad header line {line[:60]!r}")
                response.headers.append((k.strip(), v.strip()))
            else:
                raise UpstreamError(f"the upstream sent more than {_MAX_HEADERS} header lines")
        except TimeoutError:
            writer.close()
            raise UpstreamError(f"the upstream did not take the request within {self.read_timeout:g} s") from None
        except (UpstreamError, OSError):
            writer.close()
            raise
        return response

    def relayed_headers(self, response: UpstreamResponse) -> Headers:
        """The response headers a relay passes on (hop-by-hop ones dropped: it frames the body itself)."""
        return [(k, v) for k, v in response.headers if k.lower() not in HOP_BY_HOP]
