"""The clients of the matrix: each a real SDK, framework or agent running its own tool loop on the
task of :mod:`route`, as a user would write it (the framework's documented idiom, nothing that
names looptap: every client reads the base URL ``looptap run`` exports).

A :class:`Client` says which environment runs it (``test``: the suite's own, with the current
openai/anthropic/google-genai SDKs, pydantic-ai and openai-agents; ``frameworks``:
``.venv-clients``, the frameworks that pin ``openai<3``; ``agents_py``: ``.venv-agents``, the agent
frameworks whose pins sit beside neither; ``crewai``: ``.venv-crewai``; ``node``: ``.npm-clients``),
what a clean run must look like (conversations and their turns), and which client bug is injected
into its requests for the bug run.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The three injected client bugs (tests/clients/inject/mutate.py) and the root causes that name
#: them.
BUG_CAUSES = {
    "drop_result": ("C.dropped_tool_result",),
    "wrong_id": ("C.wrong_tool_call_id", "C.orphan_tool_result"),
    "mutate_history": ("C.tool_result_altered", "C.history_mutated"),
}

#: The clients the history rewrites run on (tests/clients/test_matrix.py,
#: test_history_mutation_is_named: every variant of inject/mutate.py): an SDK and a framework of
#: each API family.
MUTATION_CLIENTS = (
    "openai-python chat",
    "openai-python responses",
    "anthropic-python",
    "google-genai",
    "openai-node runTools",
    "vercel-ai responses",
    "vercel-ai anthropic",
    "strands gemini",
)


@dataclass(frozen=True)
class Client:
    id: str
    #: What the table shows: the package whose version is reported, and the API family spoken.
    package: str
    api: str
    # "test" | "frameworks" | "agents_py" | "crewai" | "node" | "agent" (a coding agent of
    # .npm-agents: tests/clients/test_agents.py)
    runtime: str
    script: str
    #: Turns of each conversation of a clean run, sorted (one entry per conversation).
    turns: tuple[int, ...]
    bug: str
    stream: bool = False
    note: str = ""
    #: Why the bug run cannot be judged right yet (a threading case of issue 45 item 1): the bug
    #: test is then a strict expected failure, which flips to a failure the day it is read.
    pending: str = ""
    #: The clean run's conversations with turns, in order, as (kind, parent turn's seq) — the
    #: threader's labels checked against the real framework (issue 45 item 1); empty: not checked.
    kinds: tuple[tuple[str, int | None], ...] = ()


PY_PRELUDE = '''
import json, os, sys
STREAM = os.environ.get("MATRIX_STREAM") == "1"
TASK = "What is the weather in Paris, Tokyo and Berlin?"
SYSTEM = "You are a weather assistant. Use the get_weather tool for every city."
def out(**kw):
    print(json.dumps(kw), flush=True)
def get_weather(city: str) -> str:
    """The weather in a city right now."""
    return f"WEATHER: {city} is {'sunny' if city == 'Paris' else 'rainy' if city == 'Tokyo' else 'cloudy'}"
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
'''  # noqa: E501

OPENAI_CHAT = '''
from openai import OpenAI
client = OpenAI()
tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": PARAMS}}]
messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
for _ in range(8):
    if STREAM:
        text, calls = "", {}
        for chunk in client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools, stream=True,
                                                    stream_options={"include_usage": True}):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            text += delta.content or ""
            for tc in delta.tool_calls or []:
                e = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                e["id"] = tc.id or e["id"]
                e["name"] += (tc.function.name or "") if tc.function else ""
                e["arguments"] += (tc.function.arguments or "") if tc.function else ""
        message = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [{"id": e["id"], "type": "function", "function": {"name": e["name"], "arguments": e["arguments"]}}
                                     for _, e in sorted(calls.items())]
    else:
        # The idiom docs/testing.md uses: the SDK's message, dumped without its None fields (no "content").
        message = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools).choices[0].message.model_dump(exclude_none=True)
    messages.append(message)
    if not message.get("tool_calls"):
        out(final=message.get("content"))
        break
    for tc in message["tool_calls"]:
        messages.append({"role": "tool", "tool_call_id": tc["id"], "content": get_weather(**json.loads(tc["function"]["arguments"]))})
'''  # noqa: E501

OPENAI_RESPONSES = '''
from openai import OpenAI
client = OpenAI()
tools = [{"type": "function", "name": "get_weather", "description": "The weather in a city", "parameters": PARAMS, "strict": False}]
if not STREAM:  # stateless: the whole history re-sent, the model's items echoed as the SDK gave them
    items = [{"role": "user", "content": TASK}]
    for _ in range(8):
        r = client.responses.create(model="gpt-4o", instructions=SYSTEM, input=items, tools=tools)
        items += [o.model_dump(exclude_none=True) for o in r.output]
        calls = [o for o in r.output if o.type == "function_call"]
        if not calls:
            out(final=r.output_text)
            break
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": get_weather(**json.loads(c.arguments))} for c in calls]
else:  # stateful: chained with previous_response_id, only the new outputs sent
    items, previous = [{"role": "user", "content": TASK}], {}
    for _ in range(8):
        with client.responses.stream(model="gpt-4o", instructions=SYSTEM, input=items, tools=tools, **previous) as s:
            for _event in s:
                pass
            r = s.get_final_response()
        previous = {"previous_response_id": r.id}
        calls = [o for o in r.output if o.type == "function_call"]
        if not calls:
            out(final=r.output_text)
            break
        items = [{"type": "function_call_output", "call_id": c.call_id, "output": get_weather(**json.loads(c.arguments))} for c in calls]
'''  # noqa: E501

ANTHROPIC = '''
import anthropic
client = anthropic.Anthropic()
tools = [{"name": "get_weather", "description": "The weather in a city", "input_schema": PARAMS}]
messages = [{"role": "user", "content": TASK}]
for _ in range(8):
    kw = dict(model="claude-sonnet-4-5", max_tokens=1024, system=SYSTEM, messages=messages, tools=tools)
    if STREAM:
        with client.messages.stream(**kw) as s:
            m = s.get_final_message()
    else:
        m = client.messages.create(**kw)
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]})
    uses = [b for b in m.content if b.type == "tool_use"]
    if not uses:
        out(final="".join(b.text for b in m.content if b.type == "text"))
        break
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": get_weather(**b.input)} for b in uses]})
'''  # noqa: E501

GOOGLE_GENAI = '''
from google import genai
from google.genai import types
client = genai.Client(api_key=os.environ["GEMINI_API_KEY"])
if not STREAM:  # automatic function calling: the SDK runs the loop, given the Python function
    r = client.models.generate_content(model="gemini-2.5-flash", contents=TASK,
                                       config=types.GenerateContentConfig(tools=[get_weather], system_instruction=SYSTEM))
    out(final=r.text)
else:  # the loop by hand, streamed
    decl = types.FunctionDeclaration(name="get_weather", description="The weather in a city", parameters_json_schema=PARAMS)
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[decl])], system_instruction=SYSTEM,
                                         automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    contents = [types.Content(role="user", parts=[types.Part(text=TASK)])]
    for _ in range(8):
        parts = []
        for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents=contents, config=config):
            if chunk.candidates and chunk.candidates[0].content and chunk.candidates[0].content.parts:
                parts += chunk.candidates[0].content.parts
        contents.append(types.Content(role="model", parts=parts))
        calls = [p.function_call for p in parts if p.function_call]
        if not calls:
            out(final="".join(p.text or "" for p in parts))
            break
        contents.append(types.Content(role="user", parts=[
            types.Part.from_function_response(name=c.name, response={"result": get_weather(**c.args)}) for c in calls]))
'''  # noqa: E501

PYDANTIC_AI = '''
from pydantic_ai import Agent
KIND = os.environ["MATRIX_KIND"]
if KIND == "chat":
    from pydantic_ai.models.openai import OpenAIChatModel as Model
    model = Model("gpt-4o")
elif KIND == "responses":
    from pydantic_ai.models.openai import OpenAIResponsesModel as Model
    model = Model("gpt-4o")
else:
    from pydantic_ai.models.anthropic import AnthropicModel as Model
    model = Model("claude-sonnet-4-5")
agent = Agent(model, system_prompt=SYSTEM)
agent.tool_plain(get_weather)
if STREAM:
    with agent.run_stream_sync(TASK) as result:
        out(final="".join(result.stream_text(delta=True)))
else:
    out(final=agent.run_sync(TASK).output)
'''

OPENAI_AGENTS = '''
import asyncio
from agents import Agent, Runner, function_tool, set_tracing_disabled
set_tracing_disabled(True)
tool = function_tool(get_weather)
weather_agent = Agent(name="weather_agent", instructions=SYSTEM, tools=[tool], model="gpt-4o")
if os.environ["MATRIX_KIND"] == "handoff":
    front = Agent(name="front_desk", instructions="Hand weather questions to the weather agent.", handoffs=[weather_agent], model="gpt-4o")
else:  # the weather agent as a tool of an orchestrator: its loop is a sub-agent conversation
    front = Agent(name="orchestrator", instructions="Ask the weather expert, then relay its answer.", model="gpt-4o",
                  tools=[weather_agent.as_tool(tool_name="weather_expert", tool_description="Answers weather questions")])
async def main():
    if STREAM:
        r = Runner.run_streamed(front, TASK)
        async for _ in r.stream_events():
            pass
        out(final=r.final_output)
    else:
        out(final=(await Runner.run(front, TASK)).final_output)
asyncio.run(main())
'''  # noqa: E501

LANGGRAPH = '''
import warnings
warnings.filterwarnings("ignore")
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
agent = create_react_agent(ChatOpenAI(model="gpt-4o", streaming=STREAM), [tool(get_weather)], prompt=SYSTEM)
result = agent.invoke({"messages": [("user", TASK)]})
out(final=result["messages"][-1].content)
'''  # noqa: E501

LITELLM = '''
import litellm
tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": PARAMS}}]
messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
for _ in range(8):
    r = litellm.completion(model="openai/gpt-4o", messages=messages, tools=tools, api_base=os.environ["OPENAI_BASE_URL"], stream=STREAM)
    if STREAM:
        r = litellm.stream_chunk_builder(list(r), messages=messages)
    message = r.choices[0].message
    messages.append(message)  # LiteLLM's documented loop appends its Message object as it is
    if not message.tool_calls:
        out(final=message.content)
        break
    for tc in message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": tc.id, "name": tc.function.name,
                         "content": get_weather(**json.loads(tc.function.arguments))})
'''  # noqa: E501

SMOLAGENTS = '''
from smolagents import OpenAIServerModel, ToolCallingAgent, tool
@tool
def get_weather(city: str) -> str:
    """The weather in a city right now.

    Args:
        city: the city
    """
    return f"WEATHER: {city} is {'sunny' if city == 'Paris' else 'rainy' if city == 'Tokyo' else 'cloudy'}"
model = OpenAIServerModel(model_id="gpt-4o", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=6, verbosity_level=0, stream_outputs=STREAM)
out(final=str(agent.run(TASK)))
'''  # noqa: E501

LLAMA_REACT = '''
import asyncio
from llama_index.core.agent.workflow import ReActAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI
llm = OpenAI(model="gpt-4o", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
agent = ReActAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm, streaming=STREAM)
async def main():
    out(final=str(await agent.run(TASK)))
asyncio.run(main())
'''  # noqa: E501

GOOGLE_ADK = '''
import asyncio
from google.adk.agents import LlmAgent
from google.adk.runners import InMemoryRunner
from google.adk.tools.agent_tool import AgentTool
from google.genai import types
KIND = os.environ["MATRIX_KIND"]
weather_agent = LlmAgent(name="weather_agent", model="gemini-2.5-flash", instruction=SYSTEM, tools=[get_weather],
                         description="Answers weather questions")
if KIND == "handoff":  # a coordinator with the weather agent as a sub-agent: the model transfers to it
    root = LlmAgent(name="front_desk", model="gemini-2.5-flash", instruction="Transfer weather questions to weather_agent.",
                    sub_agents=[weather_agent])
elif KIND == "as_tool":
    expert = LlmAgent(name="weather_expert", model="gemini-2.5-flash", instruction=SYSTEM, tools=[get_weather],
                      description="Answers weather questions")
    root = LlmAgent(name="orchestrator", model="gemini-2.5-flash", instruction="Ask the weather expert, then relay its answer.",
                    tools=[AgentTool(agent=expert)])
else:
    root = weather_agent
async def main():
    runner = InMemoryRunner(agent=root, app_name="weather")
    session = await runner.session_service.create_session(app_name="weather", user_id="user")
    final = None
    async for event in runner.run_async(user_id="user", session_id=session.id,
                                        new_message=types.Content(role="user", parts=[types.Part(text=TASK)])):
        if event.is_final_response() and event.content and event.content.parts:
            final = "".join(p.text or "" for p in event.content.parts)
    out(final=final)
asyncio.run(main())
'''  # noqa: E501

AUTOGEN = '''
import asyncio
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient
async def main():
    model = OpenAIChatCompletionClient(model="gpt-4o")
    agent = AssistantAgent("weather_agent", model_client=model, tools=[get_weather], system_message=SYSTEM,
                           max_tool_iterations=5, reflect_on_tool_use=True, model_client_stream=STREAM)
    if os.environ["MATRIX_KIND"] == "team":
        reviewer = AssistantAgent("reviewer", model_client=model, model_client_stream=STREAM,
                                  system_message="You review weather reports. Say APPROVE when the report covers every city.")
        runner = RoundRobinGroupChat([agent, reviewer], termination_condition=TextMentionTermination("APPROVE"))
    else:
        runner = agent
    result = await runner.run(task=TASK)
    out(final=result.messages[-1].content)
    await model.close()
asyncio.run(main())
'''  # noqa: E501

STRANDS = '''
from strands import Agent, tool
KIND = os.environ["MATRIX_KIND"]
if KIND == "chat":
    from strands.models.openai import OpenAIModel
    model = OpenAIModel(client_args={"api_key": os.environ["OPENAI_API_KEY"]}, model_id="gpt-4o")
elif KIND == "responses":
    from strands.models.openai_responses import OpenAIResponsesModel
    model = OpenAIResponsesModel(client_args={"api_key": os.environ["OPENAI_API_KEY"]}, model_id="gpt-4o")
else:
    from strands.models.gemini import GeminiModel
    model = GeminiModel(client_args={"api_key": os.environ["GEMINI_API_KEY"]}, model_id="gemini-2.5-flash")
agent = Agent(model=model, tools=[tool(get_weather)], system_prompt=SYSTEM, callback_handler=None)
out(final=str(agent(TASK)))
'''  # noqa: E501

AGNO = '''
from agno.agent import Agent
from agno.models.openai import OpenAIChat
agent = Agent(model=OpenAIChat(id="gpt-4o"), tools=[get_weather], instructions=SYSTEM, telemetry=False)
if STREAM:
    text = "".join(e.content or "" for e in agent.run(TASK, stream=True) if type(e).__name__ == "RunContentEvent" and isinstance(e.content, str))
    out(final=text)
else:
    out(final=agent.run(TASK).content)
'''  # noqa: E501

HAYSTACK = '''
from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.tools import create_tool_from_function
agent = Agent(chat_generator=OpenAIChatGenerator(model="gpt-4o"), tools=[create_tool_from_function(get_weather)], system_prompt=SYSTEM,
              streaming_callback=(lambda chunk: None) if STREAM else None)
agent.warm_up()
out(final=agent.run(messages=[ChatMessage.from_user(TASK)])["messages"][-1].text)
'''  # noqa: E501

DSPY_REACT = '''
import dspy
dspy.configure(lm=dspy.LM("openai/gpt-4o", api_base=os.environ["OPENAI_BASE_URL"], cache=False))
react = dspy.ReAct("question -> answer", tools=[get_weather], max_iters=6)
out(final=react(question=TASK).answer)
'''

CREWAI = '''
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool
weather_tool = tool("get_weather")(get_weather)
agent = Agent(role="Weather assistant", goal="Report the weather in every city asked about", backstory=SYSTEM,
              tools=[weather_tool], llm=LLM(model="gpt-4o", stream=STREAM), verbose=False)
task = Task(description=TASK, expected_output="The weather in each city", agent=agent)
out(final=str(Crew(agents=[agent], tasks=[task], verbose=False).kickoff()))
'''  # noqa: E501

NODE_PRELUDE = '''
const { createRequire } = require("node:module");
const need = createRequire(process.env.NPM_CLIENTS + "/package.json");
const STREAM = process.env.MATRIX_STREAM === "1";
const TASK = "What is the weather in Paris, Tokyo and Berlin?";
const SYSTEM = "You are a weather assistant. Use the get_weather tool for every city.";
const weather = (city) => `WEATHER: ${city} is ${city === "Paris" ? "sunny" : city === "Tokyo" ? "rainy" : "cloudy"}`;
const out = (o) => console.log(JSON.stringify(o));
const PARAMS = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
'''  # noqa: E501

OPENAI_NODE = '''
const OpenAI = need("openai").default;
(async () => {
  const client = new OpenAI();
  const runner = client.chat.completions.runTools({
    model: "gpt-4o", stream: STREAM,
    messages: [{ role: "system", content: SYSTEM }, { role: "user", content: TASK }],
    tools: [{ type: "function", function: { name: "get_weather", description: "The weather in a city", parameters: PARAMS,
                                             function: ({ city }) => weather(city), parse: JSON.parse } }],
  });
  out({ final: await runner.finalContent() });
})().catch((e) => { console.error(String(e)); process.exit(1); });
'''  # noqa: E501

VERCEL_AI = '''
const { generateText, streamText, tool, stepCountIs, jsonSchema } = need("ai");
(async () => {
  const kind = process.env.MATRIX_KIND;
  let model;
  if (kind === "anthropic") {  // the provider reads ANTHROPIC_BASE_URL itself and posts ${base}/messages
    model = need("@ai-sdk/anthropic").anthropic("claude-sonnet-4-5");
  } else {
    const openai = need("@ai-sdk/openai").createOpenAI({ baseURL: process.env.OPENAI_BASE_URL });
    model = kind === "chat" ? openai.chat("gpt-4o") : openai("gpt-4o");  // openai(): Responses, the default
  }
  const tools = { get_weather: tool({ description: "The weather in a city", inputSchema: jsonSchema(PARAMS), execute: async ({ city }) => weather(city) }) };
  const args = { model, system: SYSTEM, prompt: TASK, tools, stopWhen: stepCountIs(8) };
  if (STREAM) {
    const r = streamText(args);
    for await (const _ of r.textStream) {}
    out({ final: await r.text });
  } else {
    out({ final: (await generateText(args)).text });
  }
})().catch((e) => { console.error(String(e)); process.exit(1); });
'''  # noqa: E501

LANGCHAIN_JS = '''
const { ChatOpenAI } = need("@langchain/openai");
const { createReactAgent } = need("@langchain/langgraph/prebuilt");
const { tool } = need("@langchain/core/tools");
(async () => {
  const getWeather = tool(async ({ city }) => weather(city), { name: "get_weather", description: "The weather in a city", schema: PARAMS });
  const llm = new ChatOpenAI({ model: "gpt-4o", streaming: STREAM, configuration: { baseURL: process.env.OPENAI_BASE_URL } });
  const agent = createReactAgent({ llm, tools: [getWeather], prompt: SYSTEM });
  const r = await agent.invoke({ messages: [{ role: "user", content: TASK }] });
  out({ final: r.messages[r.messages.length - 1].content });
})().catch((e) => { console.error(String(e)); process.exit(1); });
'''  # noqa: E501

OPENAI_AGENTS_JS = '''
const { Agent, run, tool, setTracingDisabled } = need("@openai/agents");
const { z } = need("zod");
setTracingDisabled(true);
(async () => {
  const getWeather = tool({ name: "get_weather", description: "The weather in a city", parameters: z.object({ city: z.string() }),
                            execute: async ({ city }) => weather(city) });
  const weatherAgent = new Agent({ name: "weather_agent", instructions: SYSTEM, tools: [getWeather], model: "gpt-4o" });
  const front = process.env.MATRIX_KIND === "handoff"
    ? Agent.create({ name: "front_desk", instructions: "Hand weather questions to the weather agent.", handoffs: [weatherAgent], model: "gpt-4o" })
    : new Agent({ name: "orchestrator", instructions: "Ask the weather expert, then relay its answer.", model: "gpt-4o",
                  tools: [weatherAgent.asTool({ toolName: "weather_expert", toolDescription: "Answers weather questions" })] });
  if (STREAM) {
    const r = await run(front, TASK, { stream: true });
    for await (const _ of r) {}
    await r.completed;
    out({ final: r.finalOutput });
  } else {
    out({ final: (await run(front, TASK)).finalOutput });
  }
})().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
'''  # noqa: E501

MASTRA = '''
const { Agent } = need("@mastra/core/agent");
const { createTool } = need("@mastra/core/tools");
const { z } = need("zod");
(async () => {
  const getWeather = createTool({ id: "get_weather", description: "The weather in a city", inputSchema: z.object({ city: z.string() }),
                                  execute: async (input) => weather(input.city) });
  const agent = new Agent({ id: "weather-agent", name: "Weather agent", instructions: SYSTEM, model: "openai/gpt-4o",
                            tools: { get_weather: getWeather } });
  if (STREAM) {
    const r = await agent.stream(TASK, { maxSteps: 8 });
    for await (const _ of r.textStream) {}
    out({ final: await r.text });
  } else {
    out({ final: (await agent.generate(TASK, { maxSteps: 8 })).text });
  }
})().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
'''  # noqa: E501

CLIENTS: tuple[Client, ...] = (
    Client("openai-python chat", "openai", "openai_chat", "test", OPENAI_CHAT, (3,), "drop_result"),
    Client(
        "openai-python chat stream",
        "openai",
        "openai_chat",
        "test",
        OPENAI_CHAT,
        (3,),
        "wrong_id",
        stream=True,
    ),
    Client(
        "openai-python responses",
        "openai",
        "openai_responses",
        "test",
        OPENAI_RESPONSES,
        (3,),
        "mutate_history",
        note="stateless: history re-sent",
    ),
    Client(
        "openai-python responses stream",
        "openai",
        "openai_responses",
        "test",
        OPENAI_RESPONSES,
        (3,),
        "drop_result",
        stream=True,
        note="chained with previous_response_id",
    ),
    Client("anthropic-python", "anthropic", "anthropic", "test", ANTHROPIC, (3,), "wrong_id"),
    Client(
        "anthropic-python stream",
        "anthropic",
        "anthropic",
        "test",
        ANTHROPIC,
        (3,),
        "mutate_history",
        stream=True,
    ),
    Client(
        "google-genai",
        "google-genai",
        "gemini",
        "test",
        GOOGLE_GENAI,
        (3,),
        "drop_result",
        note="automatic function calling",
    ),
    Client(
        "google-genai stream",
        "google-genai",
        "gemini",
        "test",
        GOOGLE_GENAI,
        (3,),
        "mutate_history",
        stream=True,
    ),
    Client(
        "pydantic-ai chat", "pydantic-ai-slim", "openai_chat", "test", PYDANTIC_AI, (3,), "wrong_id"
    ),
    Client(
        "pydantic-ai responses stream",
        "pydantic-ai-slim",
        "openai_responses",
        "test",
        PYDANTIC_AI,
        (3,),
        "drop_result",
        stream=True,
    ),
    Client(
        "pydantic-ai anthropic",
        "pydantic-ai-slim",
        "anthropic",
        "test",
        PYDANTIC_AI,
        (3,),
        "mutate_history",
    ),
    Client(
        "openai-agents handoff",
        "openai-agents",
        "openai_responses",
        "test",
        OPENAI_AGENTS,
        (4,),
        "wrong_id",
        note="handoff to a second agent",
        kinds=(("main", None),),
    ),
    Client(
        "openai-agents agent-as-tool",
        "openai-agents",
        "openai_responses",
        "test",
        OPENAI_AGENTS,
        (2, 3),
        "drop_result",
        stream=True,
        note="a sub-agent run as a tool",
        kinds=(("main", None), ("agent_tool", 0)),
    ),
    Client(
        "langgraph",
        "langgraph",
        "openai_chat",
        "frameworks",
        LANGGRAPH,
        (3,),
        "mutate_history",
        stream=True,
        note="create_react_agent + langchain-openai",
    ),
    Client("litellm", "litellm", "openai_chat", "frameworks", LITELLM, (3,), "wrong_id"),
    Client(
        "litellm stream",
        "litellm",
        "openai_chat",
        "frameworks",
        LITELLM,
        (3,),
        "drop_result",
        stream=True,
    ),
    Client(
        "smolagents",
        "smolagents",
        "openai_chat",
        "frameworks",
        SMOLAGENTS,
        (3,),
        "mutate_history",
        note="ToolCallingAgent, ends with final_answer",
    ),
    Client(
        "llama-index react",
        "llama-index-core",
        "openai_chat",
        "frameworks",
        LLAMA_REACT,
        (4,),
        "mutate_history",
        note="ReAct in text, no API tools",
    ),
    Client(
        "google-adk",
        "google-adk",
        "gemini",
        "agents_py",
        GOOGLE_ADK,
        (3,),
        "drop_result",
        note="LlmAgent + InMemoryRunner",
    ),
    Client(
        "google-adk agent-as-tool",
        "google-adk",
        "gemini",
        "agents_py",
        GOOGLE_ADK,
        (2, 3),
        "mutate_history",
        note="AgentTool",
        kinds=(("main", None), ("agent_tool", 0)),
    ),
    # The front desk's turn, and the weather agent's loop as a handoff under it (transfer_to_agent
    # names weather_agent, which ADK's system prompt for that agent names too).
    Client(
        "google-adk handoff",
        "google-adk",
        "gemini",
        "agents_py",
        GOOGLE_ADK,
        (1, 3),
        "drop_result",
        note="sub_agents, transfer_to_agent",
        kinds=(("main", None), ("handoff", 0)),
    ),
    Client(
        "autogen agent",
        "autogen-agentchat",
        "openai_chat",
        "agents_py",
        AUTOGEN,
        (3,),
        "wrong_id",
        note="AssistantAgent with tools, reflect_on_tool_use",
    ),
    Client(
        "autogen team",
        "autogen-agentchat",
        "openai_chat",
        "agents_py",
        AUTOGEN,
        (1, 3),
        "drop_result",
        stream=True,
        note="RoundRobinGroupChat of two agents",
        kinds=(("main", None), ("group_chat", 2)),
    ),
    Client(
        "strands chat",
        "strands-agents",
        "openai_chat",
        "agents_py",
        STRANDS,
        (3,),
        "drop_result",
        stream=True,
        note="OpenAIModel",
    ),
    Client(
        "strands responses",
        "strands-agents",
        "openai_responses",
        "agents_py",
        STRANDS,
        (3,),
        "wrong_id",
        stream=True,
        note="OpenAIResponsesModel",
    ),
    Client(
        "strands gemini",
        "strands-agents",
        "gemini",
        "agents_py",
        STRANDS,
        (3,),
        "mutate_history",
        stream=True,
        note="GeminiModel",
    ),
    Client(
        "agno",
        "agno",
        "openai_chat",
        "agents_py",
        AGNO,
        (3,),
        "mutate_history",
        note="Agent with OpenAIChat",
    ),
    Client("agno stream", "agno", "openai_chat", "agents_py", AGNO, (3,), "wrong_id", stream=True),
    Client(
        "haystack",
        "haystack-ai",
        "openai_chat",
        "agents_py",
        HAYSTACK,
        (3,),
        "drop_result",
        note="Agent with OpenAIChatGenerator",
    ),
    # Threaded today as one conversation per step: the re-rendered trajectory is not yet followed as
    # one loop (issue 45, item 1), so the rewritten observation goes unseen.
    Client(
        "dspy react",
        "dspy",
        "openai_chat",
        "agents_py",
        DSPY_REACT,
        (1, 4),
        "mutate_history",
        note="ReAct in text, the trajectory re-rendered each step: one loop of 4 steps, then the "
        "extract call under its own signature",
    ),
    Client(
        "crewai",
        "crewai",
        "openai_chat",
        "crewai",
        CREWAI,
        (3,),
        "wrong_id",
        note="a one-agent Crew with a tool",
    ),
    Client(
        "openai-node runTools",
        "openai",
        "openai_chat",
        "node",
        OPENAI_NODE,
        (3,),
        "drop_result",
        stream=True,
    ),
    Client("vercel-ai chat", "ai", "openai_chat", "node", VERCEL_AI, (3,), "wrong_id"),
    Client(
        "vercel-ai responses",
        "ai",
        "openai_responses",
        "node",
        VERCEL_AI,
        (3,),
        "drop_result",
        note="item references, store on",
    ),
    Client(
        "vercel-ai responses stream",
        "ai",
        "openai_responses",
        "node",
        VERCEL_AI,
        (3,),
        "mutate_history",
        stream=True,
    ),
    Client(
        "vercel-ai anthropic",
        "@ai-sdk/anthropic",
        "anthropic",
        "node",
        VERCEL_AI,
        (3,),
        "drop_result",
        note="base URL without /v1",
    ),
    Client(
        "vercel-ai anthropic stream",
        "@ai-sdk/anthropic",
        "anthropic",
        "node",
        VERCEL_AI,
        (3,),
        "wrong_id",
        stream=True,
    ),
    Client(
        "langchain-js",
        "@langchain/langgraph",
        "openai_chat",
        "node",
        LANGCHAIN_JS,
        (3,),
        "wrong_id",
    ),
    Client(
        "mastra",
        "@mastra/core",
        "openai_responses",
        "node",
        MASTRA,
        (3,),
        "drop_result",
        note="Agent with a createTool tool",
    ),
    Client(
        "mastra stream",
        "@mastra/core",
        "openai_responses",
        "node",
        MASTRA,
        (3,),
        "mutate_history",
        stream=True,
    ),
    Client(
        "openai-agents-js handoff",
        "@openai/agents",
        "openai_responses",
        "node",
        OPENAI_AGENTS_JS,
        (4,),
        "drop_result",
        note="handoff to a second agent",
        kinds=(("main", None),),
    ),
    Client(
        "openai-agents-js agent-as-tool",
        "@openai/agents",
        "openai_responses",
        "node",
        OPENAI_AGENTS_JS,
        (2, 3),
        "wrong_id",
        stream=True,
        note="a sub-agent run as a tool",
        kinds=(("main", None), ("agent_tool", 0)),
    ),
)

#: The coding agents (tests/clients/test_agents.py drives them; their runs are not a script of this
#: module). Claude Code's clean turns depend on how often its side calls fire: the test counts them
#: from the scripted model's log.
AGENTS: tuple[Client, ...] = (
    Client(
        "claude-code",
        "@anthropic-ai/claude-code",
        "anthropic",
        "agent",
        "",
        (),
        "drop_result",
        stream=True,
        note="sub-agent, side calls, remote MCP server",
    ),
    Client(
        "codex",
        "@openai/codex",
        "openai_responses",
        "agent",
        "",
        (1, 3),
        "wrong_id",
        stream=True,
        note="default settings: WebSocket, spawn_agent and wait_agent",
    ),
    # Its clean turns: the model router's call before each user prompt is a one-turn side
    # conversation.
    Client(
        "gemini-cli",
        "@google/gemini-cli",
        "gemini",
        "agent",
        "",
        (),
        "drop_result",
        stream=True,
        note='-p, a remote MCP tool, settings: selectedType "gemini-api-key"',
    ),
    # Its clean turns: a title generator's call (one turn, no tools) beside the main loop's three.
    Client(
        "opencode anthropic",
        "opencode-ai",
        "anthropic",
        "agent",
        "",
        (1, 3),
        "wrong_id",
        stream=True,
        note="run -m anthropic/…, a remote MCP tool; the AI SDK's provider: base URL without /v1",
    ),
    Client(
        "opencode responses",
        "opencode-ai",
        "openai_responses",
        "agent",
        "",
        (1, 3),
        "drop_result",
        stream=True,
        note="run -m openai/…, a remote MCP tool",
    ),
)


def kind_of(c: Client) -> str:
    """MATRIX_KIND for scripts shared by several rows."""
    if c.script is PYDANTIC_AI or c.script.endswith(PYDANTIC_AI):
        return {"openai_chat": "chat", "openai_responses": "responses"}.get(c.api, "anthropic")
    if c.script is OPENAI_AGENTS or c.script is OPENAI_AGENTS_JS:
        return "handoff" if "handoff" in c.id else "as_tool"
    if c.script is GOOGLE_ADK:
        return "handoff" if "handoff" in c.id else "as_tool" if "agent-as-tool" in c.id else "loop"
    if c.script is AUTOGEN:
        return "team" if "team" in c.id else "agent"
    if c.script is STRANDS:
        return {"openai_chat": "chat", "openai_responses": "responses"}.get(c.api, "gemini")
    if c.script is VERCEL_AI:
        return {"openai_chat": "chat", "anthropic": "anthropic"}.get(c.api, "responses")
    return ""
