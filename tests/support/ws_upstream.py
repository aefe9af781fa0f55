"""A loopback Responses-over-WebSocket server (the API's ``wss://…/v1/responses``), for the
recorder's and the replay server's WebSocket tests.

Each ``response.create`` message is answered with the events of the HTTP stream, one per message,
rendered by looptap's own Responses renderer from a scripted answer: a turn whose input carries a
``function_call_output`` gets text, any other a call of the first offered tool; ``generate: false``
gets an empty response (a prewarm); an input containing ``RATE LIMIT`` gets an ``error`` message
with status 429; an input containing ``DROP CONNECTION`` gets the turn's first two events, then the
connection goes away without a close frame: a TCP reset, or a plain close (FIN) with
``DROP CONNECTION FIN``."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from typing import Any

import orjson

from looptap.cassettes.models import FinishReason, NormalisedResponse, Part, ToolCall, Usage
from looptap.cassettes.providers.openai_responses import render_responses
from tests.support import progress


def _answer(req: dict[str, Any], rid: str) -> NormalisedResponse:
    items = req.get("input") if isinstance(req.get("input"), list) else []
    model = str(req.get("model") or "gpt-5")
    if req.get("generate") is False:
        return NormalisedResponse(
            id=rid,
            model=model,
            parts=[],
            finish_reason=FinishReason.COMPLETE,
            usage=Usage(input_tokens=0, output_tokens=0),
        )
    if any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items):
        return NormalisedResponse(
            id=rid,
            model=model,
            parts=[Part(kind="text", text="It is sunny in Paris.")],
            finish_reason=FinishReason.COMPLETE,
            usage=Usage(input_tokens=60, output_tokens=8),
        )
    from tests.support.upstream import synth_args

    offered = list(req.get("tools") or [])
    for item in items:  # Codex's default provider offers its tools in an additional_tools item
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            offered += item.get("tools") or []
    flat = []
    for t in offered:
        flat += (
            t.get("tools") or [] if isinstance(t, dict) and t.get("type") == "namespace" else [t]
        )
    tools = [t for t in flat if isinstance(t, dict) and t.get("type") == "function"]
    # Codex's get_goal (wait, with its default provider) answers the same way every run (its shell's
    # output carries a random chunk id): the one to call when the session is replayed.
    tools.sort(key=lambda t: (t.get("name") != "get_goal", t.get("name") != "wait"))
    name = tools[0]["name"] if tools else "get_weather"
    args = synth_args(tools[0].get("parameters")) if tools else {"city": "Paris"}
    if name == "get_weather":
        args = {"city": "Paris"}
    call = ToolCall(id=f"call_{rid}", name=name, arguments=args)
    return NormalisedResponse(
        id=rid,
        model=model,
        parts=[Part(kind="tool_call", tool_call=call)],
        finish_reason=FinishReason.TOOL_CALL,
        usage=Usage(input_tokens=40, output_tokens=12),
    )


def spawn_script() -> Callable[[dict[str, Any], str], NormalisedResponse]:
    """A model for Codex's sub-agents (``collaboration`` namespace): the root agent (``agent_name``
    ``/root`` in Codex's turn metadata) calls ``spawn_agent``, then ``wait_agent``, then answers;
    any other agent answers its task in text at once."""
    root_turns = itertools.count()

    def answer(req: dict[str, Any], rid: str) -> NormalisedResponse:
        import json

        model = str(req.get("model") or "gpt-5")
        if req.get("generate") is False:
            return NormalisedResponse(
                id=rid,
                model=model,
                parts=[],
                finish_reason=FinishReason.COMPLETE,
                usage=Usage(input_tokens=0, output_tokens=0),
            )
        meta = (req.get("client_metadata") or {}).get("x-codex-turn-metadata") or "{}"
        agent = json.loads(meta).get("agent_name") if isinstance(meta, str) else None
        usage = Usage(input_tokens=40, output_tokens=12)
        if agent not in (None, "/root"):
            return NormalisedResponse(
                id=rid,
                model=model,
                parts=[Part(kind="text", text="Paris: sunny, 21 C.")],
                finish_reason=FinishReason.COMPLETE,
                usage=usage,
            )
        step = next(root_turns)
        calls = [
            (
                "spawn_agent",
                {
                    "task_name": "weather",
                    "message": "Find the weather in Paris.",
                    "fork_turns": "none",
                },
            ),
            ("wait_agent", {"timeout_ms": 10000}),
        ]
        if step < len(calls):
            name, args = calls[step]
            call = ToolCall(id=f"call_{rid}", name=name, arguments=args)
            return NormalisedResponse(
                id=rid,
                model=model,
                parts=[
                    Part(
                        kind="tool_call",
                        tool_call=call,
                        provider_details={"namespace": "collaboration"},
                    )
                ],
                finish_reason=FinishReason.TOOL_CALL,
                usage=usage,
            )
        return NormalisedResponse(
            id=rid,
            model=model,
            parts=[Part(kind="text", text="It is sunny in Paris.")],
            finish_reason=FinishReason.COMPLETE,
            usage=usage,
        )

    return answer


def events(
    req: dict[str, Any],
    rid: str,
    answer: Callable[[dict[str, Any], str], NormalisedResponse] | None = None,
) -> list[bytes]:
    """The server messages for one ``response.create``: the stream's events, one JSON each."""
    if "RATE LIMIT" in orjson.dumps(req.get("input")).decode():
        return [
            orjson.dumps(
                {
                    "type": "error",
                    "status": 429,
                    "error": {
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                        "message": "Rate limit reached for requests",
                    },
                }
            )
        ]
    reply = (answer or _answer)(req, rid)
    rendered = render_responses(reply, True, req)
    out = [
        next(line[6:] for line in ev.split(b"\n") if line.startswith(b"data: "))
        for ev in rendered.chunks
    ]
    spaces = {p.tool_call.name: p.provider_details["namespace"] for p in reply.parts
              if p.tool_call is not None and (p.provider_details or {}).get("namespace")}
    return [_with_namespace(ev, spaces) for ev in out] if spaces else out


