"""The tools' recorded HTTP served by the replay server (issue 84, item 4), in process and fast:
the matcher's tool side (host compared, each call once, never a turn nor in strict order), the
server's forward-proxy path (plain HTTP in absolute form, its own address a model call, CONNECT
to a tool host a miss), the proxy variables, the stored body kept as its text, and the
``tool_answer`` edit. The real agents through ``looptap run``: tests/proxy/test_e2e_tool_replay.py.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from looptap.cassettes.matching import Matcher, Miss, Recorded
from looptap.cassettes.replay.live.edits import EditError, parse_edit
from looptap.cassettes.replay.serving.agent_env import tool_proxy_env
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import tool_loop, write

TOOL = "http://127.0.0.1:40511"
PARIS = b'{"city": "Paris", "temp_c": 15, "sky": "clear"}'


def _tool(url: str, body: bytes = PARIS, status: int = 200, method: str = "GET") -> Exchange:
    ex = Exchange(
        method,
        url,
        [("accept", "*/*")],
        b"",
        status=status,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, body)],
    )
    ex.tool = True
    return ex


def _run() -> list[Exchange]:
    """The weather loop with the tool's call between its two turns (as the recorder keeps it)."""
    first, second = tool_loop()
    return [first, _tool(f"{TOOL}/weather?city=Paris&key=REDACTED"), second]


def test_a_tool_request_is_matched_with_its_host_and_served_once() -> None:
    m = Matcher(_run(), tools=True)
    other = m.match_tool("GET", "http://127.0.0.1:9/weather?city=Paris", [], b"")
    assert (
        isinstance(other, Miss) and "no tool HTTP call to 127.0.0.1:9 was recorded" in other.reason
    )
    assert "127.0.0.1:40511" in other.reason  # the hosts the tools called
    hit = m.match_tool("GET", f"{TOOL}/weather?city=Paris&key=sk-live-123", [], b"")
    assert isinstance(hit, Recorded) and hit.exchange.response_body == PARIS  # key not compared
    again = m.match_tool("GET", f"{TOOL}/weather?city=Paris", [], b"")
    assert isinstance(again, Miss) and "the closest (already served)" in again.reason
    assert m.count_unplayed() == 2  # the two turns: a tool call is never offered to them


def test_a_model_request_never_gets_a_tool_answer_and_strict_order_skips_the_tools() -> None:
    run = _run()
    m = Matcher(run, strict=True, tools=True)
    first = run[0]
    got = m.match(first.method, "/v1/chat/completions", first.request_headers, first.request_body)
    assert isinstance(got, Recorded) and got.index == 0
    second = run[2]  # the tool call between them not made: strict order does not wait for it
    got = m.match(
        second.method, "/v1/chat/completions", second.request_headers, second.request_body
    )
    assert isinstance(got, Recorded) and got.index == 2
    assert [r.index for r in m.unplayed()] == [1]  # the tool call, unplayed


def test_without_tools_the_matcher_neither_offers_nor_waits_for_them() -> None:
    m = Matcher(_run())
    assert isinstance(m.match_tool("GET", f"{TOOL}/weather?city=Paris", [], b""), Miss)
    assert m.count_unplayed() == 2


