"""``looptap why`` on the most common client bug (issue 71 item 8): a real-SDK agent
(tests/why/why_agent.py ``--drop-answer``: openai Chat, Anthropic Messages) leaves the answer that
made the tool calls out of the history and sends the results anyway; the API (a scripted fake of
the project's own) answers with its pairing 400, in its own words (docs/WIRE.md). ``why`` proposes
the client's repair, the recorded answer put back, runs it through the real recorder and fork, and
names the client (C) with the fix."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.support.recorder import needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream
from tests.why.test_why import VARIANT, _why, record_run, shown

pytestmark = [needs_recorder]

AGENT = ("--drop-answer", "--expect", "rain")


def _has_calls(m: object) -> bool:
    if not isinstance(m, dict) or m.get("role") != "assistant":
        return False
    content = m.get("content")
    blocks = content if isinstance(content, list) else []
    return bool(m.get("tool_calls")) or any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks
    )


def route(req: ScriptedRequest) -> Reply:
    """Both cities in one answer; results sent without the answer that asked for them: the
    pairing 400 (OpenAI: openai/openai-go#43; Anthropic: anthropics/claude-code#13460)."""
    results = req.tool_results()
    if not results:
        return Reply(
            calls=(Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Lyon"}))
        )
    if not any(_has_calls(m) for m in req.body.get("messages") or []):
        if req.family == "anthropic":
            return Reply.refuse(
                "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                "toolu_01. Each `tool_result` block must have a corresponding `tool_use` block in "
                "the previous message."
            )
        return Reply.refuse(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'.",
            param="messages.[2].role",
        )
    return Reply.say("Paris: sunny; Lyon: rain." if "rain" in results else "No idea.")


@pytest.mark.slow(
    reason=shown(
        "test_why_repair.py::test_why_puts_the_dropped_answer_back_as_the_c_repair (in process, "
        "Chat and Anthropic)"
    )
)
@pytest.mark.parametrize(
    "family", ["chat", pytest.param("anthropic", marks=pytest.mark.slow(reason=VARIANT))]
)
def test_why_names_the_client_and_puts_the_dropped_answer_back(family: str, tmp_path: Path) -> None:
    (tmp_path / "rec").mkdir()
    run = record_run(tmp_path / "rec", route, *AGENT, "--family", family)
    # K=3: the repair runs alone, against the recorded run only (3 of 3 is shown, 2 of 2 is not)
    only_c = ("--layer", "C", "--samples", "3", "-o", str(tmp_path / "w"))
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(tmp_path, run, fake, *only_c, agent=AGENT, family=family)
    assert rc == 0, err[-4000:]
    lines = out.splitlines()
    assert lines[0].startswith("verdict: the client (C): C at c1 turn 1 (the dropped answer"), out
    assert any(ln.startswith("to confirm a fix: looptap why ") for ln in lines), out
    v = orjson.loads((tmp_path / "w" / "why.json").read_text())["verdict"]
    assert (v["layer"], v["turn"], v["flips"], v["samples"]) == ("C", 1, 3, 3), v
    # every repaired request carried the answer again, so the API answered it
    live = [x for x in fake.log if x.request.tool_results()]
    assert live and all(any(_has_calls(m) for m in x.request.body["messages"]) for x in live)
