"""APIs their vendors have shut down are not read (docs/coverage.md, "APIs shut down"); a user's
old recording of one reads as traffic of an API looptap does not know: each round trip listed with
the generic label, no turn, no finding, no traceback.

OpenAI shut the Assistants API down on 2026-08-26 ("The Assistants API was officially sunset on
August 26, 2026, and is no longer available": developers.openai.com/api/docs/assistants/migration).
The recording here is the real ``openai`` SDK's own traffic (``client.beta``: ``assistants.create``,
``threads.messages.create``, ``threads.create_and_run`` streamed, ``threads.runs.create``,
``runs.retrieve`` polled to ``requires_action``, ``runs.submit_tool_outputs``, ``messages.list``),
its requests taken as the SDK sent them through an ``httpx.MockTransport`` (the same bytes from
openai 2.54.0 and 3.57.0), its answers validated as the SDK's own ``Assistant``, ``Run``,
``AssistantStreamEvent`` and ``Message`` types.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.analysed import cli_output
from test_more_families import sse

from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

USAGE = {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}
CALLS = [
    {
        "id": "call_w1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
]


def _run(status: str, **extra: Any) -> dict[str, Any]:
    from openai.types.beta.threads import Run

    run = {
        "id": "run_abc",
        "object": "thread.run",
        "created_at": 1736935200,
        "assistant_id": "asst_1",
        "thread_id": "thread_1",
        "status": status,
        "started_at": None,
        "expires_at": None,
        "cancelled_at": None,
        "failed_at": None,
        "completed_at": None,
        "required_action": None,
        "last_error": None,
        "model": "gpt-4o",
        "instructions": "Be brief.",
        "tools": [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object"}},
            }
        ],
        "metadata": {},
        "incomplete_details": None,
        "usage": None,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_prompt_tokens": None,
        "max_completion_tokens": None,
        "truncation_strategy": {"type": "auto", "last_messages": None},
        "response_format": "auto",
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        **extra,
    }
    Run.model_validate(run)
    return run


def _stream() -> bytes:
    """A streamed run: created, a message delta, completed; each event the SDK's own type."""
    from openai.types.beta import AssistantStreamEvent
    from pydantic import TypeAdapter

    delta = {
        "id": "msg_1",
        "object": "thread.message.delta",
        "delta": {
            "content": [{"index": 0, "type": "text", "text": {"value": "Hi!", "annotations": []}}]
        },
    }
    adapter: TypeAdapter[Any] = TypeAdapter(AssistantStreamEvent)
    out = []
    for name, data in (
        ("thread.run.created", _run("queued")),
        ("thread.message.delta", delta),
        ("thread.run.completed", _run("completed", usage=USAGE)),
    ):
        adapter.validate_python({"event": name, "data": data})
        out += sse(data, event=name)
    return b"".join(out) + b"event: done\ndata: [DONE]\n\n"


def _messages() -> dict[str, Any]:
    from openai.types.beta.threads import Message

    msg = {
        "id": "msg_2",
        "object": "thread.message",
        "created_at": 1736935210,
        "thread_id": "thread_1",
        "role": "assistant",
        "assistant_id": "asst_1",
        "run_id": "run_abc",
        "content": [{"type": "text", "text": {"value": "18 °C in Paris.", "annotations": []}}],
        "attachments": [],
        "metadata": {},
        "status": "completed",
        "completed_at": 1736935210,
        "incomplete_at": None,
        "incomplete_details": None,
    }
    Message.model_validate(msg)
    return {"object": "list", "data": [msg], "first_id": "msg_2", "last_id": "msg_2"}


def _assistant() -> dict[str, Any]:
    from openai.types.beta import Assistant

    assistant = {
        "id": "asst_1",
        "object": "assistant",
        "created_at": 1736935100,
        "name": None,
        "description": None,
        "model": "gpt-4o",
        "instructions": "Be brief.",
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        "metadata": {},
    }
    Assistant.model_validate(assistant)
    return assistant


def _answer(request: Any) -> Any:
    """The Assistants API's answer to each call the SDK makes below."""
    path, post = request.url.path, request.method == "POST"
    if post and path.endswith("/runs") and json.loads(request.content).get("stream"):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_stream())
    if post and path.endswith("/runs"):
        return httpx.Response(200, json=_run("queued"))
    if path.endswith("/runs/run_abc"):  # the poll: the run wants its tool called
        action = {"type": "submit_tool_outputs", "submit_tool_outputs": {"tool_calls": CALLS}}
        return httpx.Response(200, json=_run("requires_action", required_action=action))
    if path.endswith("/submit_tool_outputs"):
        return httpx.Response(200, json=_run("completed", usage=USAGE))
    if post and path.endswith("/messages"):
        return httpx.Response(200, json=_messages()["data"][0])
    if post and path.endswith("/assistants"):
        return httpx.Response(200, json=_assistant())
    return httpx.Response(200, json=_messages())


