"""Values the API treats as equal never make a replay miss (issue 27 item 3): ``null`` and an
absent field, a field at its documented default, key order, a lone text part and its string. And
what the API does not treat as equal still misses: a ``null`` inside the caller's own data (a
tool's schema, a tool call's input), a text part with more than its text, two parts vs one."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from looptap.cassettes.matching import Matcher, Miss, Recorded
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import CALL, RESULT, SYSTEM, USER, chat_request, tool_loop

PATH = "/v1/chat/completions"
ANTHROPIC = "https://api.anthropic.com/v1/messages"


def _after_first(messages: list[dict[str, Any]], **extra: Any) -> Recorded | Miss:
    """The live second request, after the first was served."""
    m = Matcher(tool_loop())
    assert isinstance(m.match("POST", PATH, [], chat_request([SYSTEM, USER])), Recorded)
    return m.match("POST", PATH, [], chat_request(messages, **extra))


def test_null_content_and_an_absent_content_are_the_same_request() -> None:
    """``model_dump(exclude_none=True)``: the assistant's ``"content": null`` dropped."""
    call = {k: v for k, v in CALL.items() if v is not None}
    got = _after_first([SYSTEM, USER, call, RESULT])
    assert isinstance(got, Recorded), "\n".join(got.lines())


def test_nulls_added_defaults_and_lone_text_parts_are_the_same_request() -> None:
    call = {**copy.deepcopy(CALL), "refusal": None, "name": None}
    user = {"role": "user", "content": [{"type": "text", "text": USER["content"]}]}
    result = {**RESULT, "content": [{"type": "text", "text": RESULT["content"]}]}
    got = _after_first([SYSTEM, user, call, result], stream=False, n=1, temperature=None)
    assert isinstance(got, Recorded), "\n".join(got.lines())


def _miss(got: Recorded | Miss) -> Miss:
    assert isinstance(got, Miss), "matched a request the API would treat differently"
    return got


def test_what_the_api_does_not_treat_as_equal_still_misses() -> None:
    # a lone text part with more than its text (a cache breakpoint) is not the bare string
    user = {
        "role": "user",
        "content": [
            {"type": "text", "text": USER["content"], "cache_control": {"type": "ephemeral"}}
        ],
    }
    _miss(_after_first([SYSTEM, user, CALL, RESULT]))
    # two parts are not one string
    user = {
        "role": "user",
        "content": [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Paris?"}],
    }
    _miss(_after_first([SYSTEM, user, CALL, RESULT]))
    # a value that is not the default
    _miss(_after_first([SYSTEM, USER, CALL, RESULT], n=2))
    # a null inside a tool's schema is the caller's data
    m = Matcher(tool_loop())
    body = orjson.loads(chat_request([SYSTEM, USER]))
    body["tools"][0]["function"]["parameters"]["properties"]["city"]["default"] = None
    _miss(m.match("POST", PATH, [], orjson.dumps(body)))


def _anthropic(messages: list[dict[str, Any]]) -> Exchange:
    req = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}
    resp = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Done"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    return Exchange(
        "POST",
        ANTHROPIC,
        [("anthropic-version", "2023-06-01")],
        orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, orjson.dumps(resp))],
    )


@pytest.mark.parametrize("twin", ["same", "null_in_input"])
def test_anthropic_tool_input_keeps_its_nulls(twin: str) -> None:
    use = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "lookup",
        "input": {"q": "Paris", "page": None},
    }
    history = [
        {"role": "user", "content": "Look up Paris"},
        {"role": "assistant", "content": [use]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
    ]
    m = Matcher([_anthropic(history)])
    live = copy.deepcopy(history)
    if twin == "same":  # the API's nulls dropped, strings as lone text parts: the same request
        live[0]["content"] = [{"type": "text", "text": "Look up Paris"}]
        live[2]["content"][0]["content"] = [{"type": "text", "text": "ok"}]
        live[2]["content"][0]["is_error"] = None
        got = m.match(
            "POST",
            "/v1/messages",
            [],
            orjson.dumps(
                {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": live, "system": None}
            ),
        )
        assert isinstance(got, Recorded), "\n".join(got.lines())
    else:  # the tool call's input without its null key: what the model is shown changed
        del live[1]["content"][0]["input"]["page"]
        _miss(
            m.match(
                "POST",
                "/v1/messages",
                [],
                orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": live}),
            )
        )
