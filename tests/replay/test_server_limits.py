"""The replay server against a hostile or broken client (issue 29): every request it cannot read
is answered, every connection that stops making progress is closed, and no flood costs memory
that stays. Memory is measured on a server in a child process (``/proc/<pid>/status``), with
generous bounds; hangs are detected by lack of progress (a socket that never closes fails the
recv with a generous timeout), never by timing a step."""

from __future__ import annotations

import os
import resource
import socket
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from looptap.cassettes import net as wsframes
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import REPO, SYSTEM, USER, chat_request, chat_response, tool_loop
from tests.support import progress

#: A generous bound on any wait for the server (a hang shows as this running out).
PATIENCE = 120.0
MB = 1 << 20


# -- helpers -------------------------------------------------------------------------------------


def _recv_all(s: socket.socket) -> bytes:
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def _ask(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as s:
        s.sendall(data)
        return _recv_all(s)


class Child:
    """A replay server in a process of its own (``ReplayServer(tool_loop(), **kwargs)``), so that
    its memory and its file descriptors are its own."""

    def __init__(self, tmp_path: Path, nofile: int | None = None, **kwargs: object) -> None:
        code = textwrap.dedent(f"""
            import sys, time
            from looptap.cassettes.replay.serving.server import ReplayServer
            from tests.replay.conftest import tool_loop
            srv = ReplayServer(tool_loop(), **{kwargs!r}).start()
            print(srv.port, flush=True)
            sys.stdin.read()
            srv.stop()
        """)
        self.err = tmp_path / "server-stderr.txt"

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=REPO,
                preexec_fn=limit,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip().isdigit(), self.err.read_text()
        self.port = int(line)

    def _field(self, field: str) -> int:
        """A ``/proc/<pid>/status`` figure as written there."""
        for ln in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if ln.startswith(field + ":"):
                return int(ln.split()[1])
        raise AssertionError(field)

    def threads(self) -> int:
        """The server process's thread count."""
        return self._field("Threads")

    def settled(self, threads: int) -> None:
        """Wait until the connection threads have ended (back to ``threads``): on a loaded machine
        the client has the answer before the server's thread lets go of the request it read."""
        for _ in range(20_000):
            if self.threads() <= threads:
                return
            time.sleep(0.01)

    def status(self, field: str) -> int:
        """A ``/proc/<pid>/status`` figure in bytes (``VmRSS``, ``VmHWM``)."""
        return self._field(field) * 1024

    def stop(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(PATIENCE)
        return self.err.read_text(errors="replace")


@pytest.fixture
def quick() -> Iterator[ReplayServer]:
    """A replay server with small timeouts, in a thread."""
    with ReplayServer(tool_loop(), idle_timeout=0.5, read_timeout=0.5) as srv:
        yield srv


# -- memory: request bodies are not kept ---------------------------------------------------------


@pytest.mark.slow(
    reason=(
        "five 50 MB requests (about 7 s of CPU): the replay server's kept bodies are bounded "
        "in the process by test_served_keeps_recorded_bodies_shared_and_others_within_budget"
    )
)
def test_large_requests_cost_no_memory_once_answered(tmp_path: Path) -> None:
    """Five 50 MB requests (each a miss): each is answered, and the server's memory comes back
    down after each (it kept every body twice: in the served log and in the miss's diff)."""
    child = Child(tmp_path)
    try:
        idle = child.threads()
        # warm up: a first miss
        with socket.create_connection(("127.0.0.1", child.port), timeout=PATIENCE) as s:
            s.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: "
                b"2\r\nConnection: close\r\n\r\n{}"
            )
            _recv_all(s)
        child.settled(idle)
        start = child.status("VmRSS")
        body = orjson.dumps(
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "a" * (50 * MB)}]}
        )
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", child.port), timeout=PATIENCE) as s:
                s.sendall(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: "
                    b"application/json\r\nConnection: close\r\nContent-Length: "
                    b"%d\r\n\r\n" % len(body)
                )
                s.sendall(body)
                got = _recv_all(s)
            assert got.startswith(b"HTTP/1.1 400 ") and b"looptap_replay_miss" in got, got[:300]
            assert len(got) < 20_000  # the miss message does not echo the 50 MB value
        child.settled(idle)
        grown = child.status("VmRSS") - start
    finally:
        err = child.stop()
    # Keeping one copy of each body would be 250 MB (the bug kept two: 500 MB). What the allocator
    # keeps after five 50 MB requests varies from run to run: 60-90 MB, once in ten 103 MB, on
    # this tree and on 119317a alike; 150 MB stays below a single body kept per request.
    assert grown < 150 * MB, (
        f"the server grew by {grown / MB:.0f} MB over five 50 MB requests\n{err[-2000:]}"
    )


