"""A tool-loop agent on the real SDKs, for the fork tests: four conversations at once (threads),
openai Chat and anthropic Messages, each streamed and not. Each asks for the weather until the
model stops calling the tool (at most 5 turns) and prints ``LABEL: final text``.

    python fork_agent.py [LABEL ...]     # default: all four
    python fork_agent.py gemini gemini-stream  # google-genai's, the same loop on Gemini
    python fork_agent.py bedrock bedrock-stream  # boto3's Bedrock Converse (BEDROCK_BASE_URL)
    python fork_agent.py vertex vertex-stream  # the Vertex AI SDK's Gemini (VERTEX_BASE_URL)
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

TOOL = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def weather(city: str) -> str:
    return f"sunny, 21 C in {city}"


def openai_loop(label: str, stream: bool) -> str:
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": TOOL["name"],
                "description": TOOL["description"],
                "parameters": TOOL["schema"],
            },
        }
    ]
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "Use the weather tool."},
        {"role": "user", "content": f"[{label}] Weather in three cities?"},
    ]
    for _ in range(5):
        if stream:
            text, calls = "", {}
            for chunk in client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=tools, stream=True
            ):  # type: ignore[arg-type]
                d = chunk.choices[0].delta if chunk.choices else None
                if d is None:
                    continue
                text += d.content or ""
                for tc in d.tool_calls or []:
                    c = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    c["id"] = tc.id or c["id"]
                    if tc.function is not None:
                        c["name"] += tc.function.name or ""
                        c["arguments"] += tc.function.arguments or ""
            tool_calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls.values()
            ]
        else:
            msg = (
                client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
                .choices[0]
                .message
            )  # type: ignore[arg-type]
            text = msg.content or ""
            tool_calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in msg.tool_calls or []
            ]
        if not tool_calls:
            return text
        messages.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
        for c in tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": c["id"],
                    "content": weather(**json.loads(c["function"]["arguments"])),
                }
            )
    return "(no answer after 5 turns)"


def anthropic_loop(label: str, stream: bool) -> str:
    from anthropic import Anthropic

    client = Anthropic(max_retries=0)
    tools = [
        {"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["schema"]}
    ]
    messages: list[dict[str, object]] = [
        {"role": "user", "content": f"[{label}] Weather in three cities?"}
    ]
    for _ in range(5):
        kwargs = {
            "model": "claude-haiku-4-5",
            "max_tokens": 200,
            "system": "Use the weather tool.",
            "messages": messages,
            "tools": tools,
        }
        if stream:
            with client.messages.stream(**kwargs) as s:  # type: ignore[arg-type]
                msg = s.get_final_message()
        else:
            msg = client.messages.create(**kwargs)  # type: ignore[arg-type]
        uses = [b for b in msg.content if b.type == "tool_use"]
        text = "".join(b.text for b in msg.content if b.type == "text")
        if not uses:
            return text
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]}
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": weather(**b.input)}
                    for b in uses
                ],
            }
        )  # type: ignore[arg-type]
    return "(no answer after 5 turns)"


def gemini_loop(label: str, stream: bool) -> str:
    from google import genai
    from google.genai import types

    # GOOGLE_API_KEY and GOOGLE_GEMINI_BASE_URL from the environment; the API version named, as
    # google-genai 3.x posts to /v1 where 2.x (the trace's) posts to /v1beta
    client = genai.Client(http_options=types.HttpOptions(api_version="v1beta"))
    decl = types.FunctionDeclaration(
        name=TOOL["name"], description=TOOL["description"], parameters_json_schema=TOOL["schema"]
    )
    config = types.GenerateContentConfig(
        system_instruction="Use the weather tool.",
        tools=[types.Tool(function_declarations=[decl])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    question = types.Part(text=f"[{label}] Weather in three cities?")
    contents: list[types.Content] = [types.Content(role="user", parts=[question])]
    for _ in range(5):
        ask = {"model": "gemini-2.5-flash", "contents": contents, "config": config}
        if stream:
            parts = [
                p
                for chunk in client.models.generate_content_stream(**ask)  # type: ignore[arg-type]
                if chunk.candidates and chunk.candidates[0].content
                for p in chunk.candidates[0].content.parts or []
            ]
        else:
            answer = client.models.generate_content(**ask)  # type: ignore[arg-type]
            content = answer.candidates[0].content if answer.candidates else None
            parts = list(content.parts or []) if content else []
        calls = [p.function_call for p in parts if p.function_call]
        if not calls:
            return "".join(p.text or "" for p in parts)
        contents.append(types.Content(role="model", parts=parts))
        results = [
            types.Part.from_function_response(
                name=c.name or "", response={"result": weather(**(c.args or {}))}
            )
            for c in calls
        ]
        contents.append(types.Content(role="user", parts=results))
    return "(no answer after 5 turns)"


def bedrock_loop(label: str, stream: bool) -> str:
    import os

    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=os.environ["BEDROCK_BASE_URL"],  # looptap run --upstream bedrock=URL
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}),
    )
    spec = {"name": TOOL["name"], "description": TOOL["description"]}
    tools = {"tools": [{"toolSpec": {**spec, "inputSchema": {"json": TOOL["schema"]}}}]}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"text": f"[{label}] Weather in three cities?"}]}
    ]
    for _ in range(5):
        ask = {
            "modelId": "anthropic.claude-3-haiku-20240307-v1:0",
            "system": [{"text": "Use the weather tool."}],
            "messages": messages,
            "toolConfig": tools,
            "inferenceConfig": {"maxTokens": 200},
        }
        content: list[dict[str, Any]] = []
        if stream:
            inputs: dict[int, str] = {}
            for ev in client.converse_stream(**ask)["stream"]:
                if "contentBlockStart" in ev:
                    use = ev["contentBlockStart"]["start"]["toolUse"]
                    content.append({"toolUse": {**use, "input": {}}})
                    inputs[len(content) - 1] = ""
                elif "contentBlockDelta" in ev:
                    d = ev["contentBlockDelta"]["delta"]
                    if "text" in d:
                        if not content or "text" not in content[-1]:
                            content.append({"text": ""})
                        content[-1]["text"] += d["text"]
                    elif "toolUse" in d:
                        inputs[len(content) - 1] += d["toolUse"]["input"]
            for i, raw in inputs.items():
                content[i]["toolUse"]["input"] = json.loads(raw or "{}")
        else:
            content = client.converse(**ask)["output"]["message"]["content"]
        uses = [b["toolUse"] for b in content if "toolUse" in b]
        if not uses:
            return "".join(b.get("text", "") for b in content)
        messages.append({"role": "assistant", "content": content})
        results = [
            {
                "toolResult": {
                    "toolUseId": u["toolUseId"],
                    "content": [{"text": weather(**u["input"])}],
                }
            }
            for u in uses
        ]
        messages.append({"role": "user", "content": results})
    return "(no answer after 5 turns)"


def vertex_loop(label: str, stream: bool) -> str:
    """google-cloud-aiplatform's ``vertexai.generative_models`` over REST: its endpoint
    ``VERTEX_BASE_URL`` (``looptap run --upstream vertex=URL``), anonymous credentials (the
    upstream is a loopback one), a project and region as the URL names them."""
    import os

    import vertexai  # type: ignore[import-untyped]
    from google.auth.credentials import AnonymousCredentials  # type: ignore[import-untyped]
    from vertexai.generative_models import (  # type: ignore[import-untyped]
        Content,
        FunctionDeclaration,
        GenerativeModel,
        Part,
        Tool,
    )

    vertexai.init(
        project="looptap-test",
        location="us-central1",
        api_endpoint=os.environ["VERTEX_BASE_URL"],
        api_transport="rest",
        credentials=AnonymousCredentials(),
    )
    decl = FunctionDeclaration(
        name=TOOL["name"], description=TOOL["description"], parameters=TOOL["schema"]
    )
    model = GenerativeModel(
        "gemini-2.5-flash",
        system_instruction="Use the weather tool.",
        tools=[Tool(function_declarations=[decl])],
    )
    question = Part.from_text(f"[{label}] Weather in three cities?")
    contents = [Content(role="user", parts=[question])]
    for _ in range(5):
        if stream:
            chunks = model.generate_content(contents, stream=True)
            parts = [p for c in chunks if c.candidates for p in c.candidates[0].content.parts]
        else:
            answer = model.generate_content(contents)
            parts = list(answer.candidates[0].content.parts) if answer.candidates else []
        calls = [p.function_call for p in parts if p.to_dict().get("function_call")]
        if not calls:
            return "".join(p.to_dict().get("text", "") for p in parts)
        contents.append(Content(role="model", parts=parts))
        results = [
            Part.from_function_response(name=c.name, response={"result": weather(**dict(c.args))})
            for c in calls
        ]
        contents.append(Content(role="user", parts=results))
    return "(no answer after 5 turns)"


AGENTS = {
    "openai": lambda: openai_loop("openai", False),
    "openai-stream": lambda: openai_loop("openai-stream", True),
    "anthropic": lambda: anthropic_loop("anthropic", False),
    "anthropic-stream": lambda: anthropic_loop("anthropic-stream", True),
}
#: Run when named only (the default is :data:`AGENTS`).
MORE_AGENTS = {
    "gemini": lambda: gemini_loop("gemini", False),
    "gemini-stream": lambda: gemini_loop("gemini-stream", True),
    "bedrock": lambda: bedrock_loop("bedrock", False),
    "bedrock-stream": lambda: bedrock_loop("bedrock-stream", True),
    "vertex": lambda: vertex_loop("vertex", False),
    "vertex-stream": lambda: vertex_loop("vertex-stream", True),
}
ALL_AGENTS = {**AGENTS, **MORE_AGENTS}


def main() -> int:
    labels = sys.argv[1:] or list(AGENTS)
    out: dict[str, str] = {}
    errors: list[str] = []

    def run(label: str) -> None:
        try:
            out[label] = ALL_AGENTS[label]()
        except Exception as exc:  # said, and the exit status says so
            errors.append(f"{label}: {type(exc).__name__}: {str(exc)[:2000]}")

    threads = [threading.Thread(target=run, args=(label,)) for label in labels]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for label in labels:
        if label in out:
            print(f"{label}: {out[label]}")
    for e in errors:
        print(f"ERROR {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
