"""The agents of bench/why_cases.py's planted causes that tests/why/why_agent.py has no flag for,
each with its bug and (``--fixed``) without it: what ``looptap why DIR --confirm`` runs. Real SDKs
(openai Chat Completions; google-genai for ``gemini-schema``), the tools of why_agent.py.

    python why_cases_agent.py CASE [--fixed] [--cap N]

``relay``: a main agent asks the weather sub-agent (which answers right) and relays its answer;
the model relays it wrongly now and then. Fixed: the main agent checks that its report carries
the sub-agent's answer and asks again when it does not (up to 3 times).
``flaky``: the weather agent, both cities in one answer, no client bug; the model's final answer
is sometimes wrong. Fixed: the same check (the answer must carry every tool result).
``steps``: one city a turn over 8 turns; on its fourth answer (Lyon's) the model asks two tools
and the client drops the second result: the fifth of 8 requests (turn 4, counted from 0) is the
first the bug shows in. Fixed: no drop.
``recover``: the first request offers a tool whose schema the API refuses (400); the client
retries without it (a changed retry: it recovered); then the weather tool has a bug (Lyon's
weather read wrong), off the wire. Fixed: the tool reads right (the refusal and retry stay).
``gemini-schema``: google-genai, the schema the API refuses offered from the second request on.
Fixed: not offered.
``together``: why_agent.py's two bugs needed together (Lyon's result dropped; a cap of 60 output
tokens); ``--cap N`` lifts the cap from the second request on. Fixed: neither (``--cap 200``).

Exits 1 when the final answer lacks the word the task needs, as the task's own check would.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.why.why_agent import (
    ASK,
    BAD,
    MAIN_SYSTEM,
    QUESTION,
    TOOLS,
    WEATHER_SYSTEM,
    run_tool,
)

#: The steps case: one city a turn; Lyon's turn asks the weather and the time (its second result
#: is what the client drops).
STEP_CITIES = ["Paris", "Rome", "Oslo", "Lyon", "Nice", "Bern", "Lima"]
STEPS_QUESTION = "Weather in " + ", ".join(STEP_CITIES) + "? One city at a time."
#: What each case's final answer must carry.
EXPECT = {
    "relay": "rain",
    "flaky": "rain",
    "steps": "12:00",
    "recover": "rain",
    "gemini-schema": "rain",
    "together": "rain",
}


def chat_loop(
    opts: argparse.Namespace,
    system: str,
    tools: list[dict[str, Any]],
    question: str,
    run: Any,
) -> str:
    from openai import BadRequestError, OpenAI

    client = OpenAI(max_retries=0)

    def ask(messages: list[Any], offered: list[Any], cap: int) -> Any:
        return (
            client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, max_tokens=cap, tools=offered
            )  # type: ignore[arg-type]
            .choices[0]
            .message
        )

    history: list[dict[str, Any]] = [{"role": "user", "content": question}]
    offered = tools + ([BAD] if opts.case == "recover" else [])
    for n in range(10):
        cap = opts.cap if (opts.cap and n) else 60
        messages = [{"role": "system", "content": system}, *history]
        asks = 3 if opts.fixed and opts.case in ("relay", "flaky") else 1
        for _ in range(asks):
            try:
                msg = ask(messages, offered, cap)
            except BadRequestError:
                if offered == tools:
                    raise
                offered = tools  # the client's recovery: the refused tool left out, asked again
                msg = ask(messages, offered, cap)
            results = [m["content"] for m in history if m["role"] == "tool"]
            if msg.tool_calls or all(r in (msg.content or "") for r in results):
                break  # the fixed agent's check: a final answer carries every result
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
        for k, c in enumerate(calls):
            out = run(c.function.name, json.loads(c.function.arguments))
            if k == 1 and not opts.fixed and opts.case in ("steps", "together"):
                continue  # the bug: the tool ran, its result never goes back
            history.append({"role": "tool", "tool_call_id": c.id, "content": out})
    return "(no answer after 10 turns)"


def tool(opts: argparse.Namespace) -> Any:
    def run(name: str, args: dict[str, Any]) -> str:
        city = str(args.get("city", ""))
        if opts.case == "recover" and not opts.fixed and name == "get_weather" and city == "Lyon":
            return "sunny"  # the tool's bug: off the wire
        return run_tool(name, city)

    return run


def gemini(opts: argparse.Namespace) -> str:
    from google import genai
    from google.genai import types

    client = genai.Client()

    def declared(t: dict[str, Any]) -> dict[str, Any]:
        f = t["function"]
        return {
            "name": f["name"],
            "description": f["description"],
            "parameters_json_schema": f["parameters"],
        }

    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=QUESTION)])]
    for n in range(4):
        tools = TOOLS + ([BAD] if n and not opts.fixed else [])
        r = client.models.generate_content(
            model="gemini-2.5-flash",
            contents=contents,
            config=types.GenerateContentConfig(
                system_instruction=WEATHER_SYSTEM,
                max_output_tokens=60,
                tools=[types.Tool(function_declarations=[declared(t) for t in tools])],
            ),
        )
        calls = r.function_calls or []
        if not calls:
            return r.text or ""
        contents.append(r.candidates[0].content)
        contents.append(
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(
                        name=c.name or "",
                        response={"result": run_tool(c.name or "", **dict(c.args or {}))},
                    )
                    for c in calls
                ],
            )
        )
    return "(no answer after 4 turns)"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(EXPECT))
    ap.add_argument("--fixed", action="store_true")
    ap.add_argument("--cap", type=int, default=0)
    opts = ap.parse_args()
    if opts.case == "gemini-schema":
        text = gemini(opts)
    elif opts.case == "relay":

        def ask(name: str, args: dict[str, Any]) -> str:
            return chat_loop(opts, WEATHER_SYSTEM, TOOLS, args["question"], tool(opts))

        text = chat_loop(opts, MAIN_SYSTEM, [ASK], QUESTION, ask)
    else:
        asked = STEPS_QUESTION if opts.case == "steps" else QUESTION
        text = chat_loop(opts, WEATHER_SYSTEM, TOOLS, asked, tool(opts))
    print(f"answer: {text}")
    return 0 if EXPECT[opts.case] in text else 1


if __name__ == "__main__":
    sys.exit(main())
