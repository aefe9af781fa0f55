"""Three frameworks' own windows over a chat's history (issue 90: "AutoGen's buffered context,
Strands' sliding window and LlamaIndex's memory buffer are read right"), each recorded with the
real framework through the real ``looptap run`` against a scripted upstream: three questions in
one chat, each looked up with a tool, the framework dropping the oldest messages on its own.
Expected: one conversation, ``C.history_trimmed`` (kind ``trimmed``) at each round trip where the
window dropped messages and nowhere else, no ``C.history_mutated``, nothing else said (a prompt
cache broken by the trim folds under it; the stream's missing usage is a true info).

* AutoGen ``BufferedChatCompletionContext(buffer_size=4)`` (autogen-agentchat 0.7.5,
  ``.venv-agents``): every request sends the agent's latest 4 messages, so the window slides at
  every request from #2 on, its head an answer once the first question is gone;
* Strands ``SlidingWindowConversationManager(window_size=4)`` (strands-agents 1.62.0,
  ``.venv-agents``): after an invocation, the oldest messages past 4 go (tool pairs kept whole);
* LlamaIndex ``ChatMemoryBuffer.from_defaults(token_limit=30)`` with a ``FunctionAgent``
  (llama-index-core 0.14.25, ``.venv-clients``): the history the memory gives back is its latest
  messages within the token limit.

On c86d115d all three are read so. From becef044 (session 47) AutoGen's was not: its window's
second and later slides (a head that starts with an answer) were taken for a dropped middle group,
a false ``C.history_mutated`` warning at #3, #4 and #5 (``_block_drop`` in
cassettes/analysis/dispatch/_managed.py; mended this session: with no opening left, a drop from
the first answer is the window's head again).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clients.clients import Client
from tests.clients.outcome import keep
from tests.clients.test_matrix import PYTHONS, _explain, _final, _findings, _interpreter, _run
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

CITIES = ("Paris", "Tokyo", "Berlin")
QUESTIONS = ("What is the weather in Paris?", "And in Tokyo?", "And in Berlin?")
#: Said of a run and true whatever the window did (the stream reported no usage).
TRUE_INFO = ("A.usage_missing",)

AUTOGEN_BUFFERED = f"""
import asyncio
from autogen_agentchat.agents import AssistantAgent
from autogen_core.model_context import BufferedChatCompletionContext
from autogen_ext.models.openai import OpenAIChatCompletionClient
async def main():
    model = OpenAIChatCompletionClient(model="gpt-4o")
    # the latest 4 messages of the agent's context go to the model
    agent = AssistantAgent("weather_agent", model_client=model, tools=[get_weather], system_message=SYSTEM,
                           max_tool_iterations=5, model_context=BufferedChatCompletionContext(buffer_size=4))
    for q in {QUESTIONS!r}:
        result = await agent.run(task=q)
    out(final=result.messages[-1].content)
    await model.close()
asyncio.run(main())
"""  # noqa: E501

STRANDS_SLIDING = f"""
from strands import Agent, tool
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.models.openai import OpenAIModel
model = OpenAIModel(client_args={{"api_key": os.environ["OPENAI_API_KEY"]}}, model_id="gpt-4o")
agent = Agent(model=model, tools=[tool(get_weather)], system_prompt=SYSTEM, callback_handler=None,
              conversation_manager=SlidingWindowConversationManager(window_size=4))
for q in {QUESTIONS!r}:
    final = str(agent(q))
out(final=final)
"""

LLAMA_INDEX_MEMORY = f"""
import asyncio
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.llms.openai import OpenAI
agent = FunctionAgent(tools=[get_weather], llm=OpenAI(model="gpt-4o"), system_prompt=SYSTEM)
memory = ChatMemoryBuffer.from_defaults(token_limit=30)
async def main():
    for q in {QUESTIONS!r}:
        final = str(await agent.run(q, memory=memory))
    out(final=final)
asyncio.run(main())
"""


def _route(req: ScriptedRequest) -> Reply:
    """A get_weather call for each city the latest question names whose result the request does
    not carry, then the forecast for it."""
    texts = req.user_texts()
    question = texts[-1] if texts else ""
    done = set(re.findall(r"WEATHER: (\w+)", json.dumps(req.messages)))
    asked = [c for c in CITIES if c in question]
    todo = [c for c in asked if c not in done]
    if todo:
        return Reply.tool("get_weather", {"city": todo[0]}, what=f"call:{todo[0]}")
    return Reply.say("FORECAST: " + ", ".join(asked or ["none"]), what="answer")


@dataclass(frozen=True)
class Case:
    id: str
    package: str
    module: str
    runtime: str
    script: str
    #: the round trips where the window dropped messages
    trimmed: tuple[int, ...]
    #: why it is not read right yet: a strict expected failure
    pending: str = ""


CASES = (
    Case("autogen buffered context", "autogen-agentchat", "autogen_agentchat", "agents_py",
         AUTOGEN_BUFFERED, (2, 3, 4, 5)),
    Case("strands sliding window", "strands-agents", "strands", "agents_py", STRANDS_SLIDING, (4,)),
    Case("llama-index memory buffer", "llama-index-core", "llama_index.core", "frameworks",
         LLAMA_INDEX_MEMORY, (4,)),
)  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_frameworks_window_is_a_trim_said_where_it_dropped(
    case: Case, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    c = Client(case.id, case.package, "", case.runtime, case.script, (), "")
    interp = _interpreter(c)
    if subprocess.run([*interp, "-c", f"import {case.module}"], capture_output=True).returncode:
        pytest.skip(f"{case.package} is not in {interp[0]} ({PYTHONS[case.runtime][1]})")
    if case.pending:
        request.applymarker(pytest.mark.xfail(reason=case.pending, strict=True))
    with ScriptedUpstream(_route, validate=True) as up:
        proc, out = _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)
    keep(out, f"{case.id.replace(' ', '_')}")
    why = _explain(proc, up)
    assert "FORECAST: Berlin" in (_final(proc) or ""), why
    _cas, an = _findings(out)
    said = [f"{f.code} {f.severity} seq={f.seq}: {f.message}" for f in an.findings]
    convs = [(cv.kind, cv.turns) for cv in an.conversations if cv.turns]
    assert convs == [("main", [0, 1, 2, 3, 4, 5])], (convs, said)
    trims = [f for f in an.findings if f.code == "C.history_trimmed"]
    assert [(f.seq, f.details.get("kind")) for f in trims] == [
        (s, "trimmed") for s in case.trimmed
    ], said
    others = [
        s
        for f, s in zip(an.findings, said, strict=True)
        if f not in trims
        and f.details.get("caused_by") != "C.history_trimmed"
        and f.code not in TRUE_INFO
    ]
    assert not others, others
