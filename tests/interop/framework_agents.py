"""The fork tests' weather agent (tests/replay/fork_agent.py: ask for the weather until the model
stops calling the tool; print ``LABEL: final text``) written on two agent frameworks, for the
traces of their instrumentations (tests/interop/traced_agent.py):

    python framework_agents.py langchain [LABEL ...]   # langchain-openai / langchain-anthropic
    python framework_agents.py pydantic-ai [LABEL ...] # pydantic-ai's Agent with a tool
    python framework_agents.py openai-agents [LABEL ...]  # openai-agents' Runner (Responses API)
    python framework_agents.py haystack [LABEL ...]  # Haystack's Agent, OpenAIChatGenerator

LABELs as fork_agent's: ``openai``, ``openai-stream``, ``anthropic``, ``anthropic-stream`` (default:
all four, one after another). The SDKs read their base URLs and keys from the environment, as under
``looptap run``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

LABELS = ("openai", "openai-stream", "anthropic", "anthropic-stream")
SYSTEM = "Use the weather tool."


def weather(city: str) -> str:
    return f"sunny, 21 C in {city}"


def _question(label: str) -> str:
    return f"[{label}] Weather in three cities?"


def langchain_loop(label: str) -> str:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return weather(city)

    stream = label.endswith("-stream")
    llm: Any
    if label.startswith("openai"):
        from langchain_openai import ChatOpenAI

        llm = ChatOpenAI(model="gpt-4o-mini", streaming=stream, max_retries=0)
    else:
        from langchain_anthropic import ChatAnthropic

        llm = ChatAnthropic(  # type: ignore[call-arg]
            model_name="claude-haiku-4-5", max_tokens=200, streaming=stream, max_retries=0
        )
    bound = llm.bind_tools([get_weather])
    messages: list[Any] = [SystemMessage(SYSTEM), HumanMessage(_question(label))]
    for _ in range(5):
        ai = bound.invoke(messages)
        messages.append(ai)
        if not ai.tool_calls:
            return str(ai.text)
        for tc in ai.tool_calls:
            messages.append(ToolMessage(weather(**tc["args"]), tool_call_id=tc["id"]))
    return "(no answer after 5 turns)"


def pydantic_ai_run(label: str) -> str:
    from pydantic_ai import Agent

    model: Any
    if label.startswith("openai"):
        from pydantic_ai.models.openai import OpenAIChatModel

        model = OpenAIChatModel("gpt-4o-mini")
    else:
        from pydantic_ai.models.anthropic import AnthropicModel

        model = AnthropicModel("claude-haiku-4-5")
    agent = Agent(model, instructions=SYSTEM, model_settings={"max_tokens": 200})

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return weather(city)

    if not label.endswith("-stream"):
        return str(agent.run_sync(_question(label)).output)

    async def streamed() -> str:
        async with agent.run_stream(_question(label)) as run:
            return str(await run.get_output())

    return asyncio.run(streamed())


def openai_agents_run(label: str) -> str:
    """openai-agents' Runner on the Responses API (labels ``openai``, ``openai-stream``): the whole
    input sent each turn, its tracing left on (an instrumentation takes its spans)."""
    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool
    from openai import AsyncOpenAI

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return weather(city)

    agent = Agent(
        name="weather", instructions=SYSTEM, tools=[get_weather],
        # a client of its own: each label runs in an event loop of its own
        model=OpenAIResponsesModel("gpt-4o-mini", AsyncOpenAI(max_retries=0)),
        model_settings=ModelSettings(max_tokens=200),
    )  # fmt: skip

    async def run() -> str:
        return str((await Runner.run(agent, _question(label), max_turns=5)).final_output)

    if not label.endswith("-stream"):
        return asyncio.run(run())

    async def streamed() -> str:
        run = Runner.run_streamed(agent, _question(label), max_turns=5)
        async for _ in run.stream_events():
            pass
        return str(run.final_output)

    return asyncio.run(streamed())


def strands_run(label: str) -> str:
    """Strands Agents' Agent on its OpenAI model provider (it streams every call)."""
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return weather(city)

    model = OpenAIModel(client_args={"max_retries": 0}, model_id="gpt-4o-mini",
                        params={"max_tokens": 200})  # fmt: skip
    agent = Agent(model=model, system_prompt=SYSTEM, tools=[get_weather], callback_handler=None)
    return str(agent(_question(label))).strip()


