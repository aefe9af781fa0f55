"""What a rebuilt round trip's request holds that looptap inferred is never a reason for a miss.

A round trip ``looptap import`` rebuilt from a trace carries a ``reconstructed`` mark whose
``inferred`` names what the trace did not give (docs/interop.md). Of those, the ones that are in the
request body are left out of the comparison, on both sides, for that round trip only — exactly what
the mark says, nothing else:

- ``max_tokens``: Anthropic's required ``max_tokens`` (the trace did not say it);
- ``tools``: the tools offered, with ``tool_choice`` and ``parallel_tool_calls``;
- ``tool schemas``: each tool's schema (``parameters``, ``input_schema``, ``strict``, Anthropic's
  ``eager_input_streaming``: how its input streams), not its name;
- ``stream``: the stream flag and ``stream_options``;
- ``params``: the request's other parameters: only those the trace kept are compared (a parameter
  the agent sends that the trace has no word of is not a difference; one it kept, changed, is);
- ``max_tokens name``: the trace's ``gen_ai.request.max_tokens`` sent as ``max_completion_tokens``;
- ``tool_result.is_error``: an Anthropic tool result's ``is_error: false`` (the trace keeps none);
- ``arguments text``: how a Chat history's tool-call arguments are spelled (the trace kept the
  model's spelling, or an object; an agent may send them back its own way): compared as the JSON
  they hold; and how the message spells its lack of text (``""``, ``null`` or no ``content``: an
  SDK's choice a trace does not keep, LiteLLM's writes each as an empty text part);
- ``system role``: Gemini's ``systemInstruction.role`` (google-genai sends ``"user"``; a trace
  keeps the system text only);
- ``schema key``: the key a Gemini function declaration's schema is under (``parameters``,
  ``parametersJsonSchema``, ``parameters_json_schema``: a trace keeps the schema, not which one
  the SDK used); the schema itself is compared;
- ``query``: the URL's query string (a Vertex AI call: which client and transport sent it, the
  Vertex AI SDK's REST ``$alt=json;enum-encoding=int`` or none, the trace does not say).

Each recorded round trip with such a mark has its :class:`InferredFields`; the matcher
(:mod:`cassettes.matching`) keys it by its body so reduced, and a request that matched nothing
exactly is tried again reduced by each the recording has (a handful: one per set of marks and
recorded keys). The shapes are the API families' (this module is where they are named).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from .. import bounds
from ..wire import Exchange

__all__ = ["INFERRED", "InferredFields", "inferred_fields", "reduced"]

#: The detector a difference left out this way is on the record under (what was tolerated).
INFERRED = "inferred"

#: The body keys that are the conversation itself, compared whatever ``params`` says.
_CONTENT = frozenset(
    "model messages system tools input instructions contents systemInstruction "
    "previous_response_id".split()
)
_DROPPED = {
    "max_tokens": ("max_tokens",),
    "tools": ("tools", "tool_choice", "parallel_tool_calls"),
    "stream": ("stream", "stream_options"),
}
_MARKS = {
    *_DROPPED, "tool schemas", "params", "max_tokens name", "tool_result.is_error",
    "arguments text", "system role", "schema key", "query",
}  # fmt: skip


@dataclass(frozen=True)
class InferredFields:
    """How a rebuilt round trip's requests are compared: keys dropped, the keys compared (all
    when ``None``), tool schemas and ``is_error: false`` left out."""

    drop: frozenset[str]
    only: frozenset[str] | None = None
    schemas: bool = False
    is_error: bool = False
    max_tokens_name: bool = False
    arguments: bool = False
    system_role: bool = False
    schema_key: bool = False
    query: bool = False


def inferred_fields(ex: Exchange) -> InferredFields | None:
    """What of a recorded round trip's request is left out of the comparison (``None``: compared
    as it is)."""
    mark = ex.reconstructed
    inferred = mark.get("inferred") if isinstance(mark, dict) else None
    if not isinstance(inferred, list):
        return None
    marks = {m for m in inferred if isinstance(m, str)} & _MARKS
    if not marks:
        return None
    drop = frozenset(k for m in marks for k in _DROPPED.get(m, ()))
    only = None
    if "params" in marks:
        body = ex.request_json()
        only = frozenset((set(body) | _CONTENT) - drop) if isinstance(body, dict) else None
    return InferredFields(
        drop, only, "tool schemas" in marks, "tool_result.is_error" in marks,
        "max_tokens name" in marks, "arguments text" in marks, "system role" in marks,
        "schema key" in marks, "query" in marks,
    )  # fmt: skip


_TOOL_SCHEMA = ("input_schema", "parameters", "strict", "eager_input_streaming")


def _tool(t: Any) -> Any:
    if not isinstance(t, dict):
        return t
    t = {k: v for k, v in t.items() if k not in _TOOL_SCHEMA}
    fn = t.get("function")
    if isinstance(fn, dict):
        t["function"] = {k: v for k, v in fn.items() if k not in ("parameters", "strict")}
    return t


_SCHEMA_KEYS = ("parameters", "parametersJsonSchema", "parameters_json_schema")


def _declarations(t: Any) -> Any:
    """A Gemini tool whose function declarations hold their schema under ``parameters``."""
    decls = t.get("functionDeclarations") if isinstance(t, dict) else None
    if not isinstance(decls, list):
        return t
    out = []
    for d in decls:
        if isinstance(d, dict):
            schema = next((d[k] for k in _SCHEMA_KEYS if k in d), None)
            d = {k: v for k, v in d.items() if k not in _SCHEMA_KEYS}
            if schema is not None:
                d["parameters"] = schema
        out.append(d)
    return {**t, "functionDeclarations": out}


def _each(messages: Any, key: str, change: Callable[[Any], Any]) -> Any:
    """``messages`` with each item of each message's list ``key`` changed by ``change``."""
    if not isinstance(messages, list):
        return messages
    return [
        {**m, key: [change(x) for x in m[key]]}
        if isinstance(m, dict) and isinstance(m.get(key), list)
        else m
        for m in messages
    ]


