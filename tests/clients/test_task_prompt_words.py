"""A framework whose every task prompt mentions a summary (issue 90: "a word makes a side call"),
recorded with the real framework through the real ``looptap run`` against the matrix's scripted
upstream.

CrewAI 1.15.30 (``.venv-crewai``) ends every task prompt with its ``expected_output`` text
(crewai/translations/en.json): "…you MUST return the actual complete content as the final answer,
not a summary." With a model CrewAI gives no function calling (``o1-mini``: ``is_o1_model``), its
agent runs the text protocol (Thought / Action / Observation), so that prompt is in every request.
The client bug is planted in the run, as a user's wrapper around the OpenAI SDK would make it:
the second request leaves out the model's first answer. Expected: one conversation, the planted
``C.assistant_not_echoed`` found at #1, no side call.

Read so on c86d115d too: CrewAI puts the words in the task's opening user message, never in the
last message of a continuing request, which the base's compaction rule read. A guard; the
recording is a core fixture (tests/cassettes/analysis/test_clients_recorded.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.clients.clients import Client
from tests.clients.outcome import keep
from tests.clients.route import route
from tests.clients.test_matrix import _explain, _final, _findings, _interpreter, _run
from tests.support.recorder import needs_recorder
from tests.support.scripted import ScriptedUpstream

pytestmark = [needs_recorder]

WORDS = "you MUST return the actual complete content as the final answer, not a summary."

CREWAI_PLANTED = """
# the planted client bug: the second request leaves out the model's first answer
import openai.resources.chat.completions as _cc
_create = _cc.Completions.create
_seen = [0]
def _planted(self, *a, **kw):
    _seen[0] += 1
    msgs = kw.get("messages")
    if _seen[0] == 2 and msgs and msgs[-2].get("role") == "assistant":
        kw["messages"] = msgs[:-2] + msgs[-1:]
    return _create(self, *a, **kw)
_cc.Completions.create = _planted
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool
weather_tool = tool("get_weather")(get_weather)
agent = Agent(role="Weather assistant", goal="Report the weather in every city asked about", backstory=SYSTEM,
              tools=[weather_tool], llm=LLM(model="o1-mini"), verbose=False)
task = Task(description=TASK, expected_output="The weather in each city", agent=agent)
out(final=str(Crew(agents=[agent], tasks=[task], verbose=False).kickoff()))
"""  # noqa: E501


def test_crewai_task_prompt_saying_not_a_summary_is_one_conversation(tmp_path: Path) -> None:
    c = Client("crewai not a summary", "crewai", "", "crewai", CREWAI_PLANTED, (), "")
    interp = _interpreter(c)
    if subprocess.run([*interp, "-c", "import crewai"], capture_output=True).returncode:
        pytest.skip(f"crewai is not in {interp[0]} (tests/clients/requirements-crewai.txt)")
    with ScriptedUpstream(route, validate=True) as up:
        proc, out = _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)
    keep(out, "crewai_not_a_summary_planted")
    why = _explain(proc, up)
    assert "FORECAST" in (_final(proc) or ""), why
    cas, an = _findings(out)
    bodies = [json.loads(e.request_body) for e in cas.exchanges]
    assert len(bodies) == 5 and all(WORDS in json.dumps(b) for b in bodies), why
    said = [f"{f.code} {f.severity} seq={f.seq}: {f.message}" for f in an.findings]
    convs = [(cv.kind, cv.parent_seq, cv.turns) for cv in an.conversations if cv.turns]
    assert convs == [("main", None, [0, 1, 2, 3, 4])], (convs, said)
    serious = [(f.code, f.seq) for f in an.findings if f.severity in ("warning", "error")]
    # the plant, and #2 putting the left-out answer back (the framework's own list kept it)
    assert serious == [("C.assistant_not_echoed", 1), ("C.history_mutated", 2)], said
