"""What the layer analysis adds to a round trip's ``looptap.roundtrip/1`` object (``show --json``,
schema in :mod:`cassettes.views.schema`): its turn (:func:`turn_json`: conversation, layers,
tokens and their split, findings), its conversation's kind and parent, and the links between the
model's tool calls and the MCP or HTTP calls that ran them. The rest of the object, built from the
round trip alone, is :mod:`cassettes.views._roundtrip_object`'s."""

from __future__ import annotations

from typing import Any

from ..analysis import Conversation, McpCall, Turn
from ._growth import growth_bars, split_json

__all__ = [
    "conversation_json",
    "mcp_link_json",
    "tool_call_http_json",
    "tool_http_link_json",
    "turn_json",
    "turn_layers_json",
]


def _message_json(m: Any) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for p in m.parts:
        d: dict[str, Any] = {"kind": p.kind}
        if p.text is not None:
            d["text"] = p.text
        if p.tool_call is not None:
            d["tool_call"] = {
                "id": p.tool_call.id,
                "name": p.tool_call.name,
                "arguments": p.tool_call.arguments,
            }
        if p.tool_result is not None:
            d["tool_result"] = {
                "call_id": p.tool_result.call_id,
                "name": p.tool_result.name,
                "content": p.tool_result.content,
                "is_error": p.tool_result.is_error,
            }
        if p.media_type is not None:
            d["media_type"] = p.media_type
        out.append(d)
    return {"role": m.role, "parts": out}


def tool_http_link_json(call: McpCall) -> dict[str, Any]:
    """The model's call a tool's HTTP call served (``tool_http.linked`` in looptap.roundtrip/1)."""
    return mcp_link_json(call) | {"tool": call.tool}


def tool_call_http_json(call: McpCall) -> dict[str, Any]:
    """A tool's HTTP call under the model's tool call it served (``tool_calls[].http[]``)."""
    assert call.http is not None
    return {"seq": call.seq, "by": call.linked_by} | call.http.model_dump(mode="json")


def mcp_link_json(call: McpCall) -> dict[str, Any]:
    """The model's call an MCP tools/call ran (``mcp.linked`` in schema looptap.roundtrip/1)."""
    return {
        "call_id": call.call_id,
        "by": call.linked_by,
        "model_seq": call.model_seq,
        "conversation": call.conversation,
        "turn": call.turn,
        "candidates": call.candidates,
    }


def _tokens_json(turn: Turn) -> dict[str, Any]:
    """The turn's token accounting with its split as every view shows it (``split``, from
    :func:`~cassettes.views._growth.growth_bars`); the analysis' overlapping working segments are
    left out (they read as another split of the same input)."""

    (bar,) = growth_bars([turn])
    return turn.tokens.model_dump(mode="json", exclude={"segments"}) | {"split": split_json(bar)}


def conversation_json(conv: Conversation | None) -> dict[str, Any]:
    """A round trip's conversation's kind and parent in ``show --json`` (``conversation_kind``:
    ``main``, ``side_call``, ``sub_agent``, ``agent_tool``, ``handoff``, ``group_chat``,
    ``sibling``; ``conversation_parent_seq``: the turn it branched from), as the core found them."""
    if conv is None:
        return {"conversation_kind": None, "conversation_parent_seq": None}
    return {"conversation_kind": conv.kind, "conversation_parent_seq": conv.parent_seq}


def turn_layers_json(turn: Turn) -> dict[str, Any]:
    """A turn's layers and token accounting in its round trip's JSON object (``layers``,
    ``tokens``: most of its bytes), of the turn alone. A kept analysis' printed views leave them
    out (its blocks of full turns hold the turn) and take them from the kept turn again
    (docs/kept-analysis.md)."""
    c = turn.c
    return {
        "layers": {
            "E": turn.e.model_dump(mode="json"),
            "A": turn.a.model_dump(mode="json", exclude={"usage"})
            | {
                "error": turn.a.error.model_dump(mode="json", exclude={"raw"})
                if turn.a.error
                else None
            },
            # (``context`` only where the client managed the history: most turns have none)
            "C": c.model_dump(
                mode="json",
                exclude={"appended", "params"} | ({"context"} if c.context is None else set()),
            )
            | {"appended": [_message_json(m) for m in c.appended]},
        },
        "tokens": _tokens_json(turn),
    }


def turn_json(turn: Turn) -> dict[str, Any]:
    """The analysis additions to a round trip's JSON object (schema looptap.roundtrip/1)."""
    return {
        "conversation": turn.conversation,
        "turn": turn.index,
        "previous_seq": turn.previous_seq,
        **turn_layers_json(turn),
        "findings": [f.model_dump(mode="json") for f in turn.findings],
    }
