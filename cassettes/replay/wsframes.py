"""The server side of RFC 6455 WebSocket framing, enough for replay: the opening handshake's
accept key, reading the client's (masked, possibly fragmented) messages and control frames, and
writing unmasked frames. No extensions are offered (permessage-deflate is declined in the
handshake, so the client sends plain frames).

What a client may send is checked as RFC 6455 section 5 says: every client frame masked, no
reserved bits or opcodes, control frames (close, ping, pong) final and at most 125 bytes, a close
code one a peer may send, text messages valid UTF-8. A message is bounded by what it costs on the
wire and in memory: each frame counts its payload plus :data:`FRAME_COST` against
:data:`MAX_MESSAGE`, so a flood of one-byte fragments is refused as soon as a large message would
be. A client that breaks a rule gets a close frame with the code :attr:`WsProtocolError.code`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct

__all__ = ["CLOSE", "FRAME_COST", "MAX_MESSAGE", "PING", "PONG", "TEXT", "MessageReader", "WsProtocolError", "accept_key", "frame"]

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_DATA = frozenset({CONT, TEXT, BINARY})
_CONTROL = frozenset({CLOSE, PING, PONG})
#: The largest message read (a replayed turn's request: a whole history), frames' cost included.
MAX_MESSAGE = 64 * 1024 * 1024
#: What each frame of a message costs against :data:`MAX_MESSAGE` on top of its payload (its
#: header and the bookkeeping of one more piece): 64 MiB in one-byte fragments is 262,144 frames.
FRAME_COST = 256
#: The largest control frame payload (RFC 6455 5.5).
MAX_CONTROL = 125
#: Close codes a peer may send (RFC 6455 7.4.1, 7.4.2 and the IANA registry): 1000-1003,
#: 1007-1014, and 3000-4999 for libraries and applications.
_CLOSE_CODES = frozenset({1000, 1001, 1002, 1003, *range(1007, 1015), *range(3000, 5000)})


class WsProtocolError(ValueError):
    """The client broke the framing rules (or sent a message over :data:`MAX_MESSAGE`);
    ``code`` is the close code to answer with (1002 protocol error, 1007 bad data, 1009 too big)."""

    def __init__(self, message: str, code: int = 1002) -> None:
        super().__init__(message)
        self.code = code


def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for the client's ``Sec-WebSocket-Key``."""
    return base64.b64encode(hashlib.sha1(key.strip().encode("ascii") + _GUID).digest()).decode("ascii")


def frame(opcode: int, payload: bytes = b"", masked: bool = False) -> bytes:
    """One final frame: unmasked (what a server sends), or ``masked`` (what a client sends)."""
    n = len(payload)
    bit = 0x80 if masked else 0
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, bit | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, bit | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, bit | 127, n)
    if not masked:
        return head + payload
    import os

    mask = os.urandom(4)
    keys = (mask * (n // 4 + 1))[:n]
    return head + mask + ((int.from_bytes(payload, "big") ^ int.from_bytes(keys, "big")).to_bytes(n, "big") if n else b"")


async def _read_frame(reader: asyncio.StreamReader, room: int, from_server: bool = False) -> tuple[bool, int, bytes]:
    """One frame; a data frame's payload may be at most ``room`` bytes (what is left of the bound).
    A client's frames are masked; a server's (``from_server``: read by a client) are not."""
    b1, b2 = await reader.readexactly(2)
    fin, opcode = bool(b1 & 0x80), b1 & 0x0F
    if b1 & 0x70:
        raise WsProtocolError("reserved bits set (no extension was agreed)")
    if opcode not in _DATA and opcode not in _CONTROL:
        raise WsProtocolError(f"reserved opcode {opcode:#x}")
    masked, n = bool(b2 & 0x80), b2 & 0x7F
    if opcode in _CONTROL and (n > MAX_CONTROL or not fin):
        raise WsProtocolError("a control frame over 125 bytes" if n > MAX_CONTROL else "a fragmented control frame")
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    if opcode in _DATA and n > room:
        raise WsProtocolError(f"a message over {MAX_MESSAGE:,} bytes (frames counted with {FRAME_COST} bytes each)", 1009)
    if from_server:
        if masked:
            raise WsProtocolError("a server frame with a mask")
        return fin, opcode, await reader.readexactly(n)
    if not masked:
        raise WsProtocolError("a client frame without a mask")
    mask = await reader.readexactly(4)
    data = await reader.readexactly(n)
    if not n:
        return fin, opcode, data
    keys = (mask * (n // 4 + 1))[:n]
    return fin, opcode, (int.from_bytes(data, "big") ^ int.from_bytes(keys, "big")).to_bytes(n, "big")


def _check_close(data: bytes) -> None:
    """A close frame's payload: empty, or a code a peer may send and a UTF-8 reason."""
    if not data:
        return
    if len(data) == 1:
        raise WsProtocolError("a close frame with a one-byte payload")
    (code,) = struct.unpack("!H", data[:2])
    if code not in _CLOSE_CODES:
        raise WsProtocolError(f"close code {code} is not one a peer may send")
    try:
        data[2:].decode("utf-8")
    except UnicodeDecodeError:
        raise WsProtocolError("a close reason that is not UTF-8", 1007) from None


class MessageReader:
    """Reads a client's messages off one connection (a server's, read by a client: ``from_server``).
    Control frames may arrive between the fragments of a message (RFC 6455 §5.4): the partial
    message is kept across them."""

    def __init__(self, reader: asyncio.StreamReader, from_server: bool = False) -> None:
        self.reader = reader
        self.from_server = from_server
        self._parts = bytearray()
        self._first: int | None = None
        self._cost = 0

    async def next(self) -> tuple[int, bytes]:
        """The next message (``TEXT``/``BINARY``, reassembled from its fragments) or control
        frame (``PING``, ``PONG``, ``CLOSE``), as (opcode, payload)."""
        while True:
            fin, opcode, data = await _read_frame(self.reader, MAX_MESSAGE - self._cost - FRAME_COST, self.from_server)
            if opcode == CLOSE:
                _check_close(data)
            if opcode in _CONTROL:
                return opcode, data
            if opcode == CONT:
                if self._first is None:
                    raise WsProtocolError("a continuation frame with no message to continue")
            else:
                if self._first is not None:
                    raise WsProtocolError("a new message before the last one ended")
                self._first = opcode
            self._cost += len(data) + FRAME_COST
            if fin and self._first is not None and not self._parts:
                first, message = self._first, data  # one frame: no copy
            elif fin and self._first is not None:
                self._parts += data
                first, message = self._first, bytes(self._parts)
            else:
                self._parts += data
                continue
            self._first, self._parts, self._cost = None, bytearray(), 0
            if first == TEXT:
                try:
                    message.decode("utf-8")
                except UnicodeDecodeError:
                    raise WsProtocolError("a text message that is not UTF-8", 1007) from None
            return first, message
