"""Responses-API agents that chain their turns with ``previous_response_id``, for the fork tests:
the openai SDK's own tool loop (each turn sends only its new items and the id of the answer it
continues; streamed and not) and openai-agents' ``Runner`` with ``auto_previous_response_id``.
Each asks for the weather until the model stops calling the tool (at most 5 turns) and prints
``LABEL: final text``; one after the other, in the order given.

    python responses_agent.py [LABEL ...]     # default: sdk sdk-stream agents
"""

from __future__ import annotations

import json
import sys
from typing import Any

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def weather(city: str) -> str:
    return f"sunny, 21 C in {city}"


def sdk_loop(label: str, stream: bool) -> str:
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    tools: Any = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": SCHEMA,
            "strict": True,
        }
    ]
    items: Any = [{"role": "user", "content": f"[{label}] Weather in three cities?"}]
    chained: dict[str, Any] = {}
    for _ in range(5):
        kwargs: dict[str, Any] = {
            "model": "gpt-4o-mini",
            "instructions": "Use the weather tool.",
            "input": items,
            "tools": tools,
            **chained,
        }
        if stream:
            r = None
            for ev in client.responses.create(stream=True, **kwargs):
                if ev.type == "response.completed":
                    r = ev.response
            assert r is not None, "the stream ended without response.completed"
        else:
            r = client.responses.create(**kwargs)
        calls = [o for o in r.output if o.type == "function_call"]
        if not calls:
            return str(r.output_text)
        items = [
            {
                "type": "function_call_output",
                "call_id": c.call_id,
                "output": weather(**json.loads(c.arguments)),
            }
            for c in calls
        ]
        chained = {"previous_response_id": r.id}  # only the new items, and the answer they continue
    return "(no answer after 5 turns)"


def agents_loop(label: str) -> str:
    from agents import Agent, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return weather(city)

    agent = Agent(
        name="weather",
        instructions="Use the weather tool.",
        tools=[get_weather],
        model="gpt-4o-mini",
    )
    result = Runner.run_sync(
        agent, f"[{label}] Weather in three cities?", auto_previous_response_id=True, max_turns=5
    )
    return str(result.final_output)


AGENTS = {
    "sdk": lambda: sdk_loop("sdk", False),
    "sdk-stream": lambda: sdk_loop("sdk-stream", True),
    "agents": lambda: agents_loop("agents"),
}


def main() -> int:
    errors = 0
    for label in sys.argv[1:] or list(AGENTS):
        try:
            print(f"{label}: {AGENTS[label]()}", flush=True)
        except Exception as exc:  # said, and the exit status says so
            print(f"ERROR {label}: {type(exc).__name__}: {str(exc)[:2000]}", file=sys.stderr)
            errors += 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
