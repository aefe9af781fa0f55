"""A tool-loop agent on the real openai SDK (Chat Completions) for the ``looptap why`` tests: it
asks about the weather in Paris and Lyon, runs the tools the model calls, prints the final answer
and exits 1 when it lacks the word the task needs (``--expect``), as a task's own check would.

    python why_agent.py [--drop-second] [--expect WORD]

``--drop-second``: the client bug of the C case: of an answer's tool calls, only the first one's
result is sent back (the second is dropped). The cap is 60 output tokens (the A case lifts it).
"""

from __future__ import annotations

import argparse
import json
import sys

TOOLS = [
    {"type": "function", "function": {"name": name, "description": f"The {what} in a city.",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    for name, what in (("get_weather", "weather"), ("get_time", "local time"))
]


def run_tool(name: str, city: str) -> str:
    if name == "get_time":
        return f"12:00 in {city}"
    return {"Paris": "sunny", "Lyon": "rain"}.get(city, "cloudy")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--drop-second", action="store_true")
    ap.add_argument("--expect", default="sunny")
    opts = ap.parse_args()
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    messages: list[dict[str, object]] = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "Weather in Paris and Lyon?"}]
    text = "(no answer after 4 turns)"
    for _ in range(4):
        msg = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, max_tokens=60).choices[0].message  # type: ignore[arg-type]
        calls = list(msg.tool_calls or [])
        if not calls:
            text = msg.content or ""
            break
        messages.append({"role": "assistant", "content": msg.content, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in calls]})
        for n, c in enumerate(calls):
            if opts.drop_second and n == 1:
                continue  # the bug: the second result never goes back
            messages.append({"role": "tool", "tool_call_id": c.id, "content": run_tool(c.function.name, **json.loads(c.function.arguments))})
    print(f"answer: {text}")
    return 0 if opts.expect in text else 1


if __name__ == "__main__":
    sys.exit(main())
