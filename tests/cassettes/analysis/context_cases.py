"""Context-management cases for threading and the C layer (issue 82): every shape a long-running
agent manages its context by (docs/threading.md "Context management"), scripted in the wire format
of each API family. Each case is one agent's run: the true conversations it holds, and the
findings a right reading gives (every other warning or error is false).

Shapes (each a client habit seen in the wild; the frameworks are named in docs/threading.md):

* ``head_cut`` — the oldest messages dropped, no system prompt kept (a token-budget window);
* ``tail_kept`` — the system prompt and the latest messages (LangChain ``trim_messages``
  strategy "last", pydantic-ai's keep-the-last-N history processor, openai-agents' session
  limit): the request answers the previous turn's call ids and nothing before it is kept;
* ``summary_head`` — a summary message in place of the head (LangChain's
  ``SummarizationMiddleware``), the latest messages kept;
* ``side_call_summary`` — a summary asked of the model by a side call (another system prompt, no
  tools), then used: the next main request opens with the side call's answer (Claude Code's
  compaction, LangGraph's summarising node);
* ``cleared_results`` — old tool results' content replaced by a placeholder by the client
  (LangChain's ``ClearToolUsesEdit``, Claude Code's micro-compaction);
* ``api_edits`` — the client asks the API to edit the context server-side (Anthropic
  ``context_management`` edits; OpenAI Responses ``truncation: "auto"``): the history is sent
  whole, the API says what it applied;
* ``task_dropped`` — a tail kept that no longer carries the user's task, nor any summary of it:
  the one shape whose drop is a warning (``C.user_instruction_dropped``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from scenarios import (
    WEATHER,
    AgentScript,
    Call,
    anthropic_assistant,
    anthropic_results,
    edit_request,
    openai_responses_user,
)

Json = dict[str, Any]

SYSTEM = "You are a travel assistant. Use the tools to answer."
TASK = "Plan a weekend in Lisbon: check the weather there and suggest two museums."
INSTRUCTION = "Always quote temperatures in Fahrenheit, never in Celsius."
SUMMARY = (
    "Summary of the conversation so far: the user wants a weekend plan for Lisbon with the "
    "weather and two museums; the weather in Lisbon was checked (sunny, 24 C)."
)
SUMMARISER = "You summarise conversations. Write a short summary of the conversation above."

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")


@dataclass
class Case:
    shape: str
    family: str
    script: AgentScript
    #: The true conversations, as lists of seqs.
    conversations: list[list[int]]
    #: The true findings at warning and above, and the management findings: (code, seq).
    expected: list[tuple[str, int]] = field(default_factory=list)
    #: Consequences at later turns folded under the management: (code, seq, the management's seq).
    folded: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.shape}-{self.family}"


def _n(family: str) -> str:
    return {"openai_chat": "c", "openai_responses": "r", "anthropic": "a", "gemini": "g"}[family]


def _loop(family: str, tag: str, instruction: bool = False) -> tuple[AgentScript, list[Call]]:
    """An agent's first three turns: the task, a weather call and its result, a museum search and
    its result; the fourth request (not sent yet) is where the client manages its context."""
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    if instruction:
        s.user(INSTRUCTION)
        s.reply("Understood: temperatures in Fahrenheit.")
    s.user(TASK)
    first = Call("get_weather", {"city": "Lisbon"}, id=f"call_{tag}_1")
    s.reply(calls=[first])
    s.results("sunny, 24 C")
    second = Call("get_weather", {"city": "Lisbon", "unit": "f"}, id=f"call_{tag}_2")
    s.reply("It is sunny. Let me check in Fahrenheit too.", calls=[second])
    s.results("sunny, 75 F")
    return s, [first, second]


def _tail(s: AgentScript, keep: int) -> None:
    """Keep the system prompt (carried apart from the history on every family but Chat) and the
    latest ``keep`` history items."""
    s.history = s.history[-keep:]


def _items_of_last_call(family: str) -> int:
    """History items the latest answer (text and one call) and its result take."""
    return {"openai_responses": 3}.get(family, 2)


def head_cut(family: str) -> Case:
    s, _ = _loop(family, _n(family) + "h")
    # No system prompt on the wire for this client: drop it, then drop the first round.
    s.system = None
    s.exchanges.clear()
    s.history.clear()
    s.user(TASK)
    c1 = Call("get_weather", {"city": "Lisbon"}, id=f"call_{_n(family)}h_1")
    s.reply(calls=[c1])
    s.results("sunny, 24 C")
    c2 = Call("get_weather", {"city": "Porto"}, id=f"call_{_n(family)}h_2")
    s.reply("Lisbon is sunny. Porto too?", calls=[c2])
    s.results("cloudy, 19 C")
    s.user("Now suggest two museums in Lisbon for the weekend plan.")
    s.reply("Try the Gulbenkian and the Tile Museum.")
    s.user("And one restaurant near the Tile Museum?")
    # A token budget: the first call and its result leave (the task's message with them).
    s.history = s.history[3:]
    s.reply("Try O Coracao do Alfama.")
    return Case("head_cut", family, s, [[0, 1, 2, 3]], [("C.history_trimmed", 3)])


def tail_kept(family: str) -> Case:
    s, _ = _loop(family, _n(family) + "t")
    _tail(s, _items_of_last_call(family))
    s.reply("Sunny, 75 F. Museums: Gulbenkian and the Tile Museum.")
    return Case(
        "tail_kept",
        family,
        s,
        [[0, 1, 2]],
        [("C.history_trimmed", 2), ("C.user_instruction_dropped", 2)],
    )


def summary_head(family: str) -> Case:
    s, _ = _loop(family, _n(family) + "s")
    latest = s.history[-_items_of_last_call(family) :]
    s.history = []
    s.user(SUMMARY)
    s.history.extend(latest)
    s.reply("Sunny, 75 F. Museums: Gulbenkian and the Tile Museum.")
    return Case("summary_head", family, s, [[0, 1, 2]], [("C.history_trimmed", 2)])


def side_call_summary(family: str) -> Case:
    s, _ = _loop(family, _n(family) + "k")
    # The side call: another system prompt, no tools, over the whole history.
    main_system, main_tools = s.system, s.tools
    s.system, s.tools = SUMMARISER, ()
    s.user("Summarise the conversation above.")
    s.reply(SUMMARY, echo=False)
    s.system, s.tools = main_system, main_tools
    s.history = []
    s.user(
        "This session is being continued from a previous conversation that ran out of "
        f"context. The conversation is summarized below:\n{SUMMARY}\nPlease continue."
    )
    s.reply("Museums: Gulbenkian and the Tile Museum; it is sunny, 75 F.")
    return Case("side_call_summary", family, s, [[0, 1, 3], [2]], [("C.history_trimmed", 3)])


_PLACEHOLDER = "[cleared]"


def _clear_first_result(family: str, body: Json) -> None:
    """Replace the first tool result's content with a placeholder, as the client does."""
    key = {"openai_chat": "messages", "openai_responses": "input", "anthropic": "messages"}.get(
        family, "contents"
    )
    for item in body[key]:
        if family == "openai_chat" and item.get("role") == "tool":
            item["content"] = _PLACEHOLDER
            return
        if family == "openai_responses" and item.get("type") == "function_call_output":
            item["output"] = _PLACEHOLDER
            return
        if family == "anthropic" and isinstance(item.get("content"), list):
            for b in item["content"]:
                if b.get("type") == "tool_result":
                    b["content"] = _PLACEHOLDER
                    return
        if family == "gemini":
            for p in item.get("parts", []):
                if "functionResponse" in p:
                    p["functionResponse"]["response"] = {"result": _PLACEHOLDER}
                    return


