"""Which model tool call each MCP ``tools/call`` ran, and what the run's MCP tool servers offered:
the state the C checks of a later turn read (``dispatch.check_mcp_results``).

A call is linked by the model's tool-use id when the client sends it to the server (Claude Code's
``_meta``); otherwise by tool name and arguments to the one model call still awaiting its result
(sent before it, answered after it). The model knows a server's tool by its listed name, or behind
a prefix the client adds: ``mcp__server__tool``, ``server__tool``, or ``server_tool`` (opencode).
A single underscore is too common inside tool names to be read as a prefix on the name alone
(``read_file`` beside a server's ``file``): such a call is linked when a ``tools/call`` runs it,
and only once one has is its prefix the server's, for the "never run" check. Two awaiting calls that
fit equally (concurrent agents doing the same thing) leave it unlinked: a wrong link is worse than
none. Everything is bounded: the newest 10,000 calls of each table.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, NamedTuple

import orjson

from ..models import NormalisedResponse
from ._model import McpCall, Turn

__all__ = ["McpLinker", "ModelCall", "put"]

_LIMIT = 10_000
#: tools/call round trips kept waiting for the model's answer that made them.
_EARLY = 256


class ModelCall(NamedTuple):
    """A model's call of a tool an MCP server listed."""

    seq: int
    conversation: str
    turn: int
    #: The tool's name as the model called it (``mcp__weather__get_weather``) …
    name: str
    #: … and as the server listed it (``get_weather``).
    tool: str
    #: A digest of the arguments (:func:`_digest`).
    args: bytes
    #: The prefix when the name was read as ``<prefix>_<tool>`` (``weather_get_weather``): the
    #: server's only once a tools/call ran a call of that prefix (``McpLinker.prefixes``).
    prefix: str | None = None


def _digest(arguments: Any) -> bytes:
    """Arguments by a digest of their canonical JSON (equal objects, equal digests)."""
    try:
        data = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        data = repr(arguments).encode()
    return hashlib.blake2b(data, digest_size=16).digest()


def put(
    table: OrderedDict[Any, Any], key: Any, value: Any, limit: int = _LIMIT
) -> list[tuple[Any, Any]]:
    """``table[key] = value``, the newest: the oldest dropped past ``limit`` entries (returned,
    oldest first, for a caller that indexes the table)."""
    table[key] = value
    table.move_to_end(key)
    return [table.popitem(last=False) for _ in range(len(table) - limit)]


