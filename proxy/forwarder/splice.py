"""A client connection handed to mitmproxy byte for byte: what the forwarder does not handle itself
(a WebSocket or other ``Upgrade``, ``Expect: 100-continue``, an HTTP/2 preface, a TLS ClientHello,
HTTP/1.0, a request it cannot read or will not hold, a fork's edit marks …) goes to the mitmproxy
reverse listener kept for it on an internal loopback port, which records it as it always did.

The bytes the forwarder already read go first, then both directions are relayed as they come. How a
side ended is passed on to the other: a reset (mitmproxy resets the client's connection when the
upstream reset its own, :mod:`proxy.failures`) is a reset, a close a close (the client's end of
sending is a half-close towards mitmproxy, which treats it as the client gone). No mitmproxy
import.
"""

from __future__ import annotations

import asyncio
import contextlib

from proxy import failures
from proxy.forwarder.upstream import READ

__all__ = ["reset", "splice"]


def reset(writer: asyncio.StreamWriter) -> None:
    """End the connection with a TCP reset (``SO_LINGER`` 0), as a peer's was."""
    failures.reset_on_close(writer)
    writer.transport.abort()


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, half_close: bool) -> bool:
    """Relay ``src`` into ``dst`` until ``src`` ends; ``True`` when it ended with a reset."""
    try:
        while True:
            data = await src.read(READ)
            if not data:
                break
            dst.write(data)
            await dst.drain()
    except ConnectionResetError:
        return True
    except (ConnectionError, OSError):
        return False
    if half_close and dst.can_write_eof() and not dst.transport.is_closing():
        with contextlib.suppress(OSError, RuntimeError):
            dst.write_eof()
    return False


async def splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    already: bytes,
    host: str,
    port: int,
) -> None:
    """Relay the client connection (``reader``/``writer``, of which ``already`` was read) to the
    internal listener at ``host:port`` until mitmproxy's side ends; closes the client's."""
    try:
        m_reader, m_writer = await asyncio.open_connection(host, port, limit=READ)
    except OSError:
        writer.transport.abort()
        return
    up = down = None
    try:
        if already:
            m_writer.write(already)
        up = asyncio.ensure_future(_pump(reader, m_writer, half_close=True))
        down = asyncio.ensure_future(_pump(m_reader, writer, half_close=False))
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if up.done() and up.result():
            reset(m_writer)  # the client reset its connection: so does mitmproxy's
        else:
            await asyncio.wait({down})  # a half-close: mitmproxy answers or closes
            if down.result():
                reset(writer)  # mitmproxy reset it (the upstream's reset, passed on)
    finally:
        for task in (up, down):
            if task is not None and not task.done():
                task.cancel()
        if not m_writer.transport.is_closing():
            m_writer.transport.abort()
        if not writer.transport.is_closing():
            writer.close()
