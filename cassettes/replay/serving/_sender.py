"""The replay server's one seam to the wire: an answer's head and body written (``Sender``: built
by h11, each write waited for within the write deadline, a header that cannot be sent dropped and
said) and every request answered kept as an exchange (``ServedLog``).

The player (:mod:`~cassettes.replay.serving._player`), the live relay
(:mod:`~cassettes.replay.serving._relay`) and the WebSocket sessions speak through these two only,
all in the server's one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import orjson

from ... import net
from ...matching import Matcher, Recorded, clip, tolerated_notes
from ...net import Request
from ...providers import Provider
from ...recording import Redactor
from ...wire import Exchange, Headers

if TYPE_CHECKING:
    from ...net import Answer

__all__ = ["Sender", "ServedLog"]


class Sender:
    """Writes answers: the head (h11), the body, each write drained within ``write_timeout``
    (``None``: no limit); keeps the headers it had to drop (names only, never values)."""

    def __init__(self, write_timeout: float | None) -> None:
        self.write_timeout = write_timeout
        #: Headers not sent because they cannot be (a recorded name or value with CR, LF, NUL …):
        #: how many, and the first lines saying which (names only, never values).
        self.headers_dropped = 0
        self.drops: list[str] = []
        #: Connections dropped because the client left its answer unread for ``write_timeout``.
        self.write_timeouts = 0

    async def drain(self, writer: asyncio.StreamWriter) -> None:
        """Wait until the client has taken what was written; after ``write_timeout`` with no
        progress the connection is dropped (counted in :attr:`write_timeouts`) and
        ``ConnectionAbortedError`` raised."""
        transport = writer.transport
        if transport.get_write_buffer_size() <= transport.get_write_buffer_limits()[0]:
            return await writer.drain()  # writing is not paused: nothing to wait for
        try:
            async with asyncio.timeout(self.write_timeout):
                await writer.drain()
        except TimeoutError:
            self.write_timeouts += 1
            writer.transport.abort()
            raise ConnectionAbortedError("the client left its answer unread") from None

    async def send_head(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        headers: Headers,
        *,
        req: Request | None = None,
        logged: Exchange | None = None,
    ) -> Answer:
        """The status line and headers, built by h11
        (:class:`~cassettes.net.Answer`); the answer to write the body with.
        A header that cannot be sent (a recorded name or value holding CR, LF, NUL …) is dropped:
        ``logged`` (the served exchange) then lists only what was sent, and a note and the report
        name the header, never its value."""

        answer = net.Answer(
            req.method if req is not None else "GET",
            close=req is not None and (req.header("connection") or "").lower() == "close",
            upgrade=req is not None and (req.header("upgrade") or "").lower() == "websocket",
        )
        said: list[str] = []
        head = answer.head(status, headers, said)
        if said:
            self.said(said, logged)
        writer.write(head)
        await self.drain(writer)
        return answer

    def said(self, said: list[str], logged: Exchange | None) -> None:
        """Headers dropped from a message (see :meth:`send_head`), kept for the report."""

        where = (
            f" (round trip {logged.seq})" if logged is not None and logged.seq is not None else ""
        )
        self.headers_dropped += len(said)
        self.drops.extend(f"{line}{where}" for line in said[: max(0, 20 - len(self.drops))])
        if logged is not None:
            logged.notes.extend(f"looptap: {line}" for line in said)
            logged.response_headers = [
                (k, v) for k, v in logged.response_headers if net.header_problem(k, v) is None
            ]

    async def send_whole(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        headers: Headers,
        body: bytes,
        *,
        req: Request | None = None,
        logged: Exchange | None = None,
    ) -> None:
        """A whole answer at once (the caller has put its content-length in ``headers``)."""
        answer = await self.send_head(writer, status, headers, req=req, logged=logged)
        writer.write(answer.data(body) + answer.end())
        await self.drain(writer)

    async def internal_error(
        self, writer: asyncio.StreamWriter, exc: Exception, websocket: bool = False
    ) -> None:
        """A failure of looptap itself, said to the client: a 500 in the generic error shape, or
        over an open WebSocket session its close as an internal error (1011)."""
        if websocket:  # the session is open: close it as an internal error (1011)
            with contextlib.suppress(Exception):
                writer.write(
                    net.frame(
                        net.CLOSE,
                        struct.pack("!H", 1011)
                        + clip(
                            f"looptap replay: internal error: {type(exc).__name__}", 100
                        ).encode(),
                    )
                )
                await writer.drain()
            return
        body = orjson.dumps(
            Provider.replay.error(
                500,
                f"looptap replay: internal error: {type(exc).__name__}: {clip(str(exc))}",
                "looptap_replay_error",
            )
        )
        with contextlib.suppress(Exception):
            await self.send_whole(
                writer,
                500,
                [
                    ("content-type", "application/json"),
                    ("x-should-retry", "false"),
                    ("content-length", str(len(body))),
                    ("connection", "close"),
                ],
                body,
            )


class ServedLog:
    """Every request answered, as an exchange (:attr:`served`: the live request and what was sent
    back); request bodies that differ from the recording kept within ``retain_bodies`` bytes.
    ``url`` gives the server's own origin (known once it listens)."""

    def __init__(self, matcher: Matcher, url: Callable[[], str], retain_bodies: int) -> None:
        self.matcher = matcher
        self.url = url
        self.served: list[Exchange] = []
        #: Of :attr:`served`, the tools' HTTP calls answered from the recording (served, or with
        #: an edited answer): served seq → the recorded call's seq (a fork writes them into its
        #: branch: :func:`cassettes.replay.forking.served.merge_served`).
        self.tool_origins: dict[int, int] = {}
        #: What is left of the budget for request bodies kept in :attr:`served`.
        self.retain_left = retain_bodies

    def __call__(
        self,
        req: Request,
        status: int | None,
        headers: Headers,
        chunks: list[tuple[float | None, bytes]],
        transport_error: str | None = None,
        origin_of: Recorded | None = None,
        played: bool = False,
    ) -> Exchange:
        """Record what is being answered *before* any of it reaches the client (``chunks`` is
        the list the sender appends to before each write): a test that inspects the run as soon
        as its client returns must find every byte the client saw. ``origin_of``: the recorded
        round trip whose origin it keeps; ``played``: that one answered it as recorded."""
        # A replayed round trip keeps the recorded origin: the run's analysis (provider, prices)
        # must see the API that answered, not this loopback server.
        origin = self.url()
        source = origin_of
        if source is not None:
            u = urlsplit(source.exchange.url)
            origin = f"{u.scheme}://{u.netloc}" if u.scheme and u.netloc else self.url()
        ex = Exchange(
            method=req.method,
            url=origin + req.target,
            request_headers=list(req.headers),
            request_body=req.body,
            status=status,
            response_headers=list(headers),
            response_chunks=chunks,
            started=time.time(),
            transport_error=transport_error,
            # a tool's HTTP call served stays one: the run's analysis links it to the model's call
            # it served and judges the result sent back against it (the plugin's run, a branch)
            tool=source is not None and source.exchange.tool,
        )
        ex.request_body = self._retained(req.body, source, ex)
        if played and source is not None and source.index in self.matcher.tolerated:
            # a changed tool result is the client's text: no secret in a note
            scrub = Redactor().scrub
            ex.notes.extend(scrub(n) for n in tolerated_notes(self.matcher.tolerated[source.index]))
        ex.seq = len(self.served)
        if ex.tool and source is not None:
            self.tool_origins[ex.seq] = source.seq
        self.served.append(ex)
        return ex

    def _retained(self, body: bytes, source: Recorded | None, ex: Exchange) -> bytes:
        """The request body as :attr:`served` keeps it: the recorded request's own bytes when it is
        the same (shared, no copy); else itself while the budget lasts; past that, nothing (a note
        gives its size): a flood of large requests costs no memory once answered."""
        if not body:
            return body
        if source is not None and source.exchange.request_body == body:
            return source.exchange.request_body
        if len(body) <= self.retain_left:
            self.retain_left -= len(body)
            return body
        ex.notes.append(
            f"request body of {len(body):,} bytes not kept: over the replay server's budget for "
            "request bodies that differ from the recording"
        )
        return b""
