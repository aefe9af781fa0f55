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
import ssl
from urllib.parse import urlsplit

import h11
from wsproto import ConnectionType
from wsproto.events import AcceptConnection, Request
from wsproto.handshake import H11Handshake
from wsproto.utilities import RemoteProtocolError

from ..untrusted import clean_line
from ._client import CONNECT_TIMEOUT, READ_TIMEOUT, Trust, UpstreamError, tls_context
from ._messages import sendable
from ._requests import HOP_BY_HOP
from ._ws import MessageReader, frame

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
        cls, base: str, target: str, headers: list[tuple[str, str]], trust: Trust | None = None
    ) -> LiveSocket:
        """Open the session at ``base`` + ``target`` with the client's handshake headers (those of
        the connection and of the WebSocket handshake itself are this client's own; one that
        cannot be sent is dropped); TLS verified against ``trust``
        (:class:`~cassettes.net._client.Trust`). The handshake is wsproto's."""
        u = urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UpstreamError(f"a live upstream is http(s)://host[:port], not {base[:80]!r}")
        tls = u.scheme == "https"
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                reader, writer = await asyncio.open_connection(
                    u.hostname,
                    u.port or (443 if tls else 80),
                    ssl=tls_context(trust) if tls else None,
                    limit=_LINE,
                )
        except TimeoutError:
            raise UpstreamError(
                f"connecting to {base[:80]} took longer than {CONNECT_TIMEOUT:g} s"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError(f"cannot connect to {base[:80]}: {exc}") from None
        keep = [
            (k, v)
            for k, v in headers
            if k.lower() not in HOP_BY_HOP and not k.lower().startswith("sec-websocket-")
        ]
        hs = H11Handshake(ConnectionType.CLIENT)
        path = f"{u.path.rstrip('/')}{target}"
        try:
            writer.write(
                hs.send(Request(host=u.netloc, target=path, extra_headers=sendable(keep, None)))
            )
        except h11.LocalProtocolError as exc:
            writer.close()
            raise UpstreamError(
                f"the request cannot be sent: {clean_line(str(exc))[:120]}"
            ) from None
        try:
            # the answer's head is read up to its empty line: no frame after it is taken
            async with asyncio.timeout(READ_TIMEOUT):
                await writer.drain()
                hs.receive_data(await reader.readuntil(b"\r\n\r\n"))
            event = next(iter(hs.events()), None)
        except TimeoutError:
            writer.close()
            raise UpstreamError(
                f"the upstream did not answer the WebSocket handshake within {READ_TIMEOUT:g} s"
            ) from None
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
            writer.close()
            raise UpstreamError(f"the upstream broke off the WebSocket handshake: {exc}") from None
        except RemoteProtocolError as exc:
            writer.close()
            raise UpstreamError(
                f"the upstream did not open the WebSocket: {clean_line(str(exc))[:120]}"
            ) from None
        if not isinstance(event, AcceptConnection):
            writer.close()
            status = getattr(event, "status_code", None)
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
