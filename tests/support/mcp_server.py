"""A remote MCP tool server over streamable HTTP, for tests: one ``get_weather`` tool (and
``get_time``), speaking either spec revision.

* ``2025-11-25``: stateful. ``initialize`` opens a session (``mcp-session-id``), then
  ``notifications/initialized`` (202), ``tools/list``, ``tools/call``; a ``server/discover`` is
  answered "method not found", so a newer client falls back to ``initialize``.
* ``2026-07-28``: stateless. ``server/discover`` says what the server supports; every request is
  independent (its method also in the ``mcp-method`` header, the revision in ``_meta``); no session.

``tools/call`` replies come as a short SSE stream (``sse=True``) or JSON; other replies as JSON.
``error_cities`` makes ``get_weather`` of those cities an ``isError`` result. Every request is
logged (``log``: method, JSON-RPC method, headers of interest)."""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["McpLogged", "McpServer"]

#: 2025-06-18: stateful as 2025-11-25, for clients whose SDK knows no later revision (Gemini CLI
#: 0.61).
REVISIONS = ("2025-06-18", "2025-11-25", "2026-07-28")
_TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "inputSchema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "name": "get_time",
        "description": "The local time in a city.",
        "inputSchema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
]


@dataclass
class McpLogged:
    http_method: str
    rpc_method: str | None
    headers: dict[str, str]
    body: Any
    status: int = 0


@dataclass
class McpServer:
    revision: str = "2025-11-25"
    sse: bool = True
    #: the cities whose ``get_weather`` is an ``isError`` result
    error_cities: frozenset[str] = frozenset()
    log: list[McpLogged] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.revision in REVISIONS, self.revision
        self._sessions: set[str] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def rpc_methods(self) -> list[str | None]:
        return [x.rpc_method for x in self.log]

    def __enter__(self) -> McpServer:
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _logged(self, body: Any) -> McpLogged:
                keep = {
                    k.lower(): v
                    for k, v in self.headers.items()
                    if k.lower().startswith("mcp-") or k.lower() in ("accept", "content-type")
                }
                rpc = body.get("method") if isinstance(body, dict) else None
                entry = McpLogged(self.command, rpc, keep, body)
                with srv._lock:
                    srv.log.append(entry)
                return entry

            def _send(
                self,
                entry: McpLogged,
                status: int,
                payload: bytes = b"",
                ctype: str | None = None,
                extra: dict[str, str] | None = None,
            ) -> None:
                entry.status = status
                self.send_response(status)
                if ctype:
                    self.send_header("content-type", ctype)
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:  # no server-initiated stream
                self._send(self._logged(None), 405, b"", extra={"allow": "POST"})

            def do_DELETE(self) -> None:
                sid = self.headers.get("mcp-session-id")
                with srv._lock:
                    srv._sessions.discard(sid or "")
                self._send(self._logged(None), 200 if srv.revision == "2025-11-25" else 405)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                entry = self._logged(body)
                if (
                    not isinstance(body, dict)
                    or body.get("jsonrpc") != "2.0"
                    or not isinstance(body.get("method"), str)
                ):
                    self._send(
                        entry, 400, b'{"error": "not a JSON-RPC request"}', "application/json"
                    )
                    return
                if "id" not in body:  # a notification
                    self._send(entry, 202)
                    return
                extra: dict[str, str] = {}
                if srv.revision == "2025-11-25" and body["method"] not in (
                    "initialize",
                    "server/discover",
                ):
                    sid = self.headers.get("mcp-session-id")
                    if sid not in srv._sessions:
                        self._send(
                            entry,
                            404,
                            json.dumps(
                                {
                                    "jsonrpc": "2.0",
                                    "id": body["id"],
                                    "error": {"code": -32001, "message": "Session not found"},
                                }
                            ).encode(),
                            "application/json",
                        )
                        return
                reply = srv._answer(body, extra)
                data = json.dumps(reply).encode()
                if srv.sse and body["method"] == "tools/call":
                    self._send(
                        entry,
                        200,
                        b"event: message\ndata: " + data + b"\n\n",
                        "text/event-stream",
                        extra,
                    )
                else:
                    self._send(entry, 200, data, "application/json", extra)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, body: dict[str, Any], extra: dict[str, str]) -> dict[str, Any]:
        rid, method = body["id"], body["method"]
        params = body.get("params") if isinstance(body.get("params"), dict) else {}
        info = {"name": "weather", "version": "1.0.0"}
        stateless = self.revision == "2026-07-28"
        cache = {"ttlMs": 0, "cacheScope": "private"} if stateless else {}

        def ok(result: dict[str, Any]) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": rid, "result": result}

        if method == "server/discover":
            if not stateless:
                return {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32601, "message": "Method not found: server/discover"},
                }
            return ok(
                {
                    "supportedVersions": [self.revision],
                    "capabilities": {"tools": {}},
                    "serverInfo": info,
                    **cache,
                }
            )
        if method == "initialize":
            if not stateless:
                sid = uuid.uuid4().hex
                with self._lock:
                    self._sessions.add(sid)
                extra["mcp-session-id"] = sid
            return ok(
                {
                    "protocolVersion": self.revision if not stateless else "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": info,
                }
            )
        if method == "ping":
            return ok({})
        if method == "tools/list":
            return ok({"tools": _TOOLS, **cache})
        if method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            city = args.get("city") if isinstance(args, dict) else None
            if name == "get_weather":
                if city in self.error_cities:
                    return ok(
                        {
                            "content": [{"type": "text", "text": f"City not found: {city}"}],
                            "isError": True,
                        }
                    )
                return ok(
                    {
                        "content": [{"type": "text", "text": f"sunny, 21 C in {city}"}],
                        "isError": False,
                    }
                )
            if name == "get_time":
                return ok(
                    {"content": [{"type": "text", "text": f"14:05 in {city}"}], "isError": False}
                )
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32602, "message": f"Unknown tool: {name}"},
            }
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        }
