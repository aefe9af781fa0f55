"""The client bug injected into a coding agent that no hook reaches: Claude Code ships a native
executable (its Bun build) and Codex a Rust one, so neither ``NODE_OPTIONS=--import`` nor
``PYTHONPATH`` gets inside them. This relay runs in the agent's own process tree, between the agent
and ``looptap run``'s listeners, and breaks the agent's outgoing requests the way mutate.py does for
the SDK clients: looptap records exactly what an agent with that bug would send.

    relay.py -- COMMAND...

It reads the listeners ``looptap run`` exported (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``),
listens on a loopback port for each, points the variables at itself and runs COMMAND. Plain HTTP
requests are forwarded with their JSON body mutated (once, the first request that qualifies) and
marked with the ``x-matrix-injected`` header; a WebSocket session (Codex's Responses transport) is
relayed message by message, the mutated ``response.create`` marked with ``metadata`` (a WebSocket
message has no headers of its own). Responses pass through as they come.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutate import MARK, Injector

_HOP = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "proxy-connection",
}


class Relay:
    def __init__(self, kind: str) -> None:
        self.injector = Injector(kind)
        self.kind = kind
        self.lock = threading.Lock()

    def mutate(self, path: str, body: Any) -> bool:
        with self.lock:
            return self.injector.mutate(path, body)

    async def front(
        self, upstream: tuple[str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One connection of the agent: its request forwarded (one per connection: ``Connection:
        close`` both ways), or its WebSocket session relayed."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [
            (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
        ]
        hdr = {k.lower(): v for k, v in headers}
        try:
            if hdr.get("upgrade", "").lower() == "websocket":
                await self.websocket(upstream, target, headers, reader, writer)
            else:
                await self.http(upstream, method, target, headers, hdr, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def http(
        self,
        upstream: tuple[str, int],
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        hdr: dict[str, str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        if hdr.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                body += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")
        else:
            body = await reader.readexactly(int(hdr.get("content-length") or 0))
        extra: list[tuple[str, str]] = []
        if method == "POST" and body:
            try:
                obj = json.loads(body)
            except ValueError:
                obj = None
            if obj is not None and self.mutate(urlsplit(target).path, obj):
                body = json.dumps(obj).encode()
                extra.append((MARK, self.kind))
        out = [f"{method} {target} HTTP/1.1", f"Host: {upstream[0]}:{upstream[1]}"]
        out += [f"{k}: {v}" for k, v in headers if k.lower() not in _HOP] + [
            f"{k}: {v}" for k, v in extra
        ]
        out += [f"Content-Length: {len(body)}", "Connection: close"]
        r, w = await asyncio.open_connection(*upstream)
        w.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body)
        await w.drain()
        # The answer's head with Connection: close (this connection ends with it), then its bytes as
        # they come.
        rhead = (await r.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        kept = [
            ln
            for ln in rhead[1:]
            if ln and ln.partition(":")[0].strip().lower() not in ("connection", "keep-alive")
        ]
        writer.write(
            ("\r\n".join([rhead[0], *kept, "Connection: close"]) + "\r\n\r\n").encode("latin-1")
        )
        while data := await r.read(65536):
            writer.write(data)
            await writer.drain()
        w.close()

    async def websocket(
        self,
        upstream: tuple[str, int],
        target: str,
        headers: list[tuple[str, str]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """The agent's WebSocket handshake answered by a websockets server of ours (on a pipe), each
        of its messages sent on by a websockets client connected to looptap's listener."""
        from websockets.asyncio.client import connect
        from websockets.asyncio.server import serve

        keep = [
            (k, v)
            for k, v in headers
            if k.lower() not in _HOP and not k.lower().startswith("sec-websocket")
        ]

        async def session(agent: Any) -> None:
            url = f"ws://{upstream[0]}:{upstream[1]}{target}"
            async with connect(
                url,
                additional_headers=keep,
                user_agent_header=None,
                max_size=None,
                open_timeout=None,
            ) as api:
                async def up() -> None:
                    async for msg in agent:
                        if isinstance(msg, str):
                            try:
                                obj = json.loads(msg)
                            except ValueError:
                                obj = None
                            if (
                                isinstance(obj, dict)
                                and obj.get("type") == "response.create"
                                and self.mutate(urlsplit(target).path, obj)
                            ):
                                obj["metadata"] = {**(obj.get("metadata") or {}), MARK: self.kind}
                                msg = json.dumps(obj)
                        await api.send(msg)
                    await api.close()

                async def down() -> None:
                    async for msg in api:
                        await agent.send(msg)
                    await agent.close()

                await asyncio.gather(up(), down(), return_exceptions=True)

        async with serve(session, "127.0.0.1", 0, max_size=None) as inner:
            port = next(iter(inner.sockets)).getsockname()[1]
            r, w = await asyncio.open_connection("127.0.0.1", port)
            raw = (
                "\r\n".join([f"GET {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)])
                + "\r\n\r\n"
            )
            w.write(raw.encode("latin-1"))

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


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    kind = os.environ["LOOPTAP_MATRIX_BUG"]
    relay = Relay(kind)
    env = dict(os.environ)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    ports: dict[str, int] = {}

    async def start() -> None:
        for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
            base = os.environ.get(var)
            if not base:
                continue
            u = urlsplit(base)
            upstream = (u.hostname or "127.0.0.1", u.port or 80)
            server = await asyncio.start_server(
                lambda r, w, up=upstream: relay.front(up, r, w), "127.0.0.1", 0
            )
            ports[var] = server.sockets[0].getsockname()[1]
            env[var] = f"http://127.0.0.1:{ports[var]}{u.path}"
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    ready.wait()
    return subprocess.call(argv, env=env)


if __name__ == "__main__":
    sys.exit(main())
