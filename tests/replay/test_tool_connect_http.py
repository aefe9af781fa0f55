"""Plain HTTP through a ``CONNECT`` tunnel to the replay server: Node's undici (its
``ProxyAgent`` and ``EnvHttpProxyAgent``, and the built-in ``fetch`` under ``NODE_USE_ENV_PROXY``)
tunnels even a plain-HTTP request through a proxy, so the AI SDK agent of
tests/proxy/test_e2e_tool_replay.py sends its tools' calls (and its model calls, the loopback
not left out) as ``CONNECT 127.0.0.1:PORT`` then origin-form requests. Refused before (403), the
agent's every request failed; now a tunnel to a host the recording's tools called over plain HTTP,
or to the server's own address, is served as sent to that host."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import tool_loop, write
from tests.replay.test_tool_replay import PARIS, TOOL, _run, _tool


def _head_and_body(s: socket.socket) -> tuple[bytes, bytes]:
    """One answer read off the tunnel: its head, and its body (by content-length or chunks)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, _, rest = data.partition(b"\r\n\r\n")
    fields = dict(
        line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line
    )  # fmt: skip
    fields = {k.strip().lower(): v.strip() for k, v in fields.items()}
    if b"content-length" in fields:
        n = int(fields[b"content-length"])
        while len(rest) < n:
            rest += s.recv(4096)
        return head, rest[:n]
    while not rest.endswith(b"0\r\n\r\n"):  # chunked (a recorded stream)
        rest += s.recv(4096)
    body, chunks = b"", rest
    while True:
        size, _, chunks = chunks.partition(b"\r\n")
        if int(size, 16) == 0:
            return head, body
        body, chunks = body + chunks[: int(size, 16)], chunks[int(size, 16) + 2 :]


def _tunnel(server: ReplayServer, target: str) -> tuple[socket.socket, bytes]:
    s = socket.create_connection((server.host, server.port))
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        got = s.recv(1)
        if not got:
            break
        head += got
    return s, head


def test_a_plain_http_tool_and_the_model_are_served_through_a_tunnel(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", _run())
    first = tool_loop()[0]
    with ReplayServer(path) as server:
        tool, head = _tunnel(server, TOOL.removeprefix("http://"))
        with tool:
            assert head.startswith(b"HTTP/1.1 200"), head
            tool.sendall(
                b"GET /weather?city=Paris&key=sk-live-123 HTTP/1.1\r\nHost: 127.0.0.1:40511\r\n\r\n"
            )
            got_head, body = _head_and_body(tool)
        assert got_head.startswith(b"HTTP/1.1 200") and body == PARIS
        model, head = _tunnel(server, f"127.0.0.1:{server.port}")  # the loopback not left out
        with model:
            assert head.startswith(b"HTTP/1.1 200"), head
            model.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: "
                b"application/json\r\ncontent-length: " + str(len(first.request_body)).encode()
                + b"\r\n\r\n" + first.request_body
            )  # fmt: skip
            got_head, body = _head_and_body(model)
        assert got_head.startswith(b"HTTP/1.1 200") and b"get_weather" in body, body[:300]
    report = "\n".join(server.report_lines())
    assert "played 1 of 2 recorded round trips and served 1 of 1 tool HTTP call" in report, report
    assert not server.misses


def test_a_tunnel_is_refused_to_other_hosts_and_a_miss_in_it_is_named(tmp_path: Path) -> None:
    run = _run()
    run.append(_tool("https://api.weather.example/weather?city=Oslo"))
    with ReplayServer(write(tmp_path / "run.jsonl", run)) as server:
        other, head = _tunnel(server, "127.0.0.1:9")  # no tool called it
        other.close()
        assert head.startswith(b"HTTP/1.1 403"), head
        https, head = _tunnel(server, "api.weather.example:443")  # an HTTPS tool: TLS follows
        https.close()  # (tests/replay/test_tool_https.py)
        assert head.startswith(b"HTTP/1.1 200"), head
        tool, head = _tunnel(server, TOOL.removeprefix("http://"))
        with tool:
            assert head.startswith(b"HTTP/1.1 200")
            tool.sendall(b"GET /weather?city=Lyon HTTP/1.1\r\nHost: 127.0.0.1:40511\r\n\r\n")
            got_head, body = _head_and_body(tool)
    assert got_head.startswith(b"HTTP/1.1 400") and b"looptap_replay_miss" in body
    assert json.loads(body)  # the miss in the API's error shape
    report = "\n".join(server.report_lines())
    assert "unmatched: GET http://127.0.0.1:40511/weather?city=Lyon" in report, report
