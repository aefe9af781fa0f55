"""Provider evidence first (issue 103 item 1, docs/threading.md "Provider evidence first"): a
request that carries a continuity token (a Gemini thought signature, an Anthropic thinking
signature or redacted thinking, a Responses output item's id or encrypted reasoning) goes on from
the turn whose answer produced it, even where a longer history of another conversation matches.

The instance of the issue: one agent run twice into one cassette; the second run sends its call and
result pair twice, so its request extends the *first* run's request (3 messages) further than its
own turn (2). On f29135f5 it was threaded onto the first run, with a false
``C.assistant_not_echoed``. Tool-call ids here are the same in both runs (a scripted upstream's):
two answers gave them, so they are no evidence, and the signatures alone decide."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from scenarios import _exchange, run_of, serious, threads

from looptap.cassettes.analysis.spill import Spill
from looptap.cassettes.analysis.threading._data import Threads
from looptap.cassettes.analysis.threading._evidence import Remembered, carried, register
from looptap.cassettes.models import Message, Part, ToolCall, ToolResult
from looptap.cassettes.wire import Exchange

Json = dict[str, Any]
Q = "What is the weather in Paris? Use the tool."
ARGS = {"city": "Paris"}
DECL = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def _gemini(history: list[Json], parts: list[Json]) -> Exchange:
    body = {"contents": history, "tools": [{"functionDeclarations": [DECL]}]}
    resp = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "modelVersion": "gemini-2.5-flash",
    }
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    return _exchange(url, body, 200, orjson.dumps(resp), "application/json")


def _gemini_run(sig: str) -> tuple[list[Exchange], list[Exchange]]:
    """One run's requests: its first call, and its second request (with ``twice``, the pair
    sent twice)."""
    u = {"role": "user", "parts": [{"text": Q}]}
    call = {"functionCall": {"name": "get_weather", "args": ARGS}, "thoughtSignature": sig}
    model = {"role": "model", "parts": [call]}
    result = {
        "role": "user",
        "parts": [{"functionResponse": {"name": "get_weather", "response": {"out": "sunny"}}}],
    }
    first = _gemini([u], [call])
    once = _gemini([u, model, result], [{"text": "Sunny in Paris."}])
    twice = _gemini([u, model, result, model, result], [{"text": "Sunny in Paris."}])
    return [first, once], [first, twice]


def _anthropic(history: list[Json], content: list[Json], stop: str) -> Exchange:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": history,
    }
    resp = {
        "id": "msg_" + str(len(orjson.dumps(history))),
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    return _exchange(
        "https://api.anthropic.com/v1/messages", body, 200, orjson.dumps(resp), "application/json"
    )


def _anthropic_run(sig: str, redacted: bool) -> tuple[list[Exchange], list[Exchange]]:
    u = {"role": "user", "content": Q}
    think = (
        {"type": "redacted_thinking", "data": sig}
        if redacted
        else {"type": "thinking", "thinking": "I call the tool.", "signature": sig}
    )
    use = {"type": "tool_use", "id": "toolu_same_in_every_run", "name": "get_weather"}
    use["input"] = ARGS
    model = {"role": "assistant", "content": [think, use]}
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_same_in_every_run", "content": "sunny"}
        ],
    }
    done = [{"type": "text", "text": "Sunny in Paris."}]
    first = _anthropic([u], [think, use], "tool_use")
    once = _anthropic([u, model, result], done, "end_turn")
    twice = _anthropic([u, model, result, model, result], done, "end_turn")
    return [first, once], [first, twice]


def _responses(history: list[Json], output: list[Json], rid: str) -> Exchange:
    body = {
        "model": "gpt-5",
        "input": history,
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    }
    resp = {"id": rid, "object": "response", "status": "completed", "model": "gpt-5"}
    resp["output"] = output
    return _exchange(
        "https://api.openai.com/v1/responses", body, 200, orjson.dumps(resp), "application/json"
    )


def _responses_run(sig: str) -> tuple[list[Exchange], list[Exchange]]:
    """Item ids and encrypted reasoning as the tokens (call ids the same in every run)."""
    u = {"role": "user", "content": Q}
    reason = {"type": "reasoning", "id": f"rs_{sig}", "summary": [], "encrypted_content": sig * 2}
    call = {
        "type": "function_call",
        "id": f"fc_{sig}",
        "call_id": "call_same_in_every_run",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    out = {"type": "function_call_output", "call_id": "call_same_in_every_run", "output": "sunny"}
    text = {
        "type": "message",
        "id": f"msg_{sig}",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Sunny in Paris."}],
    }
    first = _responses([u], [reason, call], f"resp_a{sig}")
    once = _responses([u, reason, call, out], [text], f"resp_b{sig}")
    twice = _responses([u, reason, call, out, reason, call, out], [text], f"resp_c{sig}")
    return [first, once], [first, twice]


RUNS = {
    "gemini": lambda sig: _gemini_run(sig),
    "anthropic": lambda sig: _anthropic_run(sig, redacted=False),
    "anthropic_redacted": lambda sig: _anthropic_run(sig, redacted=True),
    "openai_responses": lambda sig: _responses_run(sig),
}


@pytest.mark.parametrize("family", sorted(RUNS))
def test_a_token_wins_over_a_longer_history_of_another_run(family: str) -> None:
    one, _ = RUNS[family]("SIGNATURE-OF-RUN-ONE-0001")
    _, two = RUNS[family]("SIGNATURE-OF-RUN-TWO-0002")
    run = run_of([*one, *two])
    assert threads(run) == [[0, 1], [2, 3]]
    said = {f.code for f in run.findings}
    assert not said & {"C.assistant_not_echoed", "C.stopped_with_pending_calls"}
    if family == "gemini":  # no ids: the pair sent twice is no wrong pairing
        assert serious(run) == []
    else:  # the same call id answered twice in one request: true, and the client's doing
        assert {c for c, _ in serious(run)} <= {
            "C.duplicate_tool_result",
            "C.tool_results_split",
        }
    turn = run.turns[3]
    assert (turn.c.link, turn.c.kept, turn.c.echoed_assistant) == ("extends", 1, True)


def test_a_token_two_answers_gave_is_no_evidence() -> None:
    """Both runs' answers carry the same signature (an upstream that repeats it): no token
    decides, and the threading is the history's, as without tokens."""
    one, _ = RUNS["gemini"]("SIGNATURE-THE-SAME-EACH-RUN")
    _, two = RUNS["gemini"]("SIGNATURE-THE-SAME-EACH-RUN")
    run = run_of([*one, *two])
    assert threads(run) == [[0, 1, 3], [2]]


