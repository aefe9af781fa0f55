"""Replay of Responses over a WebSocket: the replay server answers a WebSocket session from the
recorded turns (matched like HTTP requests, events sent one message each), fail-closed with the
API's error message; the openai SDK's ``beta.responses.connect()`` gets the recorded run back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes import net as wsframes
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import write
from tests.support.ws_upstream import WsResponsesUpstream

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
TOOLS: Any = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]


def agent(base_url: str, question: str = "Weather in Paris?") -> list[Any]:
    """A tool loop over one WebSocket: prewarm, a call, its result, the answer."""
    import openai

    out: list[Any] = []
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0)
    with client.beta.responses.connect() as conn:
        conn.response.create(
            model="gpt-5",
            generate=False,
            tools=TOOLS,
            instructions="Answer with the weather tool.",
            input=[],
        )
        prev = next(ev.response.id for ev in conn if ev.type == "response.completed")
        conn.response.create(
            model="gpt-5",
            previous_response_id=prev,
            tools=TOOLS,
            input=[{"role": "user", "content": question}],
        )
        for ev in conn:
            if ev.type == "error":
                out.append(("error", ev.error.code))
                return out
            if ev.type == "response.completed":
                prev, call = (
                    ev.response.id,
                    next(i for i in ev.response.output if i.type == "function_call"),
                )
                break
        out.append((call.name, call.arguments))
        conn.response.create(
            model="gpt-5",
            previous_response_id=prev,
            tools=TOOLS,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        )
        text = ""
        for ev in conn:
            if ev.type == "response.output_text.delta":
                text += ev.delta
            if ev.type == "response.completed":
                break
        out.append(text)
    return out


@pytest.fixture
def cassette(tmp_path: Path) -> tuple[Path, list[Any]]:
    pytest.importorskip("websockets")
    with WsResponsesUpstream() as up:
        live = agent(up.url)
    return write(tmp_path / "ws.jsonl", up.exchanges), live


def test_the_sdk_gets_the_recorded_session_back(cassette: tuple[Path, list[Any]]) -> None:
    path, live = cassette
    assert live == [("get_weather", '{"city":"Paris"}'), "It is sunny in Paris."]
    with ReplayServer(path) as srv:
        assert agent(srv.url) == live
        assert srv.misses == [] and srv.unplayed() == []
        assert [ex.status for ex in srv.served] == [200, 200, 200]
        assert all("websocket replay" in ex.notes for ex in srv.served)
    from looptap.cassettes.analysis import analyse

    run = analyse(list(srv.served))  # the served session reads like the recorded one
    assert [c.turns for c in run.conversations] == [[1, 2]]


def test_a_turn_the_cassette_lacks_gets_the_apis_error_message(
    cassette: tuple[Path, list[Any]],
) -> None:
    path, _ = cassette
    with ReplayServer(path) as srv:
        assert agent(srv.url, question="Weather in Rome?") == [("error", "looptap_replay_miss")]
        assert len(srv.misses) == 1 and "input[0].content" in "\n".join(srv.misses[0].lines())
    from looptap.cassettes.analysis import analyse

    # The served session reads the miss as the client's divergence, never as the API's error.
    findings = analyse(list(srv.served)).findings
    assert [(f.code, f.layer) for f in findings] == [("C.diverged_from_recording", "C")], findings
    assert findings[0].path is not None and findings[0].path.startswith("input[0]"), findings[0]


def test_framing(tmp_path: Path) -> None:
    """Fragmented and masked client frames, ping, close; bad framing closes with 1002."""

    async def run() -> None:
        reader = asyncio.StreamReader()
        def masked(op: int, payload: bytes, fin: bool = True) -> bytes:
            mask = b"\x01\x02\x03\x04"
            body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            n = len(payload)
            head = bytes([(0x80 if fin else 0) | op]) + (
                bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
            )
            return head + mask + body

        reader.feed_data(
            masked(wsframes.TEXT, b"hel", fin=False)
            + masked(wsframes.PING, b"p")
            + masked(0, b"lo" * 100)
        )
        reader.feed_data(masked(wsframes.CLOSE, b"\x03\xe8"))
        incoming = wsframes.MessageReader(reader)
        assert await incoming.next() == (wsframes.PING, b"p")  # between the fragments of a message
        assert await incoming.next() == (wsframes.TEXT, b"hel" + b"lo" * 100)
        assert await incoming.next() == (wsframes.CLOSE, b"\x03\xe8")
        bad = asyncio.StreamReader()
        bad.feed_data(b"\x81\x03abc")  # unmasked
        with pytest.raises(wsframes.WsProtocolError, match="unmasked"):
            await wsframes.MessageReader(bad).next()

    asyncio.run(run())
    # RFC 6455's example
    assert wsframes.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def _turns(base_url: str) -> list[tuple[str, Any]]:
    """The same session, recording what each turn ended with (terminal event type and detail)."""
    import openai

    out: list[tuple[str, Any]] = []
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0)
    with client.beta.responses.connect() as conn:
        conn.response.create(
            model="gpt-5",
            generate=False,
            tools=TOOLS,
            instructions="Answer with the weather tool.",
            input=[],
        )
        prev = next(ev.response.id for ev in conn if ev.type == "response.completed")
        conn.response.create(
            model="gpt-5",
            previous_response_id=prev,
            tools=TOOLS,
            input=[{"role": "user", "content": "Weather in Paris?"}],
        )
        for ev in conn:
            if ev.type == "error":
                out.append(("error", ev.error.code))
                break
            if ev.type in ("response.completed", "response.incomplete"):
                r = ev.response
                out.append(
                    (
                        ev.type,
                        (
                            r.incomplete_details.reason if r.incomplete_details else None,
                            [(i.name, i.arguments) for i in r.output if i.type == "function_call"],
                        ),
                    )
                )
                break
    return out


@pytest.mark.parametrize(
    ("fault", "want"),
    [
        ("request=2:rate_limit", [("error", "rate_limit_exceeded")]),
        (
            "request=2:truncate",
            [("response.incomplete", ("max_output_tokens", [("get_weather", '{"city":')]))],
        ),
        (
            "request=2:unoffered_tool",
            [("response.completed", (None, [("get_weather_v2", '{"city":"Paris"}')]))],
        ),
    ],
)
def test_faults_over_a_websocket(
    cassette: tuple[Path, list[Any]], fault: str, want: list[Any]
) -> None:
    """``looptap replay --fault`` on a WebSocket session: a status fault is the API's error message
    with that status, a rewriting fault the rewritten answer's events; the served turn is
    labelled."""
    from looptap.cassettes.analysis import analyse
    from looptap.cassettes.replay.serving.faults import FaultPlan, parse_fault

    path, _ = cassette
    plan = FaultPlan([parse_fault(fault)])
    with ReplayServer(path, faults=plan) as srv:
        assert _turns(srv.url) == want
        served = list(srv.served)
    assert plan.fired and served[1].response_header("x-looptap-fault")
    codes = {f.code: f for f in analyse(served).findings}
    expected = {
        "rate_limit": "A.rate_limited",
        "truncate": "A.truncated_length",
        "unoffered_tool": "E.tool_not_offered",
    }[fault.split(":")[1]]
    assert codes[expected].message.startswith("[injected by looptap: ")


def test_a_stream_cut_over_a_websocket_closes_the_connection_mid_turn(
    cassette: tuple[Path, list[Any]],
) -> None:
    from looptap.cassettes.analysis import analyse
    from looptap.cassettes.replay.serving.faults import FaultPlan, parse_fault

    path, _ = cassette
    plan = FaultPlan([parse_fault("request=2:stream_cut=2")])
    with ReplayServer(path, faults=plan) as srv:
        with pytest.raises(Exception) as info:  # the SDK's connection error: the turn never ended
            _turns(srv.url)
        served = list(srv.served)
    assert "closed" in repr(info.value).lower() or "connection" in repr(info.value).lower(), repr(
        info.value
    )
    assert served[1].transport_error == "looptap fault: stream cut after 2 messages"
    codes = {f.code for f in analyse(served).findings}
    assert {"A.stream_truncated", "A.transport_error"} <= codes, codes
