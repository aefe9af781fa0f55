"""The Vercel AI SDK's own spans (tests/interop/traces/ai-sdk.otlp.json, made by its telemetry on
a real run) with what its reader does not read put in: a prompt part of a kind it does not know
(a file), a provider it has no profile of (the OpenAI Responses model). Each is said unread on
its round trip (``partial``, named), and nothing is judged on it (issue 102 item 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.cli import main
from tests.interop.test_import_traces import show_json

TRACE = Path(__file__).with_name("traces") / "ai-sdk.otlp.json"


def _calls(doc: dict[str, Any]) -> list[dict[str, str]]:
    """The attributes (key → its value object) of each model call span, in the file's order."""
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    return [
        {a["key"]: a["value"] for a in s["attributes"]}
        for s in spans
        if s["name"] in ("ai.generateText.doGenerate", "ai.streamText.doStream")
    ]


def _imported(
    doc: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> list[dict[str, Any]]:
    src, out = tmp_path / "changed.otlp.json", tmp_path / "changed.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    return show_json(out, capsys)


def _warnings(views: list[dict[str, Any]]) -> list[str]:
    return [f["code"] for v in views for f in v["findings"] if f["severity"] != "info"]


def test_a_prompt_part_it_does_not_read_is_named_and_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = orjson.loads(TRACE.read_bytes())
    by_id = {s["spanId"]: s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]}  # fmt: skip
    changed = 0
    for s in by_id.values():
        for a in s["attributes"]:
            if a["key"] == "ai.prompt.messages":
                msgs = orjson.loads(a["value"]["stringValue"])
                msgs[1]["content"].append(
                    {"type": "file", "mediaType": "image/png", "data": "AA=="}
                )
                a["value"] = {"stringValue": orjson.dumps(msgs).decode()}
                changed += 1
    assert changed == 6
    views = _imported(doc, tmp_path, capsys)
    assert len(views) == 6
    for v in views:
        assert v["read"] == "partial" and "messages: a 'file' part, not read" in v["unread"], v[
            "unread"
        ]
        assert any("of the AI SDK's prompt not read" in n for n in v["notes"])
    assert _warnings(views) == []
    # what it did read is the run's: its tool calls and results
    assert sum(len(v["tool_calls"]) for v in views) == 4


def test_a_provider_it_has_no_profile_of_is_said_and_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``openai.responses`` (the ``openai()`` default): its prompt is not the Responses request
    the SDK sent (item references, its own input items), so its content is not read; its model,
    usage and timing are."""
    doc = orjson.loads(TRACE.read_bytes())
    for a in (x for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
              for x in s["attributes"]):  # fmt: skip
        if a["key"] in ("ai.model.provider", "gen_ai.system"):
            a["value"] = {"stringValue": "openai.responses"}
    views = _imported(doc, tmp_path, capsys)
    assert len(views) == 6
    for v in views:
        assert v["read"] != "complete" and v["tool_calls"] == []
        assert any("'openai.responses' is one looptap has no profile of" in n for n in v["notes"])
        assert v["usage"]["input"] and v["model_requested"] == "gpt-4o-mini"
    assert _warnings(views) == []
    assert sorted(v["usage"]["output"] for v in views) == sorted(
        int(c["gen_ai.usage.output_tokens"]["intValue"]) for c in _calls(doc)
    )
