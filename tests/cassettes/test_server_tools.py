"""Issue 54: a tool the API runs itself is shown as the API's, with no result due from the client.

Anthropic's server tools (``server_tool_use`` answered in the same answer by a
``web_search_tool_result``, ``tool_search_tool_result`` …, also on Bedrock), and OpenAI Responses'
hosted calls (``web_search_call`` items, which the parse keeps as the items they are) were listed
by ``show`` as ordinary tool calls, or (Responses) not at all; ``show --json`` had no field to tell
them apart, and the inspector said "the next turn sent no result for this call" in red. Now the
parse's calls (:func:`cassettes.models.emitted_calls`) say ``by_server``, ``show`` prints them as
"server tool call … run by the API", ``show --json`` gives ``ran_by: "server"``, the analysis' view
model (``Turn.e.tool_calls``, what the inspector draws) carries their kind, and no finding asks a
result of the client for them.

The recordings are the corpus' real ones (pydantic-ai's): Anthropic web search (streamed), OpenAI
Responses web search (streamed, then a second turn), Bedrock Nova's code interpreter beside the
client's ``final_result``, Anthropic's tool search beside the client's ``get_exchange_rate``.
Twin: the client's own call in those answers stays a client call, and a request that drops its
result is still ``C.dropped_tool_result`` — for that call alone.
"""

from __future__ import annotations

import json

import orjson
import pytest
from real_corpus import CORPUS, load

from looptap.cassettes.analysis import analyse
from looptap.cassettes.cli import main
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.views import roundtrip_json
from looptap.cassettes.wire import Exchange

P = "pydantic-ai/tests/models/cassettes/"
RECORDED = {
    "anthropic web search": (P + "test_anthropic/test_anthropic_web_search_tool_stream.yaml", 0),
    "responses web search": (
        P + "test_openai_responses/test_openai_responses_model_web_search_tool_stream.yaml",
        0,
    ),
    "bedrock code interpreter": (
        P + "test_bedrock/test_bedrock_model_with_code_execution_tool.yaml",
        0,
    ),
    "anthropic tool search": (
        "pydantic-ai/tests/cassettes/test_native_tool_search_vcr/"
        "test_anthropic_native_tool_search.yaml",
        0,
    ),
}
#: Per recording: (server call names, client call names) of the answer read.
CALLS = {
    "anthropic web search": (["web_search", "web_search"], []),
    "responses web search": (["web_search"], []),
    "bedrock code interpreter": (["nova_code_interpreter"], ["final_result"]),
    "anthropic tool search": (["tool_search_tool_bm25"], ["get_exchange_rate"]),
}


def _recorded(name: str) -> list[Exchange]:
    path, _ = RECORDED[name]
    exchanges = load(CORPUS / path)
    for i, ex in enumerate(exchanges):
        ex.seq = i
    return exchanges


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_parse_and_show_json_say_the_api_ran_it(name: str) -> None:
    from looptap.cassettes.models import emitted_calls  # (new in issue 54: the parse's every call)

    ex = _recorded(name)[RECORDED[name][1]]
    rt = parse_exchange(ex)
    server, client = CALLS[name]
    calls = emitted_calls(rt.response)
    assert [c.name for c in calls if c.by_server] == server
    assert [c.name for c in calls if not c.by_server] == client
    got = roundtrip_json(rt, ex)["tool_calls"]
    assert [(c["name"], c["ran_by"]) for c in got] == [
        (c.name, "server" if c.by_server else "client") for c in calls
    ]


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_show_and_the_view_model_mark_the_apis_calls(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show``'s turn block and the analysis' turn (the inspector's view model)."""
    exchanges = _recorded(name)
    run = analyse(exchanges)
    seq = RECORDED[name][1]
    server, client = CALLS[name]
    e = run.turns[seq].e
    assert [c.name for c in e.tool_calls if c.by_server] == server
    assert [c.name for c in e.tool_calls if not c.by_server] == client
    assert all(c.kind != "function" for c in e.tool_calls if c.by_server)
    assert main(["show", str(CORPUS / RECORDED[name][0])]) == 0
    text = capsys.readouterr().out
    for n in server:
        assert f"server tool call: {n}(" in text and "run by the API" in text
        assert f"    tool call: {n}(" not in text
    for n in client:
        assert f"    tool call: {n}(" in text
    # no finding asks the client for the result of a call the API ran
    server_ids = {c.id for c in e.tool_calls if c.by_server}
    assert not [f for f in run.findings if f.tool_call_id in server_ids]


def test_twin_the_clients_call_beside_a_server_call_is_still_owed_its_result() -> None:
    """The tool-search answer, echoed whole by the client's next request, which then asks
    something else without the result of get_exchange_rate: dropped (that call alone; the server's
    tool search was answered by the API in the answer itself)."""
    first = _recorded("anthropic tool search")[0]
    body = orjson.loads(orjson.dumps(first.request_json()))
    answer = orjson.loads(b"".join(c for _, c in first.response_chunks))
    body["messages"] += [
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": [{"type": "text", "text": "Never mind: what is 2 + 2?"}]},
    ]
    client = next(b for b in answer["content"] if b["type"] == "tool_use")
    server = next(b for b in answer["content"] if b["type"] == "server_tool_use")
    message = (
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{client['id']}. Each `tool_use` block must have a corresponding `tool_result` block in "
        "the next message."
    )
    second = Exchange(
        method="POST",
        url=first.url,
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(body),
        status=400,
        response_headers=[("content-type", "application/json")],
        response_chunks=[
            (
                0.2,
                json.dumps(
                    {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": message},
                        "request_id": "req_011CVxTwin",
                    }
                ).encode(),
            )
        ],
        seq=1,
    )
    run = analyse([first, second])
    dropped = [f for f in run.findings if f.code == "C.dropped_tool_result"]
    assert [f.tool_call_id for f in dropped] == [client["id"]]
    assert not [f for f in run.findings if f.tool_call_id == server["id"]]
