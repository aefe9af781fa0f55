"""Issue 102 item 5 on real traffic: the openai SDK (the test environment's) run under ``looptap
run`` against a scripted loopback upstream, recorded by the real recorder (mitmproxy): an
embedding the upstream answers 404, a chat answer that writes its tool call as Hermes text, and
one whose output tokens equal the request's ``max_tokens`` under ``stop``. One run, read many."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
CAPPED = "Roses are red, violets are"
#: The scripted upstream counts an answer's output tokens as its message's JSON size / 4: the cap
#: the agent asks for is that count, so the answer ends exactly at it, finish ``stop``.
CAP = len(json.dumps({"role": "assistant", "content": CAPPED})) // 4

AGENT = f"""
import openai
c = openai.OpenAI(max_retries=0)
try:
    c.embeddings.create(model="text-embedding-4", input="hi")
except openai.NotFoundError as e:
    print("embedding refused:", e.status_code)
tools = [{{"type": "function", "function": {{"name": "get_weather", "parameters": {{
    "type": "object", "properties": {{"city": {{"type": "string"}}}}}}}}}}]
a = c.chat.completions.create(model="gpt-4o-mini", tools=tools,
    messages=[{{"role": "user", "content": "Weather in Paris?"}}])
print("answer:", a.choices[0].finish_reason, a.choices[0].message.tool_calls)
b = c.chat.completions.create(model="gpt-4o-mini", max_tokens={CAP},
    messages=[{{"role": "user", "content": "A poem."}}])
print("poem:", b.choices[0].finish_reason, b.usage.completion_tokens)
"""


def _route(req: ScriptedRequest) -> Reply:
    return Reply.say(HERMES if req.tools else CAPPED)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("wire")
    (tmp / "agent.py").write_text(AGENT)
    with ScriptedUpstream(_route) as fake:
        proc = progress.run(
            [*RECORDER, "run", "-o", str(tmp / "run.jsonl"), "--confdir", str(tmp / "conf"),
             "--upstream", f"openai={fake.url}", "--", sys.executable, str(tmp / "agent.py")],
            env=clean_env(OPENAI_API_KEY="sk-test-wire"), capture_output=True, text=True, cwd=tmp,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "embedding refused: 404" in proc.stdout and "answer: stop None" in proc.stdout
    assert f"poem: stop {CAP}" in proc.stdout, proc.stdout
    return open_run(tmp / "run.jsonl", whole=True).analysis


@needs_recorder
def test_the_sdks_failed_embedding_is_an_a_finding_on_its_round_trip(recorded: Any) -> None:
    (f,) = [f for f in recorded.findings if f.code == "A.http_error"]
    assert f.seq == 0 and f.turn is None and f.details["operation"] == "embed"
    assert f.details["status"] == 404 and 0 not in recorded.turns


@needs_recorder
def test_the_tool_call_written_as_text_and_the_stop_at_the_cap(recorded: Any) -> None:
    found = sorted((f.code, f.seq, f.severity.value) for f in recorded.findings)
    assert found == [
        ("A.http_error", 0, "error"),
        ("A.stop_at_cap", 2, "warning"),
        ("E.tool_call_as_text", 1, "warning"),
    ], [(f.code, f.message) for f in recorded.findings]
