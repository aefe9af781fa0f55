"""A WebSocket session sent live part-way (past a fork's cursor): the client side of the
connection to the live upstream.

The replay server answers a session's turns from the recording until a turn reaches the cursor;
from then on it relays the session to a live upstream (the recorder's listener, which records
it). A turn there may continue an answer the live upstream never gave (a ``previous_response_id``
of an answer replayed from the recording): it is sent self-contained, as an HTTP request is
(:mod:`cassettes.replay.live.chains`, which keeps what every answer stood for).

The connection is RFC 6455's client side: the opening handshake (no extension offered, so the
upstream sends plain frames), masked frames out, the upstream's unmasked frames in. Connecting
and the handshake are bounded; an upstream that refuses or breaks off raises
:class:`~cassettes.net._client.UpstreamError`.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
from urllib.parse import urlsplit

from cassettes.net._client import (
    CONNECT_TIMEOUT,
    READ_TIMEOUT,
    Trust,
    UpstreamError,
    tls_context,
)
from cassettes.net._messages import Ask, Unsendable
from cassettes.net._requests import HOP_BY_HOP
from cassettes.net._ws import MessageReader, accept_key, frame
from cassettes.untrusted import clean_line

__all__ = ["LiveSocket"]

_LINE = 1 << 16


class LiveSocket:
    """One WebSocket connection to a live upstream, as its client. ``known``: the answers this
    upstream gave on this connection (a turn continuing one of them is sent as it is)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.incoming = MessageReader(reader, from_server=True)
        self.known: set[str] = set()

    @classmethod
    async def open(
        cls,
        base: str,
        target: str,
        headers: list[tuple[str, str]],
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        said: list[str] | None = None,
        trust: Trust | None = None,
    ) -> LiveSocket:
        """Open the session at ``base`` + ``target`` with the client's handshake headers (those of
        the connection and of the WebSocket handshake itself are this client's own); TLS verified
        against ``trust`` (:class:`~cassettes.net._client.Trust`)."""
        import h11

        u = urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UpstreamError(f"a live upstream is http(s)://host[:port], not {base[:80]!r}")
        tls = u.scheme == "https"
        try:
            async with asyncio.timeout(connect_timeout):
                reader, writer = await asyncio.open_connection(
                    u.hostname,
                    u.port or (443 if tls else 80),
                    ssl=tls_context(trust) if tls else None,
                    limit=_LINE,
                )
        except TimeoutError:
            raise UpstreamError(
                f"connecting to {base[:80]} took longer than {connect_timeout:g} s"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError(f"cannot connect to {base[:80]}: {exc}") from None
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        keep = [
            (k, v)
            for k, v in headers
            if k.lower() not in HOP_BY_HOP and not k.lower().startswith("sec-websocket-")
        ]
        # The handshake is h11's (cassettes.net._messages: a header that cannot be sent
        # is dropped); the answer's head is read up to its empty line (no frame after it is taken)
        # and parsed by h11.
        ask = Ask(_LINE)
        try:
            message = ask.request(
                "GET",
                f"{u.path.rstrip('/')}{target}",
                [
                    ("Host", u.netloc),
                    ("Upgrade", "websocket"),
                    ("Connection", "Upgrade"),
                    ("Sec-WebSocket-Key", key),
                    ("Sec-WebSocket-Version", "13"),
                    *keep,
                ],
                b"",
                said,
            )
        except Unsendable as exc:
            writer.close()
            raise UpstreamError(str(exc)) from None
        try:
            writer.write(message)
            async with asyncio.timeout(read_timeout):
                await writer.drain()
                ask.conn.receive_data(await reader.readuntil(b"\r\n\r\n"))
                event = ask.conn.next_event()
        except TimeoutError:
            writer.close()
            raise UpstreamError(
                f"the upstream did not answer the WebSocket handshake within {read_timeout:g} s"
            ) from None
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
            writer.close()
            raise UpstreamError(f"the upstream broke off the WebSocket handshake: {exc}") from None
        except h11.RemoteProtocolError as exc:
            writer.close()
            raise UpstreamError(
                f"the upstream's WebSocket handshake is not HTTP/1.1: {clean_line(str(exc))[:120]}"
            ) from None
        status = getattr(event, "status_code", None)
        got = {
            k.decode("latin-1").lower(): v.decode("latin-1")
            for k, v in getattr(event, "headers", [])
        }
        if status != 101 or got.get("sec-websocket-accept") != accept_key(key):
            writer.close()
            raise UpstreamError(f"the upstream did not open the WebSocket: {status}")
        return cls(reader, writer)

    async def send(self, opcode: int, payload: bytes) -> None:
        self.writer.write(frame(opcode, payload, masked=True))
        await self.writer.drain()

    async def next(self) -> tuple[int, bytes]:
        """The upstream's next message or control frame (see :class:`MessageReader`)."""
        return await self.incoming.next()

    def close(self) -> None:
        self.writer.close()
