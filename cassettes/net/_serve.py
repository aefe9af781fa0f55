"""An asyncio TCP server that runs in an event loop or on a thread of its own.

The replay server serves tests from a thread (``start()`` / ``stop()`` or ``with``), and so does
the test suite's fake upstream; each holds a :class:`BackgroundServer` and gives it its connection
handler (and what else it needs: host, port, TLS, how to shed idle connections).

**Out of file descriptors.** When ``accept()`` fails for want of file descriptors (``EMFILE``,
``ENFILE``) or memory, asyncio stops accepting for a second and tries again; it also reports
each failure with a traceback, a hundred a second while the limit holds. The server takes those
reports over: it closes its idle connections (the holder's ``shed_idle``: those waiting for a
request), logs one warning line per episode (at most one a minute), counts it in
:attr:`BackgroundServer.accept_pauses`, and accepting resumes by itself as connections close.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import random
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Self

__all__ = ["BackgroundServer", "Handler", "free_port"]

_logger = logging.getLogger("looptap.server")
#: What asyncio's accept loop reports when ``accept()`` fails for want of resources.
_ACCEPT_FAILED = "socket.accept() out of system resource"
_OUT_OF = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: Seconds between two warnings about running out of file descriptors.
_WARN_EVERY = 60.0

#: Serves one connection (until it ends, or is cancelled by a stop).
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _no_tls() -> ssl.SSLContext | None:
    return None


def _nothing_to_preload() -> None:
    pass


def _none_idle() -> int:
    return 0


class BackgroundServer:
    """Listens on ``host:port`` (0: a free port; :attr:`port` is the one bound once listening)
    and serves each connection with ``handle``, in a task a stop cancels.

    ``label`` names the thread and the server in errors and warnings; ``read_limit`` is the
    StreamReader buffer limit (the longest line or headers block it reads at once). ``ssl_context``
    is called when it starts listening (``None``: plain TCP). ``start_failed`` makes the error
    :meth:`start` raises when it could not listen (default: an :class:`OSError` saying where).
    ``preload`` imports what serving a request needs, before listening: imported on the first
    request instead, it would need file descriptors exactly when a server out of them cannot open
    one (the module's file), and the request would fail with a traceback. ``shed_idle`` closes
    the connections waiting for a request (a server may close an idle connection at any time), to
    make room when out of file descriptors, and says how many (default: none, for a holder that
    does not know which are idle)."""

    def __init__(
        self,
        handle: Handler,
        *,
        host: str,
        port: int,
        label: str = "server",
        read_limit: int = 1 << 20,
        ssl_context: Callable[[], ssl.SSLContext | None] = _no_tls,
        start_failed: Callable[[BaseException], Exception] | None = None,
        preload: Callable[[], None] = _nothing_to_preload,
        shed_idle: Callable[[], int] = _none_idle,
    ) -> None:
        self.host = host
        self.port = port
        self.label = label
        self.read_limit = read_limit
        self._handle = handle
        self._ssl_context = ssl_context
        self._start_failed = start_failed
        self._preload = preload
        self._shed_idle = shed_idle
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        #: Times accepting was paused for want of file descriptors (or memory).
        self.accept_pauses = 0
        self._paused = False
        self._warned_at: float | None = None
        self._prev_handler: Any = None
        self._handler_loop: asyncio.AbstractEventLoop | None = None

    def _failed(self, exc: BaseException) -> Exception:
        """The error :meth:`start` raises when the server could not listen."""
        if self._start_failed is not None:
            return self._start_failed(exc)
        return OSError(f"{self.label} could not listen on {self.host}:{self.port}: {exc}")

    # -- in a running event loop ---------------------------------------------------------------
    async def start_async(self) -> None:
        self._preload()
        self._server = await asyncio.start_server(
            self._connected, self.host, self.port, limit=self.read_limit, ssl=self._ssl_context()
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        loop = asyncio.get_running_loop()
        self._prev_handler = loop.get_exception_handler()
        self._handler_loop = loop
        loop.set_exception_handler(self._loop_exception)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._paused = False  # accepting again
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            await self._handle(reader, writer)
        finally:
            self._conns.discard(task)

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler while serving: a failed ``accept()`` on this server's
        socket for want of descriptors is one warning line per episode; anything else goes on
        to the handler there was before."""
        exc = context.get("exception")
        sock = context.get("socket")
        ours = (
            self._server is not None
            and sock is not None
            and any(sock.fileno() == s.fileno() for s in self._server.sockets)
        )
        if (
            context.get("message") == _ACCEPT_FAILED
            and ours
            and isinstance(exc, OSError)
            and exc.errno in _OUT_OF
        ):
            if not self._paused:
                self._paused = True
                self.accept_pauses += 1
                now = time.monotonic()
                shed = self._shed_idle()
                if self._warned_at is None or now - self._warned_at >= _WARN_EVERY:
                    self._warned_at = now
                    _logger.warning(
                        "looptap: %s is out of file descriptors (%s, %d connections open): closed "
                        "%d idle ones; not accepting new connections until some close",
                        self.label,
                        errno.errorcode.get(exc.errno or 0, "?"),
                        len(self._conns),
                        shed,
                    )
            return
        if self._prev_handler is not None:
            self._prev_handler(loop, context)
        else:
            loop.default_exception_handler(context)

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
        if self._handler_loop is not None:
            if self._handler_loop.get_exception_handler() == self._loop_exception:
                self._handler_loop.set_exception_handler(self._prev_handler)
            self._handler_loop = None

    # -- on a thread of its own ----------------------------------------------------------------
    def start(self) -> Self:
        """Serve from a thread of its own; returns once listening."""
        self._thread = threading.Thread(target=self._thread_main, name=self.label, daemon=True)
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError(f"{self.label} did not start within 15 s")
        if self._error is not None:
            raise self._failed(self._error) from self._error
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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


def _ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives outgoing connections as their source ports."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default; other systems use 49152-65535 or this
    return lo, hi


def free_port(avoid: Collection[int] = ()) -> int:
    """A port free to listen on, for a listener another process opens (the recorder's mitmproxy,
    a test's subprocess), so it cannot be handed a bound socket. A port is free again as soon as
    it is tested, so it may be taken before that process binds it: a caller that chose it says
    so and draws again (``Recorder`` does). To make that rare it is drawn below the ephemeral
    range when there is room (a port the kernel just called free inside that range can become the
    source port of any outgoing connection; seen in CI as "address already in use"). Never one of
    ``avoid`` (the ports already given to the other listeners of one recorder)."""
    lo, _ = _ephemeral_range()
    if lo > 11_000:
        rng = random.SystemRandom()
        for _ in range(64):
            port = rng.randrange(10_000, lo)
            if port in avoid:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port
