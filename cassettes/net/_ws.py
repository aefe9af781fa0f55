"""RFC 6455 WebSocket framing for replay, by wsproto: the opening handshake's accept key, reading
a peer's (masked, possibly fragmented) messages and control frames, and writing frames. No
extensions are offered (permessage-deflate is declined in the handshake, so the peer sends plain
frames).

wsproto checks what a peer sends as RFC 6455 section 5 says: a client's frames masked and a
server's not, no reserved bits or opcodes, control frames (close, ping, pong) final and at most
125 bytes, a close code one a peer may send, text messages valid UTF-8. What looptap adds is the
bound: a message is bounded by what it costs on the wire and in memory: each frame counts its
payload plus :data:`FRAME_COST` against :data:`MAX_MESSAGE`, so a flood of one-byte fragments is
refused as soon as a large message would be. A peer that breaks a rule gets a close frame with
the code :attr:`WsProtocolError.code` (wsproto's reason, escaped and cut).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..untrusted import clean_line

if TYPE_CHECKING:
    from wsproto.events import Message

__all__ = [
    "CLOSE",
    "FRAME_COST",
    "MAX_MESSAGE",
    "PING",
    "PONG",
    "TEXT",
    "MessageReader",
    "WsProtocolError",
    "accept_key",
    "frame",
]

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
#: The largest message read (a replayed turn's request: a whole history), frames' cost included.
MAX_MESSAGE = 64 * 1024 * 1024
#: What each frame of a message costs against :data:`MAX_MESSAGE` on top of its payload (its
#: header and the bookkeeping of one more piece): 64 MiB in one-byte fragments is 262,144 frames.
FRAME_COST = 256
#: The largest control frame payload (RFC 6455 5.5).
MAX_CONTROL = 125
#: How much is read from the stream at once.
_READ = 1 << 16


class WsProtocolError(ValueError):
    """The client broke the framing rules (or sent a message over :data:`MAX_MESSAGE`);
    ``code`` is the close code to answer with (1002 protocol error, 1007 bad data, 1009 too big)."""

    def __init__(self, message: str, code: int = 1002) -> None:
        super().__init__(message)
        self.code = code


def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for the client's ``Sec-WebSocket-Key`` (wsproto's)."""
    from wsproto.utilities import generate_accept_token

    return generate_accept_token(key.strip().encode("ascii")).decode("ascii")


def frame(opcode: int, payload: bytes = b"", masked: bool = False) -> bytes:
    """One final frame, built by wsproto: unmasked (what a server sends), or ``masked`` (what a
    client sends). A close frame's payload is its code and reason, as a peer sent them."""
    from wsproto.connection import Connection, ConnectionType
    from wsproto.events import BytesMessage, CloseConnection, Ping, Pong, TextMessage

    conn = Connection(ConnectionType.CLIENT if masked else ConnectionType.SERVER)
    if opcode == TEXT:
        return conn.send(TextMessage(data=payload.decode("utf-8", "replace")))
    if opcode == BINARY:
        return conn.send(BytesMessage(data=payload))
    if opcode == PING:
        return conn.send(Ping(payload=payload))
    if opcode == PONG:
        return conn.send(Pong(payload=payload))
    if opcode == CLOSE:
        if len(payload) < 2:
            return conn.send(CloseConnection(code=1005))  # no code: an empty close frame
        (code,) = struct.unpack("!H", payload[:2])
        # a control frame holds 125 bytes at most
        reason = payload[2 : MAX_CONTROL].decode("utf-8", "ignore")
        return conn.send(CloseConnection(code=code, reason=reason or None))
    raise ValueError(f"no frame is sent with opcode {opcode:#x}")


class MessageReader:
    """Reads a client's messages off one connection (a server's, read by a client: ``from_server``)
    with a wsproto connection: it checks the framing (masks, reserved bits and opcodes, control
    frames, close codes, UTF-8) and reassembles fragments, control frames arriving between them
    (RFC 6455 §5.4). What looptap adds is the bound: :data:`MAX_MESSAGE`, each frame costing its
    payload plus :data:`FRAME_COST`, counted as the bytes arrive (a 1009 before the message is
    whole)."""

    def __init__(self, reader: asyncio.StreamReader, from_server: bool = False) -> None:
        from wsproto.connection import Connection, ConnectionType

        self.reader = reader
        self.from_server = from_server
        self._conn = Connection(ConnectionType.CLIENT if from_server else ConnectionType.SERVER)
        self._events: Iterator[object] = iter(())
        self._parts: list[bytes | str] = []
        self._cost = 0

    def _fragment(self, event: Message[Any], text: bool) -> tuple[int, bytes] | None:
        """A data frame (wsproto's ``Message``) added to the message it is part of: the whole
        message once this frame ends it, else ``None``; raises :class:`WsProtocolError` (1009)
        past :data:`MAX_MESSAGE`."""
        self._cost += len(event.data) + (FRAME_COST if event.frame_finished else 0)
        if self._cost > MAX_MESSAGE:
            raise WsProtocolError(
                f"a message over {MAX_MESSAGE:,} bytes (frames "
                f"counted with {FRAME_COST} bytes each)",
                1009,
            )
        self._parts.append(event.data)
        if not event.message_finished:
            return None
        parts, self._parts, self._cost = self._parts, [], 0
        if text:
            return TEXT, "".join(p for p in parts if isinstance(p, str)).encode("utf-8")
        pieces = [p for p in parts if isinstance(p, bytes | bytearray)]
        return BINARY, bytes(pieces[0]) if len(pieces) == 1 else b"".join(pieces)

    async def next(self) -> tuple[int, bytes]:
        """The next message (``TEXT``/``BINARY``, reassembled from its fragments) or control
        frame (``PING``, ``PONG``, ``CLOSE``), as (opcode, payload). Raises
        :class:`WsProtocolError` (a rule broken), ``asyncio.IncompleteReadError`` (the peer
        went)."""
        from wsproto.connection import ConnectionState
        from wsproto.events import CloseConnection, Message, Ping, Pong, TextMessage

        while True:
            for event in self._events:
                if isinstance(event, Ping):
                    return PING, bytes(event.payload)
                if isinstance(event, Pong):
                    return PONG, bytes(event.payload)
                if isinstance(event, CloseConnection):
                    # not the peer's close: wsproto refused a frame
                    if self._conn.state is ConnectionState.OPEN:
                        raise WsProtocolError(
                            clean_line(event.reason or "a frame that breaks RFC 6455")[:120],
                            int(event.code),
                        )
                    if int(event.code) == 1005:  # a close frame without a code
                        return CLOSE, b""
                    return CLOSE, struct.pack("!H", int(event.code)) + (event.reason or "").encode(
                        "utf-8"
                    )
                if (
                    isinstance(event, Message)
                    and (whole := self._fragment(event, isinstance(event, TextMessage))) is not None
                ):
                    return whole
            data = await self.reader.read(_READ)
            if not data:
                raise asyncio.IncompleteReadError(b"", None)
            self._conn.receive_data(data)
            self._events = self._conn.events()