def test_served_keeps_recorded_bodies_shared_and_others_within_budget() -> None:
    exchanges = tool_loop()
    with ReplayServer(exchanges, retain_bodies=100) as srv:
        recorded = exchanges[0].request_body
        sent = bytes(recorded)  # read off the socket: equal, not the same object
        got = _ask(
            srv.port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: "
            b"application/json\r\nConnection: close\r\nContent-Length: "
            b"%d\r\n\r\n%s" % (len(sent), sent),
        )
        assert got.startswith(b"HTTP/1.1 200 ")
        big = chat_request([SYSTEM, USER, {"role": "user", "content": "x" * 500}])
        got = _ask(
            srv.port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: "
            b"application/json\r\nConnection: close\r\nContent-Length: "
            b"%d\r\n\r\n%s" % (len(big), big),
        )
        assert got.startswith(b"HTTP/1.1 400 ")
        played, missed = srv.served
    assert played.request_body is recorded  # shared with the recording: no copy kept
    assert missed.request_body == b"" and any(
        f"request body of {len(big):,} bytes not kept" in n for n in missed.notes
    )
    assert srv.misses and srv.misses[0].target == "/v1/chat/completions"


# -- bounded echo ----------------------------------------------------------------------------------


def test_a_miss_does_not_echo_a_long_url_or_key_back(quick: ReplayServer) -> None:
    target = "/v1/chat/completions?q=" + "u" * 60_000
    got = _ask(
        quick.port, f"GET {target} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode()
    )
    assert got.startswith(b"HTTP/1.1 400 ") and b"[cut: " in got and len(got) < 10_000, len(got)
    body = chat_request([SYSTEM, USER], **{"k" * 50_000: 1})
    got = _ask(
        quick.port,
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: "
        b"application/json\r\nConnection: close\r\nContent-Length: "
        b"%d\r\n\r\n%s" % (len(body), body),
    )
    assert got.startswith(b"HTTP/1.1 400 ") and b"[cut: " in got and len(got) < 40_000, len(got)
    assert all(len(line) < 3000 for line in quick.report_lines())


# -- timeouts --------------------------------------------------------------------------------------


def test_an_idle_connection_is_closed(quick: ReplayServer) -> None:
    with socket.create_connection(("127.0.0.1", quick.port), timeout=PATIENCE) as s:
        assert s.recv(100) == b""  # closed by the server, nothing said
    # idle after a request
    with socket.create_connection(("127.0.0.1", quick.port), timeout=PATIENCE) as s:
        s.sendall(b"GET /nothing HTTP/1.1\r\nHost: h\r\n\r\n")
        got = _recv_all(s)
    assert got.startswith(b"HTTP/1.1 400 ") and got.count(b"HTTP/1.1 ") == 1


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n", b"did not arrive within 0.5 s"),
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc",
            b"stalled: nothing for 0.5 s after 3 of 10 bytes",
        ),
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
            b"chunked\r\n\r\n3\r\nabc\r\n",
            b"stalled",
        ),
    ],
    ids=["head", "body", "chunked"],
)
def test_a_request_that_stops_arriving_gets_408(
    quick: ReplayServer, data: bytes, says: bytes
) -> None:
    got = _ask(quick.port, data)
    assert got.startswith(b"HTTP/1.1 408 ") and says in got, got
    assert quick.refused == 1 and "408" in quick.report_lines()[0] + "".join(quick.report_lines())


def test_timeouts_can_be_turned_off() -> None:
    with (
        ReplayServer(tool_loop(), idle_timeout=None, read_timeout=None) as srv,
        socket.create_connection(("127.0.0.1", srv.port)) as s,
    ):
        s.settimeout(1.0)
        with pytest.raises(TimeoutError):
            s.recv(100)  # still open


def test_a_client_that_leaves_its_answer_unread_is_dropped() -> None:
    """A client that sends a request and never reads the (8 MB) answer: once the socket buffers
    are full and nothing moves for ``write_timeout``, the server drops the connection and counts
    it (it waited on the write forever). Waited for by progress, not by a timed step."""
    from tests.replay.conftest import chat_exchange
    from tests.support.progress import until

    # over the loopback socket buffers (4 MB at most by default)
    big = chat_response("w" * (8 * MB))
    exchanges = [chat_exchange([SYSTEM, USER], big)]
    with (
        ReplayServer(exchanges, write_timeout=0.3) as srv,
        socket.create_connection(("127.0.0.1", srv.port)) as s,
    ):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = exchanges[0].request_body
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        until(lambda: srv.sender.write_timeouts == 1, what="the unread answer's connection dropped")
        assert "1 connection dropped (answer unread for 0.3 s)" in srv.report_lines()[0]
        s.settimeout(PATIENCE)
        # the start of what was in the buffers (reading it all through a 4 KB window is slow)
        got = s.recv(13)
    assert got.startswith(b"HTTP/1.1 200 ")


