"""MCP (Model Context Protocol) over streamable HTTP: the tool servers an agent calls, read beside
its model calls.

Recognised by protocol, on any host: a POST whose body is a JSON-RPC 2.0 request (``initialize``,
``tools/list``, ``tools/call`` …; both the 2025-11-25 revision with ``mcp-session-id`` and the
2026-07-28 revision's stateless ``server/discover`` with its ``mcp-method`` header). The answer is
JSON or a short SSE stream of JSON-RPC messages. These are not model calls (no turn, no tokens);
:meth:`Mcp.side_call` says what a call did: the tool, its arguments, the result or error, and the
model's tool-use id when the client sends it (Claude Code puts it in
``params._meta["claudecode/toolUseId"]``), so ``show`` can name the model's call it ran.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

import orjson

from ..wire import Framed
from ._base import Provider
from ._profile import Profile
from ._replay import ReplayShapes
from ._values import as_obj, as_str, compact_json, json_events

__all__ = ["Mcp"]

#: The ``_meta`` keys clients put the model's tool-use id under.
_TOOL_USE_KEYS = ("claudecode/toolUseId", "toolUseId", "tool_use_id", "toolCallId")


def is_mcp_request(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and body.get("jsonrpc") == "2.0"
        and isinstance(body.get("method"), str)
    )


def _answers(obj: Any, rid: Any) -> bool:
    """``obj`` is the JSON-RPC response to the request whose id is ``rid``."""
    return (
        isinstance(obj, dict)
        and obj.get("jsonrpc") == "2.0"
        and obj.get("id") == rid
        and ("result" in obj or "error" in obj)
    )


def _result_text(result: Any, limit: int = 2000) -> str:
    """A tool result's content as text (text parts joined; other parts named)."""
    if not isinstance(result, dict):
        return compact_json(result)[:limit]
    out = []
    for part in result.get("content") or []:
        if (
            isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            out.append(part["text"])
        elif isinstance(part, dict):
            out.append(f"[{part.get('type')}]")
    if not out and "structuredContent" in result:
        out.append(compact_json(result["structuredContent"]))
    return "\n".join(out)[:limit]


class McpReplay(ReplayShapes):
    """How replay answers an MCP server's request: with the client's own JSON-RPC id."""

    def chunks(
        self,
        chunks: list[tuple[float | None, bytes]],
        content_type: str,
        recorded: Any,
        live: bytes,
    ) -> list[tuple[float | None, bytes]]:
        try:
            new_id = orjson.loads(live).get("id")
        except (orjson.JSONDecodeError, AttributeError):
            return chunks
        old_id = recorded.get("id") if isinstance(recorded, dict) else None
        if new_id == old_id or old_id is None:
            return chunks

        def swap(data: bytes) -> bytes:
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                return data
            if _answers(obj, old_id):
                obj["id"] = new_id
                return orjson.dumps(obj)
            return data

        body = b"".join(c for _, c in chunks)
        last = chunks[-1][0] if chunks else None
        if "event-stream" not in content_type:
            return [(last, swap(body))]
        lines = [
            b"data: " + swap(line[5:].strip()) if line.startswith(b"data:") else line
            for line in body.split(b"\n")
        ]
        return [(last, b"\n".join(lines))]


class Mcp(Provider):
    family = "mcp"
    #: The JSON-RPC id is the client's counter: replay matches without it and answers with the
    #: client's own (``McpReplay.chunks``).
    profile = Profile(volatile_top_fields=frozenset({"id"}))
    replay = McpReplay()

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        return 3 if method.upper() == "POST" and is_mcp_request(body) else 0

    def operation(self, method: str, url: SplitResult) -> str:
        return "mcp"

    def body_operation(self, operation: str, body: Any) -> str:
        return f"mcp {body['method']}" if is_mcp_request(body) else operation

    def side_call(self, body: Any, framed: Framed) -> dict[str, Any] | None:
        """What one MCP request did: ``method``, and for ``tools/call`` the ``tool``, its
        ``arguments``, the model's ``tool_use_id`` when sent, and the ``result`` text, ``is_error``
        or the JSON-RPC ``error``; for ``tools/list`` the tool names."""
        if not is_mcp_request(body):
            return None
        given = body.get("params")
        params: dict[str, Any] = as_obj(given)
        out: dict[str, Any] = {"method": body["method"], "id": body.get("id")}
        found = params.get("_meta")
        meta: dict[str, Any] = as_obj(found)
        tool_use = next(
            (as_str(meta[k]) for k in _TOOL_USE_KEYS if isinstance(meta.get(k), str)), None
        )
        if body["method"] == "tools/call":
            out.update(
                tool=as_str(params.get("name")),
                arguments=params.get("arguments"),
                tool_use_id=tool_use,
            )
        reply = self._reply(framed, body.get("id"))
        if reply is None:
            out["answered"] = False
            return out
        out["answered"] = True
        if isinstance(reply.get("error"), dict):
            err = reply["error"]
            out["error"] = {"code": err.get("code"), "message": as_str(err.get("message"))}
            return out
        result = reply.get("result")
        if body["method"] == "tools/call":
            out["is_error"] = bool(result.get("isError")) if isinstance(result, dict) else False
            out["result"] = _result_text(result)
        elif body["method"] == "tools/list" and isinstance(result, dict):
            out["tools"] = [
                as_str(t.get("name")) for t in result.get("tools") or [] if isinstance(t, dict)
            ]
        return out

    @staticmethod
    def _reply(framed: Framed, rid: Any) -> dict[str, Any] | None:
        """The JSON-RPC response to request ``rid`` in a JSON body or an SSE stream."""
        if framed.kind == "json":
            candidates: list[Any] = (
                framed.value if isinstance(framed.value, list) else [framed.value]
            )
        else:
            candidates = [obj for _, obj in json_events(framed)]
        return next((obj for obj in candidates if _answers(obj, rid)), None)