def _call(i: str) -> Message:
    return Message(role="assistant", parts=[Part(kind="tool_call", tool_call=ToolCall(id=i))])


def _result(i: str) -> Message:
    return Message(role="user", parts=[Part(kind="tool_result", tool_result=ToolResult(call_id=i))])


def test_a_remembered_message_is_read_again_once_its_token_changed() -> None:
    """``carried`` takes a message the request before carried from its memo, with its tokens'
    latest turn: an answer that produces one of its tokens again (set aside, ``TWICE``) or for
    the first time (a result recorded before its call's answer) makes it read again; a history
    managed in the middle (a message dropped) or sent again shorter is looked up message by
    message. Every answer is the one an empty memo gives (issue 106: the memo saves time, never
    changes a link)."""
    s, memo = Threads(Spill(), 64), Remembered()
    x, y, z = "toolu_0123456789", "toolu_9876543210", "toolu_5555555555"
    said = []

    def text(t: str) -> Message:
        return Message(role="user", parts=[Part(kind="text", text=t)])

    steps = [  # (the history from the one before: the same message objects; the answer's token)
        (lambda h: [text("go")], x),
        (lambda h: [*h, _call(x), _result(x)], x),  # its answer gives x again: x names no turn
        (lambda h: [*h, text("on")], None),
        (lambda h: [*h, _result(y)], y),  # a result before its call's answer
        (lambda h: [*h, text("on")], None),
        (lambda h: [*h, _call(z), _result(z)], None),
        (lambda h: [h[0], *h[3:]], None),  # managed: x's pair dropped
        (lambda h: h[:2], None),  # shorter: an earlier request again
        (lambda h: [*h[:1], *(text(str(i)) for i in range(70)), *h[1:]], None),  # past the scan
    ]
    history: list[Message] = []
    for tid, (then, token) in enumerate(steps):
        history = then(history)
        fresh = carried(s, history, frozenset(), Remembered())
        said.append(carried(s, history, frozenset(), memo))
        assert said[-1] == fresh
        register(s, _call(token).parts if token else [], frozenset(), tid, memo)
    assert said == [None, 0, None, None, 3, 3, 3, None, None]
