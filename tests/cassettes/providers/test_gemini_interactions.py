"""Gemini's Interactions API (``/v1beta/interactions``, ``/v1/interactions``) read as LLM calls
(issue 45, "LLM calls left unread"): finish, usage, tool calls and errors, JSON and streamed.

The recordings are made here: the google-genai SDK (3.x, its ``client.interactions``) talks to a
loopback fake that answers in the API's shapes, each body validated as the SDK's own types
(``Interaction``, ``InteractionSSEEvent``) before it is sent; the exchange the fake saw and sent
is then read by looptap and compared with what the SDK itself read."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import orjson
import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.wire import Exchange

genai = pytest.importorskip("google.genai")
from google.genai import interactions as gi  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

MODEL = "gemini-3-flash-preview"
UPSTREAM = "https://generativelanguage.googleapis.com"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
_EVENT = TypeAdapter(gi.InteractionSSEEvent)


def _interaction(
    iid: str, status: str, steps: list[dict[str, Any]], usage: dict[str, int], **extra: Any
) -> dict[str, Any]:
    body = {
        "id": iid,
        "object": "interaction",
        "model": MODEL,
        "status": status,
        "created": "2026-11-25T06:00:00Z",
        "updated": "2026-11-25T06:00:01Z",
        "steps": steps,
        "usage": usage,
        **extra,
    }
    sdk = gi.Interaction.model_validate(body)  # the SDK's own type, strictly
    assert sdk.status == status and not any(
        type(s).__name__.startswith("Unknown") for s in sdk.steps or []
    )
    return body


def _usage(inp: int, out: int, thought: int = 0) -> dict[str, int]:
    u = {"total_input_tokens": inp, "total_output_tokens": out, "total_tokens": inp + out + thought}
    return {**u, "total_thought_tokens": thought} if thought else u


def _sse(*events: dict[str, Any]) -> bytes:
    out = b""
    for e in events:
        _EVENT.validate_python(e)
        out += b"event: " + e["event_type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
    return out


class _Fake(BaseHTTPRequestHandler):
    """Answers each request with the next scripted (status, content type, body); keeps what it saw
    and sent."""

    script: ClassVar[list[tuple[int, str, bytes]]] = []
    seen: ClassVar[list[Exchange]] = []

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        status, ctype, out = self.script.pop(0)
        headers = [
            (k.lower(), v)
            for k, v in self.headers.items()
            if k.lower() not in ("x-goog-api-key", "host")
        ]
        # kept before answering: the client may go on as soon as it has read the answer
        self.seen.append(
            Exchange(
                self.command,
                UPSTREAM + self.path,
                headers,
                body,
                status=status,
                response_headers=[("content-type", ctype)],
                response_chunks=[(0.05, out)],
                seq=len(self.seen),
            )
        )
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[tuple[Any, type[_Fake]]]:
    handler = type("Fake", (_Fake,), {"script": [], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = genai.Client(
        api_key="test-key",
        http_options={"base_url": f"http://127.0.0.1:{server.server_address[1]}"},
    )
    try:
        yield client, handler
    finally:
        server.shutdown()
        server.server_close()


def _json(body: dict[str, Any], status: int = 200) -> tuple[int, str, bytes]:
    return status, "application/json", orjson.dumps(body)


def _rt(ex: Exchange) -> RoundTrip:
    rt = parse_exchange(ex)
    assert rt.analysis_errors == [], rt.analysis_errors
    return rt


CALL = {
    "type": "function_call",
    "id": "fc_1",
    "name": "get_weather",
    "arguments": {"city": "Paris"},
}
THOUGHT = {
    "type": "thought",
    "signature": "c2lnLTE=",
    "summary": [{"type": "text", "text": "Need the weather tool."}],
}


def _loop(client: Any, handler: type[_Fake]) -> tuple[Any, Any, Any]:
    """A tool loop chained by ``previous_interaction_id``, then a follow-up question."""
    handler.script += [
        _json(_interaction("v1_a1", "requires_action", [THOUGHT, CALL], _usage(41, 12, 20))),
        _json(
            _interaction(
                "v1_a2",
                "completed",
                [
                    {
                        "type": "model_output",
                        "content": [{"type": "text", "text": "Sunny, 21°C in Paris."}],
                    }
                ],
                _usage(80, 9),
                previous_interaction_id="v1_a1",
            )
        ),
        _json(
            _interaction(
                "v1_a3",
                "completed",
                [{"type": "model_output", "content": [{"type": "text", "text": "Rome: cloudy."}]}],
                _usage(95, 5),
                previous_interaction_id="v1_a2",
            )
        ),
    ]
    first = client.interactions.create(
        model=MODEL, input="Weather in Paris?", tools=[WEATHER], system_instruction="Be brief."
    )
    call = next(s for s in first.steps if s.type == "function_call")
    second = client.interactions.create(
        model=MODEL,
        previous_interaction_id=first.id,
        tools=[WEATHER],
        input=[
            {
                "type": "function_result",
                "call_id": call.id,
                "name": call.name,
                "result": "sunny, 21C",
            }
        ],
    )
    third = client.interactions.create(
        model=MODEL, previous_interaction_id=second.id, tools=[WEATHER], input="And in Rome?"
    )
    return first, second, third


def test_a_chained_tool_loop_is_read_and_stays_clean(fake: tuple[Any, type[_Fake]]) -> None:
    client, handler = fake
    first, second, third = _loop(client, handler)
    rts = [_rt(ex) for ex in handler.seen]
    assert [(r.family, r.operation, r.stream) for r in rts] == [
        ("gemini_interactions", "generate", False)
    ] * 3
    r1, r2, r3 = rts
    assert (
        r1.request is not None
        and r1.request.model == MODEL
        and [t.name for t in r1.request.tools] == ["get_weather"]
    )
    assert (
        r1.request.system[0].text == "Be brief."
        and r1.request.messages[0].parts[0].text == "Weather in Paris?"
    )
    assert (
        r1.response is not None
        and r1.response.finish_reason is FinishReason.TOOL_CALL
        and r1.response.complete is True
    )
    calls = [p.tool_call for p in r1.response.parts if p.tool_call is not None]
    sdk_call = first.steps[1]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        (sdk_call.id, sdk_call.name, sdk_call.arguments)
    ]
    assert [p.kind for p in r1.response.parts] == ["reasoning", "tool_call"]
    u = r1.response.usage
    assert u is not None and (
        u.input_tokens,
        u.output_tokens,
        u.reasoning_tokens,
        u.total_tokens,
    ) == (41, 32, 20, 73)
    assert r2.request is not None and r2.request.previous_response_id == "v1_a1"
    assert (
        r2.request.messages[0].role == "tool"
        and r2.request.messages[0].parts[0].tool_result is not None
    )
    assert (
        r2.response is not None
        and r2.response.text == second.output_text == "Sunny, 21°C in Paris."
    )
    assert r2.response.finish_reason is FinishReason.COMPLETE and r2.response.id == "v1_a2"
    assert r3.response is not None and r3.response.text == third.output_text
    run = analyse(handler.seen)
    assert [len(c.turns) for c in run.conversations] == [3]
    assert not [f for f in run.findings if f.severity.value in ("warning", "error")], [
        (f.code, f.message) for f in run.findings
    ]


def test_a_stateless_history_of_steps_is_threaded_and_clean(fake: tuple[Any, type[_Fake]]) -> None:
    """Without ``previous_interaction_id`` the client sends the whole history as steps."""
    client, handler = fake
    handler.script += [
        _json(_interaction("v1_b1", "requires_action", [CALL], _usage(30, 8))),
        _json(
            _interaction(
                "v1_b2",
                "completed",
                [{"type": "model_output", "content": [{"type": "text", "text": "Sunny."}]}],
                _usage(50, 3),
            )
        ),
    ]
    user = {"type": "user_input", "content": [{"type": "text", "text": "Weather in Paris?"}]}
    first = client.interactions.create(model=MODEL, input=[user], tools=[WEATHER], store=False)
    history = [
        user,
        first.steps[0].model_dump(exclude_none=True),
        {"type": "function_result", "call_id": "fc_1", "name": "get_weather", "result": "sunny"},
    ]
    client.interactions.create(model=MODEL, input=history, tools=[WEATHER], store=False)
    r2 = _rt(handler.seen[1])
    assert r2.request is not None and [m.role for m in r2.request.messages] == [
        "user",
        "assistant",
        "tool",
    ]
    run = analyse(handler.seen)
    assert [len(c.turns) for c in run.conversations] == [2]
    assert not [f for f in run.findings if f.severity.value in ("warning", "error")], [
        (f.code, f.message) for f in run.findings
    ]


def test_a_stream_is_read_and_a_cut_one_is_not_complete(fake: tuple[Any, type[_Fake]]) -> None:
    client, handler = fake
    events = [
        {
            "event_type": "interaction.created",
            "event_id": "e0",
            "interaction": {
                "id": "v1_s1",
                "status": "in_progress",
                "model": MODEL,
                "object": "interaction",
            },
        },
        {"event_type": "step.start", "index": 0, "step": {"type": "thought"}},
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "thought_summary", "content": {"type": "text", "text": "Plan."}},
        },
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "thought_signature", "signature": "c2ln"},
        },
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1, "step": {"type": "model_output", "content": []}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "text", "text": "Hello"}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "text", "text": " there."}},
        {"event_type": "step.stop", "index": 1},
        {
            "event_type": "interaction.status_update",
            "interaction_id": "v1_s1",
            "status": "completed",
        },
        {
            "event_type": "interaction.completed",
            "interaction": {"id": "v1_s1", "status": "completed", "usage": _usage(7, 3, 5)},
        },
    ]
    handler.script += [
        (200, "text/event-stream", _sse(*events)),
        (200, "text/event-stream", _sse(*events[:7])),
    ]
    got = [e for e in client.interactions.create(model=MODEL, input="Hi", stream=True)]
    sdk_text = "".join(
        e.delta.text for e in got if e.event_type == "step.delta" and e.delta.type == "text"
    )
    list(client.interactions.create(model=MODEL, input="Hi", stream=True))
    whole, cut = (_rt(ex) for ex in handler.seen)
    assert (whole.family, whole.operation, whole.stream) == (
        "gemini_interactions",
        "generate",
        True,
    )
    assert (
        whole.response is not None
        and whole.response.text == sdk_text == "Hello there."
        and whole.response.model == MODEL
    )
    assert [p.kind for p in whole.response.parts] == ["reasoning", "text"] and whole.response.parts[
        0
    ].text == "Plan."
    assert (
        whole.response.finish_reason is FinishReason.COMPLETE
        and whole.response.complete is True
        and whole.response.id == "v1_s1"
    )
    u = whole.response.usage
    assert u is not None and (u.input_tokens, u.output_tokens) == (7, 8)
    assert (
        cut.response is not None and cut.response.complete is False and cut.response.text == "Hello"
    )
    assert cut.response.finish_reason is None


def test_a_streamed_function_call_and_a_stream_error(fake: tuple[Any, type[_Fake]]) -> None:
    client, handler = fake
    call = [
        {
            "event_type": "interaction.created",
            "interaction": {"id": "v1_s2", "status": "in_progress", "model": MODEL},
        },
        {
            "event_type": "step.start",
            "index": 0,
            "step": {"type": "function_call", "id": "fc_9", "name": "get_weather", "arguments": {}},
        },
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "arguments_delta", "arguments": '{"city": '},
        },
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "arguments_delta", "arguments": '"Oslo"}'},
        },
        {"event_type": "step.stop", "index": 0},
        {
            "event_type": "interaction.completed",
            "interaction": {"id": "v1_s2", "status": "requires_action", "usage": _usage(20, 6)},
        },
    ]
    failed = [
        {
            "event_type": "interaction.created",
            "interaction": {"id": "v1_s3", "status": "in_progress", "model": MODEL},
        },
        {
            "event_type": "error",
            "error": {"code": "resource_exhausted", "message": "Quota exceeded"},
        },
    ]
    handler.script += [
        (200, "text/event-stream", _sse(*call)),
        (200, "text/event-stream", _sse(*failed)),
    ]
    list(client.interactions.create(model=MODEL, input="Oslo?", tools=[WEATHER], stream=True))
    sdk_errors = [
        e
        for e in client.interactions.create(model=MODEL, input="Oslo?", stream=True)
        if e.event_type == "error"
    ]
    r1, r2 = (_rt(ex) for ex in handler.seen)
    assert (
        r1.response is not None
        and r1.response.finish_reason is FinishReason.TOOL_CALL
        and r1.response.complete is True
    )
    (c,) = [p.tool_call for p in r1.response.parts if p.tool_call is not None]
    assert (c.id, c.name, c.arguments) == ("fc_9", "get_weather", {"city": "Oslo"})
    assert r2.response is not None and r2.response.error is not None and r2.response.error.in_stream
    assert r2.response.error.message == sdk_errors[0].error.message == "Quota exceeded"
    assert r2.response.finish_reason is FinishReason.ERROR and r2.response.complete is True


def test_incomplete_failed_and_http_errors(fake: tuple[Any, type[_Fake]]) -> None:
    client, handler = fake
    cut_text = {
        "type": "model_output",
        "content": [{"type": "text", "text": "The history of Rome begins with"}],
    }
    handler.script += [
        _json(_interaction("v1_c1", "incomplete", [cut_text], _usage(12, 64))),
        _json(
            _interaction(
                "v1_c2",
                "failed",
                [],
                _usage(12, 0),
                errors=[{"code": "internal", "message": "Model overloaded"}],
            )
        ),
        _json({"error": {"code": "invalid_argument", "message": "Unknown model"}}, 400),
    ]
    incomplete = client.interactions.create(
        model=MODEL, input="Tell me about Rome", generation_config={"max_output_tokens": 64}
    )
    client.interactions.create(model=MODEL, input="Tell me about Rome")
    with pytest.raises(Exception, match="Unknown model"):
        client.interactions.create(model="nope", input="x")
    r1, r2, r3 = (_rt(ex) for ex in handler.seen)
    assert r1.response is not None and r1.response.text == incomplete.output_text
    assert (
        r1.response.finish_reason is FinishReason.TRUNCATED_LENGTH
        and r1.response.finish_reason_raw == "incomplete"
    )
    assert r1.request is not None and r1.request.params["generation_config"] == {
        "max_output_tokens": 64
    }
    assert r2.response is not None and r2.response.finish_reason is FinishReason.ERROR
    assert r2.response.error is not None and r2.response.error.message == "Model overloaded"
    assert (
        r3.family == "gemini_interactions"
        and r3.response is not None
        and r3.response.error is not None
    )
    assert (r3.response.error.status, r3.response.error.message) == (400, "Unknown model")
    run = analyse(handler.seen[:1])
    assert "A.truncated_length" in [f.code for f in run.findings], [f.code for f in run.findings]


def test_a_retrieve_is_read(fake: tuple[Any, type[_Fake]]) -> None:
    client, handler = fake
    handler.script += [
        _json(
            _interaction(
                "v1_r1",
                "completed",
                [{"type": "model_output", "content": [{"type": "text", "text": "Done."}]}],
                _usage(5, 1),
            )
        )
    ]
    got = client.interactions.get("v1_r1")
    (rt,) = (_rt(ex) for ex in handler.seen)
    assert (rt.family, rt.operation) == ("gemini_interactions", "retrieve")
    assert (
        rt.response is not None
        and rt.response.text == got.output_text == "Done."
        and rt.response.complete is True
    )


def test_the_first_version_outputs_and_content_events_are_read() -> None:
    """The API's first shape (google-genai 1.x ``_interactions/types``): ``outputs`` instead of
    steps, ``interaction.start`` / ``content.*`` / ``interaction.complete`` events, ``/v1beta``. The
    SDK installed here speaks only steps: these bodies were checked once to validate as google-genai
    1.70.0's ``Interaction`` and ``InteractionSSEEvent`` (pydantic, outside this suite)."""
    url = UPSTREAM + "/v1beta/interactions"
    body = {
        "id": "v1_o1",
        "model": MODEL,
        "status": "requires_action",
        "created": "2025-12-11T00:00:00Z",
        "updated": "2025-12-11T00:00:01Z",
        "outputs": [
            {"type": "thought", "signature": "c2ln"},
            {
                "type": "function_call",
                "id": "c1",
                "name": "get_weather",
                "arguments": {"city": "Nice"},
            },
        ],
        "usage": {"total_input_tokens": 9, "total_output_tokens": 4, "total_tokens": 13},
    }
    ex = Exchange(
        "POST",
        url,
        [("content-type", "application/json")],
        orjson.dumps({"model": MODEL, "input": "Nice?"}),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.1, orjson.dumps(body))],
    )
    rt = _rt(ex)
    assert rt.response is not None and rt.response.finish_reason is FinishReason.TOOL_CALL
    assert [
        (p.tool_call.name, p.tool_call.arguments) for p in rt.response.parts if p.tool_call
    ] == [("get_weather", {"city": "Nice"})]
    TIMES = {"created": "2025-12-11T00:00:00Z", "updated": "2025-12-11T00:00:02Z"}
    events = [
        {
            "event_type": "interaction.start",
            "interaction": {"id": "v1_o2", "model": MODEL, "status": "in_progress", **TIMES},
        },
        {"event_type": "content.start", "index": 0, "content": {"type": "text", "text": ""}},
        {"event_type": "content.delta", "index": 0, "delta": {"type": "text", "text": "Bon"}},
        {"event_type": "content.delta", "index": 0, "delta": {"type": "text", "text": "jour"}},
        {"event_type": "content.stop", "index": 0},
        {
            "event_type": "interaction.complete",
            "interaction": {
                "id": "v1_o2",
                "status": "completed",
                **TIMES,
                "usage": {"total_input_tokens": 3, "total_output_tokens": 2},
            },
        },
    ]
    chunks = b"".join(
        b"event: " + e["event_type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
        for e in events
    )
    sx = Exchange(
        "POST",
        url,
        [("content-type", "application/json")],
        orjson.dumps({"model": MODEL, "input": "Hi", "stream": True}),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=[(0.1, chunks)],
    )
    srt = _rt(sx)
    assert (
        srt.response is not None
        and srt.response.text == "Bonjour"
        and srt.response.complete is True
    )
    assert (
        srt.response.finish_reason is FinishReason.COMPLETE
        and srt.response.usage is not None
        and srt.response.usage.output_tokens == 2
    )


def test_a_loopback_gateway_is_read_by_its_body_and_other_paths_are_not_taken(
    fake: tuple[Any, type[_Fake]],
) -> None:
    client, handler = fake
    handler.script += [
        _json(
            _interaction(
                "v1_g1",
                "completed",
                [{"type": "model_output", "content": [{"type": "text", "text": "ok"}]}],
                _usage(1, 1),
            )
        )
    ]
    client.interactions.create(model=MODEL, input="ping")
    (ex,) = handler.seen
    local = Exchange(
        ex.method,
        ex.url.replace(UPSTREAM, "http://127.0.0.1:8080"),
        ex.request_headers,
        ex.request_body,
        status=200,
        response_headers=ex.response_headers,
        response_chunks=ex.response_chunks,
    )
    assert _rt(local).family == "gemini_interactions"
    other = Exchange(
        "POST",
        "http://127.0.0.1:8080/api/interactions",
        [("content-type", "application/json")],
        b'{"input": "x", "model": "m"}',
    )
    assert parse_exchange(other).family != "gemini_interactions"
    crm = Exchange("GET", "https://crm.example.com/v1/contacts/interactions/42", [], b"")
    assert parse_exchange(crm).family != "gemini_interactions"


def test_a_chained_request_made_self_contained_carries_the_stored_steps(
    fake: tuple[Any, type[_Fake]],
) -> None:
    """What a fork sends when the live upstream never stored the interaction a request continues."""
    from looptap.cassettes.providers import by_family

    client, handler = fake
    _loop(client, handler)
    adapter = by_family("gemini_interactions")
    chaining = adapter.chaining() if adapter is not None else None
    assert chaining is not None
    first_req, second_req = (orjson.loads(ex.request_body) for ex in handler.seen[:2])
    first_answer = orjson.loads(handler.seen[0].response_chunks[0][1])
    prev, rid, items = chaining.thread(first_req, first_answer)
    assert (prev, rid) == (None, "v1_a1") and [i["type"] for i in items] == [
        "user_input",
        "thought",
        "function_call",
    ]
    assert chaining.thread(second_req, None)[0] == "v1_a1"
    alone = chaining.standalone(second_req, items)
    assert "previous_interaction_id" not in alone
    rt = parse_exchange(
        Exchange(
            "POST",
            UPSTREAM + "/v1/interactions",
            [("content-type", "application/json")],
            orjson.dumps(alone),
        )
    )
    assert rt.request is not None and [m.role for m in rt.request.messages] == [
        "user",
        "assistant",
        "tool",
    ]
