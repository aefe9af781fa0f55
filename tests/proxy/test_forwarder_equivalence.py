"""looptap's forwarder (proxy/forwarder/, the reverse listeners' default) records what mitmproxy
records, and its clients see what they saw through mitmproxy.

The same scripted traffic goes, over real sockets, through two real recorders side by side: one with
the forwarder (the default) and one with ``LOOPTAP_FORWARDER=mitmproxy`` (mitmproxy on every
listener, as before the forwarder), both in front of the same loopback upstreams. JSON, SSE
(chunked), fixed-length and gzip'd bodies, error statuses, a chunked request, keep-alive and
pipelined requests, large bodies both ways, the upstream resetting or closing before its answer and
in the middle of it, a client gone in the middle of a stream, the client's path without the API's
version segment, and what the forwarder splices to mitmproxy (``Expect: 100-continue``, HTTP/1.0,
a request it cannot read, a fork's edit marks, a WebSocket session). The two cassettes must be
equal record by record apart from timestamps, and each client must have seen the same bytes end
the same way (a reset, a close).
"""

from __future__ import annotations

import gzip
import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from cassettes.storage.store import read_records
from cassettes.wire.exchange import Exchange
from tests.support import progress
from tests.support.recorder import RecorderProcess, clean_env, needs_recorder
from tests.support.upstream import FakeUpstream
from tests.support.ws_upstream import WsResponsesUpstream

pytestmark = [needs_recorder]

CHAT = "/v1/chat/completions"
ASK = [{"role": "user", "content": "What is the capital of France?"}]


def body(stream: bool = False, **extra: Any) -> bytes:
    return json.dumps({"model": "gpt-4o", "messages": ASK, "stream": stream, **extra}).encode()


def post(
    path: str,
    data: bytes,
    scenario: str | None = None,
    *,
    headers: tuple[tuple[str, str], ...] = (),
    version: str = "HTTP/1.1",
) -> bytes:
    lines = [f"POST {path} {version}", "Host: looptap.test", "Content-Type: application/json"]
    if scenario is not None:
        lines.append(f"X-Fake-Upstream: {scenario}")
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


class Client:
    """A raw HTTP/1.1 client on one connection: what it was sent, byte for byte, and how the
    connection ended. A hang fails after ``progress.STALL`` seconds without a byte."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(progress.STALL)
        self.buf = b""
        self.ended: str | None = None

    def _more(self) -> bool:
        if self.ended is not None:
            return False
        try:
            data = self.sock.recv(1 << 16)
        except ConnectionResetError:
            self.ended = "reset"
            return False
        if not data:
            self.ended = "closed"
            return False
        self.buf += data
        return True

    def _take(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not self._more():
                return None
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self, sep: bytes = b"\r\n") -> bytes | None:
        while sep not in self.buf:
            if not self._more():
                return None
        out, _, self.buf = self.buf.partition(sep)
        return out

    def response(self, *, head_only: bool = False, first_chunk: bool = False) -> dict[str, Any]:
        """The next response as seen: its head, its body (de-chunked), and how it ended if the
        connection did. ``first_chunk``: stop after the body's first chunk."""
        head = self._line(b"\r\n\r\n")
        if head is None:
            return {"head": None, "rest": self.buf, "ended": self.ended}
        status, *fields = head.split(b"\r\n")
        headers = [tuple(f.split(b": ", 1)) for f in fields]
        got: dict[str, Any] = {"status": status, "headers": headers}
        names = {k.lower(): v for k, v in headers}
        data = b""
        if head_only or status.split(b" ")[1] in (b"100", b"204", b"304"):
            pass
        elif b"chunked" in names.get(b"transfer-encoding", b"").lower():
            while True:
                size = self._line()
                if size is None:
                    break
                n = int(size, 16)
                chunk = self._take(n + 2)
                if chunk is None:
                    break
                data += chunk[:n]
                if n == 0 or first_chunk:
                    break
        elif b"content-length" in names:
            data = self._take(int(names[b"content-length"])) or self.buf
        got["body"] = data
        got["ended"] = self.ended
        return got

    def to_end(self) -> dict[str, Any]:
        """Everything until the connection ends."""
        while self._more():
            pass
        return {"rest": self.buf, "ended": self.ended}

    def close(self) -> None:
        self.sock.close()


