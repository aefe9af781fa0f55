"""Issue 102 item 5: what the wire proves beyond a chat's status and finish — an error status on
any API call (an embedding, a token count, an image), a tool call written as text in an open
model's tool-call syntax, and output tokens at the cap under a natural stop."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from scenarios import FAMILIES, STREAM_FAMILIES, WEATHER, Script, Tokens

from looptap.cassettes.analysis import RunAnalysis, analyse
from looptap.cassettes.analysis._text_calls import SYNTAXES, text_call
from looptap.cassettes.wire import Exchange
from tests.support.analysed import cli_run

JSON = [("content-type", "application/json")]


def codes_of(run: RunAnalysis) -> list[str]:
    return [f.code for f in run.findings]


def _call(method: str, url: str, body: object, status: int, answer: object) -> Exchange:
    return Exchange(
        method=method,
        url=url,
        request_headers=JSON,
        request_body=orjson.dumps(body) if body is not None else b"",
        status=status,
        response_headers=JSON,
        response_chunks=[(0.05, orjson.dumps(answer))],
    )


# --- an error status on any endpoint ------------------------------------------------------------

NOT_FOUND = {"error": {"message": "The model `text-embedding-4` does not exist", "code": "nf"}}
SIDE_CALLS = [
    ("POST", "https://api.openai.com/v1/embeddings", {"model": "text-embedding-4", "input": "x"}),
    ("POST", "https://api.openai.com/v1/images/generations", {"model": "dall-e-9", "prompt": "x"}),
    (
        "POST",
        "https://api.anthropic.com/v1/messages/count_tokens",
        {"model": "claude-x", "messages": [{"role": "user", "content": "x"}]},
    ),
    (
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-x:embedContent",
        {"content": {"parts": [{"text": "x"}]}},
    ),
]


@pytest.mark.parametrize(("method", "url", "body"), SIDE_CALLS)
@pytest.mark.parametrize(
    ("status", "code"), [(404, "A.http_error"), (429, "A.rate_limited"), (503, "A.overloaded")]
)
def test_an_error_status_on_a_call_that_is_no_model_call_is_an_a_finding(
    method: str, url: str, body: object, status: int, code: str
) -> None:
    s = Script("openai_chat", tools=[])
    s.user("hi")
    s.reply("Hello")
    side = _call(method, url, body, status, NOT_FOUND)
    side.seq = 1
    run = analyse([*s.exchanges, side])
    (f,) = run.findings
    assert (f.code, f.layer, f.seq, f.conversation, f.turn) == (code, "A", 1, None, None)
    assert 1 not in run.turns and f.details["operation"]
    if status == 404:
        assert "text-embedding-4" in f.message and f.details["status"] == 404


def test_a_successful_call_or_a_tool_servers_error_is_no_a_finding() -> None:
    ok = _call("POST", SIDE_CALLS[0][1], SIDE_CALLS[0][2], 200, {"data": [], "model": "m"})
    mcp = _call(
        "POST",
        "http://127.0.0.1:9/mcp",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}},
        500,
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "boom"}},
    )
    # an LLM-looking call no adapter reads (family unknown): said unread, never judged
    unknown = _call("POST", "http://127.0.0.1:9/x", {"messages": [{"content": "hi"}]}, 500, {})
    for i, ex in enumerate((ok, mcp, unknown)):
        ex.seq = i
    assert not [f for f in analyse([ok, mcp, unknown]).findings if f.layer == "A"]


def test_show_says_the_side_calls_error_on_its_round_trip(tmp_path: Path) -> None:
    """``show`` and ``show --json`` put the finding on the embedding's round trip (no turn)."""
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    answer = {
        "id": "c1",
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],
    }
    rows = [
        ("https://api.openai.com/v1/chat/completions", chat, 200, answer),
        (SIDE_CALLS[0][1], SIDE_CALLS[0][2], 404, NOT_FOUND),
    ]
    path = tmp_path / "run.yaml"
    path.write_text(
        orjson.dumps(
            {
                "interactions": [
                    {
                        "request": {
                            "method": "POST",
                            "uri": u,
                            "headers": {},
                            "body": orjson.dumps(b).decode(),
                        },
                        "response": {
                            "status": {"code": st, "message": ""},
                            "headers": {"content-type": ["application/json"]},
                            "body": {"string": orjson.dumps(a).decode()},
                        },
                    }
                    for u, b, st, a in rows
                ]
            }
        ).decode()
    )
    shown = cli_run("show", str(path))  # (what show says: in process)
    assert shown.returncode == 0, shown.stderr
    assert "A A.http_error (#1): The API answered HTTP 404" in shown.stdout
    js = cli_run("show", "--json", str(path))
    assert js.returncode == 0, js.stderr
    lines = js.stdout.splitlines()
    side = [orjson.loads(x) for x in lines if orjson.loads(x).get("seq") == 1]
    assert [f["code"] for f in side[0]["findings"]] == ["A.http_error"]


# --- a tool call written as text ----------------------------------------------------------------

