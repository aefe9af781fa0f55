"""A tool-loop agent on the real SDKs (openai Chat Completions by default; ``--family responses``:
openai Responses; ``--family anthropic``: Anthropic Messages) for the ``looptap why`` tests: it
asks about the weather in Paris and Lyon, runs the tools the model calls, prints the final answer
and exits 1 when it lacks the word the task needs (``--expect``), as a task's own check would.

    python why_agent.py [--drop-second] [--expect WORD] [--family chat|responses|anthropic]
                        [--shape plain|sub-agent|handoff] [--bad-schema [--recover]] [--tool-bug]

``--drop-second``: the client bug of the C case: of an answer's tool calls, only the first one's
result is sent back (the second is dropped). The cap is 60 output tokens (the A case lifts it).

``--shape`` (Chat and Anthropic): ``sub-agent``, a main agent whose one tool asks a weather
sub-agent (its own system prompt and tools, the question as its first user message) and gets the
sub-agent's answer back as the tool's result; ``handoff``, a triage agent that hands the run over
to the weather agent (a ``transfer_to_weather_agent`` call, answered as openai-agents answers it,
then the same history under the weather agent's system prompt and tools). ``--drop-second`` is
then the weather agent's bug, after the hand-over or inside the sub-agent. ``sub-agents``: the
main agent asks the weather sub-agent twice in one answer (a city each) and ``--drop-second`` is
the main agent's bug (the second sub-agent's answer dropped, after a correct sub-agent);
``group``, a group chat: a planner speaks first (no tool), its answer goes on, with the
question, to the weather agent (whose bug ``--drop-second`` is), whose answer goes back to the
planner, who sums it up (the final answer).

``--ask TEXT``: the user's question is TEXT (Chat and Anthropic): a fixed agent whose change shows
in its first request, before a verdict's turn.

``--vary FILE``: the agent counts its runs in FILE; its 2nd, 5th, 8th … run asks another question
(the client diverging from the recording, as a client whose prompt carries what changed does).

``--drop-answer`` (Chat and Anthropic): the most common client bug: the answer that made the tool
calls is never appended to the history, its results are sent all the same (the API answers with
its pairing 400; the SDK raises, the agent fails).

``--bad-schema``: from its second request on, the client also offers a ``get_forecast`` tool whose
schema the API refuses (``properties`` an array): a client bug the API answers with a 400. With
``--recover`` the client recovers from it as a careful one does: on the 400 it sends the same
history again with the schema mended (an object), and keeps the mended one.

``--retries N`` (Chat): the SDK's own retries of a failed request (``max_retries``; 0 unless
given): a 503 it retries itself, looptap's ``C.retry``.

``--cap N`` (Chat, Anthropic): the output token cap (60 unless given: the A case's).

``--http`` (Chat): the requests are sent by the standard library (``urllib``, to
``OPENAI_BASE_URL`` as ``looptap run`` sets it), not by the openai SDK: the same bodies, without
the SDK's import (about 0.7 s of CPU a run, most of a branch's agent). For the tests about what
``why`` concludes from its branches, whose client is not what they show; the SDK's own behaviour
(its retries, its errors, its streams) stays on the SDK.

``--tool-bug``: a bug in the weather tool's own code (Lyon's weather read from the wrong row:
"sunny"), which no request shows: the model answers right from what the tool said.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


#: ``--tool-bug``: the weather tool reads Lyon's weather from Paris's row.
TOOL_BUG: list[bool] = [False]


def run_tool(name: str, city: str) -> str:
    if name == "get_time":
        return f"12:00 in {city}"
    if TOOL_BUG[0] and city == "Lyon":
        city = "Paris"
    return {"Paris": "sunny", "Lyon": "rain"}.get(city, "cloudy")


WEATHER_SYSTEM = "Use the tools."
QUESTION = "Weather in Paris and Lyon?"
#: The sub-agent shape's main agent: its one tool asks the weather agent.
MAIN_SYSTEM = "You are the main agent. Ask the weather agent, then report what it said."
ASK: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "ask_weather_agent",
        "description": "Ask the weather agent a question.",
        "parameters": {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
    },
}
#: The group chat's first agent: it answers with a plan, no tool.
PLANNER_SYSTEM = "You are the planner. Say which cities to look up."
#: The handoff shape's first agent: its one tool hands the run over.
TRIAGE_SYSTEM = "You are the triage agent. Hand weather questions to the weather agent."
TRANSFER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "transfer_to_weather_agent",
        "description": "Handoff to the weather agent to handle the request.",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}
#: A tool whose schema the API refuses (``properties`` must be an object).
BAD: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_forecast",
        "description": "The forecast in a city.",
        "parameters": {"type": "object", "properties": ["city"]},
    },
}
#: ``--recover``: the same tool with its schema mended.
MENDED: dict[str, Any] = {
    "type": "function",
    "function": {
        **BAD["function"],
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def offered(opts: argparse.Namespace, tools: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The tools of request ``n``: with ``--bad-schema``, the refused one from the second on
    (``--bad-from N``: from request N on; mended once the client recovered from its 400)."""
    return tools + (
        [MENDED if opts.mended else BAD] if opts.bad_schema and n >= opts.bad_from else []
    )


