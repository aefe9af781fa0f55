"""proxy/failures.py on real loopback sockets (no mitmproxy): how a peer ended its connection is
seen as it was, a close can be made a reset, and a close frame can be held back."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from looptap.proxy import failures


class Conn:
    """Stands for mitmproxy's connection object (hashable, weakly referable)."""


async def _pair() -> tuple[
    asyncio.StreamReader, asyncio.StreamWriter, asyncio.StreamReader, asyncio.StreamWriter
]:
    accepted: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
        asyncio.get_running_loop().create_future()
    )

    async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.set_result((r, w))

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    r, w = await asyncio.open_connection("127.0.0.1", port)
    pr, pw = await accepted
    server.close()
    return r, w, pr, pw


def _abort(w: asyncio.StreamWriter) -> None:
    w.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
    )
    w.transport.abort()


async def _ended(how: str) -> str | None:
    r, w, _pr, pw = await _pair()
    ends, conn = failures.Ends(), Conn()
    assert ends.watch(conn, w)
    if how == "rst":
        _abort(pw)
    elif how == "fin":
        pw.close()
    else:
        w.close()  # our own close
    try:
        await asyncio.wait_for(r.read(), 10)
    except ConnectionError:
        pass
    await asyncio.sleep(0.05)
    w.close()
    return ends.how(conn)


def test_a_reset_and_a_close_by_the_peer_are_told_apart_and_our_own_close_is_neither() -> None:
    assert asyncio.run(_ended("rst")) == failures.RESET
    assert asyncio.run(_ended("fin")) == failures.CLOSED
    assert asyncio.run(_ended("ours")) is None


def test_reset_on_close_makes_the_close_a_reset() -> None:
    async def main(reset: bool) -> Any:
        r, w, _pr, pw = await _pair()
        pw.write(b"last words")
        await pw.drain()
        await asyncio.sleep(0.05)
        if reset:
            assert failures.reset_on_close(pw)
        pw.close()
        got = b""
        try:
            while chunk := await asyncio.wait_for(r.read(100), 10):
                got += chunk
        except ConnectionResetError as exc:
            return got, type(exc).__name__
        finally:
            w.close()
        return got, "eof"

    assert asyncio.run(main(False)) == (b"last words", "eof")
    got, end = asyncio.run(main(True))
    assert end == "ConnectionResetError" and got in (b"", b"last words")


def test_drop_close_frame_holds_back_only_a_close_frame_and_only_when_asked() -> None:
    class Writer:
        def __init__(self) -> None:
            self.sent: list[bytes] = []

        def write(self, data: bytes) -> None:
            self.sent.append(data)

    dropped = [False]
    then: list[int] = []
    w = Writer()
    sent = w.sent
    assert failures.drop_close_frame(w, lambda: dropped[0], lambda: then.append(1))
    text, close = b"\x81\x02hi", b"\x88\x02\x03\xe8"
    w.write(text)
    w.write(close)  # a real close frame from the peer: passed on
    dropped[0] = True
    w.write(text)
    w.write(close)  # the one mitmproxy makes up for a peer that sent none: held back
    assert sent == [text, close, text] and then == [1]
