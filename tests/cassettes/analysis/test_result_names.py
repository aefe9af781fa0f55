"""Issue 45: a Gemini ``functionResponse`` with the right id but another function's name.

Gemini (Vertex, and the Gemini API with Gemini 3) gives each ``functionCall`` an ``id``; the client
answers with ``functionResponse {id, name, response}``. Results pair by id, so a result sent under
the other call's name paired silently, and a later change of that name in the history was not a
change at all (the history key ignored the name). The recordings are built here in the wire shape
of ``:generateContent`` (request ``contents``/``tools``, answer ``candidates``/``usageMetadata``).
"""

from __future__ import annotations

from typing import Any

import orjson

from looptap.cassettes.analysis import RunAnalysis, Severity, analyse
from looptap.cassettes.wire import Exchange

URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-3-pro-preview:generateContent"
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "get_weather",
                "description": "Current weather in a city.",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"city": {"type": "STRING"}},
                    "required": ["city"],
                },
            },
            {
                "name": "get_local_time",
                "description": "Local time in a city.",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"city": {"type": "STRING"}},
                    "required": ["city"],
                },
            },
        ]
    }
]
USER = {
    "role": "user",
    "parts": [
        {"text": "Is it a good time to call my sister in Lisbon, and what's the weather there?"}
    ],
}
CALLS = [
    {
        "functionCall": {"id": "k3n8r2qa", "name": "get_weather", "args": {"city": "Lisbon"}},
        "thoughtSignature": "CiQBcsjafA==",
    },
    {"functionCall": {"id": "p7d1w5zc", "name": "get_local_time", "args": {"city": "Lisbon"}}},
]
ANSWER = "It's 18:40 in Lisbon and 21 °C with clear skies — a fine time to call."


def _exchange(
    contents: list[dict[str, Any]], parts: list[dict[str, Any]], finish: str = "STOP"
) -> Exchange:
    resp = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 96,
            "candidatesTokenCount": 24,
            "totalTokenCount": 120,
        },
        "modelVersion": "gemini-3-pro-preview",
        "responseId": "xBIlaf7LD5ay1MkP6Z2Q8AU",
    }
    return Exchange(
        method="POST",
        url=URL,
        request_headers=[
            ("content-type", "application/json"),
            ("x-goog-api-client", "google-genai-sdk/1.38.0 gl-python/3.11.9"),
        ],
        request_body=orjson.dumps({"contents": contents, "tools": TOOLS}),
        status=200,
        response_headers=[("content-type", "application/json; charset=UTF-8")],
        response_chunks=[(0.9, orjson.dumps(resp))],
        ttfb=0.9,
        duration=1.0,
    )


def _results(
    weather_name: str = "get_weather", time_name: str = "get_local_time"
) -> dict[str, Any]:
    return {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "k3n8r2qa",
                    "name": weather_name,
                    "response": {"output": {"temp_c": 21, "sky": "clear"}},
                }
            },
            {
                "functionResponse": {
                    "id": "p7d1w5zc",
                    "name": time_name,
                    "response": {"output": "18:40"},
                }
            },
        ],
    }


def _run(results_now: dict[str, Any], results_later: dict[str, Any] | None = None) -> RunAnalysis:
    model_calls = {"role": "model", "parts": CALLS}
    t0 = _exchange([USER], CALLS)
    t1 = _exchange([USER, model_calls, results_now], [{"text": ANSWER}])
    follow = {"role": "user", "parts": [{"text": "And tomorrow morning?"}]}
    later = results_later or results_now
    t2 = _exchange(
        [USER, model_calls, later, {"role": "model", "parts": [{"text": ANSWER}]}, follow],
        [{"text": "Tomorrow at 9:00 it will be 17 °C and cloudy."}],
    )
    for i, ex in enumerate((t0, t1, t2)):
        ex.seq = i
    return analyse([t0, t1, t2])


def _codes(run: RunAnalysis) -> list[tuple[str, int | None]]:
    return [(f.code, f.seq) for f in run.findings]


def test_a_result_under_the_other_calls_name_is_flagged() -> None:
    """The client swapped the two results' names (ids right). Was: nothing."""
    run = _run(_results(weather_name="get_local_time", time_name="get_weather"))
    got = [f for f in run.findings if f.code == "C.tool_result_wrong_name"]
    assert [(f.seq, f.severity, f.tool_call_id, f.path) for f in got] == [
        (1, Severity.WARNING, "k3n8r2qa", "contents[2]"),
        (1, Severity.WARNING, "p7d1w5zc", "contents[2]"),
    ]
    assert (
        got[0].details["tool"] == "get_local_time" and got[0].details["call_tool"] == "get_weather"
    )
    assert "get_weather" in got[0].message and "get_local_time" in got[0].message
    # Results still pair by id: no orphan, no dropped call; the unchanged history stays unchanged.
    assert [c for c in _codes(run) if c[0] != "C.tool_result_wrong_name"] == []


def test_a_later_change_of_a_results_name_is_history_rewritten() -> None:
    """The right names on turn 1, one renamed in the history of turn 2. Was: nothing."""
    run = _run(_results(), _results(weather_name="get_forecast"))
    got = [f for f in run.findings if f.code == "C.history_mutated"]
    assert [(f.seq, f.path) for f in got] == [(2, "contents[2]")], _codes(run)
    assert "C.tool_result_wrong_name" not in [c for c, _ in _codes(run)]


def test_right_names_stay_clean() -> None:
    """Clean twin: the same run with each result under its call's name."""
    assert _codes(_run(_results())) == []


def test_a_name_looked_up_from_the_call_is_not_part_of_the_results_identity() -> None:
    """Anthropic and OpenAI results carry no name on the wire: looptap looks it up from the call,
    which a later request may not hold (a history delta, a trimmed history). Claude Code's clean
    runs read as C.history_mutated when that lookup entered the history key; a name the wire
    carries (Gemini's functionResponse.name) still does."""
    from looptap.cassettes.analysis import message_key
    from looptap.cassettes.models import Message, Part, ToolResult

    def msg(name: str | None, named: bool) -> Message:
        return Message(
            role="user",
            parts=[
                Part(
                    kind="tool_result",
                    tool_result=ToolResult(
                        call_id="toolu_1", name=name, named=named, content="sunny"
                    ),
                )
            ],
        )

    assert message_key(msg("get_weather", False)) == message_key(msg(None, False))
    assert message_key(msg("get_weather", True)) != message_key(msg("get_time", True))