def _gzip_request() -> bytes:
    return gzip.compress(body())


def scripted(
    ports: dict[str, int], up: FakeUpstream, tag: str, flush: Callable[[], int]
) -> list[Any]:
    """The traffic, the same for both recorders; what each client saw."""
    seen: list[Any] = []
    openai, anthropic = ports["OPENAI_BASE_URL"], ports["ANTHROPIC_BASE_URL"]

    def one(port: int, data: bytes, *, to_end: bool = False) -> dict[str, Any]:
        c = Client(port)
        c.sock.sendall(data)
        got = c.response()
        got["then"] = c.to_end() if got.get("ended") is None and to_end else None
        c.close()
        return got

    # JSON, SSE, error statuses, gzip'd bodies (fixed-length and streamed), a non-LLM GET
    for scenario, stream in (
        ("text", False),
        ("text", True),
        ("rate_limit", False),
        ("server_error", True),
        ("lying_encoding; claim=gzip; actual=gzip", False),
        ("lying_encoding; claim=gzip; actual=gzip", True),
        ("malformed; kind=sse", True),
    ):
        seen.append(one(openai, post(CHAT, body(stream), scenario)))
    seen.append(one(openai, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"))
    # a client that asks for the connection to close after its answer
    seen.append(
        one(openai, post(CHAT, body(), "text", headers=(("Connection", "close"),)), to_end=True)
    )
    # a gzip'd request body, and a chunked one
    seen.append(
        one(openai, post(CHAT, _gzip_request(), "text", headers=(("Content-Encoding", "gzip"),)))
    )
    data = body()
    seen.append(
        one(
            openai,
            f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
            + b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (10, data[:10], len(data) - 10, data[10:]),
        )
    )
    # keep-alive: three round trips on one connection; then two pipelined
    c = Client(openai)
    for stream in (False, True, False):
        c.sock.sendall(post(CHAT, body(stream), "text"))
        seen.append(c.response())
    c.sock.sendall(post(CHAT, body(), "text") + post(CHAT, body(True), "tool_call"))
    seen += [c.response(), c.response()]
    c.close()
    # large bodies: a 5 MB request, 3 MB answers (fixed-length and streamed)
    big = body(extra="x" * 5_000_000)
    seen.append(one(openai, post(CHAT, big, "text")))
    seen.append(one(openai, post(CHAT, body(), "big; size=3000000; kind=json")))
    seen.append(one(openai, post(CHAT, body(True), "big; size=3000000; kind=sse")))
    # the upstream resets or closes, before its answer and in the middle of it
    for scenario, stream in (
        ("reset_before_response", False),
        ("reset_before_response; mode=fin", True),
        ("reset_mid_stream", True),
        ("reset_mid_stream; mode=fin", True),
        ("reset_mid_stream", False),
        ("reset_mid_stream; mode=fin", False),
    ):
        c = Client(openai)
        c.sock.sendall(post(CHAT, body(stream), scenario))
        seen.append((c.response(), c.to_end()))
        c.close()
    # the client goes away in the middle of a stream (the upstream holds its second event until
    # the client says it has the first: it never does)
    key = f"gone-{tag}"
    stored = flush()
    c = Client(openai)
    c.sock.sendall(post(CHAT, body(True), f"drip; lockstep={key}"))
    seen.append(c.response(first_chunk=True))
    c.close()
    # recorded once the recorder saw the client go; only then may the upstream go on (and fail)
    progress.until(lambda: flush() > stored, what="the round trip of the client gone")
    up.ack(key, 1 << 30)
    # the client's base URL without the API's version segment (the AI SDK's Anthropic provider)
    seen.append(
        one(
            anthropic,
            post(
                "/messages",
                json.dumps(
                    {"model": "claude-3-5-haiku-latest", "max_tokens": 64, "messages": ASK}
                ).encode(),
                "text",
                headers=(("anthropic-version", "2023-06-01"),),
            ),
        )
    )
    # spliced to mitmproxy: HTTP/1.0, a fork's edit marks, Expect: 100-continue (after a plain
    # request on the same connection), a request that cannot be read
    seen.append(one(openai, post(CHAT, body(), "text", version="HTTP/1.0"), to_end=True))
    seen.append(one(openai, post(CHAT, body(), "text", headers=(("x-looptap-edit", "e30"),))))
    c = Client(openai)
    c.sock.sendall(post(CHAT, body(), "text"))
    seen.append(c.response())
    head, _, rest = post(CHAT, body(), "text", headers=(("Expect", "100-continue"),)).partition(
        b"\r\n\r\n"
    )
    c.sock.sendall(head + b"\r\n\r\n")
    seen.append(c.response())  # 100 Continue
    c.sock.sendall(rest)
    seen.append(c.response())
    c.close()
    seen.append(one(openai, b"NOT HTTP AT ALL\r\n\r\n", to_end=True))
    return seen


def websocket_turns(port: int) -> list[Any]:
    """A Responses session over a WebSocket (spliced to mitmproxy, recorded turn by turn)."""
    from websockets.sync.client import connect

    got = []
    with connect(f"ws://127.0.0.1:{port}/v1/responses", open_timeout=progress.STALL) as ws:
        for text in ("hello", "and again"):
            ws.send(
                json.dumps(
                    {
                        "type": "response.create",
                        "model": "gpt-5",
                        "input": [{"role": "user", "content": text}],
                    }
                )
            )
            while True:
                ev = json.loads(ws.recv(timeout=progress.STALL))
                got.append(ev["type"])
                if ev["type"] in ("response.completed", "error"):
                    break
    return got


#: Headers that differ from run to run (a WebSocket handshake's key and answer, its date).
_VARY = frozenset({"date", "sec-websocket-key", "sec-websocket-accept"})


def view(ex: Exchange, hosts: dict[str, str]) -> dict[str, Any]:
    """A record without its timestamps (whether each timing is known is kept), its upstream's
    address named by role (each run has its own WebSocket upstream)."""

    def named(text: str) -> str:
        for addr, role in hosts.items():
            text = text.replace(addr, role)
        return text

    chunks = [c for _, c in ex.response_chunks]
    whole = b"".join(chunks)
    return {
        "method": ex.method,
        "url": named(ex.url),
        "request_headers": [(k, named(v)) for k, v in ex.request_headers if k.lower() not in _VARY],
        "request_body": ex.request_body,
        "status": ex.status,
        "reason": ex.reason,
        "response_headers": [(k, v) for k, v in ex.response_headers if k.lower() not in _VARY],
        # piece by piece where pieces do not depend on socket reads (small streamed bodies)
        "response": chunks if len(whole) < 1 << 16 else whole,
        "offsets_known": [t is not None for t, _ in ex.response_chunks][:1],
        "ttfb_known": ex.ttfb is not None,
        "duration_known": ex.duration is not None,
        "transport_error": ex.transport_error,
        "notes": ex.notes,
        "edits": ex.edits,
        "decoded_from": ex.decoded_from,
    }


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(delay=0.005) as up:
        yield up


def listening(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its sockets in ``/proc/net/tcp``)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        if parts[3] == "0A" and parts[9] in inodes:
            ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


def run(
    tmp_path: Path, confdir: Path, up: FakeUpstream, switch: str | None
) -> tuple[list[dict[str, Any]], list[Any], str]:
    """The script through one recorder: its records (as views) and what the clients saw."""
    pytest.importorskip("websockets")
    tag = switch or "looptap"
    out = tmp_path / f"{tag}.jsonl"
    env = clean_env(**({"LOOPTAP_FORWARDER": switch} if switch else {}))
    with ExitStack() as stack:
        ws_up = stack.enter_context(WsResponsesUpstream())
        rec = stack.enter_context(
            RecorderProcess(
                out,
                confdir,
                None,
                "--upstream",
                f"openai={up.url}",
                "--upstream",
                f"anthropic={up.url}",
                "--upstream",
                f"gemini={ws_up.url}",
                env=env,
            )
        )
        ports = rec.ports()
        # the forwarder listens on the clients' ports, mitmproxy behind it on internal ones
        extra = listening(rec.pid) - set(ports.values())
        assert len(extra) == (0 if switch == "mitmproxy" else 3), (ports, extra)
        seen = scripted(ports, up, tag, rec.recorder.flush)
        seen.append(websocket_turns(ports["GOOGLE_GEMINI_BASE_URL"]))
        rc = rec.stop()
        said = rec.output
    assert rc == 0, said
    hosts = {ws_up.url.removeprefix("http://"): "WS_UPSTREAM", f"gone-{tag}": "gone-TAG"}
    records = read_records(out)
    assert not records.problems, records.problems
    return [view(ex, hosts) for ex in records.exchanges], seen, said


def test_the_forwarder_records_and_answers_as_mitmproxy_does(
    tmp_path: Path, confdir: Path, upstream: FakeUpstream
) -> None:
    slow, slow_seen, _ = run(tmp_path, confdir, upstream, "mitmproxy")
    fast, fast_seen, said = run(tmp_path, confdir, upstream, None)
    assert "Traceback" not in said, said
    assert len(slow_seen) == len(fast_seen)
    for i, (a, b) in enumerate(zip(slow_seen, fast_seen, strict=True)):
        assert a == b, f"client view {i} differs"
    # the script's round trips are all there (the WebSocket's two turns included)
    assert len(slow) >= 30, len(slow)
    assert len(fast) == len(slow), (len(fast), len(slow))
    for i, (a, b) in enumerate(zip(slow, fast, strict=True)):
        assert a == b, f"record {i} ({a['url']}) differs"
    errors = [r["transport_error"] for r in fast if r["transport_error"]]
    assert any("(the upstream reset the connection)" in e for e in errors)
    assert "Client disconnected." in errors
    assert any(n.startswith("path: ") for r in fast for n in r["notes"])
    assert any(n.startswith("edits: ") for r in fast for n in r["notes"])


def small_script(port: int) -> list[Any]:
    """JSON, SSE, an upstream reset mid-stream: what the client saw of each."""
    seen: list[Any] = []
    for scenario, stream in (("text", False), ("text", True), ("reset_mid_stream", True)):
        c = Client(port)
        c.sock.sendall(post(CHAT, body(stream), scenario))
        seen.append((c.response(), c.to_end() if scenario.startswith("reset") else None))
        c.close()
    return seen


@pytest.mark.parametrize("insecure", [False, True], ids=["verified", "ssl-insecure"])
def test_an_https_upstream_is_verified_and_recorded_as_mitmproxy_does(
    tmp_path: Path, confdir: Path, insecure: bool
) -> None:
    """An https upstream whose certificate no trust store holds (and names another host): refused
    by both paths alike (mitmproxy answers, the forwarder having handed it the request), and with
    ``--ssl-insecure`` forwarded and recorded alike."""
    from tests.proxy.codex_default_ns import certificates

    _, cert, key = certificates(tmp_path)
    got = {}
    with FakeUpstream(delay=0.005, tls=(cert, key)) as up:
        for switch in ("mitmproxy", "looptap"):
            out = tmp_path / f"{switch}-{insecure}.jsonl"
            args = ["--upstream", f"openai={up.url}", *(["--ssl-insecure"] if insecure else [])]
            with RecorderProcess(
                out, confdir, None, *args, env=clean_env(LOOPTAP_FORWARDER=switch)
            ) as rec:
                served = listening(rec.pid) - set(rec.ports().values())
                assert len(served) == (3 if switch == "looptap" else 0), served
                seen = small_script(rec.port())
                assert rec.stop() in (0, 3), rec.output
            records = [view(ex, {}) for ex in read_records(out).exchanges]
            got[switch] = (seen, records)
    assert got["looptap"] == got["mitmproxy"]
    seen, records = got["looptap"]
    if insecure:
        assert [r["status"] for r in records] == [200, 200, 200]
    else:
        assert all(s[0].get("status", b"").startswith(b"HTTP/1.1 502") for s in seen), seen