def cleared_results(family: str) -> Case:
    s, _ = _loop(family, _n(family) + "x")
    ex = s.reply("Sunny, 75 F. Museums: Gulbenkian and the Tile Museum.")
    edit_request(ex, lambda body: _clear_first_result(family, body))
    return Case("cleared_results", family, s, [[0, 1, 2]], [("C.history_trimmed", 2)])


def _anthropic_edits(body: Json) -> None:
    body["context_management"] = {
        "edits": [
            {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100}},
            {"type": "clear_thinking_20251015"},
        ]
    }


def _anthropic_applied(ex: Any) -> None:
    """The response reports the edits the API applied (non-streamed body)."""
    resp = orjson.loads(ex.response_chunks[0][1])
    resp["context_management"] = {
        "applied_edits": [
            {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 1, "cleared_input_tokens": 40}
        ]
    }
    ex.response_chunks = [(0.05, orjson.dumps(resp))]


def api_edits(family: str) -> Case:
    s, _ = _loop(family, _n(family) + "e")
    ex = s.reply("Sunny, 75 F. Museums: Gulbenkian and the Tile Museum.")
    if family == "anthropic":
        edit_request(ex, _anthropic_edits)
        _anthropic_applied(ex)
    else:
        edit_request(ex, lambda body: body.__setitem__("truncation", "auto"))
    return Case("api_edits", family, s, [[0, 1, 2]], [("A.context_edited", 2)])