TEXT_CALLS = [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
    "<|python_start|>[get_weather(city='Paris')]<|python_end|>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>',
    '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
    "</tool_call>",
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
    'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}',
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("text", TEXT_CALLS)
def test_a_tool_call_written_as_text_with_tools_offered_is_an_e_finding(
    family: str, text: str
) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply("Let me look.\n" + text)
    (f,) = [f for f in s.analyse().findings if f.code == "E.tool_call_as_text"]
    assert f.layer == "E" and f.severity.value == "warning"
    assert f.details["tool"] == "get_weather" and f.seq == 0


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_a_streamed_tool_call_as_text_is_found_too(family: str) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(TEXT_CALLS[0], stream=True)
    assert "E.tool_call_as_text" in codes_of(s.analyse())


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('<tool_call>{"name": "get_weather"}</tool_call>', "no tools offered"),
        ("Wrap each call in <tool_call>…</tool_call> tags, as JSON.", "names no offered tool"),
        ('<tool_call>{"name": "get_weather_now"}</tool_call>', "another name, not a word of it"),
        ("get_weather says it is sunny in Paris.", "no marker"),
    ],
)
def test_no_finding_where_the_wire_does_not_prove_a_call(text: str, why: str) -> None:
    s = Script("openai_chat", tools=[] if why == "no tools offered" else [WEATHER])
    s.user("Weather in Paris?")
    s.reply(text)
    assert "E.tool_call_as_text" not in codes_of(s.analyse()), why


def test_no_finding_when_the_turn_was_cut_or_carries_the_call() -> None:
    s = Script("openai_chat", tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(TEXT_CALLS[0], finish="length", max_tokens=24)
    assert "E.tool_call_as_text" not in codes_of(s.analyse())


def test_every_syntax_is_found_and_the_first_call_named() -> None:
    for syntax, marker in SYNTAXES:
        found = text_call(f"ok {marker}get_weather", {"get_weather", "x"})
        assert found is not None and found[0] == syntax and found[1] == "get_weather"
    assert text_call("<tool_call>" + "a" * 500 + " get_weather", {"get_weather"}) is None


# --- output tokens at the cap under a natural stop ------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_output_tokens_at_the_cap_with_a_natural_stop_is_an_a_finding(family: str) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Write a poem.")
    s.reply("Roses are red, violets", usage=Tokens(output=64), max_tokens=64)
    (f,) = [f for f in s.analyse().findings if f.code == "A.stop_at_cap"]
    assert f.layer == "A" and f.details["cap"] == 64 and f.details["output_tokens"] == 64


@pytest.mark.parametrize("family", FAMILIES)
def test_no_stop_at_cap_under_the_cap_or_when_the_finish_says_the_cap(family: str) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Write a poem.")
    s.reply("Roses are red.", usage=Tokens(output=63), max_tokens=64)
    s.user("Another.")
    from scenarios import LENGTH

    s.reply("Roses are", usage=Tokens(output=64), max_tokens=64, finish=LENGTH[family])
    found = codes_of(s.analyse())
    assert "A.stop_at_cap" not in found and "A.truncated_length" in found


# --- issue 102 item 1: an answer's alternatives beyond the first are said, not judged ------------


def _chat_two(stream: bool) -> Exchange:
    body = {"model": "gpt-4o-mini", "n": 2, "messages": [{"role": "user", "content": "hi"}]}
    if not stream:
        answer = {
            "id": "c1",
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ""},
                    "finish_reason": "stop",
                },
                {
                    "index": 1,
                    "message": {"role": "assistant", "content": "Hi"},
                    "finish_reason": "stop",
                },
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
        return _call("POST", "https://api.openai.com/v1/chat/completions", body, 200, answer)
    body["stream"] = True
    chunks = [
        {"id": "c1", "model": "m", "choices": [{"index": i, "delta": {"content": t}}]}
        for i, t in ((0, ""), (1, "Hi"))
    ] + [
        {"id": "c1", "model": "m", "choices": [{"index": i, "delta": {}, "finish_reason": "stop"}]}
        for i in (0, 1)
    ]
    sse = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    ex = _call("POST", "https://api.openai.com/v1/chat/completions", body, 200, {})
    ex.response_headers = [("content-type", "text/event-stream")]
    ex.response_chunks = [(0.05, sse)]
    return ex


def _gemini_two() -> Exchange:
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"candidateCount": 2},
    }
    answer = {
        "candidates": [
            {
                "index": 0,
                "content": {"role": "model", "parts": [{"text": ""}]},
                "finishReason": "STOP",
            },
            {
                "index": 1,
                "content": {"role": "model", "parts": [{"text": "Hi"}]},
                "finishReason": "STOP",
            },
        ],
        "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1},
        "modelVersion": "gemini-2.5-flash",
    }
    return _call("POST", url, body, 200, answer)


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (lambda: _chat_two(False), "choices"),
        (lambda: _chat_two(True), "choices"),
        (_gemini_two, "candidates"),
    ],
    ids=["chat", "chat-stream", "gemini"],
)
def test_a_second_choice_is_said_and_nothing_is_judged_of_the_answer(
    make: object, key: str
) -> None:
    ex = make()  # type: ignore[operator]
    ex.seq = 0
    run = analyse([ex])
    a = run.turns[0].a
    assert a.read == "partial" and a.unread == [
        f"answer: {key} 2 to 2 of 2 (n=2): only the first is read"
    ]
    # choice 0 is empty, choice 1 is not: no E.empty_response on an answer not read whole
    assert not [f for f in run.findings if f.layer == "E"], codes_of(run)
