"""A tool call whose arguments carry a credential, streamed a few characters per event, through the
real ``looptap run`` (issue 54): the real openai SDK drives a tool loop against a loopback fake
(:class:`~tests.support.scripted.ScriptedUpstream`, its Chat Completions stream with the arguments
``{"user": "bob", "password": "radiance"}`` cut every 3 characters) and sends the call back.

The cassette the recorder wrote reads as what was sent: the stored arguments parse (the password
masked inside its quotes), no ``E.arguments_not_json``, the echo in the next request reads as
echoed (no ``C.assistant_not_echoed``), one conversation; the password is nowhere in the file, and
the agent got it whole (redaction is of the record, never of the traffic).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.recording import REDACTED
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

AGENT = """
import json
from openai import OpenAI

client = OpenAI()
tools = [{"type": "function", "function": {"name": "login", "parameters": {
    "type": "object", "properties": {"user": {"type": "string"}, "password": {"type": "string"}}}}}]
messages = [{"role": "user", "content": "Log me in."}]
for _ in range(3):
    text, calls = "", {}
    for chunk in client.chat.completions.create(
        model="gpt-4o", messages=messages, tools=tools, stream=True
    ):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = tc.id or call["id"]
                call["name"] += (tc.function and tc.function.name) or ""
                call["arguments"] += (tc.function and tc.function.arguments) or ""
    if not calls:
        print("answer:", text)
        break
    messages.append({"role": "assistant", "content": text or None, "tool_calls": [
        {"id": c["id"], "type": "function",
         "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls.values()]})
    for c in calls.values():
        ok = json.loads(c["arguments"]) == {"user": "bob", "password": "radiance"}
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": "in" if ok else "no"})
"""


def route(req: ScriptedRequest) -> Reply:
    if not req.tool_results():
        return Reply.tool("login", {"user": "bob", "password": "radiance"})
    return Reply.say(f"Logged {req.tool_results()[0]}.")


@pytest.mark.slow(
    reason=(
        "streamed arguments under a credential's name masked and read as JSON in process: "
        "tests/cassettes/test_redaction_readings.py; secrets through the real recorder: "
        "test_streamed_secrets_recorder.py, test_redaction_sentinels.py by default"
    )
)
def test_streamed_arguments_with_a_password_read_as_sent(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    run = tmp_path / "run.jsonl"
    with ScriptedUpstream(route, pieces=3) as fake:
        proc = progress.run(
            [*RECORDER, "run", "-o", str(run), "--confdir", str(tmp_path / "conf"),
             "--upstream", f"openai={fake.url}", "--", sys.executable, str(agent)],
            env=clean_env(OPENAI_API_KEY="sk-test-redact", LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON)),
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "answer: Logged in." in proc.stdout  # the agent got the password whole
    assert len(fake.log) == 2
    assert b"radiance" not in run.read_bytes()

    read = open_run(run, whole=True)
    (call,) = read.roundtrips[0].response.tool_calls
    assert call.arguments == {"user": "bob", "password": REDACTED}, call.arguments_raw
    assert call.arguments_error is None
    codes = [f.code for f in read.analysis.findings]
    assert "E.arguments_not_json" not in codes and "C.assistant_not_echoed" not in codes, codes
    assert [list(c.turns) for c in read.analysis.conversations] == [[0, 1]]
