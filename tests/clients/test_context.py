"""Real clients that manage their context (issue 82), each recorded through the real ``looptap run``
against a scripted upstream that answers as the API does: one conversation however the client
trimmed, summarised, compacted or had the API clear its history, the management said once at the
turn it happened, and no false finding.

Each client is the framework's documented idiom, nothing that names looptap:

* **LangChain** ``trim_messages`` (strategy ``"last"``, ``include_system=True``, ``start_on="human"``)
  before every call of a chat whose second question's tool loop runs past the budget;
* **LangChain** ``SummarizationMiddleware`` in ``create_agent`` (langchain 1.x), triggered at a few
  messages: a side call writes the summary, which then stands in place of the head;
* **pydantic-ai** with a history processor that keeps the last messages (``ProcessHistory``);
* **openai-agents** with a ``SQLiteSession`` whose ``SessionSettings(limit=…)`` gives the next run
  only the session's latest items;
* **Anthropic SDK** ``context_management`` (``clear_tool_uses_20250919``): the API clears old tool
  uses server-side and says so (``applied_edits``); the SDK re-sends the whole history;
* **Claude Code** ``/compact`` and **Codex** compaction (tests/clients/test_agents.py's agents).

What each client sends is written down in docs/threading.md ("Context management in the wild").
The environments are the client matrix's (tests/clients/test_matrix.py): a missing one skips.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.clients.clients import Client
from tests.clients.test_matrix import _explain, _final, _findings, _run, _serious
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

CITIES = ("Paris", "Tokyo", "Berlin", "Madrid")
SUMMARY_MARK = "Context Extraction Assistant"  # LangChain's DEFAULT_SUMMARY_PROMPT


def _question(req: ScriptedRequest) -> str:
    """The latest user text of the request (a summary that stands for the head included)."""
    texts = req.user_texts()
    return texts[-1] if texts else ""


def _weather_route(req: ScriptedRequest) -> Reply:
    """One get_weather call per turn for each city the latest question names that no result in
    the request (or summary of one) carries yet, then the forecast."""
    if SUMMARY_MARK in req.system or any(SUMMARY_MARK in t for t in req.user_texts()):
        known = sorted(set(re.findall(r"WEATHER: \w+ is \w+", json.dumps(req.body))))
        asked = [c for c in CITIES if c in _question(req)]
        return Reply.say(
            f"The user asked for the weather in {', '.join(asked)}. Known so far: "
            + "; ".join(known),
            what="summary",
        )
    text = json.dumps(req.messages)
    asked = [c for c in CITIES if c in _question(req)]
    todo = [c for c in asked if f"WEATHER: {c}" not in text]
    if todo:
        return Reply.tool("get_weather", {"city": todo[0]}, what=f"call:{todo[0]}")
    return Reply.say("FORECAST: " + ", ".join(asked), what="answer")


# -- the clients -----------------------------------------------------------------------------------

LANGCHAIN_TRIM = '''
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
'''  # noqa: E501

LANGCHAIN_SUMMARY = '''
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
'''  # noqa: E501

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
'''

OPENAI_AGENTS_SESSION = '''
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
'''  # noqa: E501

ANTHROPIC_CONTEXT_EDITS = '''
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
        out(final="".join(b.text for b in m.content if b.type == "text"),
            applied=[e.model_dump() for e in (m.context_management.applied_edits if m.context_management else [])])
        break
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": get_weather(**b.input)} for b in uses]})
'''  # noqa: E501


def _anthropic_edits_route(req: ScriptedRequest) -> Reply:
    """As the API with ``clear_tool_uses_20250919`` (trigger 3 tool uses, keep 1): once the
    request's context holds 3 tool uses, every one but the latest is cleared server-side, and the
    answer says so in ``context_management.applied_edits``."""
    reply = _weather_route(req)
    uses = [
        b
        for m in req.messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    edits: list[dict[str, Any]] = []
    config = (req.body.get("context_management") or {}).get("edits") or []
    for edit in config:
        if edit.get("type") == "clear_tool_uses_20250919" and len(uses) >= edit["trigger"]["value"]:
            cleared = len(uses) - edit["keep"]["value"]
            edits.append(
                {
                    "type": "clear_tool_uses_20250919",
                    "cleared_tool_uses": cleared,
                    "cleared_input_tokens": 40 * cleared,
                }
            )
    return Reply(
        text=reply.text,
        calls=reply.calls,
        what=reply.what + (" edited" if edits else ""),
        extra={"context_management": {"applied_edits": edits}} if config else None,
    )


#: (client, route, the round trip (1-based, in arrival order of the agent's own loop) whose
#: request the client managed, or the one whose answer says the API edited it).
CASES: tuple[tuple[Client, Any], ...] = (
    (Client("langchain trim_messages", "langchain-core", "openai_chat", "frameworks", LANGCHAIN_TRIM, (5,), ""), _weather_route),
    (Client("langchain SummarizationMiddleware", "langchain", "openai_chat", "frameworks", LANGCHAIN_SUMMARY, (5,), ""), _weather_route),
    (Client("pydantic-ai history processor", "pydantic-ai-slim", "openai_chat", "test", PYDANTIC_AI_KEEP_LAST, (5,), ""), _weather_route),
    (Client("openai-agents session limit", "openai-agents", "openai_responses", "test", OPENAI_AGENTS_SESSION, (4,), ""), _weather_route),
    (Client("anthropic context_management", "anthropic", "anthropic", "test", ANTHROPIC_CONTEXT_EDITS, (4,), ""), _anthropic_edits_route),
)  # fmt: skip


def _dump(tmp: Path, up: ScriptedUpstream, an: Any) -> str:
    lines = []
    with open(tmp / "bodies.jsonl", "w") as fh:
        for e in up.log:
            fh.write(json.dumps({"seq": e.seq, "path": e.request.path, "body": e.request.body, "what": e.reply.what if e.reply else None, "text": e.reply.text if e.reply else None}) + "\n")
    import shutil, os
    shutil.copy(tmp / "bodies.jsonl", Path(os.environ.get("CTX_DUMP", "/tmp/ctxdump")) / (tmp.name + ".bodies.jsonl"))
    for e in up.log:
        lines.append(e.line())
        lines.append("   " + json.dumps(e.request.body)[:3000])
    for conv in an.conversations:
        lines.append(f"conv {conv.id} kind={conv.kind} parent={conv.parent_seq} turns={list(conv.turns)}")
    for f in an.findings:
        lines.append(f"finding {f.code} {f.severity} {f.layer} seq={f.seq} turn={f.turn} conv={f.conversation}: {f.message}")
    return "\n".join(lines)


@pytest.mark.parametrize("c,route", CASES, ids=[c.id for c, _ in CASES])
def test_dump(c: Client, route: Any, tmp_path: Path) -> None:
    import os
    with ScriptedUpstream(route, validate=True) as up:
        proc, out = _run(c, None, tmp_path, tmp_path / "conf", up)
    why = _explain(proc, up)
    cas, an = _findings(out)
    d = _dump(tmp_path, up, an)
    Path(os.environ.get("CTX_DUMP", "/tmp/ctxdump")).mkdir(exist_ok=True, parents=True)
    (Path(os.environ.get("CTX_DUMP", "/tmp/ctxdump")) / (c.id.replace(" ", "_") + ".txt")).write_text(why + "\n\n" + d + f"\nfinal={_final(proc)}\n")


def _cc_route_factory():
    from tests.support.scripted import Call, claude_code_side_call
    state = {"full": False}
    def route(req: ScriptedRequest) -> Reply:
        side = claude_code_side_call(req)
        if side:
            return Reply.say("(side)", what=f"side:{side}")
        if "create a detailed summary of the conversation so far" in req.last_user_text():
            ran = sorted(set(re.findall(r"step\d", " ".join(req.tool_results()))))
            return Reply.say("<analysis>Steps ran.</analysis>\n<summary>1. Primary Request and Intent: run echo step1, echo step2 and echo step3 with Bash, one at a time.\n7. Pending Tasks: steps that ran: " + ", ".join(ran) + ".</summary>", what="side:compact")
        text = json.dumps(req.messages)
        ran = set(re.findall(r"step\d", " ".join(req.tool_results())))
        m = re.search(r"steps that ran: ([^.]*)\.", text)
        if m:
            ran |= set(re.findall(r"step\d", m.group(1)))
        todo = [f"step{n}" for n in (1, 2, 3) if f"step{n}" not in ran]
        if todo:
            full = len(ran) == 1 and not state["full"]
            state["full"] = state["full"] or full
            return Reply(calls=(Call("Bash", {"command": f"echo {todo[0]}", "description": f"Run {todo[0]}"}),), what=f"main:{todo[0]}", usage_in=170000 if full else None)
        return Reply.say("All three steps ran.", what="main:answer")
    return route


def test_cc_dump(tmp_path: Path) -> None:
    import os
    from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, looptap_run, need, run_env
    claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    env = run_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-x", **CLAUDE_OFFLINE, **json.loads(os.environ.get("CC_ENV", "{}")))
    cmd = [str(claude), "-p", "Run echo step1, echo step2 and echo step3 with Bash, one at a time.", "--model", "claude-sonnet-4-5",
           "--output-format", "json", "--no-session-persistence", "--allowedTools", "Bash"]
    with ScriptedUpstream(_cc_route_factory(), validate=True) as up:
        proc, out = looptap_run(tmp_path, tmp_path / "conf", cmd, env, upstream=up)
    why = _explain(proc, up)
    cas, an = _findings(out)
    d = _dump(tmp_path, up, an)
    (Path(os.environ.get("CTX_DUMP", "/tmp/ctxdump")) / "claude.txt").write_text(why + "\n\n" + d)


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


def _codex_route_factory():
    from tests.support.scripted import Call
    state = {"full": False}
    def route(req: ScriptedRequest) -> Reply:
        text = json.dumps(req.messages)
        if "CONTEXT CHECKPOINT COMPACTION" in json.dumps(req.messages[-1]):
            return Reply.say("SUMMARY: run echo step1, echo step2 and echo step3 in the shell, one at a time. Steps that ran: " + ", ".join(sorted(set(re.findall(r"step\d", " ".join(req.tool_results()))))) + ".", what="side:compact")
        ran = set(re.findall(r"step\d", " ".join(req.tool_results())))
        m = re.search(r"Steps that ran: ([^.]*)\.", text)
        if m:
            ran |= set(re.findall(r"step\d", m.group(1)))
        todo = [f"step{n}" for n in (1, 2, 3) if f"step{n}" not in ran]
        if todo:
            full = len(ran) == 1 and not state["full"]
            state["full"] = state["full"] or full
            tool = "exec_command" if "exec_command" in req.tools else "shell"
            args = {"cmd": f"echo {todo[0]}"} if tool == "exec_command" else {"command": ["bash", "-lc", f"echo {todo[0]}"]}
            return Reply(calls=(Call(tool, args),), what=f"main:{todo[0]}", usage_in=100000 if full else None)
        return Reply.say("All three steps ran.", what="main:answer")
    return route


def test_codex_dump(tmp_path: Path) -> None:
    import os
    from tests.proxy.test_e2e_node_agents import looptap_run, need, run_env
    codex = need("@openai/codex", bin_name="codex")
    home = tmp_path / "codex-home"
    home.mkdir()
    (tmp_path / "config.toml.in").write_text(CODEX_CONFIG)
    wrapper = tmp_path / "codex.sh"
    wrapper.write_text(
        "#!/bin/sh\nset -e\n"
        f'sed "s#@OPENAI_BASE_URL@#$OPENAI_BASE_URL#" "{tmp_path}/config.toml.in" > '
        f'"$CODEX_HOME/config.toml"\nexec "{codex}" "$@"\n'
    )
    wrapper.chmod(0o755)
    env = run_env(tmp_path, CODEX_HOME=str(home), LOOPTAP_CODEX_KEY="sk-x")
    cmd = [str(wrapper), "exec", "--skip-git-repo-check", "Run echo step1, echo step2 and echo step3 in the shell, one at a time."]
    with ScriptedUpstream(_codex_route_factory(), validate=True) as up:
        proc, out = looptap_run(tmp_path, tmp_path / "conf", cmd, env, upstream=up)
    why = _explain(proc, up)
    cas, an = _findings(out)
    d = _dump(tmp_path, up, an)
    (Path(os.environ.get("CTX_DUMP", "/tmp/ctxdump")) / "codex.txt").write_text(why + "\n\n" + d)