# -- the file-descriptor limit ---------------------------------------------------------------------


def test_at_the_fd_limit_it_backs_off_with_one_line_and_recovers(tmp_path: Path) -> None:
    """With ``nofile`` at 128 and 200 idle connections held, accepting pauses with one warning
    line (asyncio alone logs a traceback per failed accept, hundreds a second), the idle
    connections are closed to make room (no idle timeout here: that alone), and a new request
    is answered."""
    child = Child(tmp_path, nofile=128, idle_timeout=None)
    held: list[socket.socket] = []
    try:
        for _ in range(200):
            held.append(socket.create_connection(("127.0.0.1", child.port), timeout=PATIENCE))
        progress.until(
            lambda: "out of file descriptors" in child.err.read_text(errors="replace"),
            pids=[child.proc.pid],
            what="the server saying it ran out",
        )
        got = _ask(child.port, b"GET /after HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 400 ") and b"looptap_replay_miss" in got
        closed = 0
        for s in held:
            s.setblocking(False)
            try:
                closed += s.recv(10) == b""
            except BlockingIOError:
                pass
            except ConnectionResetError:
                closed += 1
        assert closed >= 50, closed  # the idle ones, closed to make room
    finally:
        for s in held:
            s.close()
        err = child.stop()
    assert "Traceback" not in err and len(err) < 4000, err[:3000]
    warnings = [ln for ln in err.splitlines() if "out of file descriptors" in ln]
    # one per minute at most; a second episode may follow the first
    assert 1 <= len(warnings) <= 2, err
    assert warnings[0].startswith("looptap: the replay server is out of file descriptors (EMFILE")


# -- WebSocket -------------------------------------------------------------------------------------


def _masked(op: int, payload: bytes = b"", fin: bool = True, rsv: int = 0) -> bytes:
    mask = b"\x01\x02\x03\x04"
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    n = len(payload)
    if n < 126:
        size = bytes([0x80 | n])
    elif n < 1 << 16:
        size = bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        size = bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return bytes([(0x80 if fin else 0) | rsv | op]) + size + mask + body


