"""A fork's limit on what it sends live (``looptap run --from … --max-requests N``;
cassettes/replay/forking/limit.py, docs/fork.md): past N nothing reaches the upstream, the agent's
SDK gets its API's error (a 400 it does not retry) with looptap's message, and the fork says it
stopped at the limit. In process (the replay server and its cursor, real SDK clients, a scripted
upstream); tests/replay/test_fork.py forks through the recorder and reads the branch's note."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from looptap.cassettes.replay.forking.cursor import Cursor, live_router
from looptap.cassettes.replay.forking.limit import LIMIT_CODE, Limit
from looptap.cassettes.replay.forking.placement import parse_cursor
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import CALL, RESULT, SYSTEM, TOOLS, USER, tool_loop
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
GEMINI_URL = (
    "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"
)


def _live(req: ScriptedRequest) -> Reply:
    return Reply.say("live answer")


def _exchange(url: str, request: object, response: object) -> Exchange:
    return Exchange(
        "POST",
        url,
        [("content-type", "application/json")],
        orjson.dumps(request),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, orjson.dumps(response))],
        ttfb=0.01,
    )


ANTHROPIC_REQ = {
    "model": "claude-test-model",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
}
ANTHROPIC_RESP = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test-model",
    "content": [{"type": "text", "text": "sunny"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 2},
}
GEMINI_REQ = {"contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]}
GEMINI_RESP = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "sunny"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1, "totalTokenCount": 6},
}


def _openai(url: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=url + "/v1", api_key="sk-x")  # the SDK's own retries (2)
    client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, USER], tools=TOOLS)  # type: ignore[list-item, arg-type]


def _anthropic(url: str) -> None:
    from anthropic import Anthropic

    client = Anthropic(base_url=url, api_key="sk-ant-x")  # the SDK's own retries (2)
    client.messages.create(**ANTHROPIC_REQ)  # type: ignore[arg-type]


def _gemini(url: str) -> None:
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key="g-x",
        http_options=types.HttpOptions(
            base_url=url, retry_options=types.HttpRetryOptions(attempts=3)
        ),
    )
    client.models.generate_content(model="gemini-2.0-flash", contents="Weather in Paris?")


FAMILIES: list[tuple[str, list[Exchange], Callable[[str], None], str]] = [
    ("openai", tool_loop(), _openai, "openai.BadRequestError"),
    (
        "anthropic",
        [_exchange(ANTHROPIC_URL, ANTHROPIC_REQ, ANTHROPIC_RESP)],
        _anthropic,
        "anthropic.BadRequestError",
    ),
    (
        "gemini",
        [_exchange(GEMINI_URL, GEMINI_REQ, GEMINI_RESP)],
        _gemini,
        "google.genai.errors.ClientError",
    ),
]


@pytest.mark.parametrize(
    ("family", "exchanges", "call", "error"), FAMILIES, ids=[f[0] for f in FAMILIES]
)
def test_past_the_limit_nothing_is_sent_and_the_sdk_gets_its_apis_error_without_retrying(
    family: str, exchanges: list[Exchange], call: Callable[[str], None], error: str
) -> None:
    """``--max-requests 0`` at turn 0: the agent's first request is past the limit. The real SDK
    (its retries on) raises its API's 400 error carrying looptap's message, once: it was not
    retried, and the upstream heard nothing."""
    with ScriptedUpstream(_live) as live:
        bases = {"openai": live.url, "anthropic": live.url, "gemini": live.url}
        cursor = Cursor(parse_cursor("turn=0"), live_router(bases), limit=Limit(0))
        with ReplayServer(exchanges, cursor=cursor) as srv:
            with pytest.raises(Exception) as caught:
                call(srv.url)
            served = list(srv.served)
        assert live.log == []  # nothing reached the upstream
    exc = caught.value
    assert f"{type(exc).__module__}.{type(exc).__name__}" == error, repr(exc)
    assert "this fork stopped at its limit of 0 live requests" in str(exc), str(exc)
    assert len(served) == 1 and served[0].status == 400  # asked once: the SDK did not retry
    body = orjson.loads(b"".join(c for _, c in served[0].response_chunks))
    # the family's own error shape (WIRE.md §A.6, §C.6, §D.6)
    if family == "openai":
        assert body["error"]["code"] == LIMIT_CODE
        assert body["error"]["type"] == "invalid_request_error"
    elif family == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["code"] == 400 and body["error"]["status"] == "FAILED_PRECONDITION"
    assert cursor.limit.as_json() == {
        "limit": 0,
        "sent": 0,
        "refused": 1,
        "first": cursor.limit.first,
    }
    assert any("stopped at the limit: 1 request not sent" in ln for ln in cursor.report_lines())


def test_the_limit_counts_the_requests_sent_live_and_refuses_the_next() -> None:
    """With a limit of 1, turn 1 goes live and the agent's next request does not: the upstream
    heard one request, the fork counts one sent and one refused; the prefix is served as ever."""
    from openai import BadRequestError, OpenAI

    with ScriptedUpstream(_live) as live:
        cursor = Cursor(parse_cursor("turn=1"), live_router({"openai": live.url}), limit=Limit(1))
        with ReplayServer(tool_loop(), cursor=cursor) as srv:
            client = OpenAI(base_url=srv.url + "/v1", api_key="sk-x")
            tools = TOOLS
            client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, USER], tools=tools)  # type: ignore[list-item, arg-type]
            history = [SYSTEM, USER, CALL, RESULT]
            answer = client.chat.completions.create(model="gpt-4o", messages=history, tools=tools)  # type: ignore[arg-type]
            assert answer.choices[0].message.content == "live answer"
            again = [*history, {"role": "user", "content": "Sure?"}]
            with pytest.raises(BadRequestError, match="stopped at its limit of 1 live request"):
                client.chat.completions.create(model="gpt-4o", messages=again, tools=tools)  # type: ignore[arg-type]
        assert len(live.log) == 1
    assert cursor.sent == 1 and cursor.limit.sent == 1 and cursor.limit.refused == 1
    assert cursor.lived == [0, None]  # the refused request was neither served nor sent


def test_no_limit_sends_everything() -> None:
    limit = Limit()
    assert all(limit.take("x") for _ in range(1000)) and limit.as_json() is None
    assert limit.line() is None
