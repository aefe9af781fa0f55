"""Issue 54: a run that ended on its output tool, resumed with that call written back as text.

A framework whose structured output is a tool (pydantic-ai's ``final_result``: the model calls it
and the run ends) may, when it resumes the conversation later, send that call back as the answer
it stood for: an assistant message whose text is the call's arguments, and no result for the call.
looptap raised ``C.dropped_tool_result`` (error) and ``C.assistant_not_echoed`` (warning) on every
resume. It is the allowance ``C.stopped_with_pending_calls`` already makes for a run ending on such
a call: ``C.output_tool_as_text`` (info), nothing more.

The runs are the corpus' real recordings of pydantic-ai calling ``final_result`` (OpenAI Chat:
test_tool_choice_matrix[tools_plus_output-openai], get_weather then final_result; Anthropic
Messages: test_anthropic_tool_output, get_user_country then final_result), followed by the resumed
request as such a framework sends it, in the family's own wire format, answered in text.

Twins that stay: the call echoed as a call with no result is still ``C.dropped_tool_result``; text
that is not the call's arguments (a summary in other words) is still not its echo.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from real_corpus import CORPUS, load

from looptap.cassettes.analysis import RunAnalysis, analyse
from looptap.cassettes.wire import Exchange

Json = dict[str, Any]

RUNS = {
    "openai_chat": "pydantic-ai/tests/models/cassettes/test_tool_choice_matrix/"
    "test_tool_choice_matrix[tools_plus_output-openai].yaml",
    "anthropic": "pydantic-ai/tests/models/cassettes/test_anthropic/"
    "test_anthropic_tool_output.yaml",
}
AGAIN = "And what about Tokyo?"


def _final_call(family: str, response: Json) -> Json:
    """The recorded final_result call: its id and its arguments (as the model wrote them)."""
    if family == "openai_chat":
        call = response["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == "final_result"
        return {"id": call["id"], "args": orjson.loads(call["function"]["arguments"])}
    (block,) = [b for b in response["content"] if b["type"] == "tool_use"]
    assert block["name"] == "final_result"
    return {"id": block["id"], "args": block["input"]}


def _echo(family: str, call: Json, how: str) -> list[Json]:
    """The final call sent back: as its output text (``text``), as other words (``summary``), or
    as the call itself with no result (``call``)."""
    text = {
        "text": orjson.dumps(call["args"]).decode(),
        "fenced": "```json\n"
        + orjson.dumps(call["args"], option=orjson.OPT_INDENT_2).decode()
        + "\n```",
        "summary": "I looked it up for you.",
    }.get(how)
    if family == "openai_chat":
        if text is not None:
            return [{"role": "assistant", "content": text}]
        args = orjson.dumps(call["args"]).decode()
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": "final_result", "arguments": args},
                    }
                ],
            }
        ]
    if text is not None:
        return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
    block = {"type": "tool_use", "id": call["id"], "name": "final_result", "input": call["args"]}
    return [{"role": "assistant", "content": [block]}]


def _answer(family: str, model: str) -> Json:
    if family == "openai_chat":
        return {
            "id": "chatcmpl-D3SrR2resumed",
            "object": "chat.completion",
            "created": 1769718400,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Tokyo: rainy, 18C."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 260, "completion_tokens": 9, "total_tokens": 269},
        }
    return {
        "id": "msg_01Resumed",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "The largest city in Japan is Tokyo."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 260, "output_tokens": 11},
    }


def _resumed(family: str, how: str) -> RunAnalysis:
    recorded = load(CORPUS / RUNS[family])
    last = recorded[-1]
    body = orjson.loads(orjson.dumps(last.request_json()))  # a copy: the recorded one stays
    response = orjson.loads(b"".join(c for _, c in last.response_chunks))
    call = _final_call(family, response)
    user = (
        {"role": "user", "content": AGAIN}
        if family == "openai_chat"
        else {"role": "user", "content": [{"type": "text", "text": AGAIN}]}
    )
    body["messages"] = [*body["messages"], *_echo(family, call, how), user]
    resumed = Exchange(
        method="POST",
        url=last.url,
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.4, orjson.dumps(_answer(family, str(response.get("model")))))],
    )
    exchanges = [*recorded, resumed]
    for i, ex in enumerate(exchanges):
        ex.seq = i
    return analyse(exchanges)


def _c(run: RunAnalysis) -> list[tuple[str, str, int | None]]:
    return [(f.code, f.severity.value, f.seq) for f in run.findings if f.layer == "C"]


@pytest.mark.parametrize("family", sorted(RUNS))
@pytest.mark.parametrize("how", ["text", "fenced"])
def test_the_output_call_written_back_as_text_is_no_dropped_result(family: str, how: str) -> None:
    """Was: C.dropped_tool_result (error) and C.assistant_not_echoed (warning) on the resume."""
    run = _resumed(family, how)
    assert len(run.conversations) == 1
    n = len(run.turns) - 1
    assert _c(run) == [("C.output_tool_as_text", "info", n)]
    assert run.turns[n].c.echoed_assistant is True


@pytest.mark.parametrize("family", sorted(RUNS))
def test_twin_the_call_echoed_without_its_result_is_still_dropped(family: str) -> None:
    run = _resumed(family, "call")
    assert ("C.dropped_tool_result", "error", len(run.turns) - 1) in _c(run)
    assert "C.output_tool_as_text" not in [c for c, _, _ in _c(run)]


@pytest.mark.parametrize("family", sorted(RUNS))
def test_twin_other_words_are_not_the_calls_echo(family: str) -> None:
    run = _resumed(family, "summary")
    n = len(run.turns) - 1
    codes = _c(run)
    assert ("C.assistant_not_echoed", "warning", n) in codes
    assert ("C.dropped_tool_result", "error", n) in codes
