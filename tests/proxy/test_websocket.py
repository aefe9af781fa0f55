"""WebSocket sessions through the real recorder: Responses over a WebSocket (what Codex and the
openai SDK's ``beta.responses.connect()`` use) is recorded turn by turn as Responses round trips,
threaded by ``previous_response_id``; a prewarm is kept and labelled, an error message becomes
its status; a session looptap cannot read is kept whole with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.reading import open_run
from tests.proxy.test_e2e_frameworks import explain, looptap_run, python_client
from tests.support import progress
from tests.support.harness import outputs
from tests.support.recorder import needs_recorder
from tests.support.ws_upstream import WsResponsesUpstream

pytestmark = [needs_recorder]

AGENT = """
import openai
client = openai.OpenAI()
tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
with client.beta.responses.connect() as conn:
    conn.response.create(model="gpt-5", generate=False, tools=tools, instructions="Answer with the weather tool.", input=[])
    prev = None
    for ev in conn:
        if ev.type == "response.completed":
            prev = ev.response.id
            break
    conn.response.create(model="gpt-5", previous_response_id=prev, tools=tools, input=[{"role": "user", "content": "Weather in Paris?"}])
    call = None
    for ev in conn:
        if ev.type == "response.completed":
            prev = ev.response.id
            call = next(i for i in ev.response.output if i.type == "function_call")
            break
    out(call=call.name, args=call.arguments)
    conn.response.create(model="gpt-5", previous_response_id=prev, tools=tools,
                         input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}])
    text = ""
    for ev in conn:
        if ev.type == "response.output_text.delta":
            text += ev.delta
        if ev.type == "response.completed":
            prev = ev.response.id
            break
    out(final=text)
    conn.response.create(model="gpt-5", previous_response_id=prev, input=[{"role": "user", "content": "RATE LIMIT please"}])
    for ev in conn:
        if ev.type == "error":
            out(error=ev.error.code)
            break
"""  # noqa: E501


def test_responses_over_a_websocket_is_recorded_turn_by_turn(tmp_path, confdir, secret) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("websockets")
    with WsResponsesUpstream() as up:
        proc, out = looptap_run(
            tmp_path,
            confdir,
            secret,
            python_client(tmp_path, AGENT),
            extra=("--upstream", f"openai={up.url}"),
        )
    assert proc.returncode == 0, explain(proc)
    assert outputs(proc) == [
        {"call": "get_weather", "args": '{"city":"Paris"}'},
        {"final": "It is sunny in Paris."},
        {"error": "rate_limit_exceeded"},
    ], explain(proc)
    assert up.connections == 1 and up.paths == ["/v1/responses"]
    run = open_run(out)
    exs = run.exchanges
    assert [ex.status for ex in exs] == [200, 200, 200, 429], [
        (ex.method, ex.url, ex.status) for ex in exs
    ]
    assert all(
        ex.method == "POST"
        and ex.url.endswith("/v1/responses")
        and any("websocket" in n for n in ex.notes)
        for ex in exs
    )
    rts = list(run.roundtrips)
    assert [rt.operation for rt in rts] == ["prewarm", "generate", "generate", "generate"]
    assert [c.name for c in rts[1].response.tool_calls] == ["get_weather"] and rts[
        2
    ].response.text == "It is sunny in Paris."
    convs = run.analysis.conversations
    # threaded by previous_response_id; the prewarm is no turn
    assert len(convs) == 1 and convs[0].turns == [1, 2, 3], convs
    codes = sorted(f.code for f in run.analysis.findings if f.severity.value != "info")
    assert codes == ["A.rate_limited"], codes
    # the upgrade request's key is redacted like any header
    assert secret.encode() not in out.read_bytes()
    assert "0 conversations" not in proc.stderr


def test_a_client_bug_over_a_websocket_is_found(tmp_path, confdir, secret) -> None:  # type: ignore[no-untyped-def]
    """The twin: the agent chains its next question onto the tool-call turn (a stale
    ``previous_response_id``), so the call it made is never answered."""
    pytest.importorskip("websockets")
    buggy = AGENT.replace("""        if ev.type == "response.completed":
            prev = ev.response.id
            break
    out(final=text)""", """        if ev.type == "response.completed":
            break
    out(final=text)""")
    assert buggy != AGENT
    with WsResponsesUpstream() as up:
        proc, out = looptap_run(
            tmp_path,
            confdir,
            secret,
            python_client(tmp_path, buggy),
            extra=("--upstream", f"openai={up.url}"),
        )
    assert proc.returncode == 0, explain(proc)
    run = open_run(out)
    dropped = [f for f in run.analysis.findings if f.code == "C.dropped_tool_result"]
    assert len(dropped) == 1 and dropped[0].seq == 3, [
        (f.code, f.seq) for f in run.analysis.findings
    ]


REALTIME = """
import openai
client = openai.OpenAI()
tools = [{"type": "function", "name": "get_weather", "description": "The weather in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
with client.realtime.connect(model="gpt-realtime") as conn:
    conn.session.update(session={"type": "realtime", "output_modalities": ["text"], "instructions": "Answer with the weather tool.", "tools": tools})
    conn.conversation.item.create(item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]})
    conn.response.create()
    for ev in conn:
        if ev.type == "response.done":
            call = ev.response.output[0]
            break
    out(call=call.name, args=call.arguments)
    conn.conversation.item.create(item={"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"})
    conn.response.create()
    text = ""
    for ev in conn:
        if ev.type == "response.output_text.delta":
            text += ev.delta
        if ev.type == "response.done":
            break
    out(final=text)