class McpLinker:
    def __init__(self) -> None:
        #: What the server answered, by the model's call id it ran: (seq, ``Provider.side_call``).
        self.results: OrderedDict[str, tuple[int, dict[str, Any]]] = OrderedDict()
        #: seqs of the tools/call round trips of each server tool name (the newest 64 of each).
        self.runs: OrderedDict[str, list[int]] = OrderedDict()
        #: Tool names the run's MCP servers listed (tools/list).
        self.listed: OrderedDict[str, None] = OrderedDict()
        #: The model's calls of listed tools, by call id.
        self.calls: OrderedDict[str, ModelCall] = OrderedDict()
        #: Ids of model calls still awaiting their result.
        self.pending: OrderedDict[str, None] = OrderedDict()
        #: Single-underscore prefixes (``weather_``'s ``weather``) a tools/call has shown a
        #: server's.
        self.prefixes: OrderedDict[str, None] = OrderedDict()
        #: tools/call round trips read before the model's answer that made them (by seq, with the
        #: arguments' digest): a client that runs a tool as soon as its call has streamed (Claude
        #: Code) can finish the call, and have it written, before the model's answer ends.
        self.early: OrderedDict[int, tuple[McpCall, dict[str, Any], bytes]] = OrderedDict()

    def clear(self) -> None:
        for table in (
            self.results,
            self.runs,
            self.listed,
            self.calls,
            self.pending,
            self.early,
            self.prefixes,
        ):
            table.clear()

    def model_turn(self, turn: Turn, response: NormalisedResponse | None) -> None:
        """A turn was analysed: the results it sends back are no longer awaited; its answer's
        client tool calls are."""
        for m in turn.c.appended:
            for p in m.parts:
                if p.tool_result is not None and p.tool_result.call_id:
                    self.pending.pop(p.tool_result.call_id, None)
        if not self.listed:
            return  # no MCP server listed tools in this run (yet): nothing to link a call to
        for tc in response.tool_calls if response is not None else []:
            tool, prefix = self.server_tool(tc.name), None
            if tool is None:
                prefix, tool = self.underscored(tc.name)
            if tc.id and tc.name and tc.kind == "function" and tool is not None:
                made = ModelCall(
                    turn.seq,
                    turn.conversation,
                    turn.index,
                    tc.name,
                    tool,
                    _digest(tc.arguments),
                    prefix,
                )
                put(self.calls, tc.id, made)
                if not self._ran_early(tc.id, made):
                    put(self.pending, tc.id, None)

    def _ran_early(self, call_id: str, made: ModelCall) -> bool:
        """Link the model's call ``made`` to a tools/call already read that ran it (recorded after
        the model's request started, written before its answer ended): by the id the client sent,
        else the one such call of that tool with the same arguments. Whether one did."""
        by_id = [s for s, (c, _, _) in self.early.items() if c.call_id == call_id]
        fits = [
            s
            for s, (c, _, args) in self.early.items()
            if c.call_id is None
            and c.candidates == 0
            and s > made.seq
            and c.tool == made.tool
            and args == made.args
        ]
        if by_id:
            seq = by_id[-1]
        elif len(fits) == 1:
            seq = fits[0]
        else:
            return False  # none, or several equal calls: a wrong link is worse than none
        call, side, _ = self.early.pop(seq)
        if call.call_id is None:
            call.call_id, call.linked_by = call_id, "name_arguments"
        call.model_seq, call.conversation, call.turn = made.seq, made.conversation, made.turn
        self._ran(made)
        put(self.results, call_id, (call.seq, side))
        return True

    def side_call(self, seq: int, side: dict[str, Any]) -> McpCall | None:
        """Take one MCP round trip (``Provider.side_call``'s record); a ``tools/call`` comes back
        linked to the model's call it ran when that can be told."""
        if side.get("method") == "tools/list":
            for name in side.get("tools") or []:
                if isinstance(name, str):
                    put(self.listed, name, None)
            return None
        if side.get("method") != "tools/call":
            return None
        tool = side.get("tool")
        if isinstance(tool, str):
            seqs = self.runs.get(tool) or []
            put(self.runs, tool, [*seqs[-63:], seq])
        err = side.get("error")
        text = side.get("result")
        call = McpCall(
            seq=seq,
            tool=tool,
            is_error=bool(side.get("is_error")),
            error=err.get("message") if isinstance(err, dict) else None,
            result=text[:300] if isinstance(text, str) else None,
        )
        self._link(call, side)
        made = self.calls.get(call.call_id) if call.call_id is not None else None
        if made is None and call.candidates == 0:  # its model call may not be read yet
            put(self.early, seq, (call, side, _digest(side.get("arguments"))), _EARLY)
        if call.call_id is None:
            return call
        self.pending.pop(call.call_id, None)
        put(self.results, call.call_id, (seq, side))
        if made is not None:
            call.model_seq, call.conversation, call.turn = made.seq, made.conversation, made.turn
            self._ran(made)
        return call

    def _ran(self, made: ModelCall) -> None:
        """A tools/call ran the model's call ``made``: a prefix it was read behind is a server's."""
        if made.prefix is not None:
            put(self.prefixes, made.prefix, None)

    def _link(self, call: McpCall, side: dict[str, Any]) -> None:
        """Which model call ``call`` ran: the id the client sent with it, else the one pending call
        of that tool with the same arguments (the first of one turn's equal calls); several turns'
        equal calls fit: not linked, their number kept."""
        cid = side.get("tool_use_id")
        if isinstance(cid, str) and cid:
            call.call_id, call.linked_by = cid, "id"
            return
        args = _digest(side.get("arguments"))
        fits = [
            c
            for c in reversed(self.pending)
            if c in self.calls and self.calls[c].tool == call.tool and self.calls[c].args == args
        ]
        if fits and len({self.calls[c].seq for c in fits}) == 1:
            call.call_id, call.linked_by = fits[-1], "name_arguments"
        elif fits:
            call.candidates = len(fits)

    def server_tool(self, model_name: str | None) -> str | None:
        """The listed server tool the model's tool ``model_name`` is, if any: the same name, or
        the name after a prefix a client adds to keep servers apart (``mcp__server__tool``,
        ``server__tool``; the longest listed one, so a tool named ``get__weather`` is found)."""
        name = model_name or ""
        while name and name not in self.listed:
            _, sep, name = name.partition("__")
            if not sep:
                return None
        return name or None

    def underscored(self, model_name: str | None) -> tuple[str | None, str | None]:
        """``(prefix, tool)`` when the model's name is a listed tool behind a prefix joined by one
        underscore (opencode's ``<server>_<tool>``; the longest listed tool), else ``(None,
        None)``."""
        name = model_name or ""
        at = name.find("_")
        while at > 0:
            if name[at + 1 :] in self.listed:
                return name[:at], name[at + 1 :]
            at = name.find("_", at + 1)
        return None, None

    def confirmed(self, made: ModelCall) -> bool:
        """Whether ``made`` is a server tool's call for certain: its name says so, or its prefix is
        one a tools/call has shown a server's."""
        return made.prefix is None or made.prefix in self.prefixes

    def ran_since(self, tool: str, seq: int) -> bool:
        """Whether a tools/call of ``tool`` was recorded after round trip ``seq``."""
        return any(s > seq for s in self.runs.get(tool) or [])