def instruction_dropped(family: str) -> Case:
    """A tail kept past an earlier instruction of the user's; the task itself is kept."""
    s, _ = _loop(family, _n(family) + "i", instruction=True)
    s.history = s.history[2:]  # the instruction and its acknowledgement leave
    s.reply("Sunny, 75 F. Museums: Gulbenkian and the Tile Museum.")
    return Case(
        "instruction_dropped",
        family,
        s,
        [[0, 1, 2, 3]],
        [("C.history_trimmed", 3), ("C.user_instruction_dropped", 3)],
    )


def repeat_after_summary(family: str) -> Case:
    """A summary in place of the head drops the first call and its result; a turn later the
    model, no longer seeing that call made, makes it again: the repeat (``E.repeated_call``)
    follows from what the management dropped and folds under its ``C.history_trimmed``."""
    s, (first, _) = _loop(family, _n(family) + "r")
    latest = s.history[-_items_of_last_call(family) :]
    s.history = []
    s.user(SUMMARY)
    s.history.extend(latest)
    porto = Call("get_weather", {"city": "Porto"}, id=f"call_{_n(family)}r_3")
    s.reply(calls=[porto])
    s.results("cloudy, 19 C")
    s.reply(calls=[Call(first.name, first.args, id=f"call_{_n(family)}r_4")])
    s.results("sunny, 24 C")
    s.reply("Sunny, 24 C in Lisbon, cloudy in Porto. Museums: Gulbenkian and the Tile Museum.")
    return Case(
        "repeat_after_summary",
        family,
        s,
        [[0, 1, 2, 3, 4]],
        [("C.history_trimmed", 2)],
        folded=[("E.repeated_call", 3, 2)],
    )


SHAPES: dict[str, Callable[[str], Case]] = {
    "head_cut": head_cut,
    "tail_kept": tail_kept,
    "summary_head": summary_head,
    "side_call_summary": side_call_summary,
    "cleared_results": cleared_results,
    "instruction_dropped": instruction_dropped,
    "repeat_after_summary": repeat_after_summary,
}
#: Server-side edits exist on these families only.
API_EDITS = ("openai_responses", "anthropic")


# --- the shapes real clients send (recorded by hand through `looptap run`: /work/s42-ctx-shapes.md,
# tests/clients/test_context.py), scripted here message for message -------------------------------

S = "You are a weather assistant. Use the get_weather tool for every city."


def _w(city: str, tag: str) -> Call:
    return Call("get_weather", {"city": city}, id=tag)


def wild_langchain_trim() -> Case:
    """LangChain ``trim_messages(strategy="last", include_system=True, start_on="human")``: the
    system prompt, the latest question and what followed it."""
    s = AgentScript("openai_chat", tools=[WEATHER], system=S)
    s.user("What is the weather in Paris?")
    s.reply(calls=[_w("Paris", "call_s0001")])
    s.results("WEATHER: Paris is sunny")
    s.reply("FORECAST: Paris")
    s.user("And in Tokyo and Berlin?")
    s.reply(calls=[_w("Tokyo", "call_s0004")])
    s.results("WEATHER: Tokyo is rainy")
    s.history = s.history[-3:]  # U2, the call, its result
    s.reply(calls=[_w("Berlin", "call_s0006")])
    s.results("WEATHER: Berlin is cloudy")
    s.reply("FORECAST: Tokyo, Berlin")
    return Case(
        "langchain_trim_messages", "openai_chat", s, [[0, 1, 2, 3, 4]], [("C.history_trimmed", 3)]
    )


SUMMARY2 = (
    "The user asked for the weather in Paris, Tokyo, Berlin, Madrid. Known so far: WEATHER: "
    "Paris is sunny; WEATHER: Tokyo is rainy"
)