def _no_false_is_error(b: Any) -> Any:
    if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error") is False:
        return {k: v for k, v in b.items() if k != "is_error"}
    return b


def _call_parsed(c: Any) -> Any:
    fn = c.get("function") if isinstance(c, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
        return c
    try:
        args = bounds.loads(fn["arguments"])
    except (orjson.JSONDecodeError, ValueError):
        return c
    return {**c, "function": {**fn, "arguments": args}}


def _no_empty_text(m: Any) -> Any:
    """An assistant message with tool calls without its ``content`` when that is empty."""
    if isinstance(m, dict) and m.get("tool_calls") and m.get("content", "") in ("", None):
        return {k: v for k, v in m.items() if k != "content"}
    return m


def reduced(body: Any, p: InferredFields) -> Any:
    """``body`` (a request's JSON) as ``p`` compares it."""
    if not isinstance(body, dict):
        return body
    if p.max_tokens_name and "max_completion_tokens" in body and "max_tokens" not in body:
        body = {**body, "max_tokens": body["max_completion_tokens"]}
        del body["max_completion_tokens"]
    out = {k: v for k, v in body.items() if k not in p.drop and (p.only is None or k in p.only)}
    if p.schemas and isinstance(out.get("tools"), list):
        out["tools"] = [_tool(t) for t in out["tools"]]
    if p.is_error and "messages" in out:
        out["messages"] = _each(out["messages"], "content", _no_false_is_error)
    if p.arguments and "messages" in out:
        out["messages"] = _each(out["messages"], "tool_calls", _call_parsed)
        if isinstance(out["messages"], list):
            out["messages"] = [_no_empty_text(m) for m in out["messages"]]
    si = out.get("systemInstruction")
    if p.system_role and isinstance(si, dict) and "role" in si:
        out["systemInstruction"] = {k: v for k, v in si.items() if k != "role"}
    if p.schema_key and isinstance(out.get("tools"), list):
        out["tools"] = [_declarations(t) for t in out["tools"]]
    return out