def test_a_miss_names_the_closest_call_and_what_differs(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", _run())
    m = Matcher(read_records(path).exchanges, tools=True)
    miss = m.match_tool("GET", f"{TOOL}/weather?city=Lyon&key=sk-live-123", [], b"")
    assert isinstance(miss, Miss) and miss.closest is not None and miss.closest.index == 1
    assert "no recorded tool HTTP call matches it; the closest (not yet served)" in miss.reason
    assert miss.changes and miss.changes[0].where == "query"
    assert "sk-live-123" not in miss.target and "sk-live-123" not in "\n".join(miss.lines())
    wrong = m.match_tool("POST", f"{TOOL}/orders", [], b"{}")
    assert isinstance(wrong, Miss) and "is a POST /orders" in wrong.reason


def test_the_proxy_variables_leave_the_loopback_to_the_replay_when_the_tools_called_it() -> None:
    url = "http://127.0.0.1:5000"
    env = tool_proxy_env(url, ["127.0.0.1:40511"], "localhost,.corp.example")
    assert env["HTTP_PROXY"] == env["https_proxy"] == url
    assert env["NO_PROXY"] == ".corp.example"
    env = tool_proxy_env(url, ["api.weather.example:443"], ".corp.example")
    assert env["NO_PROXY"] == ".corp.example,127.0.0.1,localhost"


def test_the_server_serves_a_tool_as_a_forward_proxy(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", _run())
    assert b'"text"' in path.read_bytes()  # the tool's JSON answer kept as the text it was
    with ReplayServer(path) as server, httpx.Client(proxy=server.url, trust_env=False) as c:
        got = c.get(f"{TOOL}/weather", params={"city": "Paris", "key": "sk-live-123"})
        assert got.status_code == 200 and got.content == PARIS  # byte for byte
        # a model call sent through the proxy to the server's own address: answered as a turn
        first = _run()[0]
        turn = c.post(f"{server.url}/v1/chat/completions", content=first.request_body,
                      headers={"content-type": "application/json"})  # fmt: skip
        assert turn.status_code == 200 and b"get_weather" in turn.content
        missed = c.get(f"{TOOL}/weather", params={"city": "Oslo"})
        assert missed.status_code == 400 and b"looptap_replay_miss" in missed.content
    report = "\n".join(server.report_lines())
    assert "played 1 of 2 recorded round trips and served 1 of 1 tool HTTP call" in report, report
    assert "unmatched: GET http://127.0.0.1:40511/weather?city=Oslo" in report


def _all(s: socket.socket) -> bytes:
    """What the server sent until it closed the connection (it closes after a refusal)."""
    out = b""
    while data := s.recv(4096):
        out += data
    return out


def test_connect_to_a_tool_host_no_certificate_may_name_is_a_miss(tmp_path: Path) -> None:
    """A tunnel to a host the tools called over HTTPS whose name no certificate may carry (a
    cassette's host is untrusted: a 70-letter label) is refused and kept as a miss; a host
    recorded over HTTPS is served through TLS (tests/replay/test_tool_https.py), one recorded
    over plain HTTP through a plain tunnel (tests/replay/test_tool_connect_http.py)."""
    run = _run()
    host = "a" * 70 + ".example"
    run[1].url = f"https://{host}/weather?city=Paris"
    with ReplayServer(write(tmp_path / "run.jsonl", run)) as server:
        with socket.create_connection((server.host, server.port)) as s:
            s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            head = _all(s)
    assert head.startswith(b"HTTP/1.1 403") and b"but not over HTTPS" in head, head
    assert [m.method for m in server.misses] == ["CONNECT"]


def test_the_tool_answer_edit_is_read() -> None:
    e = parse_edit('tool_answer[5]=200:{"city": "Lyon"}')
    assert (e.kind, e.key, e.value) == ("tool_answer", "5", '200:{"city": "Lyon"}')
    for bad in ("tool_answer[5]=ok", "tool_answer[x]=200:{}", "tool_answer[5]=700:{}"):
        with pytest.raises(EditError):
            parse_edit(bad)


def test_a_model_call_in_absolute_form_to_the_model_server_is_a_turn(tmp_path: Path) -> None:
    """Issue 91, item 4: the recording's model server is plain HTTP on 127.0.0.1:40599 and the
    client sends its model call through ``HTTP_PROXY`` (absolute form) to it: a model call, matched
    as a turn (so a fork's cursor and ``--max-requests`` see it), never a tool's call. On
    c86d115d it was taken for a tool's request: a tool miss (400) here, live before a fork's
    cursor and not counted."""
    model = "http://127.0.0.1:40599/v1/chat/completions"
    run = _run()
    for ex in (run[0], run[2]):
        ex.url = model
    path = write(tmp_path / "run.jsonl", run)
    with ReplayServer(path) as server, httpx.Client(proxy=server.url, trust_env=False) as c:
        turn = c.post(model, content=run[0].request_body,
                      headers={"content-type": "application/json"})  # fmt: skip
        assert turn.status_code == 200 and b"get_weather" in turn.content, turn.content[:300]
        got = c.get(f"{TOOL}/weather", params={"city": "Paris"})
        assert got.status_code == 200 and got.content == PARIS  # the tool still a tool
    report = "\n".join(server.report_lines())
    assert "played 1 of 2 recorded round trips and served 1 of 1 tool HTTP call" in report, report


def test_a_tool_miss_is_not_said_as_a_divergence_before_the_cursor(tmp_path: Path) -> None:
    """Issue 91, item 5: with ``--tools-offline`` a tool's request the recording does not answer
    fails closed, before the cursor or past it; the fork's report said every such miss as "the
    client diverged before the cursor" (c86d115d). A tool's miss is said as one now; a model
    request's miss stays a divergence."""
    from looptap.cassettes.replay.command import _failed

    path = write(tmp_path / "run.jsonl", _run())
    with ReplayServer(path) as server, httpx.Client(proxy=server.url, trust_env=False) as c:
        assert c.get(f"{TOOL}/weather", params={"city": "Oslo"}).status_code == 400
        other = c.post(f"{server.url}/v1/chat/completions", content=b'{"model": "gpt-4o", '
                       b'"messages": [{"role": "user", "content": "something else"}]}',
                       headers={"content-type": "application/json"})  # fmt: skip
        assert other.status_code == 400
    said = _failed(server)
    assert len(said) == 2, said
    assert said[0].startswith("a tool's call the recording does not answer failed closed"), said
    assert said[1].startswith("the client diverged before the cursor at"), said