def _ws(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
    s.sendall(
        b"GET /v1/responses HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101 "), head
    return s


def _frames(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    while len(data) >= 2:
        op, n = data[0] & 0x0F, data[1] & 0x7F
        at = 2
        if n == 126:
            n, at = struct.unpack("!H", data[2:4])[0], 4
        elif n == 127:
            n, at = struct.unpack("!Q", data[2:10])[0], 10
        out.append((op, data[at : at + n]))
        data = data[at + n :]
    return out


def _close_code(s: socket.socket) -> tuple[int, bytes]:
    frames = _frames(_recv_all(s))
    closes = [p for op, p in frames if op == wsframes.CLOSE]
    assert closes, frames
    return struct.unpack("!H", closes[0][:2])[0], closes[0][2:]


# the reasons are wsproto's (cassettes/net/_ws.py reads frames with it)
BAD_FRAMES = [
    (_masked(0x3, b"x"), 1002, b"Invalid opcode 0x3"),
    (_masked(0xB), 1002, b"Invalid opcode 0xb"),
    (_masked(wsframes.PING, b"p" * 126), 1002, b"Control frame with payload len > 125"),
    (_masked(wsframes.PING, b"p" * 65536), 1002, b"Control frame with payload len > 125"),
    (_masked(wsframes.PING, b"p", fin=False), 1002, b"fragment control frame"),
    (_masked(wsframes.CLOSE, struct.pack("!H", 0)), 1002, b"CLOSE with invalid code"),
    (_masked(wsframes.CLOSE, struct.pack("!H", 1005)), 1002, b"local-only reason"),
    (_masked(wsframes.CLOSE, struct.pack("!H", 2000)), 1002, b"unknown reserved code"),
    (_masked(wsframes.CLOSE, b"\x03"), 1002, b"1 byte payload"),
    (
        _masked(wsframes.CLOSE, struct.pack("!H", 1000) + b"\xff"),
        1007,
        b"Error decoding CLOSE reason",
    ),
    (_masked(wsframes.TEXT, b"\xc3("), 1007, b"can't decode"),
    (_masked(wsframes.TEXT, b"x", rsv=0x40), 1002, b"Reserved bit set"),
]


@pytest.mark.parametrize(
    ("frame", "code", "says"), BAD_FRAMES, ids=[w.decode() for _, _, w in BAD_FRAMES]
)
def test_websocket_rule_breaks_are_closed_with_a_code(
    quick: ReplayServer, frame: bytes, code: int, says: bytes
) -> None:
    with _ws(quick.port) as s:
        s.sendall(frame)
        got, why = _close_code(s)
    assert (got, says in why) == (code, True), why


def test_websocket_control_frames_within_the_rules_are_answered(quick: ReplayServer) -> None:
    with _ws(quick.port) as s:
        s.sendall(
            _masked(wsframes.PING, b"p" * 125)
            + _masked(wsframes.CLOSE, struct.pack("!H", 3000) + "bye ✓".encode())
        )
        frames = _frames(_recv_all(s))
    assert frames == [(wsframes.PONG, b"p" * 125), (wsframes.CLOSE, struct.pack("!H", 3000))]


def test_an_idle_websocket_is_closed_with_1001(quick: ReplayServer) -> None:
    with _ws(quick.port) as s:
        code, why = _close_code(s)
    assert code == 1001 and b"no frame for 0.5 s" in why


@pytest.mark.slow(
    reason=(
        "a server process flooded with millions of one-byte fragments (about 3 s of CPU): the "
        "bound counting each frame is shown in the process by "
        "test_the_message_bound_counts_each_frame"
    )
)
def test_a_fragment_flood_is_refused_within_the_message_bound(tmp_path: Path) -> None:
    """One-byte fragments count their frames against the 64 MiB bound: the server closes with
    1009 after at most 64 MiB / FRAME_COST of them, its memory barely moved (before: 5 M
    fragments were taken, 228 MB more, and the message never ended)."""
    child = Child(tmp_path)
    try:
        start = child.status("VmRSS")
        limit = wsframes.MAX_MESSAGE // wsframes.FRAME_COST
        cont = _masked(0x0, b"a", fin=False)
        sent, closed = 0, False
        with _ws(child.port) as s:
            s.sendall(_masked(wsframes.TEXT, b"a", fin=False))
            while sent < 4 * limit:  # four times what the bound allows, unless closed first
                try:
                    s.sendall(cont * 10_000)
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                sent += 10_000
            code, why = _close_code(s)
        grown = child.status("VmRSS") - start
    finally:
        child.stop()
    assert code == 1009 and b"a message over 67,108,864 bytes" in why, (code, why, closed)
    assert grown < 60 * MB, f"{grown / MB:.0f} MB"


def test_the_message_bound_counts_each_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_MESSAGE / FRAME_COST one-byte fragments reach the bound (1009); the same bytes in one
    frame do not. The bound is lowered to 1 MiB here (4,096 fragments, not 262,144: the same
    count, 2 s of CPU less); the real 64 MiB with millions of fragments on a server process is
    test_a_fragment_flood_is_refused_within_the_message_bound's (nightly)."""
    import asyncio

    from looptap.cassettes.net import _ws

    bound = 1 << 20
    monkeypatch.setattr(_ws, "MAX_MESSAGE", bound)

    async def first(data: bytes) -> tuple[int, int] | int:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        try:
            op, message = await wsframes.MessageReader(reader).next()
        except wsframes.WsProtocolError as exc:
            return exc.code
        return op, len(message)

    n = bound // wsframes.FRAME_COST
    assert (
        asyncio.run(
            first(_masked(wsframes.TEXT, b"a", fin=False) + _masked(0x0, b"a", fin=False) * n)
        )
        == 1009
    )
    assert asyncio.run(first(_masked(wsframes.TEXT, b"a" * 60_000))) == (wsframes.TEXT, 60_000)
    assert n + 1 < 60_000  # (the fragments refused carry fewer bytes than the frame taken)


pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or not os.path.exists("/proc/self/status"),
    reason="reads /proc/<pid>/status",
)


def test_what_serving_needs_is_loaded_before_listening() -> None:
    """The HTTP/1.1 and WebSocket libraries are imported when the server starts, not on its first
    request: out of file descriptors, a first request would need one to open the module's file
    (the fd-limit test above failed so under load: 'Too many open files: …/h11/__init__.py')."""
    code = (
        "import sys\nfrom looptap.cassettes.replay.serving.server import ReplayServer\nfrom "
        "tests.replay.conftest import tool_loop\nassert 'h11' not in sys.modules\nsrv = "
        "ReplayServer(tool_loop()).start()\nprint('h11' in sys.modules, 'wsproto.events' in "
        "sys.modules)\nsrv.stop()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.split() == ["True", "True"], out.stdout + out.stderr
