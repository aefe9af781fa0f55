"""Real clients that manage their context (issue 82), each recorded through the real ``looptap run``
against a scripted upstream that answers as the API does: one conversation however the client
trimmed, summarised, compacted or had the API clear its history, the management said once at the
round trip it happened, and no false finding.

Each client is the framework's documented idiom, nothing that names looptap:

* **LangChain** ``trim_messages`` (strategy ``"last"``, ``include_system=True``,
  ``start_on="human"``) before every call of a chat whose second question's tool loop runs past
  the budget;
* **LangChain** ``SummarizationMiddleware`` in ``create_agent`` (langchain 1.x), triggered at six
  messages: a side call writes the summary, which then stands in place of the head;
* **LangGraph** with langmem's ``SummarizationNode`` as the agent's ``pre_model_hook``: a side call
  (the agent's messages without its system prompt, then ``Create a summary of the conversation
  above:``) writes the running summary, which then stands in a system message for the history;
* **pydantic-ai** with a history processor that keeps the last five messages (``ProcessHistory``;
  pydantic-ai 2 took ``history_processors=`` off ``Agent``);
* **openai-agents** with a ``SQLiteSession`` whose ``SessionSettings(limit=3)`` gives the next run
  only the session's latest items;
* **openai-agents** with an ``OpenAIResponsesCompactionSession``: the Responses API's compaction
  (``POST /v1/responses/compact``), whose opaque ``compaction`` item then stands for the history;
* **openai-agents** with ``ModelSettings(truncation="auto")``: the Responses API may drop items
  from the conversation's start, and does not say whether it did (``A.context_edited`` once);
* **Anthropic SDK** ``context_management`` (``clear_tool_uses_20250919``): the API clears old tool
  uses server-side and says so (``applied_edits``); the SDK re-sends the whole history;
* **Claude Code** auto-compact (its window set low, the model's usage reported high): a compaction
  side call over the history, then the summary in place of everything but the latest call;
* **Claude Code** ``/compact`` given to the resumed session (``-p /compact --continue``) after its
  final answer, then a question (``--continue``): a compaction side call over the history with
  the answer left out, then the summary and that answer before the question;
* **Codex** auto-compaction (``model_auto_compact_token_limit``, a custom provider: Codex's local
  compaction): a side call without tools, then the opening and the user's messages with the summary.

docs/threading.md ("Context management in the wild") says what each sends. The environments are the
client matrix's (tests/clients/test_matrix.py, tests/clients/test_agents.py): a missing one skips.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients.clients import Client
from tests.clients.outcome import assert_managed_once, codex_wrapper, keep, side_calls
from tests.clients.test_matrix import PYTHONS, _explain, _final, _findings, _interpreter, _run
from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, looptap_run, need, run_env
from tests.support.recorder import needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

CITIES = ("Paris", "Tokyo", "Berlin", "Madrid")
Route = Callable[[ScriptedRequest], Reply]


# -- the scripted models -------------------------------------------------------------------------


def _weather() -> Route:
    """One get_weather call per turn for each city the latest user text names (a summary that
    stands for the head included) and no result in the request carries yet, then the forecast.
    LangChain's summary side call is answered with the task and what is known."""

    def route(req: ScriptedRequest) -> Reply:
        texts = req.user_texts()
        question = texts[-1] if texts else ""
        # langmem's running summary stands in a system message: the question it carries
        if "Summary of the conversation so far:" in req.system:
            question = req.system + " " + question
        # LangChain's DEFAULT_SUMMARY_PROMPT; langmem's SummarizationNode's initial prompt
        if "Context Extraction Assistant" in question or question.startswith("Create a summary"):
            everything = json.dumps(req.messages)
            known = sorted(set(re.findall(r"WEATHER: \w+ is \w+", everything)))
            asked = [c for c in CITIES if c in " ".join(texts)]
            return Reply.say(
                f"The user asked for the weather in {', '.join(asked)}. Known so far: "
                + "; ".join(known),
                what="side:summary",
            )
        seen = json.dumps(req.messages)
        # a city is done when its result is there, or its call is (a result cleared in place)
        done = set(re.findall(r"WEATHER: (\w+)", seen)) | set(re.findall(r"city\W+(\w+)", seen))
        asked = [c for c in CITIES if c in question]
        todo = [c for c in asked if c not in done]
        if todo:
            return Reply.tool("get_weather", {"city": todo[0]}, what=f"call:{todo[0]}")
        return Reply.say("FORECAST: " + ", ".join(asked), what="answer")

    return route


