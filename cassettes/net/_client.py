"""The replay server's HTTP/1.1 client: a request passed on to a live upstream, its answer relayed.

Used for new episodes (the cassette lacks the answer: the request goes to a recorder) and past a
fork's cursor, and by ``compare``. One request per connection (``Connection: close``), framed by
its own ``Content-Length``, and one answer read from it: no connection is kept or reused, so what
an upstream sends after the answer (an answer nobody asked for, a ``408`` when idle) is never read
as another request's, and no request is sent on a connection the upstream may have closed.
``http`` or ``https`` (the system's CA store, or the one a :class:`Trust` kept). Every wait is
bounded and progress based: connecting within ``connect_timeout``, the status line and headers
within ``read_timeout``, and the body may not pause longer than ``read_timeout``; a status line,
header block or chunk size that is not HTTP/1.1 raises :class:`UpstreamError`, as does an
upstream that breaks off (also while it takes the request).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

from cassettes.errors import CassetteError
from cassettes.net._messages import Ask, Unsendable
from cassettes.net._requests import HOP_BY_HOP
from cassettes.untrusted import clean_line
from cassettes.wire.exchange import Headers, header
from cassettes.wire.own import without_own

__all__ = [
    "CONNECT_TIMEOUT",
    "READ_TIMEOUT",
    "Trust",
    "Upstream",
    "UpstreamError",
    "UpstreamResponse",
    "tls_context",
]

#: Seconds to connect to the upstream (and finish TLS).
CONNECT_TIMEOUT = 30.0
#: Seconds the upstream may take to start its answer, or pause inside it (a model thinking
#: before its first token can take minutes: generous).
READ_TIMEOUT = 600.0
#: The largest response head read (status line and headers).
_LINE = 1 << 16


class UpstreamError(CassetteError):
    """The upstream could not be reached, or answered something that is not HTTP/1.1."""


@dataclass(frozen=True)
class Trust:
    """The CA store TLS to a live upstream verifies against, as it was when :meth:`now` took it.
    The pytest plugin takes it before it points ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` at a store
    that trusts no host for a replayed test (docs/testing.md): a fork's live requests, made in
    the test's process while those are set, keep the store the test started with."""

    cafile: str | None
    capath: str | None

    @classmethod
    def now(cls) -> Trust:
        """The store ``ssl.create_default_context()`` would load now (the environment's, else
        OpenSSL's own)."""
        paths = ssl.get_default_verify_paths()
        return cls(paths.cafile, paths.capath)

    def context(self) -> ssl.SSLContext:
        # no store found: the platform's default, as before
        if self.cafile is None and self.capath is None:
            return ssl.create_default_context()
        return ssl.create_default_context(cafile=self.cafile, capath=self.capath)


def tls_context(trust: Trust | None) -> ssl.SSLContext:
    """A client context verifying against ``trust``, or (``None``) the store the environment names
    now."""
    return trust.context() if trust is not None else ssl.create_default_context()


@dataclass
class UpstreamResponse:
    status: int
    headers: Headers
    _reader: asyncio.StreamReader
    _writer: asyncio.StreamWriter
    _read_timeout: float | None
    _conn: h11.Connection | None = None

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives (a chunk of a chunked body is one piece, or a part of it), framing
        removed."""
        try:
            while True:
                event = await self._event("its body")
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    return
        finally:
            self.close()

    async def _event(self, part: str) -> object:
        """h11's next event, reading from the upstream as it needs (at most ``read_timeout`` per
        read)."""
        conn = self._conn
        assert conn is not None
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise UpstreamError(
                    f"the upstream's answer is not HTTP/1.1 ({part}): {clean_line(str(exc))[:120]}"
                ) from None
            if event is not h11.NEED_DATA:
                return event
            data = await self._read(self._reader.read(1 << 20), part)
            if (
                not data
                and conn.their_state is h11.SEND_BODY
                and not _close_delimited(self.headers)
            ):
                raise UpstreamError(f"the upstream closed the connection in the middle of {part}")
            if not data and conn.their_state is h11.SEND_RESPONSE:
                raise UpstreamError("the upstream closed the connection before answering")
            conn.receive_data(data)

    async def _read(self, what: Awaitable[bytes], part: str) -> bytes:
        try:
            async with asyncio.timeout(self._read_timeout):
                return await what
        except TimeoutError:
            raise UpstreamError(
                f"the upstream sent nothing for {self._read_timeout:g} s ({part})"
            ) from None
        except OSError as exc:  # a reset, a TLS failure
            raise UpstreamError(
                f"the upstream broke the connection off in the middle of {part}: {exc}"
            ) from None

    def close(self) -> None:
        self._writer.close()


def _close_delimited(headers: Headers) -> bool:
    """A body that ends when the connection does (neither a length nor chunked)."""
    return (
        header(headers, "content-length") is None
        and (header(headers, "transfer-encoding") or "").lower() != "chunked"
    )


class Upstream:
    """Where requests go live: ``base`` (``http(s)://host[:port]``, a path prefix kept), verified
    against ``trust`` (``None``: the store the environment names when connecting)."""

    def __init__(
        self,
        base: str,
        connect_timeout: float | None = CONNECT_TIMEOUT,
        read_timeout: float | None = READ_TIMEOUT,
        trust: Trust | None = None,
    ) -> None:
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
        self.trust = trust

    async def send(
        self, method: str, target: str, headers: Headers, body: bytes, said: list[str] | None = None
    ) -> UpstreamResponse:
        """Send one request; the response once its head has arrived (read its body with
        :meth:`UpstreamResponse.pieces`). The request's hop-by-hop headers are not passed on; a
        header that cannot be sent (CR, LF, NUL, a name that is not a token) is dropped, and a
        line naming it is appended to ``said``. The message is h11's
        (:class:`~cassettes.net._messages.Ask`)."""
        # RFC 9110 7.6.1
        listed = {
            t.strip().lower() for k, v in headers if k.lower() == "connection" for t in v.split(",")
        }
        keep = [
            (k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() not in listed
        ]
        ask = Ask(_LINE)
        try:
            message = ask.request(
                method,
                f"{self.prefix}{target}",
                [
                    ("Host", self.netloc),
                    *keep,
                    ("Content-Length", str(len(body))),
                    ("Connection", "close"),
                ],
                body,
                said,
            )
        except Unsendable as exc:
            raise UpstreamError(str(exc)) from None
        ctx = tls_context(self.trust) if self.tls else None
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=ctx, limit=_LINE
                )
        except TimeoutError:
            raise UpstreamError(
                f"connecting to {self.base} took longer than {self.connect_timeout:g} s"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError(
                f"cannot connect to {self.base}: "
                f"{exc.strerror or exc if isinstance(exc, OSError) else exc}"
            ) from None
        response = UpstreamResponse(0, [], reader, writer, self.read_timeout, ask.conn)
        try:
            writer.write(message)
            async with asyncio.timeout(self.read_timeout):
                await writer.drain()
            while True:
                event = await response._event("its head")
                if isinstance(event, h11.Response):
                    break
                if isinstance(event, h11.ConnectionClosed):
                    raise UpstreamError(
                        "the upstream closed the connection in the middle of its head"
                    )
            response.status = event.status_code
            response.headers = [
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers.raw_items()
            ]
        except TimeoutError:
            writer.close()
            raise UpstreamError(
                f"the upstream did not take the request within {self.read_timeout:g} s"
            ) from None
        except UpstreamError:
            writer.close()
            raise
        except OSError as exc:  # reset or closed while it took the request
            writer.close()
            raise UpstreamError(
                "the upstream broke the connection off while taking the request: "
                f"{exc.strerror or exc}"
            ) from None
        return response

    def relayed_headers(
        self, response: UpstreamResponse, dropped: list[str] | None = None
    ) -> Headers:
        """The response headers a relay passes on: hop-by-hop ones dropped (it frames the body
        itself), and looptap's own marks (:mod:`cassettes.wire.own`: an upstream's answer never
        speaks for looptap), whose names go to ``dropped``."""
        kept, own = without_own(
            [(k, v) for k, v in response.headers if k.lower() not in HOP_BY_HOP]
        )
        if dropped is not None:
            dropped.extend(own)
        return kept