def wild_langchain_summarization() -> Case:
    """LangChain ``SummarizationMiddleware`` in ``create_agent``: a summary asked by a call of its
    own (no system prompt, no tools, the messages to drop rendered as text), then a user message
    carrying it word for word in place of the head, the latest call and result kept."""
    s = AgentScript("openai_chat", tools=[WEATHER], system=S)
    s.user("What is the weather in Paris, Tokyo, Berlin and Madrid?")
    for i, city in enumerate(("Paris", "Tokyo", "Berlin")):
        s.reply(calls=[_w(city, f"call_s000{2 * i + 1}")])
        s.results(f"WEATHER: {city} is {('sunny', 'rainy', 'cloudy')[i]}")
    main = s.history
    s.system, s.tools, s.history = None, (), []
    s.user(
        "<role>\nContext Extraction Assistant\n</role>\n<messages>\nMessages to summarize:\n"
        '<message type="human">What is the weather in Paris, Tokyo, Berlin and Madrid?</message>\n'
        '<message type="ai">\n  <tool_call id="call_s0001" name="get_weather">{"city": "Paris"}'
        "</tool_call>\n</message>\n</messages>"
    )
    s.reply(SUMMARY2, echo=False)
    s.system, s.tools = S, (WEATHER,)
    s.history = [
        {
            "role": "user",
            "content": "Here is a summary of the conversation to date:\n\n" + SUMMARY2,
        },
        *main[-2:],
    ]
    s.reply(calls=[_w("Madrid", "call_s0007")])
    s.results("WEATHER: Madrid is hot")
    s.reply("FORECAST: Paris, Tokyo, Berlin, Madrid")
    return Case(
        "langchain_summarization",
        "openai_chat",
        s,
        [[0, 1, 2, 4, 5], [3]],
        [("C.history_trimmed", 4)],
    )


def wild_pydantic_ai_last_n() -> Case:
    """pydantic-ai's ``ProcessHistory`` keeping the last 5 messages: the trimmed history opens
    with an earlier answer after the instructions."""
    s = AgentScript("openai_chat", tools=[WEATHER], system=S)
    s.user("What is the weather in Paris?")
    s.reply(calls=[_w("Paris", "call_s0001")])
    s.results("WEATHER: Paris is sunny")
    s.reply("FORECAST: Paris")
    s.user("And in Tokyo?")
    s.reply(calls=[_w("Tokyo", "call_s0004")])
    s.results("WEATHER: Tokyo is rainy")
    s.history = s.history[-4:]  # the earlier answer, U2, the call, its result
    s.reply("FORECAST: Tokyo")
    return Case("pydantic_ai_last_n", "openai_chat", s, [[0, 1, 2, 3]], [("C.history_trimmed", 3)])


def wild_openai_agents_session() -> Case:
    """openai-agents' session limited to its latest 3 items: the next run's input opens with a
    function call (its output and the answer after it), then the new question."""
    s = AgentScript("openai_responses", tools=[WEATHER], system=S)
    s.user("What is the weather in Paris?")
    s.reply(calls=[_w("Paris", "call_s0001")])
    s.results("WEATHER: Paris is sunny")
    s.reply("FORECAST: Paris")
    s.history = s.history[-3:]
    s.user("And in Tokyo?")
    s.reply(calls=[_w("Tokyo", "call_s0005")])
    s.results("WEATHER: Tokyo is rainy")
    s.reply("FORECAST: Tokyo")
    return Case(
        "openai_agents_session", "openai_responses", s, [[0, 1, 2, 3]], [("C.history_trimmed", 2)]
    )


def _cm(applied: list[Json]) -> Callable[[Any], None]:
    def edit(ex: Any) -> None:
        edit_request(ex, _anthropic_edits)
        resp = orjson.loads(ex.response_chunks[0][1])
        resp["context_management"] = {"applied_edits": applied}
        ex.response_chunks = [(0.05, orjson.dumps(resp))]

    return edit


def wild_anthropic_context_management() -> Case:
    """The Anthropic SDK with ``context_management`` on every request; every answer reports its
    ``applied_edits``, empty until the API cleared old tool uses."""
    s = AgentScript("anthropic", tools=[WEATHER], system=S)
    s.user("What is the weather in Paris, Tokyo and Berlin?")
    for i, city in enumerate(("Paris", "Tokyo", "Berlin")):
        _cm([])(s.reply(calls=[_w(city, f"toolu_s000{2 * i + 2}")]))
        s.results(f"WEATHER: {city} is fine")
    cleared = {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": 2,
        "cleared_input_tokens": 80,
    }
    _cm([cleared])(s.reply("FORECAST: Paris, Tokyo, Berlin"))
    return Case(
        "anthropic_context_management", "anthropic", s, [[0, 1, 2, 3]], [("A.context_edited", 3)]
    )


CC_BODY = (
    "1. Primary Request: the user asked to run echo step1, echo step2 and echo step3 with Bash, "
    "one at a time. 2. Progress: step1 ran; step2 was asked."
)