def _anthropic_edits() -> Route:
    """As the API with ``clear_tool_uses_20250919`` (trigger: 3 tool uses, keep 1): every answer
    to a request that asks for edits says which it applied (``context_management.applied_edits``);
    once the request's context holds 3 tool uses, all but the latest are cleared server-side."""
    weather = _weather()

    def route(req: ScriptedRequest) -> Reply:
        reply = weather(req)
        uses = sum(
            1
            for m in req.messages
            if isinstance(m, dict) and isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"
        )
        config = (req.body.get("context_management") or {}).get("edits") or []
        applied = [
            {
                "type": e["type"],
                "cleared_tool_uses": uses - e["keep"]["value"],
                "cleared_input_tokens": 40 * (uses - e["keep"]["value"]),
            }
            for e in config
            if e.get("type") == "clear_tool_uses_20250919" and uses >= e["trigger"]["value"]
        ]
        return Reply(
            text=reply.text,
            calls=reply.calls,
            what=reply.what + (" (edited)" if applied else ""),
            extra={"context_management": {"applied_edits": applied}} if config else None,
        )

    return route


def _steps(summary_asked: Callable[[ScriptedRequest], bool], tool: Callable[[str], Call]) -> Route:
    """A coding agent asked to run ``echo step1`` … ``step3`` one at a time. The answer after the
    first step reports a nearly full context window (once), so the agent compacts before its next
    request; the compaction is answered with the task and the steps that ran, which the route
    reads back after it."""
    full = {"said": False}

    def route(req: ScriptedRequest) -> Reply:
        ran = set(re.findall(r"step\d", " ".join(req.tool_results())))
        if summary_asked(req):
            return Reply.say(
                "<analysis>Steps ran.</analysis>\n<summary>1. Primary Request and Intent: Run echo "
                "step1, echo step2 and echo step3, one at a time.\n7. Pending Tasks: steps that "
                f"ran: {', '.join(sorted(ran))}.</summary>",
                what="side:compaction",
            )
        said = re.search(r"steps that ran: ([^.]*)\.", json.dumps(req.messages))
        if said:
            ran |= set(re.findall(r"step\d", said.group(1)))
        todo = [f"step{n}" for n in (1, 2, 3) if f"step{n}" not in ran]
        if not todo:
            return Reply.say("All three steps ran.", what="answer")
        usage = None
        if len(ran) == 1 and not full["said"]:
            full["said"], usage = True, 170_000
        return Reply(calls=(tool(todo[0]),), what=f"call:{todo[0]}", usage_in=usage)

    return route


def _claude_code_steps() -> Route:
    return _steps(
        lambda req: "create a detailed summary of the conversation so far" in req.last_user_text(),
        lambda step: Call("Bash", {"command": f"echo {step}", "description": f"Run {step}"}),
    )


def _codex_steps() -> Route:
    return _steps(
        lambda req: "CONTEXT CHECKPOINT COMPACTION" in json.dumps(req.messages[-1:]),
        lambda step: Call("exec_command", {"cmd": f"echo {step}"}),
    )


# -- the clients -----------------------------------------------------------------------------------

LANGCHAIN_TRIM = """
import warnings
warnings.filterwarnings("ignore")
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage, trim_messages
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
llm = ChatOpenAI(model="gpt-4o").bind_tools([tool(get_weather)])
history = [SystemMessage(SYSTEM)]
def ask(question):
    history.append(HumanMessage(question))
    while True:
        # LangChain's chat idiom: the system prompt and the latest messages that fit, from a question on
        kept = trim_messages(history, strategy="last", token_counter=len, max_tokens=6, include_system=True,
                             start_on="human", end_on=("human", "tool"))
        ai = llm.invoke(kept)
        history.append(ai)
        if not ai.tool_calls:
            return ai.content
        for tc in ai.tool_calls:
            history.append(ToolMessage(get_weather(**tc["args"]), tool_call_id=tc["id"]))
ask("What is the weather in Paris?")
out(final=ask("And in Tokyo and Berlin?"))
"""  # noqa: E501

