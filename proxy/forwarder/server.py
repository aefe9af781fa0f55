"""The forwarder's listeners: an asyncio server per reverse listener, on the port its clients were
given, each connection served by a :class:`~proxy.forwarder.connection.ClientConn`. No mitmproxy
import."""

from __future__ import annotations

import asyncio
import contextlib

from proxy.forwarder.connection import ClientConn, Route
from proxy.forwarder.upstream import READ

__all__ = ["Forwarder"]


class Forwarder:
    """The running listeners; :meth:`close` stops them and ends their connections."""

    def __init__(self) -> None:
        self._servers: list[asyncio.Server] = []
        self._routes: list[Route] = []
        self._conns: set[asyncio.Task[None]] = set()

    async def listen(self, route: Route, host: str, port: int) -> None:
        """Serve ``route`` on ``host:port`` (``OSError`` when it cannot be bound)."""

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                self._conns.add(task)
            try:
                await ClientConn(route, reader, writer).run()
            except Exception:  # never a traceback into the event loop: the connection ends
                writer.transport.abort()
            finally:
                if task is not None:
                    self._conns.discard(task)

        server = await asyncio.start_server(handle, host, port, limit=READ)
        self._servers.append(server)
        self._routes.append(route)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._conns):
            task.cancel()
        for task in list(self._conns):
            with contextlib.suppress(BaseException):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        for route in self._routes:
            route.pool.close()
        self._servers.clear()
        self._routes.clear()
