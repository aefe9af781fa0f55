"""The server side of RFC 6455 WebSocket framing, enough for replay: the opening handshake's
accept key, reading the client's (masked, possibly fragmented) messages and control frames, and
writing unmasked frames. No extensions are offered (permessage-deflate is declined in the
handshake, so the client sends plain frames). Messages are bounded in size."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct

__all__ = ["CLOSE", "MAX_MESSAGE", "PING", "PONG", "TEXT", "MessageReader", "WsProtocolError", "accept_key", "frame"]

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
#: The largest message read (a replayed turn's request: a whole history).
MAX_MESSAGE = 64 * 1024 * 1024


class WsProtocolError(ValueError):
    """The client broke the framing rules (or sent a message over :data:`MAX_MESSAGE`)."""


def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for the client's ``Sec-WebSocket-Key``."""
    return base64.b64encode(hashlib.sha1(key.strip().encode("ascii") + _GUID).digest()).decode("ascii")


def frame(opcode: int, payload: bytes = b"") -> bytes:
    """One final, unmasked frame (what a server sends)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


async def _read_frame(reader: asyncio.StreamReader) -> tuple[bool, int, bytes]:
    b1, b2 = await reader.readexactly(2)
    fin, opcode = bool(b1 & 0x80), b1 & 0x0F
    if b1 & 0x70:
        raise WsProtocolError("reserved bits set (no extension was agreed)")
    masked, n = bool(b2 & 0x80), b2 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    if n > MAX_MESSAGE:
        raise WsProtocolError(f"a frame of {n} bytes, over {MAX_MESSAGE}")
    if not masked:
        raise WsProtocolError("a client frame without a mask")
    mask = await reader.readexactly(4)
    data = await reader.readexactly(n)
    if not n:
        return fin, opcode, data
    keys = (mask * (n // 4 + 1))[:n]
    return fin, opcode, (int.from_bytes(data, "big") ^ int.from_bytes(keys, "big")).to_bytes(n, "big")


class MessageReader:
    """Reads a client's messages off one connection. Control frames may arrive between the
    fragments of a message (RFC 6455 §5.4): the partial message is kept across them."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self._parts: list[bytes] = []
        self._first: int | None = None
        self._size = 0

    async def next(self) -> tuple[int, bytes]:
        """The next message (``TEXT``/``BINARY``, reassembled from its fragments) or control
        frame (``PING``, ``PONG``, ``CLOSE``), as (opcode, payload)."""
        while True:
            fin, opcode, data = await _read_frame(self.reader)
            if opcode in (CLOSE, PING, PONG):
                return opcode, data
            if opcode == CONT:
                if self._first is None:
                    raise WsProtocolError("a continuation frame with no message to continue")
            else:
                if self._first is not None:
                    raise WsProtocolError("a new message before the last one ended")
                self._first = opcode
            self._size += len(data)
            if self._size > MAX_MESSAGE:
                raise WsProtocolError(f"a message over {MAX_MESSAGE} bytes")
            self._parts.append(data)
            if fin:
                first, message = self._first, b"".join(self._parts)
                self._first, self._parts, self._size = None, [], 0
                return first, message
