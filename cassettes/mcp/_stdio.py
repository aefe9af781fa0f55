"""The stdio transport of ``looptap mcp``: the SDK's own (``mcp.server.stdio.stdio_server``, which
claims stdout so nothing else can write to the wire) fed by a bounded reader of stdin.

The SDK reads stdin a whole line at a time: one line of 1 GiB without a newline is held whole in
memory (1.15 GB measured), and a message it cannot validate is dropped without an answer. Here:

- a line is read at most :data:`LINE_LIMIT` bytes at a time (``BufferedReader.readline(size)``);
  a longer one is skipped to its newline without being kept, and answered as an invalid request;
- a line that is not a valid JSON-RPC message is answered with a JSON-RPC error: ``-32700`` (parse
  error, ``"id": null``) when it is not JSON, ``-32600`` (invalid request) with its id when it has a
  usable one, else with ``"id": null``. A malformed notification (no id) gets no answer, as
  JSON-RPC 2.0 says.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import orjson

__all__ = ["BoundedLines", "serve_stdio", "usable_id"]

#: The longest request line read (MCP requests from a client are small: tool names and arguments).
LINE_LIMIT = 4 * 1024 * 1024
_CHUNK = 64 * 1024


class BoundedLines:
    """Lines of a binary stream, each kept only up to ``limit`` bytes."""

    def __init__(self, raw: BinaryIO, limit: int = LINE_LIMIT) -> None:
        self._raw = raw
        self._limit = limit

    def readline(self) -> tuple[bytes, bool] | None:
        """The next line without its newline and whether it was too long (then ``b""``: its bytes
        are read and dropped, never held); ``None`` at the end of the stream."""
        line = self._raw.readline(self._limit + 1)
        if not line:
            return None
        if line.endswith(b"\n"):
            return line[:-1], False
        if len(line) <= self._limit:  # the last line, without a newline
            return line, False
        while True:  # too long: read on to the newline, keeping nothing
            more = self._raw.readline(_CHUNK)
            if not more or more.endswith(b"\n"):
                return b"", True


def usable_id(value: Any) -> bool:
    """Whether a JSON-RPC id can be answered with: a string or an integer (not a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def classify(line: bytes, too_long: bool = False) -> tuple[Any, dict[str, Any] | None]:
    """``(message, None)`` for a valid JSON-RPC message (the SDK's own validation); ``(None,
    error)`` for a malformed one that must be answered (``error`` is the JSON-RPC error response);
    ``(None, None)`` for one that gets no answer (a blank line, a malformed notification)."""
    import mcp_types as types

    def error(code: int, message: str, id_: Any = None) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}

    if too_long:
        return None, error(
            -32600, f"Invalid Request: the line is longer than {LINE_LIMIT} bytes and was skipped"
        )
    if not line.strip():
        return None, None
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:  # pydantic's ValidationError: told apart below
        pass
    else:
        if (
            not isinstance(message, types.JSONRPCNotification)
            or b'"id"' not in line
            or "id" not in orjson.loads(line)
        ):
            return message, None
        # an id of the wrong type (an object, a list, a boolean) read as a notification: a request
        # whose id cannot be told, answered with "id": null
        return None, error(-32600, "Invalid Request: the id is a string or an integer")
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, error(-32700, "Parse error: the line is not JSON")
    if isinstance(data, dict):
        if "id" not in data:
            if "method" in data:
                return None, None  # a malformed notification: never answered
            return None, error(
                -32600, "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
            )
        id_ = data["id"] if usable_id(data["id"]) else None
        return None, error(
            -32600,
            "Invalid Request: not a valid JSON-RPC 2.0 request "
            '(jsonrpc "2.0", a method name, params an object)',
            id_,
        )
    return None, error(
        -32600, "Invalid Request: a JSON-RPC message is an object (batches are not supported)"
    )


class _Stdin:
    """What ``stdio_server`` iterates over as its stdin: the valid lines, as text. Malformed ones
    are answered through ``replies`` (the session's write stream, set once the transport is up)."""

    def __init__(self, raw: BinaryIO) -> None:
        import anyio

        self._lines = BoundedLines(raw)
        self.replies: Any = None
        self.ready = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[str]:
        import anyio
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        await self.ready.wait()
        while True:
            got = await anyio.to_thread.run_sync(self._lines.readline)
            if got is None:
                return
            message, reply = classify(*got)
            if message is not None:
                yield got[0].decode("utf-8", "replace")
            elif reply is not None:
                err = types.JSONRPCError(
                    jsonrpc="2.0", id=reply["id"], error=types.ErrorData(**reply["error"])
                )
                try:
                    await self.replies.send(SessionMessage(err))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return


async def serve_stdio(server: Any, stdin: BinaryIO | None = None) -> None:
    """Run the MCP server (an ``MCPServer``) over stdio with the bounded reader."""
    from mcp.server.stdio import stdio_server

    source = _Stdin(stdin if stdin is not None else sys.stdin.buffer)
    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async does the same
    async with stdio_server(stdin=source) as (read_stream, write_stream):  # type: ignore[arg-type]
        source.replies = write_stream
        source.ready.set()
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