"""  # noqa: E501


def test_openai_realtime_in_text_mode_is_recorded_turn_by_turn(tmp_path, confdir, secret) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("websockets")
    with WsResponsesUpstream() as up:
        proc, out = looptap_run(
            tmp_path,
            confdir,
            secret,
            python_client(tmp_path, REALTIME),
            extra=("--upstream", f"openai={up.url}"),
        )
    assert proc.returncode == 0, explain(proc)
    assert outputs(proc) == [
        {"call": "get_weather", "args": '{"city":"Paris"}'},
        {"final": "It is sunny in Paris."},
    ], explain(proc)
    assert "is not one looptap reads as turns" not in proc.stderr
    run = open_run(out)
    turns = [(ex, rt) for ex, rt in run.pairs if rt.operation == "generate"]
    assert len(turns) == 2 and all(rt.family == "openai_realtime" for _, rt in turns), [
        (ex.method, ex.url, ex.status) for ex in run.exchanges
    ]
    (_, first), (_, second) = turns
    assert first.request is not None and [t.name for t in first.request.tools] == ["get_weather"]
    assert [p.text for p in first.request.system] == ["Answer with the weather tool."]
    assert first.response is not None and [
        (c.name, c.arguments) for c in first.response.tool_calls
    ] == [("get_weather", {"city": "Paris"})]
    assert (first.response.usage.input_tokens, first.response.usage.output_tokens) == (50, 20)
    assert (
        second.response is not None
        and second.response.text == "It is sunny in Paris."
        and second.response.complete
    )
    assert second.request is not None and second.request.previous_response_id == first.response.id
    convs = run.analysis.conversations
    # threaded by the connection's response ids
    assert len(convs) == 1 and len(convs[0].turns) == 2, convs
    assert [(f.code, f.seq) for f in run.analysis.findings if f.severity.value != "info"] == []
    assert secret.encode() not in out.read_bytes()


LIVE = """
import asyncio
from google import genai
from google.genai import types

