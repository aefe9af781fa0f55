"""The injected client bug of the client matrix, applied to an LLM request body on its way out.

Shared by the Python injector (``sitecustomize.py``, which wraps httpx) and, as a twin in
JavaScript, by ``inject.mjs`` (which wraps ``fetch``): both mutate the JSON body of the first
request that qualifies, once per process, and mark it with the header ``x-matrix-injected`` so the
test can find the mutated round trip in the cassette.

* ``drop_result``: the first request carrying a tool result loses its last result (the client
  "forgot" to send it; the API answers 400);
* ``wrong_id``: the first request carrying a tool result sends its last result under an id no call
  has (the API answers 400);
* ``mutate_history``: the first request that re-sends a tool's output from an earlier turn (a tool
  result, or the observation a text-protocol client writes as a message) changes its text (the API
  accepts it; the model sees a history that never happened); for a client that re-renders its
  whole trajectory into one message each step (DSPy), the first step's output in the first request
  that carries a later one.
"""

from __future__ import annotations

import json
from typing import Any

MARK = "x-matrix-injected"


def _results(family: str, body: dict[str, Any]) -> list[tuple[list[Any], int, Any]]:
    """Every tool result of the request as (container list, index, item), in order."""
    out: list[tuple[list[Any], int, Any]] = []
    if family == "openai_chat":
        msgs = body.get("messages") or []
        out += [
            (msgs, i, m)
            for i, m in enumerate(msgs)
            if isinstance(m, dict) and m.get("role") == "tool"
        ]
    elif family == "openai_responses":
        items = body.get("input") if isinstance(body.get("input"), list) else []
        out += [
            (items, i, m)
            for i, m in enumerate(items)
            if isinstance(m, dict) and m.get("type") == "function_call_output"
        ]
    elif family == "anthropic":
        for m in body.get("messages") or []:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, list):
                out += [
                    (c, i, b)
                    for i, b in enumerate(c)
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                ]
    elif family == "gemini":
        for m in body.get("contents") or []:
            parts = m.get("parts") if isinstance(m, dict) else None
            if isinstance(parts, list):
                out += [
                    (parts, i, p)
                    for i, p in enumerate(parts)
                    if isinstance(p, dict) and "functionResponse" in p
                ]
    return out


def family_of(path: str) -> str | None:
    if path.endswith("/chat/completions"):
        return "openai_chat"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini"
    return None


class Injector:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.done = False
        self.seen_results = 0  # the most results any earlier request carried
        self.seen_outputs = 0  # the most tool outputs (``WEATHER:``) any earlier request carried

    def mutate(self, path: str, body: Any) -> bool:
        """Mutates ``body`` in place when this is the request to break; True if it did."""
        family = family_of(path)
        if self.done or family is None or not isinstance(body, dict):
            return False
        results = _results(family, body)
        hit = False
        if self.kind in ("drop_result", "wrong_id") and results:
            box, i, item = results[-1]
            if self.kind == "drop_result":
                del box[i]
                if family == "anthropic" and not box:
                    body["messages"] = [
                        m
                        for m in body["messages"]
                        if not (isinstance(m, dict) and m.get("content") == [])
                    ]
            else:
                key = {
                    "openai_chat": "tool_call_id",
                    "openai_responses": "call_id",
                    "anthropic": "tool_use_id",
                }.get(family)
                if key is None:  # Gemini pairs by name
                    item["functionResponse"]["name"] = "not_a_called_tool"
                else:
                    item[key] = (
                        "call_matrix_wrong_id_0001"
                        if family != "anthropic"
                        else "toolu_matrix_wrong_id_0001"
                    )
            hit = True
        elif self.kind == "mutate_history":
            carriers = [m for m in _history(family, body) if "WEATHER:" in json.dumps(m)]
            outputs = sum(json.dumps(m).count("WEATHER:") for m in carriers)
            if self.seen_results and len(carriers) > self.seen_results:
                _rewrite(carriers[0])  # sent on an earlier turn, re-sent now
                hit = True
            elif (
                self.seen_outputs
                and len(carriers) == self.seen_results
                and outputs > self.seen_outputs
            ):
                # a trajectory re-rendered into one message each step (DSPy): its first output,
                # re-sent
                _rewrite(carriers[0], once=True)
                hit = True
            self.seen_outputs = max(self.seen_outputs, outputs)
            results = carriers
        self.seen_results = max(self.seen_results, len(results))
        self.done = hit
        return hit


def _history(family: str, body: dict[str, Any]) -> list[Any]:
    key = {"openai_responses": "input", "gemini": "contents"}.get(family, "messages")
    items = body.get(key)
    return items if isinstance(items, list) else []


def _rewrite(node: Any, once: bool = False) -> Any:
    """Every string of ``node`` that carries a tool's output, rewritten in place (``once``: only
    the first output of the first such string)."""
    if isinstance(node, dict):
        for k, v in node.items():
            node[k] = _rewrite(v, once)
            if once and node[k] is not v:
                break
    elif isinstance(node, list):
        for i, v in enumerate(node):
            node[i] = _rewrite(v, once)
            if once and node[i] is not v:
                break
    elif isinstance(node, str) and "WEATHER:" in node:
        return node.replace(
            "WEATHER:", "MUTATED: the client rewrote this after the fact;", 1 if once else -1
        )
    return node
