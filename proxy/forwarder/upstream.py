"""The forwarder's side towards the API: where a reverse listener forwards (:class:`Target`) and its
pool of keep-alive HTTP/1.1 connections (:class:`Pool`).

A connection is opened when no idle one is left, verified as mitmproxy verifies its upstreams by
default (the ``certifi`` bundle mitmproxy itself trusts, the host name checked; ``--ssl-insecure``
turns both off, as it does for mitmproxy), sends no ALPN extension, as mitmproxy sends none for a
plain-HTTP client (so the upstream speaks HTTP/1.1, as to mitmproxy), and goes back to the pool
only once its response ended cleanly and neither side asked to close. An idle connection the API
closed meanwhile is seen closed (asyncio reads it eagerly) and dropped before reuse. Each
connection carries an ``h11`` client state: h11 serialises the request (refusing by construction a
header that would break the framing) and frames the response (``Content-Length``, chunked, read to
close, bodiless ``HEAD``/``204``/``304``). No mitmproxy import.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import h11

__all__ = ["READ", "Pool", "Target", "UpstreamConn"]

#: How much is read from a socket at once (mitmproxy reads as much).
READ = 1 << 16
#: The largest response head read from an upstream (h11's default is 16 KiB; an API's answer with
#: many headers is not refused for it). A larger one is a failed round trip.
MAX_HEAD = 1 << 20
#: Idle connections kept per upstream.
_IDLE = 32


@dataclass(frozen=True)
class Target:
    """A reverse listener's upstream: ``scheme://host[:port]``."""

    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Target | None:
        """The target of an upstream URL, or ``None`` when the forwarder does not take it (not
        http(s), a path, a user, a query, an IPv6 literal: mitmproxy keeps such a listener)."""
        try:
            u = urlsplit(url)
            port = u.port
        except ValueError:
            return None
        if (
            u.scheme not in ("http", "https")
            or not u.hostname
            or ":" in u.hostname
            or u.username
            or u.password
            or u.query
            or u.fragment
            or u.path not in ("", "/")
        ):
            return None
        default = 443 if u.scheme == "https" else 80
        return cls(u.scheme, u.hostname, port if port is not None else default)

    @property
    def authority(self) -> str:
        """What mitmproxy writes in the ``Host`` header of a reverse listener's request (the port
        only when it is not the scheme's default)."""
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"

    @property
    def origin(self) -> str:
        """The recorded URL's start (mitmproxy's ``pretty_url``)."""
        return f"{self.scheme}://{self.authority}"


@dataclass(eq=False)
class UpstreamConn:
    """One connection to the upstream, with its h11 client state."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    h11: h11.Connection = field(
        default_factory=lambda: h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    )
    #: It carried a request before (a reused connection).
    reused: bool = False

    def usable(self) -> bool:
        """Still open and idle, nothing unread (an idle connection the upstream closed is not)."""
        return (
            not self.writer.transport.is_closing()
            and not self.reader.at_eof()
            and self.reader.exception() is None
            and self.h11.our_state is h11.IDLE
            and self.h11.their_state is h11.IDLE
        )

    def abort(self) -> None:
        try:
            self.writer.transport.abort()
        except Exception:
            pass


class Pool:
    """Keep-alive connections to one :class:`Target`."""

    def __init__(self, target: Target, *, insecure: bool = False) -> None:
        self.target = target
        self._idle: list[UpstreamConn] = []
        self._ssl = _client_context(insecure) if target.scheme == "https" else None

    async def get(self) -> UpstreamConn:
        """An idle connection, or a new one (``OSError`` when it cannot be opened)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            conn.abort()
        reader, writer = await asyncio.open_connection(
            self.target.host,
            self.target.port,
            ssl=self._ssl,
            server_hostname=self.target.host if self._ssl is not None else None,
            limit=READ,
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        return UpstreamConn(reader, writer)

    def put(self, conn: UpstreamConn) -> None:
        """Back to the pool after a response that ended cleanly; closed if it cannot be reused."""
        try:
            conn.h11.start_next_cycle()
        except h11.LocalProtocolError:
            conn.abort()
            return
        if len(self._idle) < _IDLE and conn.usable():
            self._idle.append(conn)
        else:
            conn.abort()

    def close(self) -> None:
        for conn in self._idle:
            conn.abort()
        self._idle.clear()


def _client_context(insecure: bool) -> ssl.SSLContext:
    """TLS towards an https upstream: mitmproxy's default trust (``certifi``'s bundle, which it
    loads itself) with the host name checked, or none at all with ``--ssl-insecure``; no ALPN."""
    cafile: str | None
    try:
        import certifi

        cafile = certifi.where()
    except ImportError:  # not beside mitmproxy: the system's store
        cafile = None
    ctx = ssl.create_default_context(cafile=cafile)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
