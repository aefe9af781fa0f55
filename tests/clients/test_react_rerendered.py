"""Issue 70 item 6: a LlamaIndex ReAct step re-rendered with the same words is the answer echoed.

Recorded for real: LlamaIndex's ``ReActAgent`` (llama-index-core 0.14, the frameworks
environment) through ``looptap run`` against a scripted model whose step calls a tool with a
boolean and a null argument (``{"city": "Paris", "metric": true, "station": null}``). LlamaIndex
sends the step back re-rendered from its parsed form, the ``Action Input`` as a Python dict
(``{'city': 'Paris', 'metric': True, 'station': None}``): the same words, JSON's literals spelt as
Python's. It was read as ``C.assistant_not_echoed``; now the literals compare alike.

Twin: the same agent whose re-rendering changes a value (the city) still fires.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from looptap.cassettes.analysis import Finding
from looptap.cassettes.reading import open_run
from tests.clients.test_matrix import _SCRUB, CLIENTS_PYTHON
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

AGENT = r'''
import asyncio, json, os, sys
from llama_index.core.agent.react.types import ActionReasoningStep
from llama_index.core.agent.workflow import ReActAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI

if sys.argv[1] == "changed":  # the bug: the step re-rendered with another value
    rendered = ActionReasoningStep.get_content
    ActionReasoningStep.get_content = lambda self: rendered(self).replace("Paris", "Lyon")

def get_weather(city: str, metric: bool = False, station: str | None = None) -> str:
    """The weather in a city right now."""
    return f"WEATHER: {city} is sunny, {'21 C' if metric else '70 F'}"

llm = OpenAI(model="gpt-4o", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
agent = ReActAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm)
async def main():
    print(json.dumps({"final": str(await agent.run("Weather in Paris, in Celsius?"))}), flush=True)
asyncio.run(main())
'''  # noqa: E501
STEP = (
    "Thought: I need the weather in Celsius.\nAction: get_weather\n"
    'Action Input: {"city": "Paris", "metric": true, "station": null}'
)
FINAL = "Thought: I can answer without using any more tools.\nAnswer: Paris is sunny, 21 C."


def _route(step: str) -> Callable[[ScriptedRequest], Reply]:
    def route(req: ScriptedRequest) -> Reply:
        steps = sum(1 for m in req.messages if isinstance(m, dict) and m.get("role") == "assistant")
        return Reply.say(step if steps == 0 else FINAL)

    return route


def _record(tmp: Path, mode: str, step: str = STEP) -> tuple[list[Finding], str]:
    if not CLIENTS_PYTHON.exists():
        pytest.skip(f"no frameworks environment at {CLIENTS_PYTHON} (bash .ci/run makes it)")
    (tmp / "agent.py").write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SCRUB}
    env.update(HOME=str(tmp), OPENAI_API_KEY="sk-looptap-react", PYTHONUNBUFFERED="1")
    with ScriptedUpstream(_route(step)) as up:
        proc = progress.run(
            [*RECORDER, "run", "-o", "run.jsonl", "--confdir", str(tmp / "conf"),
             "--upstream", f"openai={up.url}", "--", str(CLIENTS_PYTHON), "agent.py", mode],
            env=env, capture_output=True, text=True, cwd=tmp, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = json.loads(proc.stdout.strip().splitlines()[-1])["final"]
    assert final == "Paris is sunny, 21 C.", proc.stdout
    run = open_run(tmp / "run.jsonl", whole=True, cache=False)
    assert [list(c.turns) for c in run.analysis.conversations] == [[0, 1]]
    second = run.by_seq(1)
    echo = second[1].request.messages[-2] if second is not None and second[1].request else None
    assert echo is not None and echo.role == "assistant"
    return [f for f in run.analysis.findings if f.severity != "info"], echo.parts[0].text or ""


def test_a_react_step_re_rendered_with_the_same_words_is_echoed(tmp_path: Path) -> None:
    """Was: C.assistant_not_echoed (warning) on turn 1."""
    found, echo = _record(tmp_path, "same")
    assert "{'city': 'Paris', 'metric': True, 'station': None}" in echo  # as LlamaIndex sent it
    assert found == []


def test_twin_a_step_re_rendered_with_another_value_is_not_echoed(tmp_path: Path) -> None:
    found, echo = _record(tmp_path, "changed")
    assert "'city': 'Lyon'" in echo
    assert [(f.code, f.turn) for f in found] == [("C.assistant_not_echoed", 1)]


#: Issue 83 item 5c: the step written otherwise, which LlamaIndex reads and re-renders with the
#: same words: JSON escapes written back as the characters, the Action Input fenced (written back
#: bare) and a sentence after it (dropped). (A step without its "Thought:" label, added back, was
#: read already; tests/cassettes/analysis/test_text_protocol.py has each form alone.)
WRITTEN_OTHERWISE = (
    "Thought: I need the weather.\nAction: get_weather\nAction "
    'Input: ```json\n{"city": "Par\\u00eds", "metric": true}\n```\n\nI will wait for the '
    "observation."
)


def test_a_react_step_written_otherwise_is_echoed_as_llama_index_renders_it(
    tmp_path: Path,
) -> None:
    """Was: C.assistant_not_echoed on turn 1."""
    found, echo = _record(tmp_path, "same", WRITTEN_OTHERWISE)
    assert "Action Input: {'city': 'París', 'metric': True}" in echo, echo
    assert found == [], found