def semantic_kernel_run(label: str) -> str:
    """Semantic Kernel's OpenAI chat service with a kernel function, its calls made by the
    service's automatic function calling."""
    from openai import AsyncOpenAI
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
    from semantic_kernel.connectors.ai.open_ai import (
        OpenAIChatCompletion,
        OpenAIChatPromptExecutionSettings,
    )
    from semantic_kernel.contents import ChatHistory
    from semantic_kernel.functions import kernel_function

    class Weather:
        @kernel_function(name="get_weather", description="The weather in a city.")
        def get_weather(self, city: str) -> str:
            return weather(city)

    kernel = Kernel()
    client = AsyncOpenAI(max_retries=0)
    service = OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=client)
    kernel.add_service(service)
    kernel.add_plugin(Weather(), plugin_name="weather")
    settings = OpenAIChatPromptExecutionSettings(
        function_choice_behavior=FunctionChoiceBehavior.Auto(), max_tokens=200
    )
    history = ChatHistory(system_message=SYSTEM)
    history.add_user_message(_question(label))

    async def run() -> str:
        return str(await service.get_chat_message_content(history, settings, kernel=kernel))

    return asyncio.run(run())


def haystack_run(label: str) -> str:
    """Haystack's ``Agent`` on its ``OpenAIChatGenerator`` with a ``Tool`` (labels ``openai``,
    ``openai-stream``: a streaming callback makes each call a stream)."""
    from haystack.components.agents import Agent
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack.tools import Tool

    tool = Tool(
        name="get_weather", description="The weather in a city.", function=weather,
        parameters={"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]},
    )  # fmt: skip
    stream = label.endswith("-stream")
    generator = OpenAIChatGenerator(
        model="gpt-4o-mini", generation_kwargs={"max_tokens": 200}, max_retries=0,
        streaming_callback=(lambda _chunk: None) if stream else None,
    )  # fmt: skip
    agent = Agent(chat_generator=generator, tools=[tool], system_prompt=SYSTEM, max_agent_steps=5)
    result = agent.run(messages=[ChatMessage.from_user(_question(label))])
    return str(result["messages"][-1].text)


def litellm_loop(label: str) -> str:
    """LiteLLM's ``completion()`` (OpenAI's messages, its provider prefix naming the API) in the
    fork agent's loop: ``openai``, ``openai-stream`` (the stream rebuilt by its chunk builder)."""
    import litellm

    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]  # fmt: skip
    stream = label.endswith("-stream")
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": _question(label)},
    ]
    for _ in range(5):
        ask = {"model": "openai/gpt-4o-mini", "messages": messages, "tools": tools,
               "max_tokens": 200, "num_retries": 0}  # fmt: skip
        if stream:
            chunks = list(litellm.completion(**ask, stream=True))
            reply = litellm.stream_chunk_builder(chunks, messages=messages)
        else:
            reply = litellm.completion(**ask)
        message = reply.choices[0].message  # type: ignore[union-attr]
        calls = message.tool_calls or []
        if not calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True))
        for c in calls:
            city = json.loads(c.function.arguments)["city"]
            messages.append({"role": "tool", "tool_call_id": c.id, "content": weather(city)})
    return "(no answer after 5 turns)"


def adk_run(label: str) -> str:
    """Google ADK's ``LlmAgent`` with a function tool on its Gemini model (google-genai; the
    base URL from ``GOOGLE_GEMINI_BASE_URL``), run by its ``InMemoryRunner``: ``gemini``,
    ``gemini-stream`` (its SSE streaming mode); ``openai``: on its LiteLLM model
    (``openai/gpt-4o-mini``)."""
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return weather(city)

    model: Any = "gemini-2.5-flash"
    if label.startswith("openai"):  # its LiteLLM model (OpenAI's wire; ADK keeps Gemini's shape)
        from google.adk.models.lite_llm import LiteLlm

        model = LiteLlm(model="openai/gpt-4o-mini")
    agent = LlmAgent(name="weather", model=model, instruction=SYSTEM, tools=[get_weather])
    runner = InMemoryRunner(agent=agent, app_name="weather")
    mode = StreamingMode.SSE if label.endswith("-stream") else StreamingMode.NONE

    async def run() -> str:
        session = await runner.session_service.create_session(app_name="weather", user_id="u")
        ask = types.Content(role="user", parts=[types.Part(text=_question(label))])
        text = ""
        async for event in runner.run_async(user_id="u", session_id=session.id, new_message=ask,
                                            run_config=RunConfig(streaming_mode=mode)):  # fmt: skip
            if event.is_final_response() and event.content and event.content.parts:
                text = "".join(p.text or "" for p in event.content.parts)
        return text

    return asyncio.run(run())


RUNS = {
    "litellm": litellm_loop,
    "haystack": haystack_run,
    "adk": adk_run,
    "semantic-kernel": semantic_kernel_run,
    "strands": strands_run,
    "langchain": langchain_loop,
    "pydantic-ai": pydantic_ai_run,
    "openai-agents": openai_agents_run,
}


def main() -> int:
    framework, labels = sys.argv[1], sys.argv[2:] or list(LABELS)
    run = RUNS[framework]
    for label in labels:
        print(f"{label}: {run(label)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
