"""The scripted model of the client matrix: one agent task, answered from each request's content.

Task: "What is the weather in Paris, Tokyo and Berlin?" with one tool, ``get_weather(city)``,
whose result starts with ``WEATHER:``. The model answers in three turns: two parallel calls
(Paris, Tokyo), then one call (Berlin), then a final answer starting with ``FORECAST:``. Framework
shapes on top of that:

* a handoff tool ``transfer_to_weather_agent`` offered without ``get_weather``: the model hands off
  first (openai-agents handoffs); Google ADK's one ``transfer_to_agent`` tool, given the agent's
  name;
* an agent offered as a tool, ``weather_expert``: the model asks it once, then relays its answer
  (openai-agents ``as_tool``: the sub-agent's own loop is a conversation of its own);
* no tools and a forecast in the history: a reviewer of a two-agent team (AutoGen's round robin),
  which approves it;
* a ``final_answer`` tool (smolagents): the model ends by calling it instead of answering in text;
* no tools but a ReAct prompt (``Action Input``): the same three steps written as
  Thought / Action / Action Input text, with the observations read back from the history.
"""

from __future__ import annotations

import json

from tests.support.scripted import Call, Reply, ScriptedRequest

TASK = "What is the weather in Paris, Tokyo and Berlin?"
FINAL = "FORECAST: Paris sunny 21 C, Tokyo rain 18 C, Berlin cloudy 15 C."


def weather(city: str) -> str:
    """What every client's get_weather tool returns."""
    return (
        f"WEATHER: {city} is "
        f"{'sunny' if city == 'Paris' else 'rainy' if city == 'Tokyo' else 'cloudy'}"
    )


def _history_text(req: ScriptedRequest) -> str:
    return json.dumps(req.messages)


def route(req: ScriptedRequest) -> Reply:
    tools = req.tools
    results = req.tool_results()
    if not tools and "Action Input" in (req.system + _history_text(req)):
        return _react(req)
    if not tools and (
        "[[ ## next_tool_name ## ]]" in req.system or "[[ ## trajectory ## ]]" in _history_text(req)
    ):
        return _dspy(req)
    if "transfer_to_weather_agent" in tools and "get_weather" not in tools:
        return Reply.tool("transfer_to_weather_agent", {}, what="handoff")
    # Google ADK: one tool, the agent named
    if "transfer_to_agent" in tools and "get_weather" not in tools:
        return Reply.tool("transfer_to_agent", {"agent_name": "weather_agent"}, what="handoff")
    if "weather_expert" in tools:
        if any("FORECAST" in r for r in results):
            return Reply.say("The weather expert says: " + FINAL, what="relay")
        return Reply.tool(
            "weather_expert", {_first_parameter(req, "weather_expert"): TASK}, what="ask expert"
        )
    # a reviewer of a team: approves the forecast it was shown
    if not tools and "FORECAST" in _history_text(req):
        return Reply.say("APPROVE. " + FINAL, what="review")
    # Cities whose weather the history holds, however the client sent it back: as tool results, or
    # as text (smolagents renders calls and observations as plain messages).
    history = _history_text(req)
    done = sum(f"WEATHER: {c}" in history for c in ("Paris", "Tokyo", "Berlin"))
    if done == 0:
        return Reply(
            calls=(Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Tokyo"})),
            what="parallel",
        )
    if done < 3:
        return Reply.tool("get_weather", {"city": "Berlin"}, what="one call")
    if "final_answer" in tools:
        return Reply.tool("final_answer", {"answer": FINAL}, what="final tool")
    return Reply.say(FINAL, what="final")


def _first_parameter(req: ScriptedRequest, tool: str) -> str:
    """The name of the tool's first parameter (``input`` for openai-agents, ``request`` for ADK)."""
    props = (req.tool_schema(tool) or {}).get("properties")
    return next(iter(props), "input") if isinstance(props, dict) and props else "input"


def _fields(**fields: str) -> str:
    """DSPy's text protocol: each output field under its ``[[ ## name ## ]]`` header."""
    return (
        "\n\n".join(f"[[ ## {k} ## ]]\n{v}" for k, v in fields.items())
        + "\n\n[[ ## completed ## ]]"
    )


def _dspy(req: ScriptedRequest) -> Reply:
    """DSPy's ReAct: a step asks next_thought / next_tool_name / next_tool_args, the trajectory so
    far re-rendered into the one user message; the last call extracts the answer from the
    trajectory."""
    history = _history_text(req)
    if "next_tool_name" not in req.system:
        return Reply.say(
            _fields(reasoning="Every city has its weather.", answer=FINAL), what="dspy answer"
        )
    todo = [c for c in ("Paris", "Tokyo", "Berlin") if f"WEATHER: {c}" not in history]
    if todo:
        return Reply.say(
            _fields(
                next_thought=f"I need the weather in {todo[0]}.",
                next_tool_name="get_weather",
                next_tool_args=json.dumps({"city": todo[0]}),
            ),
            what=f"dspy {todo[0]}",
        )
    return Reply.say(
        _fields(next_thought="I have every city.", next_tool_name="finish", next_tool_args="{}"),
        what="dspy finish",
    )


def _react(req: ScriptedRequest) -> Reply:
    history = _history_text(req)
    todo = [c for c in ("Paris", "Tokyo", "Berlin") if f"WEATHER: {c}" not in history]
    if todo:
        city = todo[0]
        text = (
            f"Thought: I need the weather in {city}.\nAction: get_weather\nAction Input: "
            f"{json.dumps({'city': city})}"
        )
        return Reply.say(text, what=f"react {city}")
    return Reply.say(
        f"Thought: I can answer without using any more tools.\nAnswer: {FINAL}", what="react final"
    )
