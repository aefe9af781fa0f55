"""The agent of bench/why_cases.py's hidden tool failure (issue 95): the openai SDK agent with
httpx tools of tests/proxy/test_e2e_tool_http.py, whose ``get_weather`` hands the model ``{}``
when its call fails (the failure hidden from the model). ``--fixed``: the call is tried again
(up to 3 times) before it gives up. Run with the clients' environment (.venv-clients: openai,
httpx); the tool API's URL and key from ``TOOL_URL`` and ``TOOL_KEY``. Exits 1 when the answer
says it could not get the weather, as the task's own check would.

    python why_tool_agent.py [--fixed]
"""

from __future__ import annotations

import json
import os
import sys

import httpx
from openai import OpenAI

FIXED = "--fixed" in sys.argv[1:]
TOOLS, KEY = os.environ["TOOL_URL"], os.environ["TOOL_KEY"]
http = httpx.Client(headers={"x-api-key": KEY})  # trust_env: the recorder's proxy variables


def get_weather(city: str) -> str:
    for _ in range(3 if FIXED else 1):
        try:  # as many tools do: a failure becomes an empty result
            r = http.get(f"{TOOLS}/weather", params={"city": city, "key": KEY})
            r.raise_for_status()
            return r.text
        except httpx.HTTPError:
            continue
    return "{}"


def main() -> int:
    client = OpenAI(max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]  # fmt: skip
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather in Lyon and Tokyo?"}]
    answer = ""
    for _ in range(4):
        msg = (
            client.chat.completions.create(
                model="gpt-4o",
                messages=messages,
                tools=tools,  # type: ignore[arg-type]
            )
            .choices[0]
            .message
        )
        if not msg.tool_calls:
            answer = msg.content or ""
            break
        messages.append(msg.model_dump(exclude_none=True))
        for tc in msg.tool_calls:
            args = json.loads(tc.function.arguments)
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": get_weather(**args)})
    print(f"answer: {answer}")
    return 1 if "could not" in answer else 0


if __name__ == "__main__":
    sys.exit(main())