def recovering(opts: argparse.Namespace, send: Callable[[], Any]) -> Any:
    """``send()``; with ``--recover``, a 400 on the refused schema is answered by mending it and
    sending the same history again (once)."""
    try:
        return send()
    except Exception as exc:
        if not (opts.recover and getattr(exc, "status_code", None) == 400 and not opts.mended):
            raise
        opts.mended = True
        return send()


@dataclass
class Agent:
    """One agent of a loop: its system prompt, its tools (Chat's shape) and how it runs a call;
    ``handoff``: the agent a call of that name hands the run over to; ``drop``: it drops the
    second result of an answer (the C bug)."""

    system: str
    tools: list[dict[str, Any]]
    run: Callable[[str, dict[str, Any]], str]
    handoff: dict[str, Agent] = field(default_factory=dict)
    drop: bool = False


def question(opts: argparse.Namespace) -> str:
    """The user's question (``--ask``: another one); with ``--vary``, another one on the 2nd,
    5th, 8th … run."""
    if opts.ask:
        return str(opts.ask)
    if not opts.vary:
        return QUESTION
    counter = Path(opts.vary)
    n = int(counter.read_text() or 0) if counter.exists() else 0
    counter.write_text(str(n + 1))
    return QUESTION + (" Asked again." if n % 3 == 1 else "")


def agents(opts: argparse.Namespace, loop: Callable[[Agent, str], str]) -> tuple[Agent, str]:
    """The first agent of ``--shape`` and its question (``loop`` runs a sub-agent)."""
    parent_drops = opts.shape == "sub-agents"  # --drop-second is then the main agent's bug
    weather = Agent(
        WEATHER_SYSTEM,
        TOOLS,
        lambda n, a: run_tool(n, **a),
        drop=opts.drop_second and not parent_drops,
    )
    if opts.shape in ("sub-agent", "sub-agents"):
        ask = Agent(
            MAIN_SYSTEM,
            [ASK],
            lambda n, a: loop(weather, a["question"]),
            drop=parent_drops and opts.drop_second,
        )
        return ask, question(opts)
    if opts.shape == "handoff":
        to = {"transfer_to_weather_agent": weather}
        return Agent(TRIAGE_SYSTEM, [TRANSFER], lambda n, a: "", handoff=to), question(opts)
    return weather, question(opts)


class HTTPStatusError(Exception):
    """``--http``: the API answered with an error status (``status_code``, as the SDK's errors)."""

    def __init__(self, status_code: int, body: str) -> None:
        super().__init__(f"Error code: {status_code} - {body[:2000]}")
        self.status_code = status_code


def chat_create(opts: argparse.Namespace) -> Callable[..., dict[str, Any]]:
    """A Chat Completions ``create(**body)`` returning the response as a dict: the openai SDK's,
    or with ``--http`` the standard library's POST of the same body."""
    if not opts.http:
        from openai import OpenAI

        client = OpenAI(max_retries=opts.retries)
        return lambda **body: client.chat.completions.create(**body).model_dump()
    import os
    import urllib.error
    import urllib.request

    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    key = os.environ.get("OPENAI_API_KEY", "")

    def create(**body: Any) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{base}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "authorization": f"Bearer {key}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return dict(json.loads(r.read()))
        except urllib.error.HTTPError as exc:
            raise HTTPStatusError(exc.code, exc.read().decode("utf-8", "replace")) from None

    return create


def chat_loop(opts: argparse.Namespace, agent: Agent, question: str) -> str:
    create = chat_create(opts)
    history: list[dict[str, object]] = [{"role": "user", "content": question}]
    for n in range(4):
        msg = recovering(
            opts,
            lambda a=agent, k=n: create(
                model="gpt-4o-mini",
                messages=[{"role": "system", "content": a.system}, *history],
                max_tokens=opts.cap,
                **({"tools": t} if (t := offered(opts, a.tools, k)) else {}),
            ),
        )["choices"][0]["message"]
        calls = list(msg.get("tool_calls") or [])
        if not calls:
            return str(msg.get("content") or "")
        answer = {
            "role": "assistant",
            "content": msg.get("content"),
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    },
                }
                for c in calls
            ],
        }
        if not opts.drop_answer:  # --drop-answer: the answer with the calls never goes back
            history.append(answer)
        after = None
        for k, c in enumerate(calls):
            name, args = c["function"]["name"], json.loads(c["function"]["arguments"])
            if agent.drop and k == 1:  # the bug: the tool runs, its result never goes back
                agent.run(name, args)
                continue
            if name in agent.handoff:
                after = agent.handoff[name]
                out = json.dumps({"assistant": "weather_agent"})  # as openai-agents answers it
            else:
                out = agent.run(name, args)
            history.append({"role": "tool", "tool_call_id": c["id"], "content": out})
        agent = after or agent
    return "(no answer after 4 turns)"