LANGCHAIN_SUMMARY = """
import warnings
warnings.filterwarnings("ignore")
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
model = ChatOpenAI(model="gpt-4o")
agent = create_agent(model, tools=[tool(get_weather)], system_prompt=SYSTEM,
                     middleware=[SummarizationMiddleware(model=model, trigger=("messages", 6), keep=("messages", 2))])
result = agent.invoke({"messages": [("user", "What is the weather in Paris, Tokyo, Berlin and Madrid?")]})
out(final=result["messages"][-1].content)
"""  # noqa: E501

LANGGRAPH_SUMMARY_NODE = """
import warnings
warnings.filterwarnings("ignore")
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.prebuilt.chat_agent_executor import AgentState
from langmem.short_term import RunningSummary, SummarizationNode
class State(AgentState):
    context: dict[str, RunningSummary]
model = ChatOpenAI(model="gpt-4o")
# langmem's summarising node before every model call (its documented LangGraph idiom)
summarize = SummarizationNode(token_counter=count_tokens_approximately, model=model, max_tokens=200,
                              max_tokens_before_summary=150, max_summary_tokens=64, output_messages_key="llm_input_messages")
agent = create_react_agent(model, tools=[tool(get_weather)], prompt=SYSTEM, pre_model_hook=summarize,
                           state_schema=State, checkpointer=InMemorySaver())
result = agent.invoke({"messages": [("user", "What is the weather in Paris, Tokyo, Berlin and Madrid?")]},
                      {"configurable": {"thread_id": "1"}})
out(final=result["messages"][-1].content)
"""  # noqa: E501

LANGCHAIN_CLEAR = """
import warnings
warnings.filterwarnings("ignore")
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
# the client clears old tool results in place (LangChain's own kin of Anthropic's server-side edit)
agent = create_agent(ChatOpenAI(model="gpt-4o"), tools=[tool(get_weather)], system_prompt=SYSTEM,
                     middleware=[ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=0, keep=1)])])
result = agent.invoke({"messages": [("user", "What is the weather in Paris and Tokyo?")]})
out(final=result["messages"][-1].content)
"""  # noqa: E501

AUTOGEN_HEAD_AND_TAIL = """
import asyncio
from autogen_agentchat.agents import AssistantAgent
from autogen_core.model_context import HeadAndTailChatCompletionContext
from autogen_ext.models.openai import OpenAIChatCompletionClient
async def main():
    model = OpenAIChatCompletionClient(model="gpt-4o")
    # the first message, "Skipped N messages." in place of the middle, the latest two
    agent = AssistantAgent("weather_agent", model_client=model, tools=[get_weather], system_message=SYSTEM,
                           max_tool_iterations=5,
                           model_context=HeadAndTailChatCompletionContext(head_size=1, tail_size=2))
    result = await agent.run(task="What is the weather in Paris and Tokyo?")
    out(final=result.messages[-1].content)
    await model.close()
asyncio.run(main())
"""  # noqa: E501


def _calls_in_turn() -> Route:
    """One get_weather call per request for each city the task names, in order, then the
    forecast: counted by the requests seen (a head-and-tail context hides the earlier calls
    from the request, so the request alone cannot say which are done)."""
    asked = ("Paris", "Tokyo")
    seen = [0]

    def route(req: ScriptedRequest) -> Reply:
        n = seen[0]
        seen[0] += 1
        if n < len(asked):
            return Reply.tool("get_weather", {"city": asked[n]}, what=f"call:{asked[n]}")
        return Reply.say("FORECAST: " + ", ".join(asked), what="answer")

    return route


PYDANTIC_AI_KEEP_LAST = '''
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.openai import OpenAIChatModel
def keep_recent(messages):
    """The last 5 messages, from a model response on (a tool return keeps its call)."""
    if len(messages) <= 5:
        return messages
    tail = messages[-5:]
    while tail and not isinstance(tail[0], ModelResponse):
        tail = tail[1:]
    return tail
agent = Agent(OpenAIChatModel("gpt-4o"), instructions=SYSTEM, capabilities=[ProcessHistory(keep_recent)])
agent.tool_plain(get_weather)
first = agent.run_sync("What is the weather in Paris?")
out(final=agent.run_sync("And in Tokyo?", message_history=first.all_messages()).output)
'''  # noqa: E501

