"""A tool-loop agent on the real SDKs (openai Chat Completions by default; ``--family responses``:
openai Responses; ``--family anthropic``: Anthropic Messages) for the ``looptap why`` tests: it
asks about the weather in Paris and Lyon, runs the tools the model calls, prints the final answer
and exits 1 when it lacks the word the task needs (``--expect``), as a task's own check would.

    python why_agent.py [--drop-second] [--expect WORD] [--family chat|responses|anthropic]

``--drop-second``: the client bug of the C case: of an answer's tool calls, only the first one's
result is sent back (the second is dropped). The cap is 60 output tokens (the A case lifts it).
"""

from __future__ import annotations

import argparse
import json
import sys
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


def run_tool(name: str, city: str) -> str:
    if name == "get_time":
        return f"12:00 in {city}"
    return {"Paris": "sunny", "Lyon": "rain"}.get(city, "cloudy")


def chat(opts: argparse.Namespace) -> str:
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Paris and Lyon?"},
    ]
    for _ in range(4):
        msg = (
            client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=TOOLS, max_tokens=60
            )
            .choices[0]
            .message
        )  # type: ignore[arg-type]
        calls = list(msg.tool_calls or [])
        if not calls:
            return msg.content or ""
        messages.append(
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
        for n, c in enumerate(calls):
            if opts.drop_second and n == 1:
                continue  # the bug: the second result never goes back
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": c.id,
                    "content": run_tool(c.function.name, **json.loads(c.function.arguments)),
                }
            )
    return "(no answer after 4 turns)"


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


def anthropic(opts: argparse.Namespace) -> str:
    from anthropic import Anthropic

    client = Anthropic(max_retries=0)
    tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in TOOLS
    ]
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather in Paris and Lyon?"}]
    for _ in range(4):
        msg = client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=60,
            system="Use the tools.",
            messages=messages,
            tools=tools,
        )  # type: ignore[arg-type]
        uses = [b for b in msg.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in msg.content if b.type == "text")
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]}
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": b.id,
                        "content": run_tool(b.name, **b.input),
                    }  # type: ignore[arg-type]
                    for n, b in enumerate(uses)
                    if not (opts.drop_second and n == 1)
                ],
            }
        )
    return "(no answer after 4 turns)"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--drop-second", action="store_true")
    ap.add_argument("--expect", default="sunny")
    ap.add_argument("--family", choices=("chat", "responses", "anthropic"), default="chat")
    ap.add_argument("--answer-file", help="also write the answer there (what a --check reads)")
    opts = ap.parse_args()
    text = {"chat": chat, "responses": responses, "anthropic": anthropic}[opts.family](opts)
    print(f"answer: {text}")
    if opts.answer_file:
        with open(opts.answer_file, "w") as f:
            f.write(text)
    return 0 if opts.expect in text else 1


if __name__ == "__main__":
    sys.exit(main())
