"""The addon in process, driven through mitmproxy's own test helpers (``taddons`` / ``tflow``): its
hooks called as mitmproxy calls them, with a real writer process behind it.

mitmproxy lives in the recorder's environment only: here it is skipped when mitmproxy cannot be
imported; ``tests/proxy/test_addon_in_recorder_env.py`` runs this file there
(``$LOOPTAP_PROXY_PYTHON -m pytest``) from the normal suite."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip(
    "mitmproxy",
    reason="mitmproxy lives in the recorder's environment (test_addon_in_recorder_env.py "
    "runs this file there)",
)

from mitmproxy import http
from mitmproxy.addons.eventstore import EventStore
from mitmproxy.connection import Client
from mitmproxy.flow import Error
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons, tflow, tutils
from mitmproxy.websocket import WebSocketMessage
from wsproto.frame_protocol import Opcode

import looptap.proxy.addon as addon_module
from looptap.cassettes.replay.serving.faults import FaultSpecError
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange
from looptap.proxy import messages
from looptap.proxy.addon import LooptapRecorder
from looptap.proxy.capture import Tee
from looptap.proxy.durable import RECEIPT, WS_RECEIPTS, DurableGate
from looptap.proxy.faults import live_plan
from tests.support import progress

CHAT = b"/v1/chat/completions"
REQUEST = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
ANSWER = orjson.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hello"},
                "finish_reason": "stop",
            }
        ],
    }
)
SSE = [
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{"content":"hel"}}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


@pytest.fixture(autouse=True)
def _mitmproxy_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """As under mitmdump/mitmweb: the recorder's messages go to mitmproxy's log (the root logger),
    not to stderr (``looptap run`` alone installs that)."""
    monkeypatch.setattr(messages.LOG, "propagate", True)
    for h in [h for h in messages.LOG.handlers if type(h).__name__ == "_Stderr"]:
        monkeypatch.setattr(
            messages.LOG, "handlers", [x for x in messages.LOG.handlers if x is not h]
        )


def run(test: Callable[[], Awaitable[None]]) -> None:
    """mitmproxy's hooks run on its event loop: so do these tests (the addon reads the writer's
    answers there)."""
    asyncio.run(test())


def llm_flow(
    host: str = "api.openai.com",
    path: bytes = CHAT,
    body: bytes = REQUEST,
    headers: Any = None,
    resp: http.Response | None = None,
    mode: str = "regular",
) -> http.HTTPFlow:
    req = tutils.treq(
        host=host,
        port=443,
        scheme=b"https",
        method=b"POST",
        path=path,
        content=body,
        headers=headers
        or http.Headers(
            (
                (b"content-type", b"application/json"),
                (b"authorization", b"Bearer sk-test-KEYKEYKEYKEYKEYKEY"),
            )
        ),
    )
    client: Client = tflow.tclient_conn()
    client.proxy_mode = ProxyMode.parse(mode)
    return tflow.tflow(client_conn=client, req=req, resp=resp or False)


def json_response(body: bytes = ANSWER) -> http.Response:
    return tutils.tresp(
        headers=http.Headers(
            ((b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()))
        ),
        content=body,
    )


def sse_response() -> http.Response:
    """Response headers of a chunked SSE stream, as ``responseheaders`` sees them: no body yet."""
    resp = tutils.tresp(
        headers=http.Headers(
            ((b"content-type", b"text/event-stream"), (b"transfer-encoding", b"chunked"))
        ),
        content=None,
    )
    resp.timestamp_end = None
    return resp


class Recording:
    """A recorder in a mitmproxy test context, writing ``out``."""

    def __init__(self, tctx: taddons.context, rec: LooptapRecorder, out: Path) -> None:
        self.tctx, self.rec, self.out = tctx, rec, out

    async def flushed(self) -> LooptapRecorder:
        await asyncio.get_running_loop().run_in_executor(None, self.rec.handoff.flush, 30)
        return self.rec

    def exchanges(self) -> list[Exchange]:
        return read_records(self.out).exchanges


@contextmanager
def recording(tmp_path: Path, *extra: Any, **options: Any) -> Iterator[Recording]:
    rec = LooptapRecorder()
    out = tmp_path / "run.jsonl"
    with taddons.context(rec, *extra) as tctx:
        tctx.configure(rec, looptap_output=str(out), **options)
        try:
            yield Recording(tctx, rec, out)
        finally:
            rec.done()


def test_a_round_trip_to_an_llm_host_is_handed_off_and_recorded(tmp_path: Path) -> None:
    async def main() -> None:
        with recording(tmp_path) as r:
            f = llm_flow(resp=json_response())
            await r.tctx.cycle(r.rec, f)  # requestheaders … response, as mitmproxy calls them
            assert isinstance(f.response.stream, Tee)  # every response is streamed, through the tee
            rec = await r.flushed()
            assert (
                rec.handoff.recorded,
                rec.handoff.storage_errors,
                rec.handoff.failed_records,
            ) == (1, 0, 0)
            (ex,) = r.exchanges()
            assert (ex.method, ex.url, ex.status) == (
                "POST",
                "https://api.openai.com/v1/chat/completions",
                200,
            )
            assert ex.request_body == REQUEST and ex.response_body == ANSWER
            assert b"KEYKEYKEY" not in r.out.read_bytes()  # redacted by the writer
            await r.tctx.cycle(r.rec, f)  # the same flow again (a replayed hook): recorded once
            assert (await r.flushed()).handoff.recorded == 1

    run(main)


def test_other_hosts_pass_through_streamed_and_unrecorded(tmp_path: Path) -> None:
    """Forward-proxy mode records LLM API hosts and MCP servers only; a reverse listener records
    everything it forwards."""

    async def main() -> None:
        with recording(tmp_path) as r:
            other = llm_flow(
                host="example.com",
                path=b"/index.html",
                body=b"",
                resp=json_response(b"<html></html>"),
            )
            await r.tctx.cycle(r.rec, other)
            assert other.response.stream is True  # never buffered, never teed
            mcp = llm_flow(
                host="tools.example.com",
                path=b"/mcp",
                body=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
                resp=json_response(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'),
            )
            await r.tctx.cycle(r.rec, mcp)
            reverse = llm_flow(
                host="127.0.0.1",
                path=b"/v1/anything",
                mode="reverse:http://127.0.0.1:9@0",
                resp=json_response(),
            )
            await r.tctx.cycle(r.rec, reverse)
            assert (await r.flushed()).handoff.recorded == 2
            assert [ex.url for ex in r.exchanges()] == [
                "https://tools.example.com/mcp",
                "https://127.0.0.1/v1/anything",
            ]

    run(main)


def test_the_tools_http_is_recorded_marked_and_bounded(tmp_path: Path) -> None:
    """With ``looptap_tool_http`` (``looptap run``'s default) the other hosts are recorded too, as
    the tools' HTTP: marked ``tool``, a connection error kept, an answer over 1 MiB passed on
    whole and kept cut before its last quote, a request over 1 MiB streamed and kept cut; an
    excluded host, the recorder's own listener (reached through the proxy) and the agents' own
    calls seen on their runs (Gemini CLI's telemetry, opencode's plugin check, Codex's ChatGPT
    workspace discovery: ``providers.AGENT_OWN_HOSTS``) are not."""

    async def main() -> None:
        with recording(
            tmp_path,
            looptap_tool_http=True,
            looptap_tool_http_exclude=["*.internal.example", "127.0.0.1:9999"],
            mode=["regular@0", "reverse:https://api.openai.com@8123"],
        ) as r:
            ok = llm_flow(host="wx.example.com", path=b"/v1/now?city=Paris", body=b"", resp=json_response(b'{"t":15}'))  # noqa: E501
            await r.tctx.cycle(r.rec, ok)
            refused = llm_flow(host="wx.example.com", path=b"/v1/now?city=Oslo", body=b"")
            refused.error = Error("Connection refused")
            await r.tctx.cycle(r.rec, refused)
            big = b'{"items": [' + b", ".join(b'"x%06d"' % i for i in range(200_000)) + b"]}"
            headers = http.Headers(((b"content-type", b"application/json"), (b"content-length", str(len(big)).encode())))  # noqa: E501
            long = llm_flow(host="files.example.com", path=b"/big", body=b"", resp=tutils.tresp(headers=headers, content=None))  # noqa: E501
            r.rec.requestheaders(long)
            r.rec.responseheaders(long)
            tee = long.response.stream
            passed = b"".join(tee(big[i : i + 65536]) for i in range(0, len(big), 65536))
            assert passed == big  # the client gets every byte
            upload = llm_flow(host="files.example.com", path=b"/up", body=b"")
            upload.request.headers["content-length"] = str(3 << 20)
            r.rec.requestheaders(upload)
            assert upload.request.stream.limit == 1 << 20  # kept up to the tools' bound
            for host, port, path in (
                ("db.internal.example", 443, b"/v1/chat/completions"),
                ("127.0.0.1", 9999, b"/v1/chat/completions"),
                ("127.0.0.1", 8123, b"/v1/chat/completions"),
                ("play.googleapis.com", 443, b"/log?format=json&hasfast=true"),
                ("registry.npmjs.org", 443, b"/@opencode-ai%2fplugin"),
                ("chatgpt.com", 443, b"/backend-api/wham/accounts/check"),
            ):
                other = llm_flow(host=host, path=path, resp=json_response())
                other.request.port = port
                await r.tctx.cycle(r.rec, other)
                assert other.response.stream is True, (host, port, path)
            # a tool's call to npm and to Google's other paths is a tool's
            for host, path in (("registry.npmjs.org", b"/left-pad"), ("play.googleapis.com", b"/")):
                tool = llm_flow(host=host, path=path, body=b"", resp=json_response())
                await r.tctx.cycle(r.rec, tool)
            assert (await r.flushed()).handoff.recorded == 5
            first, second, third, *tools = r.exchanges()
            assert [ex.tool for ex in (first, second, third, *tools)] == [True] * 5
            assert first.status == 200 and first.response_body == b'{"t":15}'
            assert second.transport_error == "Connection refused" and second.status is None
            kept = third.response_body
            assert len(kept) <= 1 << 20 and big.startswith(kept) and kept.endswith(b", ")
            assert any(n.startswith(f"response body: {len(big):,} bytes went to the client") for n in third.notes)  # noqa: E501

    run(main)


def test_without_tool_http_other_hosts_stay_unrecorded(tmp_path: Path) -> None:
    async def main() -> None:
        with recording(tmp_path, looptap_tool_http=False) as r:
            f = llm_flow(host="wx.example.com", path=b"/v1/now", body=b"", resp=json_response())
            await r.tctx.cycle(r.rec, f)
            assert f.response.stream is True and (await r.flushed()).handoff.recorded == 0

    run(main)


def test_a_streamed_response_is_teed_unchanged_and_recorded_with_its_chunks(tmp_path: Path) -> None:
    async def main() -> None:
        with recording(tmp_path) as r:
            f = llm_flow(resp=sse_response())
            r.rec.responseheaders(f)
            tee = f.response.stream
            assert isinstance(tee, Tee)
            # HTTP/2 in mitmproxy 11 ends with two b""
            forwarded = [tee(c) for c in [*SSE, b"", b""]]
            assert forwarded == [*SSE, b"", b""]
            assert r.rec.handoff.recorded == 0 and f.response.raw_content is None
            f.response.timestamp_end = f.request.timestamp_start + 1.5
            r.rec.response(f)
            # the flow is whole again for mitmweb / -w
            assert f.response.raw_content == b"".join(SSE)
            assert (await r.flushed()).handoff.recorded == 1
            (ex,) = r.exchanges()
            assert [c for _, c in ex.response_chunks] == SSE and ex.duration == 1.5
            assert all(t is not None and t >= 0 for t, _ in ex.response_chunks)

    run(main)


def test_a_fixed_length_body_is_handed_over_before_its_last_byte_goes_on(tmp_path: Path) -> None:
    """The tee hands the round trip over when the announced length has arrived, before it
    returns that last chunk to mitmproxy to send: once the agent has it, the writer has it."""

    async def main() -> None:
        with recording(tmp_path) as r:
            headers = http.Headers(
                (
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(ANSWER)).encode()),
                )
            )
            f = llm_flow(resp=tutils.tresp(headers=headers, content=None))
            r.rec.responseheaders(f)
            tee = f.response.stream
            assert isinstance(tee, Tee)
            assert tee(ANSWER[:10]) == ANSWER[:10]
            assert (await r.flushed()).handoff.recorded == 0
            assert tee(ANSWER[10:]) == ANSWER[10:]  # the last byte: handed over first
            assert (await r.flushed()).handoff.recorded == 1
            r.rec.response(f)  # already handed over: not twice
            assert (await r.flushed()).handoff.recorded == 1
            assert r.exchanges()[0].response_body == ANSWER

    run(main)


def test_error_flows_are_recorded_with_their_transport_error(tmp_path: Path) -> None:
    """A stream cut by the client (the openai sync client after [DONE]) and a request the upstream
    never answered: both are kept, with what mitmproxy said."""

    async def main() -> None:
        with recording(tmp_path) as r:
            cut = llm_flow(resp=sse_response())
            r.rec.responseheaders(cut)
            for c in SSE:
                cut.response.stream(c)
            cut.error = Error("Client disconnected.")
            r.rec.error(cut)
            refused = llm_flow()
            refused.error = Error("Connection refused")
            await r.tctx.cycle(r.rec, refused)  # error hook only: no response
            assert (await r.flushed()).handoff.recorded == 2
            first, second = r.exchanges()
            assert (
                first.transport_error == "Client disconnected."
                and [c for _, c in first.response_chunks] == SSE
            )
            assert second.transport_error == "Connection refused" and second.status is None

    run(main)


def test_websocket_turns_are_handed_over_at_their_terminal_message(tmp_path: Path) -> None:
    """Responses over a WebSocket: the 101 starts a session, and the turn reaches the writer in
    ``websocket_message`` of its terminal event, before mitmproxy forwards that message."""
    create = orjson.dumps(
        {"type": "response.create", "model": "gpt-5", "input": [{"role": "user", "content": "Hi"}]}
    )
    done = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello"}],
            }
        ],
        "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
    }
    server = [
        orjson.dumps(
            {
                "type": "response.created",
                "response": {**done, "status": "in_progress", "output": []},
            }
        ),
        orjson.dumps({"type": "response.output_text.delta", "delta": "Hello"}),
        orjson.dumps({"type": "response.completed", "response": done}),
    ]

    async def main() -> None:
        with recording(tmp_path) as r:
            f = tflow.twebsocketflow(messages=False)
            f.request.host, f.request.scheme, f.request.port, f.request.path = (
                "api.openai.com",
                "https",
                443,
                "/v1/responses",
            )
            f.websocket.messages = []
            r.rec.response(f)  # the 101
            assert "looptap_ws" in f.metadata
            t = f.request.timestamp_start
            for i, (from_client, content) in enumerate(
                [(True, create), *((False, s) for s in server)]
            ):
                f.websocket.messages.append(
                    WebSocketMessage(Opcode.TEXT, from_client, content, t + 0.1 * (i + 1))
                )
                r.rec.websocket_message(f)
                recorded = (await r.flushed()).handoff.recorded
                assert recorded == (1 if i == len(server) else 0), f"after message {i}"
            r.rec.websocket_end(f)
            (ex,) = r.exchanges()
            assert (ex.method, ex.url, ex.status) == (
                "POST",
                "https://api.openai.com/v1/responses",
                200,
            )
            assert ex.request_body == create and len(ex.response_chunks) == 3

    run(main)


def test_durable_holds_the_websocket_message_that_completes_a_turn_until_the_turn_is_stored(
    tmp_path: Path,
) -> None:
    """``looptap_durable`` over a WebSocket: the terminal event's ``websocket_message`` leaves the
    turn's receipt on the flow, and DurableGate's hook (mitmproxy forwards the message only once it
    returns) returns once the turn is in the cassette; messages that complete nothing do not
    wait."""
    create = orjson.dumps(
        {"type": "response.create", "model": "gpt-5", "input": [{"role": "user", "content": "Hi"}]}
    )
    done = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": [],
        "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
    }
    server = [
        orjson.dumps({"type": "response.created", "response": {**done, "status": "in_progress"}}),
        orjson.dumps({"type": "response.completed", "response": done}),
    ]

    async def main() -> None:
        gate = DurableGate()
        with recording(tmp_path, gate, looptap_durable=True) as r:
            f = tflow.twebsocketflow(messages=False)
            f.request.host, f.request.scheme, f.request.port, f.request.path = (
                "api.openai.com",
                "https",
                443,
                "/v1/responses",
            )
            f.websocket.messages = []
            r.rec.response(f)
            t = f.request.timestamp_start
            for i, (from_client, content) in enumerate(
                [(True, create), *((False, m) for m in server)]
            ):
                f.websocket.messages.append(
                    WebSocketMessage(Opcode.TEXT, from_client, content, t + 0.1 * (i + 1))
                )
                r.rec.websocket_message(f)
                last = i == len(server)
                assert (WS_RECEIPTS in f.metadata) == last, f"message {i}"
                await asyncio.wait_for(gate.websocket_message(f), 30)
                assert WS_RECEIPTS not in f.metadata
                if last:  # the gate returned: the turn is on disk before the message goes on
                    (ex,) = r.exchanges()
                    assert ex.request_body == create and not ex.transport_error

    run(main)


def test_durable_holds_the_response_until_the_round_trip_is_stored(tmp_path: Path) -> None:
    """``looptap_durable``: a fixed-length body is not streamed (its last byte would leave before
    the write), and DurableGate's hook returns only once the writer has stored the round trip."""

    async def main() -> None:
        gate = DurableGate()
        with recording(tmp_path, gate, looptap_durable=True) as r:
            f = llm_flow(resp=json_response())
            r.rec.responseheaders(f)
            assert f.response.stream is False
            r.rec.response(f)
            assert RECEIPT in f.metadata
            await progress.wait_async(gate.response(f))
            assert RECEIPT not in f.metadata
            assert len(r.exchanges()) == 1  # in the cassette when the response goes on
            s = llm_flow(resp=sse_response())
            r.rec.responseheaders(s)
            for c in SSE:
                s.response.stream(c)  # a chunked stream still streams; its end waits
            r.rec.response(s)
            await progress.wait_async(gate.response(s))
            assert len(r.exchanges()) == 2
            other = llm_flow(host="example.com", resp=json_response())
            await r.tctx.cycle(r.rec, other)
            await progress.wait_async(gate.response(other))  # nothing to wait for

    run(main)


def test_a_capture_failure_is_counted_and_said_in_mitmproxys_event_log_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What mitmweb shows: its event store receives the recorder's error line, with the request's
    key (learned from the flow's headers) masked and the escape shown, not emitted."""
    key = "ltInproc" + secrets.token_hex(16)

    def broken(flow: http.HTTPFlow, *args: Any) -> Exchange:
        raise RuntimeError(
            f"simulated \x1b[2J failure for {flow.request.headers['x-goog-api-key']}"
        )

    async def main() -> None:
        store = EventStore()
        try:
            with recording(tmp_path) as r:
                monkeypatch.setattr(addon_module, "flow_to_exchange", broken)
                f = llm_flow(
                    headers=http.Headers(
                        ((b"content-type", b"application/json"), (b"x-goog-api-key", key.encode()))
                    ),
                    resp=json_response(),
                )
                await r.tctx.cycle(r.rec, f)
                assert f.response is not None and f.error is None  # the traffic flows on
                rec = await r.flushed()
                assert (rec.handoff.recorded, rec.handoff.failed_records) == (0, 1)
                assert "simulated" in rec.handoff.lost[0] and key[:12] not in rec.handoff.lost[0]
                for _ in range(5):
                    await asyncio.sleep(0.01)  # the event store is fed through the loop
                lines = [e for e in store.data if "NOT recorded" in e.msg]
                assert len(lines) == 1 and lines[0].level == "error", list(store.data)
                msg = lines[0].msg
                assert "could not capture POST https://api.openai.com/v1/chat/completions" in msg
                assert key[:12] not in msg and key[-12:] not in msg and "\x1b" not in msg
        finally:
            store.done()

    run(main)


def test_a_cassette_that_cannot_be_opened_is_an_options_error(tmp_path: Path) -> None:
    from mitmproxy import exceptions

    async def main() -> None:
        rec = LooptapRecorder()
        (tmp_path / "dir.jsonl").mkdir()
        with taddons.context(rec) as tctx:
            with pytest.raises(exceptions.OptionsError, match="looptap_output: "):
                tctx.configure(rec, looptap_output=str(tmp_path / "dir.jsonl"))
            assert not rec.handoff.running and rec.output is None
            f = llm_flow(resp=json_response())
            await tctx.cycle(rec, f)  # nothing to record into: passed through
            assert f.response.stream is True

    run(main)



def test_a_handshake_asked_for_a_client_certificate_passes_the_host_through(
    tmp_path: Path,
) -> None:
    """Issue 100, item 2: where the recorder's check decided nothing, an intercepted handshake
    (pyOpenSSL, as mitmproxy's TLS client shakes hands) whose server sent a ``CertificateRequest``
    (a Python ``ssl`` server with ``CERT_OPTIONAL``: the handshake completes, so nothing but the
    request tells it) passes that host through from the next connection on, said once on the
    record; a server that asks for none is left intercepted."""
    import socket
    import ssl
    import threading
    from types import SimpleNamespace

    from OpenSSL import SSL

    from looptap.proxy.trust import CLIENT_CERT, UpstreamTrust
    from tests.support.tls import private_ca

    ca = private_ca(tmp_path)
    notes: list[dict[str, Any]] = []
    trust = UpstreamTrust(note=notes.append)
    regular = SimpleNamespace(proxy_mode=ProxyMode.parse("regular"))

    def handshake(asks: bool) -> tuple[int, Any]:
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(ca["leaf"], ca["leaf-key"])
        if asks:
            server.verify_mode = ssl.CERT_OPTIONAL
            server.load_verify_locations(ca["ca"])
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with server.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        sock = socket.create_connection(("127.0.0.1", port))
        client = SSL.Connection(SSL.Context(SSL.TLS_CLIENT_METHOD), sock)
        trust._watch(client)
        client.set_connect_state()
        client.do_handshake()
        client.sendall(b"x")
        thread.join()
        listener.close()
        data = SimpleNamespace(
            conn=SimpleNamespace(address=("127.0.0.1", port), sni=None),
            ssl_conn=client,
            context=SimpleNamespace(client=regular),
        )
        trust.tls_established_server(data)
        return port, data

    plain, _ = handshake(asks=False)
    mtls, _ = handshake(asks=True)
    assert trust.client_cert == {("127.0.0.1", mtls)}
    assert notes == [
        {"type": "note", "note": "passed-through", "host": f"127.0.0.1:{mtls}", "why": CLIENT_CERT}
    ]

    def hello(port: int) -> bool:
        server = SimpleNamespace(address=("127.0.0.1", port))
        data = SimpleNamespace(
            context=SimpleNamespace(server=server, client=regular),
            ignore_connection=False,
            client_hello=SimpleNamespace(sni=None),
        )
        with taddons.context():
            asyncio.run(trust.tls_clienthello(data))
        return bool(data.ignore_connection)

    assert hello(mtls) is True
    trust.known[("127.0.0.1", plain, "")] = None  # (its check verified it)
    assert hello(plain) is False


def test_a_reply_reaches_the_agent_once_its_turns_tree_is_taken(tmp_path: Path) -> None:
    """The working tree's scan at a model request runs on a thread beside the request; the reply
    is held until it ends (an agent acting on the reply changes files at once: a scan still running
    then would take the next turn's change as this one's). A scan held back here, the agent
    writing the moment it has the reply: its write is in the next scan, not this turn's."""
    from looptap.cassettes.recording import Redactor
    from looptap.proxy.workspace import Workspace

    root = tmp_path / "work"
    root.mkdir()
    (root / "a.py").write_text("one\n")
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    ws.start()
    ws.read()
    gate, scan = threading.Event(), ws.scan
    ws.scan = lambda at=None, last=False: (gate.wait(), scan(at, last))[1]  # type: ignore[method-assign]
    (root / "a.py").write_text("two\n")  # this turn's tools

    async def main() -> None:
        flow = llm_flow(mode="reverse:https://api.openai.com")
        ws.requestheaders(flow)
        flow.response = json_response()
        reply = asyncio.ensure_future(ws.responseheaders(flow))

        async def agent() -> None:
            await reply
            (root / "b.py").write_text("next turn\n")

        acting = asyncio.ensure_future(agent())
        for _ in range(20):  # the agent would act here, had it the reply
            await asyncio.sleep(0)
        assert not acting.done()
        gate.set()
        await acting

    asyncio.run(main())
    ws.scan = scan  # type: ignore[method-assign]
    ws.scan(last=True)
    turns = [[c["path"] for c in r["changes"]] for r in recs if "changes" in r]
    assert turns == [["a.py"], ["b.py"]]


def test_live_faults_a_live_proxy_cannot_apply_are_refused_with_why() -> None:
    """``looptap run --fault``'s plan (proxy/faults.py ``live_plan``): a fault that only a replay
    can apply, or a selector known only from the answer, is refused saying so (the end-to-end
    ``looptap run`` of the same specs: test_live_faults.py, nightly since session 55)."""
    for spec, says in (
        ("turn=1:reset", "live, a request is selected by request=N"),
        ("request=1:stream_cut=2", "stream_cut works in looptap replay only"),
    ):
        with pytest.raises(FaultSpecError) as refused:
            live_plan([spec], seed=0)
        assert says in str(refused.value) and repr(spec) in str(refused.value), refused.value
    plan = live_plan(["request=2:context_length", "p=0.2:rate_limit", "*:overloaded=0*2"], seed=1)
    assert len(plan.faults) == 3