def wild_claude_code_compaction() -> Case:
    """Claude Code's auto-compact: the compaction asked under the same system prompt and tools
    (its prompt appended to the last user message, the latest answer left out), then a request
    that opens with a summary message carrying the compaction's ``<summary>`` body, then the
    latest answer and its result."""
    bash = Call("Bash", {"command": "echo step1"}, id="toolu_s0002")
    tool = type(WEATHER)("Bash", {"type": "object", "properties": {"command": {"type": "string"}}})
    s = AgentScript("anthropic", tools=[tool], system="You are a Claude agent. cc=.9c4")
    s.user("Run echo step1, echo step2 and echo step3 with Bash, one at a time.")
    s.reply(calls=[bash])
    s.results("step1")
    step2 = Call("Bash", {"command": "echo step2"}, id="toolu_s0004")
    s.reply(calls=[step2], echo=False)
    s.history[-1] = {
        **s.history[-1],
        "content": [
            *s.history[-1]["content"],
            {"type": "text", "text": "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools. "
             "Your task is to create a detailed summary of the conversation so far."},
        ],
    }  # fmt: skip
    s.reply(f"<analysis>thinking</analysis>\n<summary>\n{CC_BODY}\n</summary>", echo=False)
    s.system = "You are a Claude agent. cc=.281"
    s.history = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "This session is being continued from a previous "
                 f"conversation that ran out of context.\nSummary:\n{CC_BODY}\nContinue the "
                 "conversation from where it left off."},
            ],
        },
        anthropic_assistant(calls=[step2]),
        *anthropic_results([(step2, "step2")]),
    ]  # fmt: skip
    s.reply(calls=[Call("Bash", {"command": "echo step3"}, id="toolu_s0007")])
    s.results("step3")
    s.reply("All three steps ran.")
    return Case(
        "claude_code_compaction",
        "anthropic",
        s,
        [[0, 1, 3, 4], [2]],
        [("C.history_trimmed", 3)],
    )


CODEX_SUMMARY = (
    "Handoff: the user asked to run echo step1, echo step2 and echo step3; step1 and step2 ran, "
    "step3 is next."
)


def wild_codex_compaction() -> Case:
    """Codex's local compaction: the checkpoint asked with ``tools: []`` over the whole history,
    answer and result included; then the opening again (developer messages, environment, the
    task) and a user message carrying the checkpoint's answer; every call and result dropped."""
    exec_tool = type(WEATHER)(
        "exec_command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    s = AgentScript("openai_responses", tools=[exec_tool], system=None)
    s.history = [
        {"role": "developer", "content": "You are Codex, a coding agent."},
        {"role": "developer", "content": "Skills: none."},
        openai_responses_user("<environment_context>cwd=/w</environment_context>"),
    ]  # fmt: skip
    s.user("Run echo step1, echo step2 and echo step3 in the shell, one at a time.")
    opening = list(s.history)
    s.reply(calls=[Call("exec_command", {"cmd": "echo step1"}, id="call_s0001")])
    s.results("step1")
    s.reply(calls=[Call("exec_command", {"cmd": "echo step2"}, id="call_s0004")])
    s.results("step2")
    s.tools = ()
    s.user("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for "
           "another LLM that will resume the task.")  # fmt: skip
    s.reply(CODEX_SUMMARY, echo=False)
    s.tools = (exec_tool,)
    s.history = opening
    s.user(
        "Another language model started to solve this problem and produced a summary of its "
        f"thinking process. Here is the summary: {CODEX_SUMMARY}"
    )
    s.reply(calls=[Call("exec_command", {"cmd": "echo step3"}, id="call_s0007")])
    s.results("step3")
    s.reply("All three steps ran.")
    return Case(
        "codex_compaction", "openai_responses", s, [[0, 1, 3, 4], [2]], [("C.history_trimmed", 3)]
    )


def _renamed(case: Case, shape: str) -> Case:
    case.shape = shape
    return case


WILD: dict[str, Callable[[], Case]] = {
    "langchain_trim_messages": wild_langchain_trim,
    "langchain_summarization": wild_langchain_summarization,
    "pydantic_ai_last_n": wild_pydantic_ai_last_n,
    "openai_agents_session": wild_openai_agents_session,
    "anthropic_context_management": wild_anthropic_context_management,
    "claude_code_compaction": wild_claude_code_compaction,
    "codex_compaction": wild_codex_compaction,
    "langchain_context_editing": lambda: _renamed(
        cleared_results("openai_chat"), "langchain_context_editing"
    ),
}


def all_cases() -> list[Case]:
    """Every shape × family, then the shapes real clients send (:data:`WILD`)."""
    cases = [build(f) for build in SHAPES.values() for f in FAMILIES4]
    return cases + [api_edits(f) for f in API_EDITS] + [build() for build in WILD.values()]
