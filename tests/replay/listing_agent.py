"""A tool-using agent on the real openai SDK whose tool lists a directory, for the tolerant-prefix
fork tests: what the tool returns is whatever the directory holds when the agent runs, so a fork
made after the directory changed sends other tool results than were recorded.

    LISTING_ROOT=DIR [LISTING_ASK=TEXT] python listing_agent.py
"""

from __future__ import annotations

import json
import os

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "list_files",
            "description": "The files in a folder of the project.",
            "parameters": {
                "type": "object",
                "properties": {"folder": {"type": "string"}},
                "required": ["folder"],
            },
        },
    }
]


def list_files(folder: str) -> str:
    return "\n".join(sorted(os.listdir(os.path.join(os.environ["LISTING_ROOT"], folder))))


def main() -> None:
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    ask = os.environ.get("LISTING_ASK", "Which files does the project have?")
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "List the folders with the tool."},
        {"role": "user", "content": ask},
    ]
    for _ in range(6):
        msg = (
            client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
            .choices[0]
            .message
        )  # type: ignore[arg-type]
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in msg.tool_calls or []
        ]
        if not calls:
            print(f"answer: {msg.content}")
            return
        messages.append({"role": "assistant", "content": msg.content, "tool_calls": calls})
        for c in calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": c["id"],
                    "content": list_files(**json.loads(c["function"]["arguments"])),
                }
            )
    print("answer: (none after 6 turns)")


if __name__ == "__main__":
    main()