def shaped(opts: argparse.Namespace, loop: Callable[[argparse.Namespace, Agent, str], str]) -> str:
    """The run of ``--shape`` on one API's ``loop``; ``group``: a group chat, the planner speaks
    first and its answer goes to the weather agent with the question."""
    first, asked = agents(opts, lambda a, q: loop(opts, a, q))
    if opts.shape == "group":
        planner = Agent(PLANNER_SYSTEM, [], lambda n, a: "")
        plan = loop(opts, planner, asked)
        found = loop(opts, first, f"{asked}\nThe planner said: {plan}")
        return loop(opts, planner, f"{asked}\nThe weather agent said: {found}\nSum it up.")
    return loop(opts, first, asked)


def chat(opts: argparse.Namespace) -> str:
    return shaped(opts, chat_loop)


def responses(opts: argparse.Namespace) -> str:
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    tools = [
        {
            "type": "function",
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "parameters": t["function"]["parameters"],
        }
        for t in TOOLS
    ]
    items: list[object] = [{"role": "user", "content": "Weather in Paris and Lyon?"}]
    for _ in range(4):
        r = client.responses.create(
            model="gpt-4o-mini",
            instructions="Use the tools.",
            input=items,
            tools=tools,
            max_output_tokens=60,
        )  # type: ignore[arg-type]
        calls = [o for o in r.output if o.type == "function_call"]
        if not calls:
            return r.output_text
        items += [o.model_dump(exclude_none=True) for o in r.output]
        for n, c in enumerate(calls):
            if opts.drop_second and n == 1:
                continue
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": c.call_id,
                    "output": run_tool(c.name, **json.loads(c.arguments)),
                }
            )
    return "(no answer after 4 turns)"


def _anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in tools
    ]


def anthropic_loop(opts: argparse.Namespace, agent: Agent, question: str) -> str:
    from anthropic import Anthropic

    client = Anthropic(max_retries=0)
    messages: list[dict[str, object]] = [{"role": "user", "content": question}]
    for n in range(4):
        msg = recovering(
            opts,
            lambda a=agent, k=n: client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=opts.cap,
                system=a.system,
                messages=messages,
                **({"tools": _anthropic_tools(t)} if (t := offered(opts, a.tools, k)) else {}),
            ),  # type: ignore[arg-type]
        )
        uses = [b for b in msg.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in msg.content if b.type == "text")
        if not opts.drop_answer:  # --drop-answer: the answer with the calls never goes back
            content = [b.model_dump(exclude_none=True) for b in msg.content]
            messages.append({"role": "assistant", "content": content})
        after, results = None, []
        for k, b in enumerate(uses):
            if agent.drop and k == 1:
                agent.run(b.name, dict(b.input))  # type: ignore[arg-type]
                continue
            if b.name in agent.handoff:
                after = agent.handoff[b.name]
                out = json.dumps({"assistant": "weather_agent"})
            else:
                out = agent.run(b.name, dict(b.input))  # type: ignore[arg-type]
            results.append({"type": "tool_result", "tool_use_id": b.id, "content": out})
        messages.append({"role": "user", "content": results})
        agent = after or agent
    return "(no answer after 4 turns)"


def anthropic(opts: argparse.Namespace) -> str:
    return shaped(opts, anthropic_loop)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--drop-second", action="store_true")
    ap.add_argument("--drop-answer", action="store_true")
    ap.add_argument("--expect", default="sunny")
    ap.add_argument("--family", choices=("chat", "responses", "anthropic"), default="chat")
    ap.add_argument("--answer-file", help="also write the answer there (what a --check reads)")
    ap.add_argument(
        "--shape", choices=("plain", "sub-agent", "sub-agents", "handoff", "group"), default="plain"
    )
    ap.add_argument("--bad-schema", action="store_true")
    ap.add_argument("--bad-from", type=int, default=1, help="the request --bad-schema starts at")
    ap.add_argument("--recover", action="store_true")
    ap.add_argument("--tool-bug", action="store_true")
    ap.add_argument("--http", action="store_true", help="Chat: urllib, not the openai SDK")
    ap.add_argument("--vary", metavar="FILE")
    ap.add_argument(
        "--ask", metavar="TEXT", help="the user's question (a fix that shows at turn 0)"
    )
    ap.add_argument(
        "--retries", type=int, default=0, help="the SDK's own retries (Chat; its max_retries)"
    )
    ap.add_argument("--cap", type=int, default=60, help="the output token cap (Chat, Anthropic)")
    opts = ap.parse_args()
    opts.mended = False
    TOOL_BUG[0] = opts.tool_bug
    text = {"chat": chat, "responses": responses, "anthropic": anthropic}[opts.family](opts)
    print(f"answer: {text}")
    if opts.answer_file:
        with open(opts.answer_file, "w") as f:
            f.write(text)
    return 0 if opts.expect in text else 1


if __name__ == "__main__":
    sys.exit(main())