async def main():
    client = genai.Client(api_key=os.environ["GEMINI_API_KEY"])
    config = {"response_modalities": ["TEXT"], "system_instruction": "Answer with the weather tool.",
              "tools": [{"function_declarations": [{"name": "get_weather", "description": "The weather in a city.",
                         "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]}}]}]}
    async with client.aio.live.connect(model="gemini-live-2.5-flash", config=config) as session:
        await session.send_client_content(turns={"role": "user", "parts": [{"text": "Weather in Paris?"}]}, turn_complete=True)
        call = None
        async for msg in session.receive():
            if msg.tool_call:
                call = msg.tool_call.function_calls[0]
                break
        out(call=call.name, args=call.args)
        await session.send_tool_response(function_responses=[types.FunctionResponse(id=call.id, name=call.name, response={"result": "sunny"})])
        text = ""
        async for msg in session.receive():
            if msg.text:
                text += msg.text
            if msg.server_content and msg.server_content.turn_complete:
                break
        out(final=text)

asyncio.run(main())
"""  # noqa: E501


def test_gemini_live_is_recorded_turn_by_turn(tmp_path, secret) -> None:  # type: ignore[no-untyped-def]
    """google-genai's Live client always speaks wss:// (it rewrites the base URL's scheme), so it
    cannot use looptap's plain-http listener: it goes through HTTPS_PROXY, as it would to the real
    API. Run in a network namespace where generativelanguage.googleapis.com is a loopback TLS
    WebSocket server of ours (tests/proxy/codex_default_ns.py, mode live)."""
    import json
    import sys

    pytest.importorskip("websockets")
    pytest.importorskip("google.genai")
    pytest.importorskip("cryptography")
    from tests.proxy.test_codex_websocket import _can_unshare
    from tests.support.recorder import PROXY_PYTHON

    if not _can_unshare():
        pytest.skip("needs root and unshare/ip to make a network namespace")
    helper = Path(__file__).with_name("codex_default_ns.py")
    proc = progress.run(
        [
            "unshare",
            "--net",
            "--mount",
            "--fork",
            sys.executable,
            str(helper),
            str(tmp_path),
            "-",
            str(PROXY_PYTHON),
            secret,
            "live",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["record_rc"] == 0, r
    got = [json.loads(line) for line in r["record_stdout"].splitlines() if line.startswith("{")]
    assert got == [
        {"call": "get_weather", "args": {"city": "Paris"}},
        {"final": "It is sunny in Paris."},
    ], r
    out = tmp_path / "run.jsonl"
    run = open_run(out)
    turns = [rt for rt in run.roundtrips if rt.operation == "generate"]
    assert [rt.family for rt in turns] == ["gemini_live", "gemini_live"], [
        (ex.method, ex.url, ex.status) for ex in run.exchanges
    ]
    first, second = turns
    assert (
        first.request is not None
        and [t.name for t in first.request.tools] == ["get_weather"]
        and first.request.model == "gemini-live-2.5-flash"
    )
    assert first.response is not None and [
        (c.name, c.arguments) for c in first.response.tool_calls
    ] == [("get_weather", {"city": "Paris"})]
    assert (
        second.request is not None
        and second.request.messages[0].parts[0].tool_result.name == "get_weather"
    )
    assert (
        second.response is not None
        and second.response.text == "It is sunny in Paris."
        and second.response.complete
    )
    assert (second.response.usage.input_tokens, second.response.usage.output_tokens) == (40, 9)
    convs = run.analysis.conversations
    # threaded by the recorder's turn numbers
    assert len(convs) == 1 and len(convs[0].turns) == 2, convs
    assert [(f.code, f.seq) for f in run.analysis.findings if f.severity.value != "info"] == []
    assert secret.encode() not in out.read_bytes()


UNREADABLE = """
from websockets.sync.client import connect
url = os.environ["OPENAI_BASE_URL"].replace("http://", "ws://") + "/audio/stream?model=gpt-realtime"
with connect(url) as ws:
    ws.send('{"type": "session.update", "session": {"modalities": ["text"]}}')
    ws.send('{"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}}')
out(sent=2)
"""  # noqa: E501


def test_a_session_looptap_cannot_read_is_kept_whole_with_a_warning(
    tmp_path, confdir, secret
) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("websockets")
    with WsResponsesUpstream() as up:
        proc, out = looptap_run(
            tmp_path,
            confdir,
            secret,
            python_client(tmp_path, UNREADABLE),
            extra=("--upstream", f"openai={up.url}"),
        )
    assert proc.returncode == 0, explain(proc)
    assert "is not one looptap reads as turns" in proc.stderr, explain(proc)
    run = open_run(out)
    assert len(run.exchanges) == 1
    ex = run.exchanges[0]
    assert (
        ex.status == 101
        and ex.response_body.count(b"\n") == 2
        and b"> " in ex.response_body
        and b"session.update" in ex.response_body
    )
    assert any("cannot read as turns" in n for n in ex.notes)


MCP_CLIENT = """
import json, os, urllib.request
for k in ("NO_PROXY", "no_proxy"):
    os.environ.pop(k, None)  # the tool server is on loopback here: go through looptap's proxy anyway
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": os.environ["HTTP_PROXY"]}))
url = sys.argv[1]
def rpc(body, session=None):
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    if session:
        headers["mcp-session-id"] = session
    with opener.open(urllib.request.Request(url, json.dumps(body).encode(), headers)) as r:
        return r.headers.get("mcp-session-id"), r.read().decode()
sid, _ = rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
_, text = rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_weather", "arguments": {"city": "Paris"}, "_meta": {"claudecode/toolUseId": "toolu_X"}}}, sid)
out(reply=text)
"""  # noqa: E501


def test_mcp_on_any_host_is_recorded_by_protocol(tmp_path, confdir, secret) -> None:  # type: ignore[no-untyped-def]
    """An MCP tool server on a host no LLM list names (here loopback, through looptap's forward
    proxy) is recorded because it speaks MCP; plain traffic to the same host is not."""
    import http.server
    import json
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if body["method"] == "initialize":
                reply, extra = (
                    {
                        "jsonrpc": "2.0",
                        "id": 0,
                        "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}},
                    },
                    [("mcp-session-id", "sess-1")],
                )
                data, ctype = json.dumps(reply).encode(), "application/json"
            else:
                reply, extra = (
                    {
                        "jsonrpc": "2.0",
                        "id": body["id"],
                        "result": {
                            "content": [{"type": "text", "text": "sunny"}],
                            "isError": False,
                        },
                    },
                    [],
                )
                data, ctype = (
                    b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n",
                    "text/event-stream",
                )
            self.send_response(200)
            for k, v in [("content-type", ctype), ("content-length", str(len(data))), *extra]:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        proc, out = looptap_run(
            tmp_path, confdir, secret, [*python_client(tmp_path, MCP_CLIENT), url]
        )
    finally:
        server.shutdown()
    assert proc.returncode == 0, explain(proc)
    assert outputs(proc) and "sunny" in outputs(proc)[0]["reply"], explain(proc)
    run = open_run(out)
    ops = [rt.operation for rt in run.roundtrips]
    assert ops == ["mcp initialize", "mcp tools/call"], [
        (ex.method, ex.url, ex.status) for ex in run.exchanges
    ]
    from looptap.cassettes.views.schema import roundtrip_json

    call = roundtrip_json(run.roundtrips[1], run.exchanges[1])["mcp"]
    assert (call["tool"], call["arguments"], call["tool_use_id"], call["result"]) == (
        "get_weather",
        {"city": "Paris"},
        "toolu_X",
        "sunny",
    )
    assert secret.encode() not in out.read_bytes()
