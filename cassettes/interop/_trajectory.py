"""One chat trajectory (a list of messages in the OpenAI or the Anthropic shape) as model calls:
one per assistant message, its request the messages before it. Read by the trajectory import
(:mod:`._traces`) and by the OTLP import where an instrumentation keeps the API's own request and
answer (:mod:`._otlp_in`)."""

from __future__ import annotations

from typing import Any

from .. import bounds
from ..errors import ImportFormatError
from ..providers import Call, chat_ids

__all__ = ["is_anthropic", "trajectory_calls"]


def is_anthropic(messages: list[Any], around: dict[str, Any]) -> bool:
    for m in messages:
        if m.get("role") in ("system", "tool") or m.get("tool_calls"):
            return False
        c = m.get("content")
        if isinstance(c, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in c
        ):
            return True
    return isinstance(around.get("system"), (str, list))


def _checked(messages: list[Any], where: str) -> list[dict[str, Any]]:
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ImportFormatError(f"{where}: message {i} has no role; nothing imported")
        if bounds.too_deep(m):
            raise ImportFormatError(
                f"{where}: message {i} is nested deeper than {bounds.WALK_DEPTH} levels; "
                "nothing imported"
            )
    return messages


def trajectory_calls(messages: list[Any], around: dict[str, Any], where: str) -> list[Call]:
    """The model calls of one trajectory: one per assistant message, its request the messages
    before it."""
    msgs = _checked(messages, where)
    anthropic = is_anthropic(msgs, around)
    family = "anthropic" if anthropic else "openai_chat"
    model = around.get("model") if isinstance(around.get("model"), str) else None
    inferred: set[str] = set()
    system: list[str] = []
    if anthropic:
        s = around.get("system")
        system = [s] if isinstance(s, str) else []
    else:
        msgs = chat_ids(msgs, inferred)
    tools: list[dict[str, Any]] = [t for t in around.get("tools") or [] if isinstance(t, dict)]
    given = (
        {"messages", "output"} | ({"model"} if model else set()) | ({"tools"} if tools else set())
    )
    if not tools:
        inferred.add("tools")  # the trajectory does not say which were offered
    calls = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        output = {k: v for k, v in m.items() if k != "role"}
        if anthropic and isinstance(output.get("content"), str):
            output["content"] = [{"type": "text", "text": output["content"]}]
        calls.append(
            Call(
                family, "a trajectory", msgs[:i], output, model=model, system=system,
                tools=tools, given=set(given), inferred=set(inferred),
            )
        )  # fmt: skip
    return calls