def _recorded() -> list[Exchange]:
    """The SDK's Assistants calls, each request as the SDK sent it, with the API's answer."""
    exchanges: list[Exchange] = []

    def handler(request: Any) -> Any:
        response = _answer(request)
        exchanges.append(
            Exchange(
                request.method,
                str(request.url),
                request_headers=[
                    (k, v) for k, v in request.headers.items() if k.lower() != "authorization"
                ],
                request_body=request.content,
                status=response.status_code,
                response_headers=list(response.headers.items()),
                response_chunks=[(0.1, response.content)],
                seq=len(exchanges),
            )
        )
        return response

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="https://api.openai.com/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    threads = client.beta.threads
    with warnings.catch_warnings():  # the SDK marks the whole API deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        client.beta.assistants.create(
            model="gpt-4o",
            instructions="Be brief.",
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        )
        threads.messages.create(thread_id="thread_1", role="user", content="Weather in Paris?")
        for _ in threads.create_and_run(
            assistant_id="asst_1",
            thread={"messages": [{"role": "user", "content": "Hi"}]},
            stream=True,
        ):
            pass
        threads.runs.create(
            thread_id="thread_1",
            assistant_id="asst_1",
            additional_messages=[{"role": "user", "content": "Weather in Paris?"}],
        )
        threads.runs.retrieve(run_id="run_abc", thread_id="thread_1")
        threads.runs.submit_tool_outputs(
            run_id="run_abc",
            thread_id="thread_1",
            tool_outputs=[{"tool_call_id": "call_w1", "output": "18 °C"}],
        )
        threads.messages.list(thread_id="thread_1", order="desc")
    return exchanges


def test_an_assistants_recording_reads_as_an_api_looptap_does_not_know(tmp_path: Path) -> None:
    exchanges = _recorded()
    #: Each call, and the generic reading of it: ``none`` (not read as an LLM call), or
    #: ``unknown`` where the body looks like one (a message added to a thread: role and content).
    expected = [
        ("POST", "/assistants", "none"),
        ("POST", "/threads/thread_1/messages", "unknown"),
        ("POST", "/threads/runs", "none"),
        ("POST", "/threads/thread_1/runs", "none"),
        ("GET", "/threads/thread_1/runs/run_abc", "none"),
        ("POST", "/threads/thread_1/runs/run_abc/submit_tool_outputs", "none"),
        ("GET", "/threads/thread_1/messages", "none"),
    ]
    assert [(e.method, e.url.split("/v1", 1)[1].split("?")[0]) for e in exchanges] == [
        (method, path) for method, path, _ in expected
    ]
    assert all(("openai-beta", "assistants=v2") in e.request_headers for e in exchanges)
    for ex, (_, _, family) in zip(exchanges, expected, strict=True):
        rt = parse_exchange(ex)
        # No adapter claims it: not read as Chat, Responses or any other API's call.
        assert (rt.family, rt.operation) == (family, None), ex.url
        assert rt.request is None and rt.response is None and rt.analysis_errors == []
    run = analyse(exchanges)
    assert (run.turns, run.findings) == ({}, [])

    path = tmp_path / "assistants.jsonl"
    with CassetteWriter(path) as writer:
        for ex in exchanges:
            writer.append(ex)
    rc, out, err = cli_output("show", str(path))
    assert (rc, err) == (0, "")
    text = out.decode()
    assert "7 round trips, 1 to LLM APIs (unknown 1)" in text
    assert "0 conversations, 0 turns, 0 findings" in text
    assert "#5  POST api.openai.com/v1/threads/thread_1/runs/run_abc/submit_tool_outputs" in text
    assert "#1  unknown  ?  200  json  POST api.openai.com/v1/threads/thread_1/messages" in text
    rc, out, err = cli_output("textconv", str(path))
    assert (rc, err) == (0, "") and out.startswith(
        b"looptap cassette, format 1: 7 round trips, 0 conversations, 0 findings\n"
    )
    rc, out, err = cli_output("show", "--json", str(path))
    assert (rc, err) == (0, "")
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert [(r["seq"], r["family"], r["findings"]) for r in rows] == [
        (i, family, []) for i, (_, _, family) in enumerate(expected)
    ]
