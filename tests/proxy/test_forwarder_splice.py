"""The forwarder in process (it imports no mitmproxy): what it does not handle itself reaches the
internal listener byte for byte, from the request that needs it, and the answers come back as they
were sent; no CR, LF or NUL of a request is forwarded; an upstream's own looptap marks are dropped
with the addon's note.

A stand-in for mitmproxy's internal listener logs every byte it receives and answers a fixed text;
the upstream is the tests' ``FakeUpstream``; the writer is a list."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from proxy.forwarder import Forwarder, Pool, Route, Target
from tests.support import progress
from tests.support.upstream import FakeUpstream

CHAT = b"/v1/chat/completions"
JSON = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
ANSWER = b"HTTP/1.1 299 From The Splice\r\ncontent-length: 2\r\n\r\nok"


def post(extra: bytes = b"", version: bytes = b"HTTP/1.1", body: bytes = JSON) -> bytes:
    return (
        b"POST %s %s\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
        % (CHAT, version, extra, len(body), body)
    )


class Sink:
    """The writer: the round trips handed over, and how many bytes of its answer each client had
    been sent by then (read through the forwarder's transport)."""

    running = True

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.lost: list[str] = []

    def hand_over(self, item: object, *, receipt: bool = False) -> object:
        self.items.append(item)
        return None

    def not_recorded(self, what: str) -> None:
        self.lost.append(what)


class Stand:
    """mitmproxy's internal listener, stood in for: logs what it gets, answers ``ANSWER`` once it
    has a request head."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        try:
            while b"\r\n\r\n" not in data and not data.startswith(b"\x16"):
                more = await reader.read(1 << 16)
                if not more:
                    break
                data += more
            self.got.append(data)
            writer.write(ANSWER)
            await writer.drain()
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])


@asynccontextmanager
async def forwarder(up: FakeUpstream) -> AsyncIterator[tuple[int, Stand, Sink]]:
    async with forwarder_to(up.url) as got:
        yield got


@asynccontextmanager
async def forwarder_to(url: str) -> AsyncIterator[tuple[int, Stand, Sink]]:
    stand, sink = Stand(), Sink()
    stand.server = await asyncio.start_server(stand.handle, "127.0.0.1", 0)
    target = Target.parse(url)
    assert target is not None
    fwd = Forwarder()
    route = Route("openai", target, Pool(target), sink, "127.0.0.1", stand.port)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    await fwd.listen(route, "127.0.0.1", port)
    try:
        yield port, stand, sink
    finally:
        await fwd.close()
        stand.server.close()


async def exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, read until the forwarder closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    got = b""
    async with asyncio.timeout(progress.STALL):
        while more := await reader.read(1 << 16):
            got += more
    writer.close()
    return got


@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeUpstream(delay=0.001) as up:
        yield up


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", id="h2-preface"),
        pytest.param(b"\x16\x03\x01\x00\x05hello", id="tls-client-hello"),
        pytest.param(
            b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n",
            id="websocket-upgrade",
        ),
        pytest.param(post(b"Expect: 100-continue\r\n", body=b""), id="expect"),
        pytest.param(post(version=b"HTTP/1.0"), id="http-1.0"),
        pytest.param(post(b"x-looptap-edit: e30\r\n"), id="edit-marks"),
        pytest.param(b"NOT HTTP AT ALL\r\n\r\n", id="unreadable"),
        pytest.param(post(b"Bad Header\r\n"), id="bad-header-line"),
    ],
)
def test_what_the_forwarder_does_not_handle_reaches_mitmproxy_byte_for_byte(
    upstream: FakeUpstream, data: bytes
) -> None:
    async def main() -> None:
        async with forwarder(upstream) as (port, stand, sink):
            got = await exchange(port, data)
            assert got == ANSWER
            assert stand.got == [data]
            assert sink.items == []

    asyncio.run(main())


def test_a_keep_alive_connection_goes_to_mitmproxy_from_the_request_that_needs_it(
    upstream: FakeUpstream,
) -> None:
    """The first request is forwarded and recorded; the second (an upgrade), pipelined behind it,
    and what follows it go to mitmproxy whole."""
    upgrade = (
        b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"\r\n"
    )

    async def main() -> None:
        async with forwarder(upstream) as (port, stand, sink):
            got = await exchange(port, post() + upgrade)
            assert got.startswith(b"HTTP/1.1 200 ")
            assert got.endswith(ANSWER)
            assert stand.got == [upgrade]
            assert len(sink.items) == 1 and sink.items[0].status == 200

    asyncio.run(main())


def test_no_cr_lf_from_a_request_reaches_the_upstream_or_the_record(
    upstream: FakeUpstream,
) -> None:
    """A header value with a bare CR or a NUL is not HTTP: mitmproxy's to refuse (spliced), never
    forwarded nor recorded by the forwarder."""

    async def main() -> None:
        async with forwarder(upstream) as (port, stand, sink):
            for bad in (b"X-A: one\rInjected: yes\r\n", b"X-A: one\x00two\r\n"):
                stand.got.clear()
                got = await exchange(port, post(bad))
                assert got == ANSWER
                assert stand.got and bad in stand.got[0]
            assert sink.items == []

    asyncio.run(main())


def test_the_upstreams_own_marks_are_dropped_and_said_as_the_addon_says(
    upstream: FakeUpstream,
) -> None:
    """An upstream's ``x-looptap-*`` headers never reach the client nor the cassette; the round
    trip carries the addon's note (proxy/notes.py words it for both)."""
    from proxy import notes

    async def lying(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(len(JSON))
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\nX-Looptap-Fault: rate_limit\r\n"
            b"content-type: application/json\r\nx-looptap-replay: miss\r\n"
            b"content-length: 2\r\n\r\n{}"
        )
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(lying, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with forwarder_to(f"http://127.0.0.1:{port}") as (fport, _stand, sink):
                got = await exchange(fport, post(b"Connection: close\r\n"))
        finally:
            server.close()
        assert got.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
        assert b"looptap" not in got.lower()
        (ex,) = sink.items
        assert [k for k, _ in ex.response_headers] == ["content-type", "content-length"]
        assert ex.notes == [notes.marks_refused(["x-looptap-fault", "x-looptap-replay"])]
        assert ex.response_body == b"{}" and ex.transport_error is None

    asyncio.run(main())