def _with_namespace(ev: bytes, spaces: dict[str | None, Any]) -> bytes:
    """A function_call item as the API sends a call of a namespaced tool: with its ``namespace``."""
    d = orjson.loads(ev)
    items = [d.get("item")] + list((d.get("response") or {}).get("output") or [])
    for item in items:
        if (
            isinstance(item, dict)
            and item.get("type") == "function_call"
            and item.get("name") in spaces
        ):
            item["namespace"] = spaces[item["name"]]
    return orjson.dumps(d)


def realtime_answer(
    items: list[dict[str, Any]], tools: list[Any], rid: str
) -> list[dict[str, Any]]:
    """OpenAI Realtime's events for one response.create: a call of the first tool when the last
    item is the user's message, else text; always ending with response.done and its usage."""
    last = items[-1] if items else {}
    usage = {
        "total_tokens": 70,
        "input_tokens": 50,
        "output_tokens": 20,
        "input_token_details": {"cached_tokens": 0},
    }
    head = {
        "type": "response.created",
        "response": {
            "id": rid,
            "object": "realtime.response",
            "status": "in_progress",
            "output": [],
        },
    }
    if last.get("type") == "message" and tools:
        name = tools[0]["name"]
        item = {
            "id": f"item_{rid}",
            "type": "function_call",
            "status": "completed",
            "name": name,
            "call_id": f"call_{rid}",
            "arguments": '{"city":"Paris"}',
        }
        return [
            head,
            {
                "type": "response.output_item.added",
                "response_id": rid,
                "output_index": 0,
                "item": {**item, "arguments": ""},
            },
            {
                "type": "response.function_call_arguments.delta",
                "response_id": rid,
                "item_id": item["id"],
                "output_index": 0,
                "call_id": item["call_id"],
                "delta": item["arguments"],
            },
            {
                "type": "response.function_call_arguments.done",
                "response_id": rid,
                "item_id": item["id"],
                "output_index": 0,
                "call_id": item["call_id"],
                "name": name,
                "arguments": item["arguments"],
            },
            {
                "type": "response.output_item.done",
                "response_id": rid,
                "output_index": 0,
                "item": item,
            },
            {
                "type": "response.done",
                "response": {
                    "id": rid,
                    "object": "realtime.response",
                    "status": "completed",
                    "output": [item],
                    "usage": usage,
                },
            },
        ]
    text = "It is sunny in Paris."
    item = {
        "id": f"item_{rid}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text}],
    }
    out = [
        head,
        {
            "type": "response.output_item.added",
            "response_id": rid,
            "output_index": 0,
            "item": {**item, "content": []},
        },
    ]
    out += [
        {
            "type": "response.output_text.delta",
            "response_id": rid,
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": d,
        }
        for d in ("It is ", "sunny in ", "Paris.")
    ]
    out += [
        {"type": "response.output_item.done", "response_id": rid, "output_index": 0, "item": item},
        {
            "type": "response.done",
            "response": {
                "id": rid,
                "object": "realtime.response",
                "status": "completed",
                "output": [item],
                "usage": usage,
            },
        },
    ]
    return out