OPENAI_AGENTS_SESSION = """
import asyncio
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import SessionSettings
set_tracing_disabled(True)
agent = Agent(name="weather_agent", instructions=SYSTEM, tools=[function_tool(get_weather)], model="gpt-4o")
async def main():
    # the session hands each run only its latest 3 items
    session = SQLiteSession("chat", session_settings=SessionSettings(limit=3))
    await Runner.run(agent, "What is the weather in Paris?", session=session)
    out(final=(await Runner.run(agent, "And in Tokyo?", session=session)).final_output)
asyncio.run(main())
"""  # noqa: E501

OPENAI_AGENTS_COMPACTION = """
import asyncio
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession
set_tracing_disabled(True)
agent = Agent(name="weather_agent", instructions=SYSTEM, tools=[function_tool(get_weather)], model="gpt-4o")
async def main():
    # the Responses API's compaction (POST /v1/responses/compact) once 4 items other than the user's
    session = OpenAIResponsesCompactionSession("chat", SQLiteSession("chat"), model="gpt-4o", compaction_mode="input",
                                               should_trigger_compaction=lambda c: len(c["compaction_candidate_items"]) >= 4)
    await Runner.run(agent, "What is the weather in Paris and Tokyo?", session=session)
    out(final=(await Runner.run(agent, "And in Berlin?", session=session)).final_output)
asyncio.run(main())
"""  # noqa: E501

OPENAI_AGENTS_TRUNCATION = """
from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
set_tracing_disabled(True)
# the Responses API drops items from the conversation's start when it outgrows the window
agent = Agent(name="weather_agent", instructions=SYSTEM, tools=[function_tool(get_weather)], model="gpt-4o",
              model_settings=ModelSettings(truncation="auto"))
out(final=Runner.run_sync(agent, "What is the weather in Paris and Tokyo?").final_output)
"""  # noqa: E501

ANTHROPIC_CONTEXT_EDITS = """
import anthropic
client = anthropic.Anthropic()
tools = [{"name": "get_weather", "description": "The weather in a city", "input_schema": PARAMS}]
messages = [{"role": "user", "content": "What is the weather in Paris, Tokyo and Berlin?"}]
# the API clears old tool uses once 3 are in the context, keeping the latest
edits = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3},
                    "keep": {"type": "tool_uses", "value": 1}}]}
for _ in range(8):
    m = client.beta.messages.create(model="claude-sonnet-4-5", max_tokens=1024, system=SYSTEM, messages=messages,
                                    tools=tools, betas=["context-management-2025-06-27"], context_management=edits)
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]})
    uses = [b for b in m.content if b.type == "tool_use"]
    if not uses:
        out(final="".join(b.text for b in m.content if b.type == "text"))
        break
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": get_weather(**b.input)} for b in uses]})
"""  # noqa: E501

#: Codex on a provider of its own (local compaction; the built-in provider compacts through the
#: API's ``/responses/compact`` instead), compacting past 60,000 tokens.
CODEX_CONFIG = """\
model = "gpt-5-codex"
model_provider = "looptap"
model_auto_compact_token_limit = 60000

[analytics]
enabled = false

[features]
plugins = false

[model_providers.looptap]
name = "looptap recorder"
base_url = "@OPENAI_BASE_URL@"
env_key = "LOOPTAP_CODEX_KEY"
wire_api = "responses"
supports_websockets = false
"""

STEPS_TASK = "Run echo step1, echo step2 and echo step3 with Bash, one at a time."
STEPS_AFTER = "Which steps ran?"


@dataclass(frozen=True)
class Case:
    id: str
    #: the package whose pinned version runs, and its environment (test_matrix's runtimes, or
    #: "agent": a coding agent of .npm-agents)
    package: str
    runtime: str
    script: str
    route: Callable[[], Route]
    #: seqs of the one conversation the client kept, in order
    main: tuple[int, ...]
    #: the side calls the management made: (seq, the seq of the turn it was asked over)
    side: tuple[tuple[int, int], ...]
    #: where the management is said, and with which code and kind
    at: int
    code: str
    kind: str
    final: str
    #: what fec4f2c2 said of the run (the misreading this test catches)
    before: str
    #: why the run is not read right yet: the test is then a strict expected failure
    pending: str = ""


