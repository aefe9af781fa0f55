"""Provider evidence first, end to end (issue 103 item 1, docs/threading.md "Provider evidence
first"): the real google-genai and anthropic SDKs, each running one agent twice in one process
through the real ``looptap run``, against a loopback upstream that thinks: every Gemini answer's
parts carry a ``thoughtSignature`` and every Anthropic answer opens with a signed ``thinking``
block, each signature new. Both runs ask the same question and get the same call; the second run
sends its call/result pair twice (the issue's instance), so its request extends the first run's
request (3 messages) further than its own turn (2). Tool-call ids repeat from run to run (the
upstream numbers them per run), so only the signatures tell the runs apart.

Each run is its own conversation, every turn where its tokens say, with no false warning. On
f29135f5 the second run's request went to the first run (a false ``C.assistant_not_echoed``)."""

from __future__ import annotations

import base64
import itertools
import json
import os
import sys
import textwrap
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import read_records
from tests.support import progress
from tests.support.recorder import RECORDER, SCRUB, needs_recorder
from tests.support.tool_http import LoopbackServer

pytestmark = [needs_recorder]

QUESTION = "What is the weather in Paris? Use the tool."


class Thinking:
    """The loopback upstream: Gemini ``generateContent`` and Anthropic ``/v1/messages``. An
    answer calls ``get_weather`` while the request holds no result, then says the weather."""

    def __init__(self) -> None:
        self._sig = itertools.count(1)
        self.paths: list[str] = []

    def signature(self) -> str:
        return base64.b64encode(f"signed-thought-{next(self._sig):04d}".encode() * 3).decode()

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.paths.append(path)
        family = "gemini" if ":generateContent" in path else "anthropic"
        history = body.get("contents" if family == "gemini" else "messages") or []
        results = json.dumps(history).count(
            '"functionResponse"' if family == "gemini" else '"tool_result"'
        )
        return (self._gemini if family == "gemini" else self._anthropic)(results == 0, results)

    def _gemini(self, call: bool, n: int) -> dict[str, Any]:
        part: dict[str, Any] = (
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
            if call
            else {"text": "It is sunny in Paris."}
        )
        part["thoughtSignature"] = self.signature()
        return {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5},
            "modelVersion": "gemini-2.5-flash",
        }

    def _anthropic(self, call: bool, n: int) -> dict[str, Any]:
        think = {"type": "thinking", "thinking": "The tool says.", "signature": self.signature()}
        said: dict[str, Any] = (
            {
                "type": "tool_use",
                "id": f"toolu_run_call_{n}",
                "name": "get_weather",
                "input": {"city": "Paris"},
            }
            if call
            else {"type": "text", "text": "It is sunny in Paris."}
        )
        return {
            "id": f"msg_{self.signature()[:20]}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [think, said],
            "stop_reason": "tool_use" if call else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 5},
        }


def _server(up: Thinking) -> LoopbackServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            n = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
            raw = json.dumps(up.answer(self.path, body)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return LoopbackServer(Handler)


GEMINI = """
from google import genai
from google.genai import types
c = genai.Client()
tool = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="get_weather", description="Weather now",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}})])
cfg = types.GenerateContentConfig(tools=[tool], thinking_config=types.ThinkingConfig(include_thoughts=True))
for run in range(2):
    contents = [types.Content(role="user", parts=[types.Part.from_text(text=QUESTION)])]
    for turn in range(4):
        r = c.models.generate_content(model="gemini-2.5-flash", contents=contents, config=cfg)
        if not r.function_calls:
            break
        pair = [r.candidates[0].content, types.Content(role="user", parts=[
            types.Part.from_function_response(name=f.name, response={"result": "sunny, 21 C"})
            for f in r.function_calls])]
        contents += pair * (run + 1)  # the second run sends its pair twice
"""  # noqa: E501

ANTHROPIC = """
import anthropic
c = anthropic.Anthropic()
tools = [{"name": "get_weather", "description": "Weather now",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
for run in range(2):
    msgs = [{"role": "user", "content": QUESTION}]
    for turn in range(4):
        m = c.messages.create(model="claude-sonnet-4-5", max_tokens=2048, messages=msgs, tools=tools,
                              thinking={"type": "enabled", "budget_tokens": 1024})
        uses = [b for b in m.content if b.type == "tool_use"]
        if not uses:
            break
        pair = [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": "sunny, 21 C"} for b in uses]}]
        msgs += pair * (run + 1)  # the second run sends its pair twice
"""  # noqa: E501


@pytest.mark.slow(
    reason="two runs of a real SDK in one looptap run, a family; the same threading on the same"
    " tokens in process by default (tests/cassettes/analysis/test_threading_tokens.py, every"
    " family), each family's recording through the real recorder in test_e2e_sdks.py"
)
@pytest.mark.parametrize(("family", "code"), [("gemini", GEMINI), ("anthropic", ANTHROPIC)])
def test_two_runs_alike_are_threaded_by_their_tokens(
    tmp_path: Path, family: str, code: str
) -> None:
    up = Thinking()
    script = tmp_path / "agent.py"
    script.write_text(f"QUESTION = {QUESTION!r}\n" + textwrap.dedent(code))
    out = tmp_path / "run.jsonl"
    env = {k: v for k, v in os.environ.items() if k.upper() not in SCRUB}
    env.update(ANTHROPIC_API_KEY="sk-ant-test", GOOGLE_API_KEY="test-key", PYTHONUNBUFFERED="1")
    with _server(up) as server:
        upstream = f"{family}={server.url}"
        argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(tmp_path / "conf"),
                "--upstream", upstream, "--", sys.executable, str(script)]  # fmt: skip
        proc = progress.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(up.paths) == 4  # each run: a call, then the answer
    cas = read_records(out)
    run = analyse(cas.exchanges, parse_all(cas.exchanges))
    assert sorted(c.turns for c in run.conversations) == [[0, 1], [2, 3]]
    said = {(f.code, f.seq) for f in run.findings}
    assert not {c for c, _ in said} & {"C.assistant_not_echoed", "C.stopped_with_pending_calls"}
    serious = {(f.code, f.seq) for f in run.findings if f.severity in ("warning", "error")}
    # Anthropic: the pair sent twice answers one tool_use id twice, which the API refuses: true
    # (the client's doing), at the request that did it. Gemini sends no ids: nothing to say.
    true = {("C.duplicate_tool_result", 3), ("C.tool_results_split", 3)}
    assert serious <= (true if family == "anthropic" else set()), serious
    assert [(t.c.link, t.c.echoed_assistant) for _, t in sorted(run.turns.items())][2:] == [
        ("start", None),
        ("extends", True),
    ]
