"""cassettes.recording.websocket.WsSession: a WebSocket session read as round trips, message by
message."""

from __future__ import annotations

import orjson
import pytest

from looptap.cassettes.analysis import Severity, analyse
from looptap.cassettes.parsing import parse_all, parse_exchange
from looptap.cassettes.providers import is_llm_host
from looptap.cassettes.recording.websocket import WsSession
from tests.support.ws_upstream import events


def _turn(session: WsSession, req: dict, rid: str, t: float) -> list:
    out = session.message(True, orjson.dumps(req), t)
    for i, ev in enumerate(events(req, rid)):
        out += session.message(False, ev, t + 0.01 * (i + 1))
    return out


def test_each_turn_is_handed_over_at_its_terminal_event() -> None:
    s = WsSession(
        "wss://api.openai.com/v1/responses", [("authorization", "Bearer k")], [], started=0.0
    )
    req = {
        "type": "response.create",
        "model": "gpt-5",
        "input": [{"role": "user", "content": "Hi"}],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {}}],
    }
    first = s.message(True, orjson.dumps(req), 1.0)
    assert first == []
    evs = events(req, "resp_1")
    for ev in evs[:-1]:
        assert s.message(False, ev, 1.1) == []  # nothing before the terminal event
    done = s.message(False, evs[-1], 1.2)
    assert len(done) == 1
    ex = done[0]
    assert (ex.method, ex.url, ex.status) == ("POST", "https://api.openai.com/v1/responses", 200)
    assert ex.request_body == orjson.dumps(req) and len(ex.response_chunks) == len(evs)
    rt = parse_exchange(ex)
    assert rt.family == "openai_responses" and [c.name for c in rt.response.tool_calls] == [
        "get_weather"
    ]
    assert rt.response.complete and abs((ex.duration or 0) - 0.2) < 1e-9
    assert s.end(1000) == []


def test_a_turn_cut_by_the_connection_and_messages_outside_turns_are_kept() -> None:
    s = WsSession("wss://api.openai.com/v1/responses", [], [], started=0.0)
    assert s.message(False, b'{"type": "session.created"}', 0.1) == []  # before any turn
    req = {"type": "response.create", "model": "gpt-5", "input": "Hi"}
    s.message(True, orjson.dumps(req), 0.2)
    s.message(False, events(req, "resp_1")[0], 0.3)
    cut, outside = s.end(1006, "abnormal")
    assert (
        cut.transport_error
        and "closed (code 1006: abnormal) before this turn's terminal event" in cut.transport_error
    )
    rt = parse_exchange(cut)
    assert rt.transport_error and rt.response is not None and rt.response.complete is False
    assert outside.status == 101 and outside.response_body == b'< {"type": "session.created"}\n'


@pytest.mark.parametrize(
    ("cut_by", "code", "severity"),
    [
        ("agent", "C.abandoned_answer", Severity.WARNING),  # closed on an answer that was coming
        ("next turn", "C.abandoned_answer", Severity.INFO),  # an interruption (barge-in)
        ("upstream", "A.transport_error", Severity.ERROR),
    ],
)
def test_who_cut_a_websocket_turn_says_whose_finding_it_is(
    cut_by: str, code: str, severity: Severity
) -> None:
    """A turn the agent cut (it closed the connection, or sent its next turn first) is the
    client's doing, never an API failure; one the upstream cut is the API's."""
    s = WsSession("wss://api.openai.com/v1/responses", [], [], started=0.0)
    req = {"type": "response.create", "model": "gpt-5", "input": "Hi"}
    s.message(True, orjson.dumps(req), 0.2)
    s.message(False, events(req, "resp_1")[0], 0.3)
    if cut_by == "next turn":
        (cut,) = s.message(True, orjson.dumps({**req, "input": "Stop, I meant Lyon"}), 0.4)
    else:
        (cut,) = s.end(1000, None, by_client=cut_by == "agent")
    findings = analyse([cut], parse_all([cut])).findings
    assert [(f.code, f.severity) for f in findings if f.code in (code, "A.stream_truncated")] == [
        (code, severity)
    ] + ([("A.stream_truncated", Severity.ERROR)] if cut_by == "upstream" else []), findings


def test_an_error_message_is_the_turns_status() -> None:
    s = WsSession("wss://api.openai.com/v1/responses", [], [], started=0.0)
    req = {"type": "response.create", "model": "gpt-5", "input": "RATE LIMIT"}
    (ex,) = _turn(s, req, "resp_1", 1.0)
    assert ex.status == 429 and parse_exchange(ex).response.error.code == "rate_limit_exceeded"