#: A plain HTTP answer: (method, target, headers, body) → (status, content type, body).
HttpHandler = Callable[[str, str, list[tuple[str, str]], bytes], tuple[int, str, bytes]]


class WsResponsesUpstream:
    """``with WsResponsesUpstream() as up: up.url`` — ws://127.0.0.1:PORT; ``up.received``: the
    client messages, ``up.connections``: how many sessions were opened.

    With ``http`` (a handler of plain requests) the same port also answers HTTP/1.1 requests that
    are not WebSocket upgrades (a backend's side endpoints): every request, upgrade or not, is
    then logged in ``up.requests`` as ``(method, target, headers)``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl: Any = None,
        http: HttpHandler | None = None,
        answer: Callable[[dict[str, Any], str], NormalisedResponse] | None = None,
    ) -> None:
        from looptap.cassettes.recording.websocket import WsSession
        from looptap.cassettes.wire import Exchange

        #: What a recorder would have written: the session's turns, read by looptap's own WsSession.
        self.exchanges: list[Exchange] = []
        self._session = WsSession
        self.received: list[Any] = []
        self.connections = 0
        self.paths: list[str] = []
        self.requests: list[tuple[str, str, list[tuple[str, str]]]] = []
        self._http = http
        self._answer = answer
        self._inner_port = 0
        self._ids = itertools.count()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._host, self._port, self._ssl = host, port, ssl

    async def _handler(self, ws: Any) -> None:
        import time

        self.connections += 1
        self.paths.append(ws.request.path)
        session = self._session(
            f"wss://api.openai.com{ws.request.path}",
            list(ws.request.headers.raw_items()),
            [],
            started=time.time(),
        )
        if "/realtime" in ws.request.path:
            await self._realtime(ws)
            return
        if "BidiGenerateContent" in ws.request.path:
            await self._live(ws)
            return
        async for raw in ws:
            msg = orjson.loads(raw)
            self.received.append(msg)
            self.exchanges += session.message(True, raw, time.time())
            if msg.get("type") != "response.create":
                continue
            said = orjson.dumps(msg.get("input")).decode()
            if "DROP CONNECTION" in said:
                for ev in events(msg, f"resp_{next(self._ids)}", self._answer)[:2]:
                    await ws.send(ev.decode())
                await asyncio.sleep(0.05)  # let the peer read them before the connection goes
                if "DROP CONNECTION FIN" not in said:
                    import socket
                    import struct

                    ws.transport.get_extra_info("socket").setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    ws.transport.abort()
                else:
                    ws.transport.close()
                return
            for ev in events(msg, f"resp_{next(self._ids)}", self._answer):
                self.exchanges += session.message(False, ev, time.time())
                await ws.send(ev.decode())
        self.exchanges += session.end(1000)

    async def _realtime(self, ws: Any) -> None:
        """OpenAI Realtime: the session keeps the conversation; each response.create is answered."""
        items: list[dict[str, Any]] = []
        tools: list[Any] = []
        await ws.send(
            orjson.dumps(
                {"type": "session.created", "session": {"id": "sess_1", "type": "realtime"}}
            ).decode()
        )
        async for raw in ws:
            msg = orjson.loads(raw)
            self.received.append(msg)
            kind = msg.get("type")
            if kind == "session.update":
                tools = msg.get("session", {}).get("tools") or tools
                await ws.send(
                    orjson.dumps(
                        {"type": "session.updated", "session": msg.get("session")}
                    ).decode()
                )
            elif kind == "conversation.item.create":
                items.append(msg.get("item") or {})
                await ws.send(
                    orjson.dumps(
                        {"type": "conversation.item.added", "item": msg.get("item")}
                    ).decode()
                )
            elif kind == "response.create":
                for ev in realtime_answer(items, tools, f"resp_{next(self._ids)}"):
                    if ev["type"] == "response.done":
                        items.extend(ev["response"]["output"])
                    await ws.send(orjson.dumps(ev).decode())

    async def _live(self, ws: Any) -> None:
        """Gemini Live: setup, then a function call for the user's question and text for its
        result."""
        tools: list[Any] = []
        usage = {"promptTokenCount": 40, "responseTokenCount": 9, "totalTokenCount": 49}
        async for raw in ws:
            msg = orjson.loads(raw)
            self.received.append(msg)
            # google-genai writes the message keys in snake_case, the API documents camelCase
            if "setup" in msg:
                tools = [
                    d
                    for t in msg["setup"].get("tools") or []
                    for d in t.get("functionDeclarations") or t.get("function_declarations") or []
                ]
                await ws.send(orjson.dumps({"setupComplete": {}}).decode())
            elif ("clientContent" in msg or "client_content" in msg) and tools:
                call = {
                    "id": f"fc_{next(self._ids)}",
                    "name": tools[0]["name"],
                    "args": {"city": "Paris"},
                }
                await ws.send(
                    orjson.dumps(
                        {"toolCall": {"functionCalls": [call]}, "usageMetadata": usage}
                    ).decode()
                )
            elif {"toolResponse", "tool_response", "clientContent", "client_content"} & set(msg):
                for piece in ("It is ", "sunny in ", "Paris."):
                    await ws.send(
                        orjson.dumps(
                            {
                                "serverContent": {
                                    "modelTurn": {"role": "model", "parts": [{"text": piece}]}
                                }
                            }
                        ).decode()
                    )
                await ws.send(
                    orjson.dumps({"serverContent": {"generationComplete": True}}).decode()
                )
                await ws.send(
                    orjson.dumps(
                        {"serverContent": {"turnComplete": True}, "usageMetadata": usage}
                    ).decode()
                )

    async def _front(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client connection (with ``http``): plain requests answered here, one after another;
        a WebSocket upgrade handed, bytes as they come, to the WebSocket server behind."""
        assert self._http is not None
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target = lines[0].split(" ")[:2]
                headers = [
                    (k.strip(), v.strip())
                    for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
                ]
                hdr = {k.lower(): v for k, v in headers}
                self.requests.append((method, target, headers))
                if hdr.get("upgrade", "").lower() == "websocket":
                    await self._pipe(head, reader, writer)
                    return
                if hdr.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                        body += (await reader.readexactly(size + 2))[:-2]
                    await reader.readuntil(b"\r\n")
                else:
                    body = await reader.readexactly(int(hdr.get("content-length") or 0))
                status, ctype, answer = self._http(method, target, headers, body)
                writer.write(
                    f"HTTP/1.1 {status} {'OK' if status < 400 else 'Error'}\r\ncontent-type: "
                    f"{ctype}\r\ncontent-length: {len(answer)}\r\n\r\n".encode()
                    + answer
                )
                await writer.drain()
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

    def _run(self) -> None:
        from websockets.asyncio.server import serve

        async def main() -> None:
            self._stop = asyncio.Event()
            if self._http is None:
                async with serve(self._handler, self._host, self._port, ssl=self._ssl) as server:
                    self.port = next(iter(server.sockets)).getsockname()[1]
                    self._loop = asyncio.get_running_loop()
                    self._ready.set()
                    await self._stop.wait()
                return
            async with serve(self._handler, "127.0.0.1", 0) as inner:
                self._inner_port = next(iter(inner.sockets)).getsockname()[1]
                front = await asyncio.start_server(
                    self._front, self._host, self._port, ssl=self._ssl
                )
                async with front:
                    self.port = front.sockets[0].getsockname()[1]
                    self._loop = asyncio.get_running_loop()
                    self._ready.set()
                    await self._stop.wait()

        asyncio.run(main())

    @property
    def url(self) -> str:
        return f"{'https' if self._ssl else 'http'}://{self._host}:{self.port}"

    def __enter__(self) -> WsResponsesUpstream:
        self._thread.start()
        # hung only when nothing progresses
        progress.until(self._ready.is_set, what="the WebSocket upstream's start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
