"""Helpers shared by the replay tests: small cassettes built from real-shaped exchanges."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange

REPO = Path(__file__).resolve().parents[2]

CHAT_URL = "https://api.openai.com/v1/chat/completions"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def chat_request(messages: list[dict[str, object]], **extra: object) -> bytes:
    return orjson.dumps({"model": "gpt-4o", "messages": messages, "tools": TOOLS, **extra})


def chat_response(content: str | None = None, call: tuple[str, str, str] | None = None) -> bytes:
    msg: dict[str, object] = {"role": "assistant", "content": content}
    if call is not None:
        cid, name, args = call
        msg["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        ]
    return orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o-2024-08-06",
            "choices": [
                {"index": 0, "message": msg, "finish_reason": "tool_calls" if call else "stop"}
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }
    )


def chat_exchange(
    messages: list[dict[str, object]], response: bytes, status: int = 200, **extra: object
) -> Exchange:
    return Exchange(
        "POST",
        CHAT_URL,
        [("content-type", "application/json"), ("x-stainless-os", "Linux")],
        chat_request(messages, **extra),
        status=status,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, response)],
        ttfb=0.01,
    )


SYSTEM = {"role": "system", "content": "Answer with the weather tool."}
USER = {"role": "user", "content": "Weather in Paris?"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_A1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call_A1", "content": "sunny, 21 C"}


def fork_agent(result: str = RESULT["content"]) -> str:
    """An inner pytest project's module head: the openai SDK's weather loop over the system prompt,
    question and tool of :func:`tool_loop`'s recording, its tool answering ``result`` (the marked
    tests that fork or replay that recording follow it)."""
    return (
        AGENT_HEAD
        + f"""        msgs += [{{"role": "tool", "tool_call_id": c.id, "content": {json.dumps(result)}}} for c in m.tool_calls]
"""  # noqa: E501
    )


AGENT_HEAD = '''
import os
import pytest
from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]

def agent():
    client = OpenAI(max_retries=0)
    msgs = [{"role": "system", "content": "Answer with the weather tool."}, {"role": "user", "content": "Weather in Paris?"}]
    for _ in range(5):
        m = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS).choices[0].message
        if not m.tool_calls:
            return m.content
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
'''  # noqa: E501


def tool_loop() -> list[Exchange]:
    """Two turns of one conversation: a tool call, then the answer to its result."""
    return [
        chat_exchange(
            [SYSTEM, USER], chat_response(call=("call_A1", "get_weather", '{"city":"Paris"}'))
        ),
        chat_exchange([SYSTEM, USER, CALL, RESULT], chat_response("It is sunny in Paris.")),
    ]


def write(path: Path, exchanges: list[Exchange]) -> Path:
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    return path


def sse_exchange(
    events: list[bytes],
    gap: float = 0.02,
    ttfb: float = 0.01,
    url: str = CHAT_URL,
    req: bytes | None = None,
) -> Exchange:
    """A streamed chat round trip whose chunks are ``events``, ``gap`` seconds apart."""
    return Exchange(
        "POST",
        url,
        [("content-type", "application/json")],
        req if req is not None else chat_request([SYSTEM, USER], stream=True),
        status=200,
        response_headers=[("content-type", "text/event-stream"), ("x-request-id", "req_1")],
        response_chunks=[(ttfb + i * gap, e) for i, e in enumerate(events)],
        ttfb=ttfb,
    )


def chat_events(words: list[str]) -> list[bytes]:
    out = []
    for i, w in enumerate(words):
        delta = {"role": "assistant", "content": w} if i == 0 else {"content": w}
        out.append(
            b"data: "
            + orjson.dumps(
                {
                    "id": "chatcmpl-s",
                    "object": "chat.completion.chunk",
                    "model": "gpt-4o",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
            )
            + b"\n\n"
        )
    out.append(
        b"data: "
        + orjson.dumps(
            {
                "id": "chatcmpl-s",
                "object": "chat.completion.chunk",
                "model": "gpt-4o",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
        )
        + b"\n\n"
    )
    out.append(b"data: [DONE]\n\n")
    return out


def raw_request(
    url: str,
    method: str,
    target: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, list[tuple[str, str]], list[tuple[float, bytes]]]:
    """One HTTP/1.1 request over a plain socket: (status, headers, [(arrival offset, HTTP chunk)]).
    Keeps the chunk boundaries the server wrote, which any HTTP library would hide."""
    import socket
    import time
    from urllib.parse import urlsplit

    u = urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=timeout)
    hdrs = {
        "host": u.netloc,
        "content-length": str(len(body)),
        "connection": "close",
        **(headers or {}),
    }
    head = (
        f"{method} {target} HTTP/1.1\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        + "\r\n"
    )
    t0 = time.monotonic()
    s.sendall(head.encode() + body)
    f = s.makefile("rb")
    status = int(f.readline().split()[1])
    rh: list[tuple[str, str]] = []
    while (line := f.readline().rstrip(b"\r\n")):
        k, _, v = line.decode("latin-1").partition(":")
        rh.append((k.strip().lower(), v.strip()))
    chunks: list[tuple[float, bytes]] = []
    d = dict(rh)
    if d.get("transfer-encoding") == "chunked":
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                f.readline()
                break
            data = f.read(size)
            chunks.append((time.monotonic() - t0, data))
            f.read(2)
    elif "content-length" in d:
        chunks.append((time.monotonic() - t0, f.read(int(d["content-length"]))))
    else:
        chunks.append((time.monotonic() - t0, f.read()))
    s.close()
    return status, rh, chunks


def served_miss_run(path: Path) -> Path:
    """The tool loop replayed with the tool's result changed at turn 1, as the replay server
    served it (turn 0 played, turn 1 missed), written to ``path``."""
    import urllib.error
    import urllib.request

    from looptap.cassettes.replay.serving.server import ReplayServer

    cassette = write(path.with_name("recorded.jsonl"), tool_loop())
    with ReplayServer(cassette) as srv:
        for messages in ([SYSTEM, USER], [SYSTEM, USER, CALL, {**RESULT, "content": "rainy, 9 C"}]):
            req = urllib.request.Request(
                srv.url + "/v1/chat/completions",
                data=chat_request(messages),
                headers={"content-type": "application/json"},
            )
            try:
                urllib.request.urlopen(req, timeout=60).read()
            except urllib.error.HTTPError as exc:
                assert exc.code == 400 and exc.headers["x-looptap-replay"] == "miss"
        return write(path, list(srv.served))


RECORDED = Path(__file__).with_name("recorded")


def why_agent_in_process(monkeypatch: pytest.MonkeyPatch, base_url: str, *argv: str) -> int:
    """tests/why/why_agent.py run in this process (its ``main``, the real openai SDK) against
    ``base_url`` (a replay server's), as ``looptap run`` runs it against its listener: its exit
    status. What a fork does with the agent's requests is the replay server's and its cursor's;
    the agent's own process, its interpreter and the SDK's import are not (about 1 s of CPU)."""
    import sys

    from tests.why import why_agent

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", base_url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-why")
    monkeypatch.setattr(sys, "argv", ["why_agent.py", *argv])
    monkeypatch.setattr(why_agent, "TOOL_BUG", [False])
    return why_agent.main()
