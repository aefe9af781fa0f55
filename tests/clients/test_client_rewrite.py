"""A tool result the client itself rewrites shorter after the model saw it whole (issue 90: "a
client's real history rewrite is called trimming"), recorded with the real framework through the
real ``looptap run`` against a scripted upstream.

openai-agents 0.24.0 (the suite's environment, as tests/clients/test_context.py's openai-agents
rows): the documented hook for editing what goes to the model, ``RunConfig(
call_model_input_filter=…)``, given a user's filter that keeps the latest tool output whole and cuts
every older one to its first 20 characters (``WEATHER: Paris is sunny`` becomes ``WEATHER: Paris is
su``). Nothing on the wire says a framework managed the context (no placeholder, no summary, no
API edit): the model is shown a history that never happened, ``C.history_mutated`` at the round
trip that first sends each shortened output, and never ``C.history_trimmed``. On the Responses API
(the agent's default) and on Chat Completions (``OpenAIChatCompletionsModel``).

The issue's second stack, LlamaIndex.TS (llamaindex 0.12.1, @llamaindex/workflow 1.1.25,
@llamaindex/openai 0.4.23, zod 4.6.7; Node, a prefix of .npm-clients' kind): an app that keeps the
chat (the agent's ``Memory``) and shortens each stored tool result to 20 characters before the next
question, passed back as ``chatHistory``: ``C.history_mutated`` at the next question's request.

On c86d115d: an info ``C.history_trimmed`` ("intentional trimming or summarising looks like this";
"cleared … in place") where the mutation is.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.clients.clients import Client
from tests.clients.outcome import keep
from tests.clients.route import route
from tests.clients.test_matrix import _explain, _final, _findings, _interpreter, _run
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

CITIES = ("Paris", "Tokyo", "Berlin")

OPENAI_AGENTS_FILTER = """
import asyncio
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.run import CallModelData, ModelInputData
set_tracing_disabled(True)
if API == "chat":
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI
    model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=AsyncOpenAI())
else:
    model = "gpt-4o"
def shorten_older_outputs(data: CallModelData) -> ModelInputData:
    # the user's filter: the latest tool output whole, every older one cut to 20 characters
    items = [dict(i) if isinstance(i, dict) else i for i in data.model_data.input]
    outputs = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    for item in outputs[:-1]:
        item["output"] = str(item["output"])[:20]
    return ModelInputData(input=items, instructions=data.model_data.instructions)
agent = Agent(name="weather_agent", instructions=SYSTEM, tools=[function_tool(get_weather)], model=model)
async def main():
    result = await Runner.run(agent, TASK, run_config=RunConfig(call_model_input_filter=shorten_older_outputs))
    out(final=result.final_output)
asyncio.run(main())
"""  # noqa: E501


def _route(req: ScriptedRequest) -> Reply:
    """One get_weather call per request, for each city in turn, then the forecast."""
    done = len(req.tool_results())
    if done < len(CITIES):
        return Reply.tool("get_weather", {"city": CITIES[done]}, what=f"call:{CITIES[done]}")
    return Reply.say("FORECAST: " + ", ".join(CITIES), what="answer")


@pytest.mark.slow(
    reason="openai-agents' filter live (openai-agents runs live by default in test_matrix.py and "
    "test_context.py); these runs' recordings are judged by default in "
    "tests/cassettes/analysis/test_clients_recorded.py"
)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_tool_output_the_client_shortened_is_a_mutation(api: str, tmp_path: Path) -> None:
    c = Client(f"openai-agents filter {api}", "openai-agents", "", "test",
               f"\nAPI = {api!r}" + OPENAI_AGENTS_FILTER, (), "")  # fmt: skip
    interp = _interpreter(c)
    if subprocess.run([*interp, "-c", "import agents"], capture_output=True).returncode:
        pytest.skip(f"openai-agents is not in {interp[0]}")
    with ScriptedUpstream(_route, validate=True) as up:
        proc, out = _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)
    keep(out, f"openai-agents_filter_shorter_{api}")
    why = _explain(proc, up)
    assert (_final(proc) or "").startswith("FORECAST"), why
    _cas, an = _findings(out)
    said = [f"{f.code} {f.severity} seq={f.seq}: {f.message}" for f in an.findings]
    convs = [(cv.kind, cv.turns) for cv in an.conversations if cv.turns]
    assert convs == [("main", [0, 1, 2, 3])], (convs, said)
    mutated = [(f.seq, f.severity) for f in an.findings if f.code == "C.history_mutated"]
    # Paris's output first sent cut at #2, Tokyo's at #3: each the client's rewrite
    assert mutated == [(2, "warning"), (3, "warning")], said
    assert not [f for f in an.findings if f.code in ("C.history_trimmed", "A.context_edited")]


LLAMAINDEX_TS_HISTORY = """
const { agent } = need("@llamaindex/workflow");
const { openai } = need("@llamaindex/openai");
const { tool } = need("llamaindex");
const { z } = createRequire(need.resolve("llamaindex"))("zod");
(async () => {
  const getWeather = tool({ name: "get_weather", description: "The weather in a city right now.",
    parameters: z.object({ city: z.string() }), execute: ({ city }) => weather(city) });
  const a = agent({ llm: openai({ model: "gpt-4o" }), tools: [getWeather], systemPrompt: SYSTEM });
  const state = a.createInitialState();
  await a.run("What is the weather in Paris?", { state });
  // the app keeps the chat, and shortens each stored tool result before the next question
  const history = (await state.memory.get()).map((m) => {
    const r = m.options && m.options.toolResult;
    if (!r) return m;
    const cut = String(r.result).slice(0, 20);
    return { ...m, content: cut, options: { ...m.options, toolResult: { ...r, result: cut } } };
  });
  const r = await a.run("And in Tokyo?", { chatHistory: history });
  out({ final: String(r.data.result) });
})();
"""


def test_llamaindex_ts_history_the_app_shortened_is_a_mutation(tmp_path: Path) -> None:
    """The matrix's route: #0 two calls, #1 one, #2 the forecast, then #3 the next question with
    the shortened history."""
    c = Client("llamaindex-ts history", "@llamaindex/workflow", "", "node",
               LLAMAINDEX_TS_HISTORY, (), "")  # fmt: skip
    _interpreter(c)  # skips without node or the package
    with ScriptedUpstream(route, validate=True) as up:
        proc, out = _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)
    keep(out, "llamaindex-ts_history_shorter")
    why = _explain(proc, up)
    assert (_final(proc) or "").startswith("FORECAST"), why
    _cas, an = _findings(out)
    said = [f"{f.code} {f.severity} seq={f.seq}: {f.message}" for f in an.findings]
    convs = [(cv.kind, cv.turns) for cv in an.conversations if cv.turns]
    assert convs == [("main", [0, 1, 2, 3])], (convs, said)
    assert [(f.code, f.seq, f.severity) for f in an.findings if f.code != "A.usage_missing"] == [
        ("C.history_mutated", 3, "warning")
    ], said
