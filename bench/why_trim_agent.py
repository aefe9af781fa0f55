"""The agents of bench/why_cases.py's planted causes in a managed context (issue 82): a tool loop on
the real openai SDK (Chat Completions) whose client trims, summarises or compacts the history it
sends, with the planted bug and (``--fixed``) without it: what ``looptap why DIR --confirm`` runs.

    python why_trim_agent.py CASE [--fixed]

The task asks the weather in Paris and Lyon, one lookup a turn; the tools answer in facts
("Paris: sunny", "Lyon: rain", "Lyon: 12:00"). The scripted model (bench/why_case_list.py
``trimmed``) answers from what the request it is sent holds: the latest lookup made tells it where
it is in its plan, the facts it can find give the answer, and "in capitals" anywhere in the
request makes it write the city names in capitals.

``trim-task``: the client keeps the last 4 messages once the history is longer (system prompt
kept): the user's task, with its instruction ("Write the city names in capitals."), is cut at the
third request; the answer breaks the instruction. Fixed: no trim.
``trim-summary``: the client puts its own summary in place of the head once the history is longer
than 4 messages; the summary keeps the facts and loses the instruction. Fixed: no summary.
``trim-tail``: three lookups (Lyon's time too); the client keeps the task and the last 2 messages
once the history is longer than 5: the fourth request has lost Lyon's weather, which the answer
needs. Fixed: no trim.
``trim-compact``: the three lookups of ``trim-tail``; once the history is longer than 5 messages,
the client asks the model, in a side call (another system prompt, no tools, over the whole
history), for a one-line summary of the conversation and sends the summary in place of it all (as
compaction does); the summary drops Lyon's weather, which the
answer needs. Fixed: no compaction.
``trim-garbled``: a harmless trim (the greeting before the task dropped) and a client bug elsewhere:
Lyon's result garbled before it is sent ("Lyon: r@in"), so the answer has no rain. Off the wire:
nothing a fork changes flips it. Fixed: the result sent as the tool returned it.
``trim-ignored``: the same harmless trim; the model ignores the instruction, still in the request,
40% of the time. Fixed: the agent checks its answer and asks again (up to 3 times).

``groupchat``: not a managed context: a group chat as AutoGen's selector group chat runs one.
Before each turn a side call asks the model who speaks next (the transcript as text); each agent
keeps its own context, the others' messages in it as user messages with their ``name``. The
planner speaks first, the weather agent looks the cities up (both calls in one answer) and drops
the second result (the bug), the planner sums up. Fixed: no drop. What ``why --confirm`` must
judge: every selector call after the fixed turn differs from the recording.

Exits 1 when the final answer fails the task's check, as the task's own check would.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

SYSTEM = "You are the weather agent. Use the tools, one lookup a turn."
INSTRUCTION = "Write the city names in capitals."
TASK = "Weather in Paris and Lyon? " + INSTRUCTION
TAIL_TASK = "Weather in Paris and Lyon, and the time in Lyon?"
GREETING = [
    {"role": "user", "content": "Hi, I have a question for you in a moment."},
    {"role": "assistant", "content": "Hello! Ask away."},
]
#: The side call's instruction (trim-compact).
SUMMARIZE = "Summarize the conversation so far in one line, for later."
SUMMARY_HEAD = "Summary of the conversation so far: "
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {what} in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    for name, what in (("get_weather", "weather"), ("get_time", "local time"))
]
#: What each case's final answer is checked for.
CHECK = {
    "trim-task": ("PARIS", "LYON"),
    "trim-summary": ("PARIS", "LYON"),
    "trim-tail": ("Lyon: rain",),
    "trim-compact": ("Lyon: rain",),
    "trim-garbled": ("Lyon: rain",),
    "trim-ignored": ("PARIS", "LYON"),
    "groupchat": ("rain",),
}
#: The group chat's selector side call, and its two agents' system prompts.
SELECT = "Select the next speaker of the group chat: planner or weather_agent. Say the name only."
PLANNER = "You are the planner of a group chat. Say what to look up, then sum up."


def run_tool(name: str, city: str) -> str:
    if name == "get_time":
        return f"{city}: 12:00"
    return f"{city}: " + {"Paris": "sunny", "Lyon": "rain"}.get(city, "cloudy")


def managed(opts: argparse.Namespace, client: Any, history: list[dict[str, Any]]) -> list[Any]:
    """The history the client sends (its context management, the planted bug), from the whole
    one it keeps."""
    case, fixed = opts.case, opts.fixed
    if case in ("trim-garbled", "trim-ignored"):
        return history[len(GREETING) :] if len(history) > 5 else history  # harmless: the greeting
    if fixed:
        return history
    if case == "trim-task" and len(history) > 4:
        return history[-4:]
    if case == "trim-summary" and len(history) > 4:
        head = SUMMARY_HEAD + "the user asked for the weather in Paris and Lyon; Paris: sunny."
        return [{"role": "user", "content": head}, *history[-2:]]
    if case == "trim-tail" and len(history) > 5:
        return [history[0], *history[-2:]]
    if case == "trim-compact" and len(history) > 5:
        # the side call: another system prompt, no tools, over the whole history (Claude Code's
        # compaction, LangGraph's summarising node)
        summary = (
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[
                    {"role": "system", "content": SUMMARIZE},
                    *history,
                    {"role": "user", "content": "Summarize the conversation above."},
                ],
                max_tokens=100,
            )
            .choices[0]
            .message.content
            or ""
        )
        history[:] = [{"role": "user", "content": SUMMARY_HEAD + summary}]
        return history
    return history


def loop(opts: argparse.Namespace) -> str:
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    task = TAIL_TASK if opts.case in ("trim-tail", "trim-compact") else TASK
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    if opts.case in ("trim-garbled", "trim-ignored"):
        history[:0] = list(GREETING)
    for _ in range(8):
        sent = managed(opts, client, history)
        asks = 3 if opts.fixed and opts.case == "trim-ignored" else 1
        for _ in range(asks):
            msg = (
                client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "system", "content": SYSTEM}, *sent],
                    max_tokens=100,
                    tools=TOOLS,
                )  # type: ignore[arg-type]
                .choices[0]
                .message
            )
            if msg.tool_calls or all(c in (msg.content or "") for c in CHECK[opts.case]):
                break  # the fixed agent's check: its answer passes the task's
        calls = list(msg.tool_calls or [])
        if not calls:
            return msg.content or ""
        history.append(
            {
                "role": "assistant",
                "content": msg.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in calls
                ],
            }
        )
        for c in calls:
            out = run_tool(c.function.name, json.loads(c.function.arguments)["city"])
            if opts.case == "trim-garbled" and not opts.fixed and out == "Lyon: rain":
                out = "Lyon: r@in"  # the client's bug: the result garbled before it is sent
            history.append({"role": "tool", "tool_call_id": c.id, "content": out})
    return "(no answer after 8 turns)"


def group_chat(opts: argparse.Namespace) -> str:
    """The ``groupchat`` case (see the module docstring); the planner's last word is the answer."""
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    task = "Weather in Paris and Lyon?"
    said: list[tuple[str, str]] = [("user", task)]
    contexts: dict[str, list[dict[str, Any]]] = {
        "planner": [{"role": "user", "content": task}],
        "weather_agent": [{"role": "user", "content": task}],
    }

    def ask(system: str, messages: list[Any], tools: bool) -> Any:
        return (
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "system", "content": system}, *messages],
                max_tokens=100,
                **({"tools": TOOLS} if tools else {}),
            )  # type: ignore[call-overload]
            .choices[0]
            .message
        )

    planned = False
    for _ in range(4):
        transcript = "\n".join(f"{who}: {text}" for who, text in said)
        who = (ask(SELECT, [{"role": "user", "content": transcript}], False).content or "").strip()
        if who not in contexts:
            return f"(the selector named {who[:40]!r})"
        mine = contexts[who]
        if who == "planner":
            text = ask(PLANNER, mine, False).content or ""
        else:
            text = ""
            for _ in range(3):
                msg = ask(SYSTEM, mine, True)
                calls = list(msg.tool_calls or [])
                if not calls:
                    text = msg.content or ""
                    break
                mine.append({"role": "assistant", "content": msg.content, "tool_calls": [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.function.name, "arguments": c.function.arguments}}
                    for c in calls]})  # fmt: skip
                for k, c in enumerate(calls):
                    out = run_tool(c.function.name, json.loads(c.function.arguments)["city"])
                    if k == 1 and not opts.fixed:
                        continue  # the bug: the tool ran, its result never goes back
                    mine.append({"role": "tool", "tool_call_id": c.id, "content": out})
        mine.append({"role": "assistant", "content": text})
        for other, ctx in contexts.items():
            if other != who:
                ctx.append({"role": "user", "name": who, "content": text})
        said.append((who, text))
        if who == "planner" and planned:
            return text
        planned = planned or who == "planner"
    return "(no summary after 4 turns)"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CHECK))
    ap.add_argument("--fixed", action="store_true")
    opts = ap.parse_args()
    text = group_chat(opts) if opts.case == "groupchat" else loop(opts)
    print(f"answer: {text}")
    return 0 if all(c in text for c in CHECK[opts.case]) else 1


if __name__ == "__main__":
    sys.exit(main())