def test_a_session_looptap_cannot_read_is_one_record_and_bounded(monkeypatch) -> None:
    s = WsSession("wss://api.openai.com/v1/audio/stream?model=x", [], [], started=0.0)
    assert not s.readable
    assert s.message(True, b'{"type": "session.update"}', 0.1) == []
    (rec,) = s.end(1000)
    assert rec.status == 101 and any("cannot read as turns" in n for n in rec.notes)
    monkeypatch.setitem(WsSession.message.__globals__, "MAX_PENDING_BYTES", 100)  # its module's
    s = WsSession("wss://api.openai.com/v1/audio/stream", [], [], started=0.0)
    out = []
    for i in range(10):
        out += s.message(False, b"x" * 30, float(i))
    assert len(out) >= 2 and all(len(r.response_body) <= 200 for r in out)  # handed over, not held


def test_chatgpt_codex_paths_are_recorded_and_nothing_else_there() -> None:
    assert is_llm_host("chatgpt.com", (), "/backend-api/codex/responses")
    assert not is_llm_host("chatgpt.com", (), "/backend-api/conversation")
    assert not is_llm_host("chatgpt.com")
    assert is_llm_host("api.openai.com", (), "/anything")


def test_the_hosts_of_every_api_looptap_reads_are_recorded_by_default() -> None:
    """Writer, Replicate, Aleph Alpha, watsonx and Cohere's old host: read since issue 27 item 9,
    so a forward proxy records them without --record-host."""
    for host in (
        "api.writer.com",
        "api.replicate.com",
        "api.aleph-alpha.com",
        "us-south.ml.cloud.ibm.com",
        "eu-de.ml.cloud.ibm.com",
        "api.cohere.ai",
    ):
        assert is_llm_host(host), host
    assert not is_llm_host("cloud.ibm.com")


def test_a_realtime_session_gathers_each_answers_request_and_drops_audio() -> None:
    """OpenAI Realtime: the client messages before each response.create make its request (an
    envelope), audio is stored by size and hash, and the turns thread by response id."""
    from looptap.cassettes.analysis import analyse
    from tests.support.ws_upstream import realtime_answer

    s = WsSession("wss://api.openai.com/v1/realtime?model=gpt-realtime", [], [], started=0.0)
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    out: list = []
    t = [0.0]

    def send(client: bool, m: dict) -> None:
        t[0] += 0.01
        out.extend(s.message(client, orjson.dumps(m), t[0]))

    send(False, {"type": "session.created", "session": {"id": "sess_1"}})
    send(
        True,
        {"type": "session.update", "session": {"instructions": "Use the tool.", "tools": tools}},
    )
    items = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Weather in Paris?"}],
        }
    ]
    send(True, {"type": "conversation.item.create", "item": items[0]})
    send(True, {"type": "input_audio_buffer.append", "audio": "UklGRiQAAABXQVZF"})
    send(True, {"type": "response.create"})
    for ev in realtime_answer(items, tools, "resp_1"):
        send(False, ev)
    items += [{"type": "function_call_output"}]
    send(
        True,
        {
            "type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": "call_resp_1", "output": "sunny"},
        },
    )
    send(True, {"type": "response.create"})
    for ev in realtime_answer(items, tools, "resp_2"):
        send(False, ev)
    out += s.end(1000)
    first, second, session = out
    assert (
        b"UklGRiQAAABXQVZF" not in first.request_body
        and b'"looptap_audio":{"bytes":12' in first.request_body
    )
    assert orjson.loads(second.request_body)["previous_response_id"] == "resp_1"
    assert session.status == 101 and b"session.created" in session.response_body
    rts = [parse_exchange(ex) for ex in (first, second)]
    assert [rt.family for rt in rts] == ["openai_realtime"] * 2
    assert [(c.name, c.arguments) for c in rts[0].response.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert (
        rts[1].response.text == "It is sunny in Paris."
        and rts[1].request.messages[0].parts[0].tool_result.content == "sunny"
    )
    for i, ex in enumerate(out):
        ex.seq = i
    run = analyse(out)
    assert [c.turns for c in run.conversations] == [[0, 1]] and not [
        f for f in run.findings if f.severity.value != "info"
    ]