CASES = (
    Case(
        "langchain trim_messages", "langchain-core", "frameworks", LANGCHAIN_TRIM, _weather,
        main=(0, 1, 2, 3, 4), side=(), at=3, code="C.history_trimmed", kind="trimmed",
        final="FORECAST: Tokyo, Berlin",
        before="two conversations [0-2] [3-4], a false C.stopped_with_pending_calls at #2",
    ),
    Case(
        "langchain SummarizationMiddleware", "langchain", "frameworks", LANGCHAIN_SUMMARY, _weather,
        # the summariser gets the history as rendered text (issue 90's rule by verbatim carry):
        # a side call of the conversation's latest turn, #2, as langmem's below (#1 before)
        main=(0, 1, 2, 4, 5), side=((3, 2),), at=4, code="C.history_trimmed", kind="summarised",
        final="FORECAST: Paris, Tokyo, Berlin, Madrid",
        before="two conversations [0-2] [4-5], the summary a side call of #1, a false "
        "C.stopped_with_pending_calls at #2",
    ),
    Case(
        "langgraph langmem SummarizationNode", "langmem", "frameworks", LANGGRAPH_SUMMARY_NODE,
        _weather, main=(0, 1, 2, 4, 5), side=((3, 2),), at=4, code="C.history_trimmed",
        kind="summarised", final="FORECAST: Paris, Tokyo, Berlin, Madrid",
        before="(not recorded on 4cb260e5)",
    ),
    Case(
        "langchain ContextEditingMiddleware", "langchain", "frameworks", LANGCHAIN_CLEAR, _weather,
        main=(0, 1, 2), side=(), at=2, code="C.history_trimmed", kind="cleared",
        final="FORECAST: Paris, Tokyo",
        before="one conversation, a false C.history_mutated (warning) at #2: the cleared result "
        "read as history the client rewrote",
    ),
    Case(
        "autogen head-and-tail context", "autogen-agentchat", "agents_py", AUTOGEN_HEAD_AND_TAIL,
        _calls_in_turn, main=(0, 1, 2), side=(), at=2, code="C.history_trimmed", kind="trimmed",
        final="FORECAST: Paris, Tokyo",
        before="one conversation, a false C.history_mutated (warning) at #2: the placeholder "
        "\"Skipped 2 messages.\" read as history the client rewrote",
    ),
    Case(
        "pydantic-ai history processor", "pydantic-ai-slim", "test", PYDANTIC_AI_KEEP_LAST,
        _weather, main=(0, 1, 2, 3), side=(), at=3, code="C.history_trimmed", kind="trimmed",
        final="FORECAST: Tokyo",
        before="two conversations [0-2] [3], a false C.stopped_with_pending_calls at #2",
    ),
    Case(
        "openai-agents session limit", "openai-agents", "test", OPENAI_AGENTS_SESSION, _weather,
        main=(0, 1, 2, 3), side=(), at=2, code="C.history_trimmed", kind="trimmed",
        final="FORECAST: Tokyo", before="two conversations [0-1] [2-3], the trim not said",
    ),
    Case(
        "openai-agents responses compaction", "openai-agents", "test", OPENAI_AGENTS_COMPACTION,
        _weather, main=(0, 1, 2, 4, 5), side=((3, 2),), at=4, code="C.history_trimmed",
        kind="summarised", final="FORECAST: Berlin",
        before="two conversations [0-2] [4-5]; the compaction call (#3) no round trip of any",
    ),
    Case(
        "openai-agents truncation auto", "openai-agents", "test", OPENAI_AGENTS_TRUNCATION,
        _weather, main=(0, 1, 2), side=(), at=0, code="A.context_edited", kind="truncation",
        final="FORECAST: Paris, Tokyo", before="(not recorded on 4cb260e5)",
    ),
    Case(
        "anthropic context_management", "anthropic", "test", ANTHROPIC_CONTEXT_EDITS,
        _anthropic_edits, main=(0, 1, 2, 3), side=(), at=3, code="A.context_edited",
        kind="clear_tool_uses_20250919", final="FORECAST: Paris, Tokyo, Berlin",
        before="one conversation, the API's edit not said",
    ),
    Case(
        "claude-code auto-compact", "@anthropic-ai/claude-code", "agent", "claude",
        _claude_code_steps, main=(0, 1, 3, 4), side=((2, 1),), at=3, code="C.history_trimmed",
        kind="summarised", final="All three steps ran.",
        before="two conversations [0-1] [3-4], the compaction a side call of #1, a false "
        "C.stopped_with_pending_calls at #1",
    ),
    Case(
        "claude-code /compact", "@anthropic-ai/claude-code", "agent", "claude /compact",
        _claude_code_steps, main=(0, 1, 2, 3, 5), side=((4, 3),), at=5, code="C.history_trimmed",
        kind="summarised", final="All three steps ran.",
        before="(not recorded on 4cb260e5)",
    ),
    Case(
        "codex auto-compaction", "@openai/codex", "agent", "codex", _codex_steps,
        main=(0, 1, 3, 4), side=((2, 1),), at=3, code="C.history_trimmed", kind="summarised",
        final="All three steps ran.",
        before="one conversation with the compaction (#2) as a turn of it, a false "
        "C.cache_prefix_broken at #2 and #3 (tools changed), C.history_trimmed at #3 measured "
        "against the compaction's request",
    ),
)  # fmt: skip


