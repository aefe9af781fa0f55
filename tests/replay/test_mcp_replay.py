"""MCP tool servers played back from the cassette: matched like model calls (fail-closed), the
JSON-RPC id the client's own (a client numbering its requests otherwise still replays), JSON and
SSE replies."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.cassettes.test_mcp_calls import run_exchanges

HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
}


def _cassette(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in run_exchanges():
            w.append(ex)
    return path


#: Straight to the loopback server, whatever proxy variables another test of the session left.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class _Resp:
    status_code: int
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode()

    def json(self) -> Any:
        return orjson.loads(self.content)


class _Client:
    def __init__(self, base_url: str) -> None:
        self.base = base_url

    def post(self, path: str, headers: dict[str, str], json: Any) -> _Resp:
        req = urllib.request.Request(
            self.base + path, data=orjson.dumps(json), headers=headers, method="POST"
        )
        try:
            with _DIRECT.open(req, timeout=10) as r:
                return _Resp(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read())
        except urllib.error.HTTPError as e:
            return _Resp(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())


def _rpc(resp: _Resp) -> Any:
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        (data,) = [ln[5:].strip() for ln in resp.text.splitlines() if ln.startswith("data:")]
        return orjson.loads(data)
    return resp.json()


def test_an_mcp_server_is_replayed_with_the_clients_ids(tmp_path: Path) -> None:
    with ReplayServer(_cassette(tmp_path)) as srv:
        c = _Client(srv.url)
        init = c.post(
            "/mcp",
            headers=HEADERS,
            json={
                "jsonrpc": "2.0",
                "id": 100,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-code", "version": "2.1.328"},
                },
            },
        )
        assert init.status_code == 200 and init.json() == {
            "jsonrpc": "2.0",
            "id": 100,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "weather", "version": "1"},
            },
        }
        note = c.post(
            "/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert note.status_code == 202 and note.content == b""
        tools = _rpc(
            c.post(
                "/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "id": "b", "method": "tools/list"}
            )
        )
        assert tools["id"] == "b" and [t["name"] for t in tools["result"]["tools"]] == [
            "get_weather"
        ]
        call = c.post(
            "/mcp",
            headers=HEADERS,
            json={
                "jsonrpc": "2.0",
                "id": 102,
                "method": "tools/call",
                "params": {
                    "name": "get_weather",
                    "arguments": {"city": "Paris"},
                    "_meta": {"claudecode/toolUseId": "toolu_01P"},
                },
            },
        )
        assert call.headers["content-type"].startswith("text/event-stream")
        assert _rpc(call) == {
            "jsonrpc": "2.0",
            "id": 102,
            "result": {"content": [{"type": "text", "text": "sunny, 21 C"}], "isError": False},
        }
        # fail-closed: a call the recording does not have is a miss, never a made-up answer
        other = c.post(
            "/mcp",
            headers=HEADERS,
            json={
                "jsonrpc": "2.0",
                "id": 103,
                "method": "tools/call",
                "params": {
                    "name": "get_weather",
                    "arguments": {"city": "Rome"},
                    "_meta": {"claudecode/toolUseId": "toolu_01P"},
                },
            },
        )
        assert other.status_code >= 400 and "Rome" in other.text
        assert len(srv.misses) == 1 and [ex.status for ex in srv.served][:4] == [200, 202, 200, 200]


def test_the_recorded_ids_are_kept_when_the_client_sends_the_same(tmp_path: Path) -> None:
    with ReplayServer(_cassette(tmp_path)) as srv:
        c = _Client(srv.url)
        c.post(
            "/mcp",
            headers=HEADERS,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-code", "version": "2.1.328"},
                },
            },
        )
        resp = c.post(
            "/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
        # byte for byte as recorded
        assert resp.text.startswith("event: message\ndata: ") and _rpc(resp)["id"] == 1
