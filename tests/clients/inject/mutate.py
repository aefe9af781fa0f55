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


#: The history rewrites, by kind: how an earlier tool output's text is changed (the text variants),
#: or which change of the call groups is made (the others).
TEXT_VARIANTS = ("mutate_history", "mutate_shorter", "mutate_equal")
GROUP_VARIANTS = ("mutate_reorder", "mutate_argument", "mutate_drop_middle")
VARIANTS = (*TEXT_VARIANTS, *GROUP_VARIANTS)
#: ``mutate_equal``: the same weather's word of the same length, another weather
_SAME_LENGTH = {"sunny": "foggy", "rainy": "windy", "cloudy": "stormy"}


class Injector:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.done = False
        self.seen_results = 0  # the most results any earlier request carried
        self.seen_outputs = 0  # the most tool outputs (``WEATHER:``) any earlier request carried
        self.seen_groups = 0  # the most call groups any earlier request carried

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
        elif self.kind in TEXT_VARIANTS:
            carriers = [m for m in _history(family, body) if "WEATHER:" in json.dumps(m)]
            outputs = sum(json.dumps(m).count("WEATHER:") for m in carriers)
            if self.seen_results and len(carriers) > self.seen_results:
                _rewrite(carriers[0], how=self.kind)  # sent on an earlier turn, re-sent now
                hit = True
            elif (
                self.seen_outputs
                and len(carriers) == self.seen_results
                and outputs > self.seen_outputs
            ):
                # a trajectory re-rendered into one message each step (DSPy): its first output,
                # re-sent
                _rewrite(carriers[0], once=True, how=self.kind)
                hit = True
            self.seen_outputs = max(self.seen_outputs, outputs)
            results = carriers
        elif self.kind in GROUP_VARIANTS:
            history = _history(family, body)
            groups = _groups(family, history)
            hit = _regroup(self.kind, family, history, groups, self.seen_groups)
            self.seen_groups = max(self.seen_groups, len(groups))
        self.seen_results = max(self.seen_results, len(results))
        self.done = hit
        return hit


def _history(family: str, body: dict[str, Any]) -> list[Any]:
    key = {"openai_responses": "input", "gemini": "contents"}.get(family, "messages")
    items = body.get(key)
    return items if isinstance(items, list) else []


def _rewrite(node: Any, once: bool = False, how: str = "mutate_history") -> Any:
    """Every string of ``node`` that carries a tool's output, rewritten in place (``once``: only
    the first output of the first such string) the way ``how`` says."""
    if isinstance(node, dict):
        for k, v in node.items():
            node[k] = _rewrite(v, once, how)
            if once and node[k] is not v:
                break
    elif isinstance(node, list):
        for i, v in enumerate(node):
            node[i] = _rewrite(v, once, how)
            if once and node[i] is not v:
                break
    elif isinstance(node, str) and "WEATHER:" in node:
        return _rewritten(node, once, how)
    return node


def _rewritten(text: str, once: bool, how: str) -> str:
    if how == "mutate_history":  # longer
        return text.replace(
            "WEATHER:", "MUTATED: the client rewrote this after the fact;", 1 if once else -1
        )
    out = text
    for word, other in _SAME_LENGTH.items():
        if word not in out:
            continue
        # shorter: the weather's word cut off (" sunny" gone); equal: another word as long
        out = out.replace(" " + word, "" if how == "mutate_shorter" else " " + other, 1)
        if once:
            break
    if out == text:  # no weather word: the text's last character changed, or dropped
        out = text[:-1] + ("" if how == "mutate_shorter" else "?" if text[-1] != "?" else "!")
    return out


def _groups(family: str, items: list[Any]) -> list[tuple[int, int]]:
    """The history's call groups, in order: ``(start, end)`` of a message (or item run) that
    calls tools and the results that answer it."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(items):
        end = _group_end(family, items, i)
        if end > i:
            out.append((i, end))
            i = end
        else:
            i += 1
    return out


def _calls(family: str, item: Any) -> list[dict[str, Any]]:
    """The tool calls an item of the history makes, as the dicts that hold their arguments."""
    if not isinstance(item, dict):
        return []
    if family == "openai_chat":
        return [c["function"] for c in item.get("tool_calls") or [] if isinstance(c, dict)]
    if family == "openai_responses":
        return [item] if item.get("type") == "function_call" else []
    blocks = item.get("content") if family == "anthropic" else item.get("parts")
    if not isinstance(blocks, list):
        return []
    if family == "anthropic":
        return [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    return [p["functionCall"] for p in blocks if isinstance(p, dict) and "functionCall" in p]


def _group_end(family: str, items: list[Any], i: int) -> int:
    """Where the call group that starts at ``items[i]`` ends (``i``: none starts there)."""
    item = items[i]
    if family == "openai_responses":
        if not _calls(family, item):
            return i
        j = i
        while j < len(items) and isinstance(items[j], dict):
            kind = items[j].get("type")
            # a call after an output starts the next group
            if kind == "function_call" and j > i and items[j - 1].get("type") != "function_call":
                break
            if kind not in ("function_call", "function_call_output"):
                break
            j += 1
        return j
    if not _calls(family, item):
        return i
    if family == "openai_chat":
        j = i + 1
        while j < len(items) and isinstance(items[j], dict) and items[j].get("role") == "tool":
            j += 1
        return j if j > i + 1 else i
    # Anthropic and Gemini: the results are the next message
    nxt = items[i + 1] if i + 1 < len(items) else None
    answered = (
        isinstance(nxt, dict)
        and nxt.get("role") == "user"
        and "tool_result" in json.dumps(nxt.get("content"))
        if family == "anthropic"
        else isinstance(nxt, dict) and "functionResponse" in json.dumps(nxt.get("parts"))
    )
    return i + 2 if answered else i


def _regroup(
    kind: str, family: str, items: list[Any], groups: list[tuple[int, int]], seen: int
) -> bool:
    """The group variant applied to the history in place, when it re-sends what an earlier
    request sent; True if it did."""
    if kind == "mutate_argument":
        if not (seen and groups):
            return False
        call = _calls(family, items[groups[0][0]])[0]
        key = {"openai_chat": "arguments", "openai_responses": "arguments"}.get(family)
        if key is not None:  # a JSON string
            call[key] = json.dumps(_upper(json.loads(call[key] or "{}")))
        else:
            key = "input" if family == "anthropic" else "args"
            call[key] = _upper(call.get(key) or {})
        return True
    # the first group re-sent, and a later one after it
    if not (seen and len(groups) >= 2) or groups[0][0] == 0:
        return False
    (a, b), (c, d) = groups[0], groups[1]
    if kind == "mutate_reorder":
        items[a:d] = items[c:d] + items[b:c] + items[a:b]
    else:  # mutate_drop_middle: the user's message before it stays
        del items[a:b]
    return True


def _upper(value: Any) -> Any:
    """Every string value of an argument upper-cased."""
    if isinstance(value, dict):
        return {k: _upper(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_upper(v) for v in value]
    return value.upper() if isinstance(value, str) else value