def _python(case: Case, tmp_path: Path, up: ScriptedUpstream) -> tuple[Any, Path]:
    c = Client(case.id, case.package, "", case.runtime, case.script, (), "")
    interp = _interpreter(c)
    if case.runtime in PYTHONS:
        module = case.package.replace("-", "_")
        probe = subprocess.run([*interp, "-c", f"import {module}"], capture_output=True)
        if probe.returncode:
            pytest.skip(
                f"{case.package} is not in {interp[0]} (bash .ci/run installs it from "
                f"tests/clients/{PYTHONS[case.runtime][1]})"
            )
    return _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)


def _agent(case: Case, tmp_path: Path, up: ScriptedUpstream) -> tuple[Any, Path]:
    confdir = tmp_path / "mitmproxy-conf"
    if case.script == "claude /compact":
        claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
        env = run_env(
            tmp_path, ANTHROPIC_API_KEY=f"sk-ant-context-{tmp_path.name}", **CLAUDE_OFFLINE
        )
        # the session ran, then /compact given to it resumed, then a question after the compaction
        common = "--model claude-sonnet-4-5 --output-format json --allowedTools Bash"
        wrapper = tmp_path / "claude.sh"
        wrapper.write_text(
            f"#!/bin/sh\nset -e\n{claude} -p '{STEPS_TASK}' {common} > /dev/null\n"
            f"{claude} -p /compact --continue {common} > /dev/null\n"
            f"exec {claude} -p '{STEPS_AFTER}' --continue {common}\n"
        )
        wrapper.chmod(0o755)
        return looptap_run(tmp_path, confdir, [str(wrapper)], env, upstream=up)  # type: ignore[arg-type]
    if case.script == "claude":
        claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
        env = run_env(
            tmp_path,
            ANTHROPIC_API_KEY=f"sk-ant-context-{tmp_path.name}",
            CLAUDE_CODE_AUTO_COMPACT_WINDOW="60000",
            **CLAUDE_OFFLINE,
        )
        cmd = [str(claude), "-p", STEPS_TASK, "--model", "claude-sonnet-4-5", "--output-format",
               "json", "--no-session-persistence", "--allowedTools", "Bash"]  # fmt: skip
        return looptap_run(tmp_path, confdir, cmd, env, upstream=up)  # type: ignore[arg-type]
    codex = need("@openai/codex", bin_name="codex")
    home = tmp_path / "codex-home"
    home.mkdir()
    wrapper = codex_wrapper(tmp_path, codex, CODEX_CONFIG)
    env = run_env(tmp_path, CODEX_HOME=str(home), LOOPTAP_CODEX_KEY=f"sk-context-{tmp_path.name}")
    cmd = [
        str(wrapper),
        "exec",
        "--skip-git-repo-check",
        STEPS_TASK.replace("with Bash", "in the shell"),
    ]
    return looptap_run(tmp_path, confdir, cmd, env, upstream=up)  # type: ignore[arg-type]


