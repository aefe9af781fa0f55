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
    span = _span(
        "1", None, 1, gen_ai__operation__name="chat", gen_ai__provider__name=provider,
        gen_ai__request__model="gpt-4o-mini" if provider == "openai" else "gemini-2.5-flash",
        gen_ai__input__messages=[_user("Weather in Paris?")],
        gen_ai__tool__definitions=[WEATHER], gen_ai__output__messages=out, **more,
    )  # fmt: skip
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
