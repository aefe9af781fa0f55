"""Issue 102 item 2: an API's own answer shape written as ``gen_ai.output.messages`` (OpenAI's
choices list, Gemini's candidates) is read by the family's provider, never as empty parts; a
second choice is said; an answer written as an empty text part while the span reports output
tokens is read as not kept, never judged empty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.cli import main
from tests.interop.test_import_traces import _span, _user, show_json

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CHOICE_CALL = {
    "index": 0,
    "message": {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    "finish_reason": "tool_calls",
}
CHOICE_TEXT = {
    "index": 0,
    "message": {"role": "assistant", "content": "Sunny in Paris."},
    "finish_reason": "stop",
}
CANDIDATE_TEXT = {
    "index": 0,
    "content": {"role": "model", "parts": [{"text": "Sunny in Paris."}]},
    "finishReason": "STOP",
}


def _imported(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    out: Any,
    provider: str = "openai",
    **more: Any,
) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai__operation__name": "chat", "gen_ai__provider__name": provider,
        "gen_ai__request__model": "gpt-4o-mini" if provider == "openai" else "gemini-2.5-flash",
        "gen_ai__input__messages": [_user("Weather in Paris?")],
        "gen_ai__tool__definitions": [WEATHER], "gen_ai__output__messages": out,
    }  # fmt: skip
    span = _span("1", None, 1, **{**attrs, **more})
    n = len(list(tmp_path.glob("*.jsonl")))
    otel, run = tmp_path / f"t{n}.otel.json", tmp_path / f"run{n}.jsonl"
    otel.write_bytes(orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    assert main(["import", "-q", str(otel), "-o", str(run)]) == 0
    (v,) = show_json(run, capsys)
    return v


def _codes(v: dict[str, Any]) -> list[str]:
    return [f["code"] for f in v["findings"] if f["severity"] != "info"]


def test_openais_choices_list_as_output_messages_is_read_as_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v = _imported(tmp_path, capsys, [CHOICE_CALL])
    assert [(c["id"], c["name"], c["arguments"]) for c in v["tool_calls"]] == [
        ("call_1", "get_weather", {"city": "Paris"})
    ]
    assert v["finish_reason"]["normalised"] == "tool_call" and v["read"] == "complete"
    assert _codes(v) == []  # no false A.tool_calls_without_calls, no E.empty_response


@pytest.mark.parametrize(
    ("out", "provider"), [([CHOICE_TEXT], "openai"), ([CANDIDATE_TEXT], "gcp.gemini")]
)
def test_an_answer_in_its_apis_shape_keeps_its_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], out: Any, provider: str
) -> None:
    v = _imported(tmp_path, capsys, out, provider)
    assert v["text"] == "Sunny in Paris." and v["finish_reason"]["normalised"] == "complete"
    assert _codes(v) == []


def test_a_second_choice_is_said_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second = {**CHOICE_TEXT, "index": 1}
    v = _imported(
        tmp_path, capsys, [{**CHOICE_TEXT, "message": {"role": "assistant", "content": ""}}, second]
    )
    assert v["read"] == "partial"
    assert "answer: output messages 2 to 2 of 2 (n=2), not read" in v["unread"]
    assert _codes(v) == []  # (the first choice is empty: nothing judged of an answer half read)


def test_an_answer_written_as_an_empty_text_part_is_not_judged_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = [
        {"role": "assistant", "parts": [{"type": "text", "content": ""}], "finish_reason": "stop"}
    ]
    v = _imported(
        tmp_path, capsys, empty, gen_ai__usage__output_tokens="42", gen_ai__request__stream="true"
    )
    assert v["read"] == "partial" and _codes(v) == []
    assert any("not kept by the trace" in u for u in v["unread"])
    # with no output tokens reported, an empty answer is what the model said: judged
    v = _imported(tmp_path, capsys, empty, gen_ai__usage__output_tokens="0")
    assert "E.empty_response" in _codes(v)


# -- Anthropic's message objects and Responses' items, in any attribute, event or log record ------

ANTHROPIC_MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": "Paris"}}],
    "stop_reason": "tool_use", "usage": {"input_tokens": 12, "output_tokens": 9},
}  # fmt: skip
RESPONSES_ITEMS = [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city": "Paris"}', "status": "completed"},
]  # fmt: skip
RESPONSES_ANSWER = {
    "object": "response", "id": "resp_1", "status": "completed", "model": "gpt-4o-mini",
    "output": [{"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Sunny in Paris.",
                             "annotations": []}]}],
}  # fmt: skip


@pytest.mark.parametrize(
    ("out", "provider"),
    [([ANTHROPIC_MESSAGE], "anthropic"), (RESPONSES_ITEMS, "openai"),
     ([{**RESPONSES_ANSWER, "output": RESPONSES_ITEMS}], "openai")],
)  # fmt: skip
def test_anthropic_messages_and_responses_items_as_output_messages_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], out: Any, provider: str
) -> None:
    """An instrumentation that writes Anthropic's message object, a Responses answer or its
    output items as ``gen_ai.output.messages``: read by that family's provider as its answer
    (the call, its id, the finish), never as empty parts judged empty."""
    v = _imported(tmp_path, capsys, out, provider)
    assert [(c["name"], c["arguments"]) for c in v["tool_calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert v["read"] == "complete" and _codes(v) == []
    if out is not RESPONSES_ITEMS:  # (the answer's own stop: items alone say none)
        assert v["finish_reason"]["normalised"] == "tool_call"
        assert "finish_reason" not in v["reconstructed"]["inferred"], v["reconstructed"]


def test_a_responses_answer_keeps_its_text_and_its_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v = _imported(tmp_path, capsys, [RESPONSES_ANSWER])
    assert v["text"] == "Sunny in Paris." and v["finish_reason"]["normalised"] == "complete"
    assert _codes(v) == []


def test_responses_input_items_are_read_by_the_responses_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A request's history written as Responses input items (``function_call`` and
    ``function_call_output`` beside ``message`` items) in ``gen_ai.input.messages``."""
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Paris?"}]},
        RESPONSES_ITEMS[1],
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
    ]
    span = _span(
        "1", None, 1, gen_ai__operation__name="chat", gen_ai__provider__name="openai",
        gen_ai__request__model="gpt-4o-mini", gen_ai__input__messages=history,
        gen_ai__tool__definitions=[WEATHER], gen_ai__output__messages=[RESPONSES_ANSWER],
    )  # fmt: skip
    otel, run = tmp_path / "t.otel.json", tmp_path / "run.jsonl"
    otel.write_bytes(orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    assert main(["import", "-q", str(otel), "-o", str(run)]) == 0
    (v,) = show_json(run, capsys)
    results = [p["tool_result"] for m in v["layers"]["C"]["appended"] for p in m["parts"]
               if p["kind"] == "tool_result"]  # fmt: skip
    assert [(r["call_id"], r["content"]) for r in results] == [("call_1", "sunny, 21 C")]
    assert v["text"] == "Sunny in Paris." and _codes(v) == []


def test_an_anthropic_message_in_a_log_records_body_is_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``gen_ai.choice`` event sent as a log record whose body's ``message`` is Anthropic's
    message object, joined to its span by trace and span id: read by the Anthropic provider."""
    span = _span(
        "1", None, 1, gen_ai__operation__name="chat", gen_ai__provider__name="anthropic",
        gen_ai__request__model="claude-haiku-4-5", gen_ai__tool__definitions=[WEATHER],
    )  # fmt: skip
    record = {
        "traceId": span["traceId"], "spanId": span["spanId"], "eventName": "gen_ai.choice",
        "timeUnixNano": span["startTimeUnixNano"],
        "body": {"kvlistValue": {"values": [{"key": "message", "value": {
            "stringValue": orjson.dumps(ANTHROPIC_MESSAGE).decode()}}]}},
    }  # fmt: skip
    asked = '{"role": "user", "content": "Weather in Paris?"}'
    user = {**record, "eventName": "gen_ai.user.message", "body": {"stringValue": asked}}
    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [user, record]}]}]}
    otel, run = tmp_path / "t.otel.json", tmp_path / "run.jsonl"
    otel.write_bytes(orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
                     + b"\n" + orjson.dumps(logs) + b"\n")  # fmt: skip
    assert main(["import", "-q", str(otel), "-o", str(run)]) == 0
    (v,) = show_json(run, capsys)
    assert [(c["id"], c["name"]) for c in v["tool_calls"]] == [("toolu_1", "get_weather")]
    assert v["family"] == "anthropic" and v["read"] == "complete" and _codes(v) == []


# -- item 1: a part the import does not carry is said, never dropped -------------------------------


def test_a_part_the_rebuilt_call_cannot_carry_is_named_and_nothing_rests_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``blob`` part in the request and a ``uri`` part beside an empty answer (the conventions'
    media parts, which a rebuilt call has no place for): named unread, the round trip
    ``partial``, and no finding on the answer (not the empty answer the text alone would say)."""
    blob = {"type": "blob", "modality": "image", "content": "AAAA"}
    asked = {"role": "user", "parts": [{"type": "text", "content": "What is in it?"}, blob]}
    said = [{"role": "assistant", "parts": [{"type": "uri", "modality": "image",
                                             "uri": "https://example.invalid/a.png"}],
             "finish_reason": "stop"}]  # fmt: skip
    v = _imported(tmp_path, capsys, said, gen_ai__input__messages=[asked],
                  gen_ai__usage__output_tokens="0")  # fmt: skip
    assert v["read"] == "partial"
    assert "messages: a 'blob' part, not read" in v["unread"], v["unread"]
    assert "answer: a 'uri' part, not read" in v["unread"], v["unread"]
    assert _codes(v) == []  # (without the accounting: E.empty_response on a read answer)


def test_a_real_instrumentations_parts_it_drops_are_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenLIT 1.45.0's LangChain instrumentation writes the history's Anthropic tool calls as
    parts of its own type (``tool_use``): before, dropped without a word and the history read
    ``complete``; now each such round trip names them and is ``partial``."""
    traces = Path(__file__).with_name("traces")
    run = tmp_path / "openlit-langchain.jsonl"
    assert main(["import", "-q", str(traces / "openlit-langchain.otlp.json"), "-o", str(run)]) == 0
    views = show_json(run, capsys)
    dropped = [v for v in views if "messages: a 'tool_use' part, not read" in v["unread"]]
    assert dropped and all(v["read"] == "partial" for v in dropped)
    assert all(not [f for f in v["findings"] if f["layer"] == "C" and f["severity"] != "info"]
               for v in dropped)  # fmt: skip
