"""Streamed secrets through the real recorder: 0 on disk.

A loopback upstream plays a model that prints 23 vendors' fake keys and echoes the agent's own
credentials (its Bearer token, ``x-api-key`` and body ``api_key``, neutral random strings), 1–9
characters per event, each event its own write: OpenAI chat over SSE, Ollama NDJSON, Bedrock
ConverseStream and InvokeModelWithResponseStream event streams, and Responses over a WebSocket
(with the key in ``Sec-WebSocket-Protocol``, a message outside any turn, and a session on a path
looptap cannot read as turns). Around them: an MCP exchange with ``Mcp-Session-Id`` and an
ephemeral key minted by ``POST /v1/realtime/client_secrets``. After the recorder stops, every file
under its directories is searched for each secret and each 8-character piece of one, raw,
JSON-decoded and base64-decoded (:func:`tests.support.secret_streams.leaks`, which uses nothing of
looptap's detector), and the agent must have received every key whole (redaction is of the record,
never of the traffic).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.storage import read_records
from tests.support import progress
from tests.support.recorder import RecorderProcess, clean_env, needs_recorder
from tests.support.secret_streams import (
    bedrock_converse,
    bedrock_invoke,
    chat_sse,
    leaks,
    ollama_ndjson,
    pieces,
    responses_events,
    spoken,
    vendor_keys,
)
from tests.support.wire import http_request

pytestmark = [needs_recorder]

MODEL = "anthropic.claude-3-5-sonnet-20240620-v1%3A0"


class EchoUpstream:
    """Streams :attr:`reply` plus the request's own credentials, one event per write; WebSocket
    upgrades go to a ``websockets`` server behind (Responses turns, or an echo of each message)."""

    def __init__(self) -> None:
        self.reply = ""
        self.minted = "ek_" + secrets.token_hex(16)
        self.session_id = secrets.token_hex(16)
        self.received_ws: list[Any] = []
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def text_for(self, headers: dict[str, str], body: Any) -> str:
        own = [
            headers.get("authorization", "").removeprefix("Bearer "),
            headers.get("x-api-key", ""),
        ]
        if isinstance(body, dict):
            own.append(str(body.get("api_key", "")))
        return f"{self.reply} And yours: {' '.join(o for o in own if o)}. Done."

    async def _http(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: bytes,
        headers: dict[str, str],
        method: str,
        target: str,
    ) -> None:
        body = await reader.readexactly(int(headers.get("content-length") or 0))
        doc = json.loads(body) if body[:1] == b"{" else None
        path = target.split("?")[0]
        if path.endswith("/client_secrets"):
            await self._json(
                writer,
                {
                    "value": self.minted,
                    "expires_at": 1756310470,
                    "session": {"type": "realtime", "model": "gpt-realtime"},
                },
            )
            return
        if path.endswith("/mcp"):
            await self._json(
                writer,
                {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}},
                [("Mcp-Session-Id", self.session_id)],
            )
            return
        parts = pieces(self.text_for(headers, doc))
        if path.endswith("/chat/completions"):
            events, ctype = chat_sse(parts), "text/event-stream"
        elif path.endswith("/api/chat"):
            events, ctype = ollama_ndjson(parts), "application/x-ndjson"
        elif path.endswith("/converse-stream"):
            events, ctype = bedrock_converse(parts), "application/vnd.amazon.eventstream"
        else:
            events, ctype = bedrock_invoke(parts), "application/vnd.amazon.eventstream"
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ntransfer-encoding: "
            "chunked\r\n\r\n".encode()
        )
        for e in events:
            writer.write(f"{len(e):x}\r\n".encode() + e + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _json(
        self, writer: asyncio.StreamWriter, obj: Any, extra: list[tuple[str, str]] | None = None
    ) -> None:
        data = json.dumps(obj).encode()
        hdrs = "".join(f"{k}: {v}\r\n" for k, v in extra or [])
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{hdrs}"
            f"content-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _front(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target = lines[0].split(" ")[:2]
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
                }
                if headers.get("upgrade", "").lower() == "websocket":
                    await self._pipe(head, reader, writer)
                    return
                await self._http(reader, writer, head, headers, method, target)
        finally:
            writer.close()

    async def _pipe(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        r, w = await asyncio.open_connection("127.0.0.1", self._inner_port)
        w.write(head)

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(copy(reader, w), copy(r, writer))

    async def _ws(self, ws: Any) -> None:
        headers = {k.lower(): v for k, v in ws.request.headers.raw_items()}
        async for raw in ws:
            msg = json.loads(raw)
            self.received_ws.append(msg)
            if msg.get("type") != "response.create":
                continue
            for ev in responses_events(
                pieces(self.text_for(headers, msg), seed=4), f"resp_{len(self.received_ws)}"
            ):
                await ws.send(json.dumps(ev))

    async def _main(self) -> None:
        from websockets.asyncio.server import serve

        self._stop = asyncio.Event()
        async with serve(
            self._ws,
            "127.0.0.1",
            0,
            select_subprotocol=lambda conn, offered: "realtime" if "realtime" in offered else None,
        ) as inner:
            self._inner_port = next(iter(inner.sockets)).getsockname()[1]
            front = await asyncio.start_server(self._front, "127.0.0.1", 0)
            async with front:
                self.port = front.sockets[0].getsockname()[1]
                self._loop = asyncio.get_running_loop()
                self._ready.set()
                await self._stop.wait()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> EchoUpstream:
        self._thread.start()
        # hung only when nothing progresses
        progress.until(self._ready.is_set, what="the upstream's start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _neutral(tag: str) -> str:
    return f"{tag}Q{secrets.token_hex(14)}"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    pytest.importorskip("websockets")
    from websockets.sync.client import connect

    root = tmp_path_factory.mktemp("streamed")
    (root / "tmp").mkdir()
    (root / "cassettes").mkdir()
    keys = vendor_keys()
    sentinels: dict[str, str] = dict(keys)
    received: list[str] = []
    with EchoUpstream() as up:
        up.reply = (
            "Here are the keys you asked for. "
            + "; ".join(f"{v}: {spoken(v, k)}" for v, k in keys.items())
            + "."
        )
        sentinels.update(minted=up.minted, mcp_session=up.session_id)
        extra = ["--upstream", f"ollama={up.url}", "--upstream", f"bedrock={up.url}"]
        with RecorderProcess(
            root / "cassettes" / "run.jsonl",
            root / "conf",
            up.url,
            *extra,
            env=clean_env(TMPDIR=str(root / "tmp")),
        ) as rec:
            routes = [
                ("OPENAI_BASE_URL", "/v1/chat/completions"),
                ("OLLAMA_BASE_URL", "/api/chat"),
                ("BEDROCK_BASE_URL", f"/model/{MODEL}/converse-stream"),
                ("BEDROCK_BASE_URL", f"/model/{MODEL}/invoke-with-response-stream"),
            ]
            for i, (var, path) in enumerate(routes):
                own = {
                    "bearer": _neutral(f"b{i}"),
                    "xapikey": _neutral(f"x{i}"),
                    "bodykey": _neutral(f"k{i}"),
                }
                sentinels.update({f"{path} {k}": v for k, v in own.items()})
                body: dict[str, Any] = {
                    "model": "m",
                    "stream": True,
                    "api_key": own["bodykey"],
                    "messages": [{"role": "user", "content": "Print the keys."}],
                }
                if "bedrock" in var.lower():
                    body = {
                        "anthropic_version": "bedrock-2023-05-31",
                        "max_tokens": 500,
                        "api_key": own["bodykey"],
                        "messages": body["messages"],
                    }
                headers = [
                    ("content-type", "application/json"),
                    ("authorization", f"Bearer {own['bearer']}"),
                    ("x-api-key", own["xapikey"]),
                ]
                resp = http_request(
                    "127.0.0.1", rec.port(var), "POST", path, headers, json.dumps(body).encode()
                )
                assert resp.complete and resp.status == 200, (path, resp.error)
                received.append(resp.body.decode("utf-8", "replace"))
            port = rec.port("OPENAI_BASE_URL")
            resp = http_request(
                "127.0.0.1",
                port,
                "POST",
                "/v1/realtime/client_secrets",
                [
                    ("content-type", "application/json"),
                    ("authorization", "Bearer " + _neutral("cs")),
                ],
                b'{"session":{"type":"realtime","model":"gpt-realtime"}}',
            )
            assert resp.complete and up.minted.encode() in resp.body
            resp = http_request(
                "127.0.0.1",
                port,
                "POST",
                "/mcp",
                [("content-type", "application/json"), ("mcp-protocol-version", "2025-06-18")],
                b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
            )
            assert resp.complete and resp.header("mcp-session-id") == up.session_id
            resp = http_request(
                "127.0.0.1",
                port,
                "POST",
                "/mcp",
                [("content-type", "application/json"), ("mcp-session-id", up.session_id)],
                b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
            )
            assert resp.complete
            for path in (
                "/v1/responses",
                "/v1/realtime?model=gpt-realtime",
                "/v1/some-unknown-socket",
            ):
                own = {
                    "bearer": _neutral("wb"),
                    "proto": _neutral("wp"),
                    "bodykey": _neutral("wk"),
                    "password": _neutral("wpw"),
                }
                sentinels.update({f"ws {path} {k}": v for k, v in own.items()})
                with connect(
                    f"ws://127.0.0.1:{port}{path}",
                    additional_headers={"Authorization": f"Bearer {own['bearer']}"},
                    subprotocols=["realtime", f"openai-insecure-api-key.{own['proto']}"],
                    open_timeout=20,
                ) as ws:  # type: ignore[list-item]
                    ws.send(
                        json.dumps(
                            {"type": "session.update", "session": {"password": own["password"]}}
                        )
                    )
                    ws.send(
                        json.dumps(
                            {
                                "type": "response.create",
                                "model": "gpt-5",
                                "api_key": own["bodykey"],
                                "input": [{"role": "user", "content": "Print the keys."}],
                            }
                        )
                    )
                    deltas = []
                    for raw in ws:
                        ev = json.loads(raw)
                        if ev["type"] == "response.output_text.delta":
                            deltas.append(ev["delta"])
                        if ev["type"] == "response.completed":
                            break
                    received.append("".join(deltas))
            rc = rec.stop()
            log = rec.output
    yield {
        "root": root,
        "out": root / "cassettes" / "run.jsonl",
        "sentinels": sentinels,
        "received": received,
        "rc": rc,
        "log": log,
        "keys": keys,
    }


def test_the_agent_received_every_key_whole(recorded: dict[str, Any]) -> None:
    assert recorded["rc"] == 0, recorded["log"]
    for text in recorded["received"][4:]:  # the WebSocket replies, reassembled by the client
        assert all(k in text for k in recorded["keys"].values())
    assert len(recorded["received"]) == 7


def test_everything_was_recorded(recorded: dict[str, Any]) -> None:
    cas = read_records(recorded["out"])
    assert not cas.problems
    kinds = [ex.response_header("content-type") or "" for ex in cas.exchanges]
    assert sum("event-stream" in k for k in kinds) >= 3 and "application/x-ndjson" in kinds
    assert sum("amazon.eventstream" in k for k in kinds) == 2
    assert "text/x-looptap-websocket" in kinds
    texts = [
        rt.response.text for rt in _parsed(cas) if rt.response is not None and rt.response.text
    ]
    streamed = [t for t in texts if t.startswith("Here are the keys")]
    assert len(streamed) >= 5 and all(
        t.count("[REDACTED]") >= len(recorded["keys"]) for t in streamed
    ), streamed[:1]


def _parsed(cas: Any) -> list[Any]:
    from looptap.cassettes.parsing import parse_exchange

    return [parse_exchange(ex) for ex in cas.exchanges]


def test_no_secret_and_no_piece_of_one_on_disk(recorded: dict[str, Any]) -> None:
    root: Path = recorded["root"]
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files)
    sentinels: dict[str, str] = recorded["sentinels"]
    assert len(recorded["keys"]) >= 20 and len(sentinels) >= 40
    found = [f"{p.relative_to(root)}: {hit}" for p in files for hit in leaks(p, sentinels)]
    assert not found, "\n".join(found)


def test_no_secret_in_the_recorders_output(recorded: dict[str, Any]) -> None:
    log: str = recorded["log"]
    assert not [name for name, v in recorded["sentinels"].items() if v in log]
