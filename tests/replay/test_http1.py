"""The one HTTP/1.1 request reader (cassettes/net/_requests.py), as the replay server and
the test suite's fake upstream both use it: bodies by length and chunked, ``100-continue``, the
absolute form; and every request it cannot read (bad request line, bad lengths, oversized head or
body) answered with a short 400/413/431 and a closed connection, never a traceback or a hang."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from looptap.cassettes import net as http1
from looptap.cassettes.net import BackgroundServer
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.wire import Exchange
from tests.support.upstream import FakeUpstream


class Echo:
    """The reader alone: answers each request with what it read."""

    def __init__(self) -> None:
        self.read: list[http1.Request] = []
        self.server = BackgroundServer(
            self._handle, host="127.0.0.1", port=0, label="echo", read_limit=4096
        )

    @property
    def port(self) -> int:
        return self.server.port

    def __enter__(self) -> Echo:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    req = await http1.read_request(reader, writer, max_body=1000)
                except http1.BadRequest as exc:
                    await http1.refuse(writer, exc)
                    break
                if req is None:
                    break
                self.read.append(req)
                body = f"{req.method} {req.target} {len(req.body)}".encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def _exchange(port: int, data: bytes, *, until_close: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        if not until_close:
            return s.recv(65536)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except ConnectionResetError:
            # the server closed with bytes of ours unread: its answer came first
            pass
        return out


@pytest.fixture
def echo() -> Iterator[Echo]:
    with Echo() as srv:
        yield srv


def test_bodies_by_length_and_chunked(echo: Echo) -> None:
    got = _exchange(
        echo.port, b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", until_close=False
    )
    assert got.endswith(b"POST /a 3")
    chunked = (
        b"POST http://up.example/v1/x?q=1 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
        b"chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    assert _exchange(echo.port, chunked, until_close=False).endswith(b"POST /v1/x?q=1 5")
    assert echo.read[-1].body == b"abcde" and echo.read[-1].header("transfer-encoding") == "chunked"


def test_expect_100_continue(echo: Echo) -> None:
    with socket.create_connection(("127.0.0.1", echo.port), timeout=10) as s:
        s.sendall(
            b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
        )
        assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(b"hi")
        assert s.recv(1000).endswith(b"POST /a 2")


H = b"Host: h\r\n"
BAD = [
    (b"GARBAGE\r\n\r\n", 400, b"bad request line"),
    (b"GET  HTTP/1.1\r\n\r\n", 400, b"bad request line"),
    (b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: ten\r\n\r\n", 400, b"bad Content-Length"),
    (b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n", 400, b"bad Content-Length"),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: 1001\r\n\r\n",
        413,
        b"larger than 1,000 bytes",
    ),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        400,
        b"bad chunk size",
    ),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n-1\r\n",
        400,
        b"bad chunk size",
    ),
    (b"POST /a HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabcXY", 400, b"CRLF"),
    (
        b"POST /a HTTP/1.1\r\n"
        + H
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + b"1f4\r\n"
        + b"a" * 500
        + b"\r\n"
        + b"1f4\r\n"
        + b"a" * 500
        + b"\r\n1\r\n",
        413,
        b"larger than",
    ),
    (b"GET / HTTP/1.1\r\n" + H + b"X-Big: " + b"a" * 8000 + b"\r\n\r\n", 431, b"too large"),
    (
        b"POST /a HTTP/1.1\r\n"
        + H
        + b"Transfer-Encoding: chunked\r\n\r\n0\r\n"
        + b"X: 1\r\n" * 101
        + b"\r\n",
        400,
        b"trailer",
    ),
    # RFC 9112 6.3 and 8.6: Content-Length is ASCII digits; several values only when they agree
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: 1_0\r\n\r\n" + b"a" * 10,
        400,
        b"bad Content-Length: digits only",
    ),
    (b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: +3\r\n\r\nabc", 400, b"bad Content-Length"),
    (b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: \xb2\r\n\r\nabc", 400, b"bad Content-Length"),
    (b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: 0x3\r\n\r\nabc", 400, b"bad Content-Length"),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: 3\r\nContent-Length: 5\r\n\r\nabcde",
        400,
        b"conflicting Content-Length values",
    ),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: 3, 4\r\n\r\nabcd",
        400,
        b"conflicting Content-Length",
    ),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: " + b"9" * 30 + b"\r\n\r\n",
        400,
        b"bad Content-Length",
    ),
    # RFC 9112 6.1: Transfer-Encoding with Content-Length, and codings other than chunked
    (
        b"POST /a HTTP/1.1\r\n"
        + H
        + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        400,
        b"both Transfer-Encoding and Content-Length",
    ),
    # the same in other spellings (issue 53): the order, the case, no space, equal lengths
    *(
        (
            b"POST /a HTTP/1.1\r\n" + H + both + b"\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            400,
            b"both Transfer-Encoding and Content-Length",
        )
        for both in (
            b"Transfer-Encoding: chunked\r\nContent-Length: 3",
            b"content-length: 3\r\nTRANSFER-ENCODING: Chunked",
            b"Content-Length:3\r\nTransfer-Encoding:chunked",
            b"Content-Length: 3, 3\r\nTransfer-Encoding: chunked",
        )
    ),
    (
        b"POST /a HTTP/1.1\r\n"
        + H
        + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        501,
        b"multiple Transfer-Encoding",
    ),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
        b"not supported",
    ),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
        400,
        b"bad chunk size",
    ),
    (
        b"POST /a HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n 3\r\nabc\r\n0\r\n\r\n",
        400,
        b"bad chunk size",
    ),
    (
        b"POST /a HTTP/1.1\r\n"
        + H
        + b"Transfer-Encoding: chunked\r\n\r\n1_0\r\n"
        + b"a" * 16
        + b"\r\n0\r\n\r\n",
        400,
        b"bad chunk size",
    ),
    # RFC 9112 3 and 5: the request line and header lines
    (b"GET / HTTP/2.0\r\n" + H + b"\r\n", 505, b"not supported"),
    (b"GET / HTTP/1.1 extra\r\n" + H + b"\r\n", 400, b"bad request line"),
    (b"G(T / HTTP/1.1\r\n" + H + b"\r\n", 400, b"bad request line"),
    (b"GET /a\x01b HTTP/1.1\r\n" + H + b"\r\n", 400, b"bad request line"),
    (b"GET a/b HTTP/1.1\r\n" + H + b"\r\n", 400, b"bad request target"),
    (b"GET / HTTP/1.1\r\n\r\n", 400, b"exactly one Host"),
    (b"GET / HTTP/1.1\r\n" + H + H + b"\r\n", 400, b"exactly one Host"),
    (b"GET / HTTP/1.1\r\n" + H + b"X-A : 1\r\n\r\n", 400, b"bad header line"),
    (b"GET / HTTP/1.1\r\n" + H + b"X-A: 1\r\n folded\r\n\r\n", 400, b"folded"),
    (b"GET / HTTP/1.1\r\n" + H + b"no colon here\r\n\r\n", 400, b"bad header line"),
    (b"GET / HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n", 400, b"bad header line"),
    (b"GET / HTTP/1.1\r\n" + H + b"X: 1\r\n" * 300 + b"\r\n", 431, b"header lines"),
    (b"GET http://[::1/ HTTP/1.1\r\n" + H + b"\r\n", 400, b"bad request target"),
]


@pytest.mark.parametrize(
    ("data", "status", "says"), BAD, ids=[f"{s}-{w.decode()}" for _, s, w in BAD]
)
def test_unreadable_requests_get_a_clean_answer(
    echo: Echo, data: bytes, status: int, says: bytes
) -> None:
    got = _exchange(echo.port, data)
    assert got.startswith(b"HTTP/1.1 %d " % status), got[:200]
    assert b"connection: close" in got.lower() and says in got and b"Traceback" not in got
    assert len(got) < 1000  # a short plain answer: no request echoed back whole
    assert echo.read == []


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\n" + H,  # the head never ends
        b"POST /a HTTP/1.1\r\n" + H + b"Content-Length: 10\r\n\r\nabc",  # the body ends short
        # a chunk ends short
        b"POST /a HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n3\r\nab",
        # no last chunk
        b"POST /a HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
    ],
    ids=["head", "body", "chunk", "last-chunk"],
)
def test_a_request_cut_short_is_answered(echo: Echo, data: bytes) -> None:
    """A client that stops sending (half-closes) within a request still gets an answer saying so."""
    with socket.create_connection(("127.0.0.1", echo.port), timeout=30) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 400 ") and b"ended" in got, got[:200]


def test_identical_lengths_and_leading_empty_lines_are_read(echo: Echo) -> None:
    got = _exchange(
        echo.port,
        b"\r\nPOST /a HTTP/1.1\r\n" + H + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        until_close=False,
    )
    assert got.endswith(b"POST /a 3")


@pytest.mark.parametrize("server", ["replay", "upstream"])
def test_both_servers_answer_unreadable_requests(server: str) -> None:
    srv: ReplayServer | FakeUpstream = (
        ReplayServer([Exchange(method="GET", url="http://x/ping", status=200)])
        if server == "replay"
        else FakeUpstream()
    )
    with srv:
        assert _exchange(srv.port, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400 Bad Request\r\n")
        assert _exchange(
            srv.port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n"
            % (srv.max_body + 1),
        ).startswith(b"HTTP/1.1 413 ")
        assert _exchange(
            srv.port,
            b"GET / HTTP/1.1\r\nHost: h\r\nX: " + b"a" * (srv.read_limit + 10) + b"\r\n\r\n",
        ).startswith(b"HTTP/1.1 431 ")
        long = _exchange(srv.port, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: h\r\n\r\n")
        assert long.startswith(b"HTTP/1.1 414 ") and b"over 65,536" in long and len(long) < 1000
        # and it still serves
        assert b"HTTP/1.1 " in _exchange(
            srv.port, b"GET /ping HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        )
