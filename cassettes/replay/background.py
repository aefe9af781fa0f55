"""An asyncio TCP server that runs in an event loop or on a thread of its own.

The replay server serves tests from a thread (``start()`` / ``stop()`` or ``with``), and so does
the test suite's fake upstream; both are this class with their own connection handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from typing import Self

__all__ = ["BackgroundServer"]


class BackgroundServer:
    """Subclasses set ``host``, ``port`` (0: a free port) and call :meth:`_init_background`, and
    implement :meth:`_handle`; connection tasks add themselves to ``_conns`` so a stop cancels them."""

    #: Thread name, and how start-up failures name the server.
    label = "server"
    #: StreamReader buffer limit (the longest line or headers block it reads at once).
    read_limit = 1 << 20
    host: str
    port: int

    def _init_background(self) -> None:
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def _ssl_context(self) -> ssl.SSLContext | None:
        return None

    def _start_failed(self, exc: BaseException) -> Exception:
        """The error :meth:`start` raises when the server could not listen."""
        return OSError(f"{self.label} could not listen on {self.host}:{self.port}: {exc}")

    # -- in a running event loop ---------------------------------------------------------------
    async def start_async(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, self.host, self.port, limit=self.read_limit, ssl=self._ssl_context()
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop_async(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        if self._conns:
            await asyncio.gather(*self._conns, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    # -- on a thread of its own ----------------------------------------------------------------
    def start(self) -> Self:
        """Serve from a thread of its own; returns once listening."""
        self._thread = threading.Thread(target=self._thread_main, name=self.label, daemon=True)
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError(f"{self.label} did not start within 15 s")
        if self._error is not None:
            raise self._start_failed(self._error) from self._error
        return self

    def _thread_main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                await self.start_async()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            await self.stop_async()

        asyncio.run(run())

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