#: A framework's second idiom runs live nightly: its recording is judged as below on every run by
#: the core (tests/cassettes/analysis/test_context_managed_recorded.py), and the framework's first
#: idiom runs live by default (LangChain's trim_messages, openai-agents' session limit, Claude
#: Code's auto-compact; session 55, h105m).
RECORDED = (
    "langchain SummarizationMiddleware",
    "langchain ContextEditingMiddleware",
    "openai-agents responses compaction",
    "openai-agents truncation auto",
    "claude-code /compact",
)
_RECORDED_NIGHTLY = pytest.mark.slow(
    reason="the framework's second idiom live (3-5 s of CPU); its recording is judged by "
    "tests/cassettes/analysis/test_context_managed_recorded.py"
)


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=_RECORDED_NIGHTLY) if c.id in RECORDED else c for c in CASES],
    ids=[c.id for c in CASES],
)
def test_managed_context_is_one_conversation_said_once(
    case: Case, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if case.pending:
        request.applymarker(pytest.mark.xfail(reason=case.pending, strict=True))
    with ScriptedUpstream(case.route(), validate=True) as up:
        run = _agent if case.runtime == "agent" else _python
        proc, out = run(case, tmp_path, up)
    why = _explain(proc, up)
    keep(out, case.id)
    final = _final(proc) if case.runtime != "agent" else proc.stdout
    assert final and case.final in final, why
    assert f"-context-{tmp_path.name}".encode() not in out.read_bytes()  # the agents' keys
    cas, an = _findings(out)
    assert all(e.status == 200 for e in cas.exchanges), why
    # what the scripted model took each request for, in arrival order: the client did manage
    # its context where the case says (a side call where it says, the rest its own loop)
    assert side_calls(up) == [s for s, _ in case.side], why
    # one conversation the client kept, its management's side calls under the turn they read; the
    # management said once, where it happened, and nothing else said of the run
    assert_managed_once(an, case.main, case.side, case.at, case.code, case.kind, why, case.before)


@pytest.mark.parametrize("date", ["2026-12-04", "2026-12-11"])
def test_an_answer_quoting_what_the_trim_dropped_folds_under_it(date: str, tmp_path: Path) -> None:
    """Issue 82 item 2 on a real client: LangChain's ``trim_messages`` drops the first question,
    which gave the trip's date; the final answer, after the trim, says a date. The date the
    dropped question gave (2026-12-04) is in no message of the request: ``E.ungrounded_claim``
    folded under ``C.history_trimmed`` (#3). Another date (2026-12-11) the dropped text does not
    hold: it stands as its own finding, however much later it comes. On d22946dd both stood."""
    base = CASES[0]
    first = 'ask("What is the weather in Paris?")'
    assert first in base.script
    script = base.script.replace(
        first, 'ask("My trip starts on 2026-12-04. What is the weather in Paris?")'
    )
    weather = _weather()

    def route(req: ScriptedRequest) -> Reply:
        reply = weather(req)
        if reply.what == "answer" and "Tokyo" in (reply.text or ""):
            return Reply.say(f"{reply.text} (for your trip from {date})", what="answer")
        return reply

    case = dataclasses.replace(base, script=script, route=lambda: route)
    with ScriptedUpstream(case.route(), validate=True) as up:
        proc, out = _python(case, tmp_path, up)
    why = _explain(proc, up)
    final = _final(proc)
    assert final and date in final, why
    _cas, an = _findings(out)
    (trim,) = [f for f in an.findings if f.code == "C.history_trimmed"]
    assert trim.seq == 3, why
    (claim,) = [f for f in an.findings if f.code == "E.ungrounded_claim"]
    assert claim.seq == 4 and claim.details["spans"] == [date], claim
    if date == "2026-12-04":
        assert (claim.details.get("caused_by"), claim.details.get("caused_by_seq")) == (
            "C.history_trimmed",
            3,
        ), claim
    else:
        assert "caused_by" not in claim.details, claim
