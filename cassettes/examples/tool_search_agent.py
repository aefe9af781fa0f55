"""A small tool-using agent for ``looptap demo``: plain Python, standard library only.

It answers a few questions with an Anthropic Messages tool loop. Besides an always-visible
``get_weather`` it has *deferred* tools that the model must discover first through a
``search_tools`` tool (token-overlap search over names and descriptions); discovered tools are then
offered with ``defer_loading``. Tool arguments are validated against each tool's JSON schema and a
failed validation goes back to the model as an error result, so the model can correct itself.

It reads ``ANTHROPIC_BASE_URL`` (set by ``looptap run``) and ``ANTHROPIC_API_KEY``, and prints each
question with its final answer. ``looptap demo`` runs it through the recording proxy against a
loopback server replaying the model's recorded answers, so it works offline.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

MODEL = "claude-sonnet-4-5"
QUESTIONS = (
    "What is the current exchange rate from USD to EUR?",
    "What is the current stock price for AAPL?",
    "Translate 'hello, how are you?' to French.",
    "Book a flight from New York to London for next week.",
)


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "additionalProperties": False,
        "properties": props,
        "required": required,
        "type": "object",
    }


Tool = dict[str, Any]

WEATHER: Tool = {
    "description": "Get the current weather for a city.",
    "input_schema": _schema({"city": {"type": "string"}}, ["city"]),
    "name": "get_weather",
}
SEARCH: Tool = {
    "description": "There are additional tools not yet visible to you. When you need a capability "
    "not provided by your current tools, search here by providing one or more queries to discover "
    "and activate relevant tools. Each query is tokenized into words; tool names and descriptions "
    "are scored by token overlap. If no tools are found, they do not exist -- do not retry.",
    "input_schema": _schema(
        {
            "queries": {
                "description": "List of search queries to match against tool names and "
                "descriptions. Use specific words likely to appear in tool names or descriptions "
                "to narrow down relevant tools. Each query is independently tokenized; matches "
                "across queries are unioned.",
                "items": {"type": "string"},
                "type": "array",
            }
        },
        ["queries"],
    ),
    "name": "search_tools",
}
DEFERRED: dict[str, Tool] = {
    "get_exchange_rate": {
        "description": "Look up the current exchange rate between two currencies.",
        "input_schema": _schema(
            {"from_currency": {"type": "string"}, "to_currency": {"type": "string"}},
            ["from_currency", "to_currency"],
        ),
    },
    "stock_lookup": {
        "description": "Look up stock price by ticker symbol.",
        "input_schema": _schema({"symbol": {"type": "string"}}, ["symbol"]),
    },
}
RATES = {("USD", "EUR"): 0.92, ("EUR", "USD"): 1.09, ("USD", "GBP"): 0.79}
PRICES = {"AAPL": 150.0, "MSFT": 410.0}
_STOP = {
    "a",
    "an",
    "the",
    "to",
    "of",
    "for",
    "by",
    "up",
    "look",
    "current",
    "between",
    "two",
    "and",
    "or",
}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower().replace("_", " ")) if w not in _STOP}


def search_tools(queries: list[str]) -> str:
    found = []
    for name, spec in DEFERRED.items():
        words = _words(name) | _words(spec["description"])
        if any(_words(q) & words for q in queries):
            found.append({"name": name, "description": spec["description"]})
    if not found:
        return json.dumps(
            {
                "discovered_tools": [],
                "message": "No matching tools found. The tools you need may not be available.",
            },
            separators=(",", ":"),
        )
    return json.dumps({"discovered_tools": found}, separators=(",", ":"))


def get_weather(city: str) -> str:
    return f"{city}: 18 °C, light rain"


def get_exchange_rate(from_currency: str, to_currency: str) -> str:
    rate = RATES.get((from_currency.upper(), to_currency.upper()))
    if rate is None:
        raise LookupError(f"no rate for {from_currency}/{to_currency}")
    return f"1 {from_currency.upper()} = {rate:.2f} {to_currency.upper()}"


def stock_lookup(symbol: str) -> str:
    return f"Stock {symbol.upper()}: ${PRICES[symbol.upper()]:.2f}"


FUNCTIONS: dict[str, Callable[..., str]] = {
    "get_weather": get_weather,
    "get_exchange_rate": get_exchange_rate,
    "stock_lookup": stock_lookup,
    "search_tools": search_tools,
}


def validation_errors(schema: dict[str, Any], args: dict[str, Any]) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    for name in schema.get("required", []):
        if name not in args:
            errors.append(
                {"type": "missing", "loc": [name], "msg": "Field required", "input": args}
            )
    if schema.get("additionalProperties") is False:
        for key, value in args.items():
            if key not in schema["properties"]:
                errors.append(
                    {
                        "type": "extra_forbidden",
                        "loc": [key],
                        "msg": "Extra inputs are not permitted",
                        "input": value,
                    }
                )
    return errors


def call_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    base = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com").rstrip("/")
    body = {
        "max_tokens": 4096,
        "messages": messages,
        "model": MODEL,
        "stream": False,
        "tool_choice": {"type": "auto"},
        "tools": tools,
    }
    req = urllib.request.Request(
        # Deferred tools are a beta feature: the SDK's beta client posts to this URL.
        f"{base}/v1/messages?beta=true",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""),
            "anthropic-version": "2023-06-01",
            "X-Looptap-Conversation": messages[0]["content"][0]["text"][:40],
        },
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        data: dict[str, Any] = json.load(resp)
    return data


def run_tool(name: str, args: dict[str, Any], tools: list[dict[str, Any]]) -> tuple[str, bool]:
    spec = next((t for t in tools if t["name"] == name), None)
    if spec is None:
        return f"Unknown tool name: {name!r}. Search for tools first.", True
    errors = validation_errors(spec["input_schema"], args)
    if errors:
        n = len(errors)
        text = (
            f"{n} validation error{'s' if n > 1 else ''}:\n```json\n{json.dumps(errors, indent=2)}"
            "\n```\n\nFix the errors and try again."
        )
        return text, True
    try:
        return FUNCTIONS[name](**args), False
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", True


def answer(question: str, max_turns: int = 8) -> str:
    messages: list[dict[str, Any]] = [
        {"content": [{"text": question, "type": "text"}], "role": "user"}
    ]
    discovered: list[str] = []
    for _ in range(max_turns):
        tools: list[Tool] = [
            WEATHER,
            *({"defer_loading": True, "name": n, **DEFERRED[n]} for n in discovered),
            SEARCH,
        ]
        reply = call_model(messages, tools)
        content = [{k: v for k, v in block.items() if k != "caller"} for block in reply["content"]]
        messages.append({"content": content, "role": "assistant"})
        calls = [b for b in content if b["type"] == "tool_use"]
        if reply.get("stop_reason") != "tool_use" or not calls:
            return "".join(b.get("text", "") for b in content if b["type"] == "text")
        results = []
        for call in calls:
            text, is_error = run_tool(call["name"], call["input"], tools)
            if call["name"] == "search_tools" and not is_error:
                discovered += [
                    t["name"]
                    for t in json.loads(text)["discovered_tools"]
                    if t["name"] not in discovered
                ]
            part: Any = text if is_error else [{"text": text, "type": "text"}]
            results.append(
                {
                    "content": part,
                    "is_error": is_error,
                    "tool_use_id": call["id"],
                    "type": "tool_result",
                }
            )
        messages.append({"content": results, "role": "user"})
    return "(gave up: too many turns)"


def main() -> int:
    for q in QUESTIONS:
        try:
            final = answer(q)
        except urllib.error.HTTPError as exc:
            print(f"Q: {q}\nA: (the API answered {exc.code}: {exc.read()[:200]!r})\n")
            continue
        except OSError as exc:
            print(f"agent: cannot reach the model: {exc}", file=sys.stderr)
            return 1
        print(f"Q: {q}\nA: {final}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
