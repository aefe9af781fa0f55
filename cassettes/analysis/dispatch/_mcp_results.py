"""C checks against what an MCP tool server returned: an error hidden from the model, a result
altered, a call never run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ... import providers
from ...models import ToolResult
from .. import codes as codes
from .._context import TurnContext, short
from .._model import Finding
from ._shared import _norm


def check_mcp_results(ctx: TurnContext) -> Iterator[Finding]:
    """C.mcp_error_hidden / C.tool_result_altered / C.tool_call_not_executed — the results this
    request sends back, against what the run's MCP tool servers listed and returned for the same
    call (linked by the tool-use id the client sent the server, or by tool and arguments)."""
    mcp = ctx.mcp
    if not mcp.listed and not mcp.results:
        return
    for m in ctx.turn.c.appended:
        for p in m.parts:
            tr = p.tool_result
            if tr is None or not tr.call_id:
                continue
            if tr.call_id in mcp.results:
                yield from _mcp_result(ctx, tr, *mcp.results[tr.call_id])
            else:
                yield from _mcp_not_run(ctx, tr)


def _mcp_result(
    ctx: TurnContext, tr: ToolResult, seq: int, side: dict[str, Any]
) -> Iterator[Finding]:
    sent = _norm(tr.content or "")
    tool = side.get("tool") or "?"
    if side.get("error") or side.get("is_error"):
        said = side["error"].get("message") if side.get("error") else side.get("result")
        said_n = _norm(str(said or ""))[:60]
        if tr.is_error is not True and said_n and said_n not in sent:
            yield ctx.finding(
                codes.MCP_ERROR_HIDDEN,
                f"The MCP server answered the model's call {tr.call_id} ({tool}, #{seq}) with an "
                f"error (“{short(str(said), 120)}”), but the client sent it back to the model as "
                "a success: no error flag and none of the error's text.",
                tool_call_id=tr.call_id,
                mcp_seq=seq,
            )
        return
    got = _norm(str(side.get("result") or ""))
    if not side.get("answered") or not got:
        return
    cut = sent.rstrip(".… ").removesuffix("[truncated]").rstrip()
    if got in sent or (len(cut) >= 20 and got.startswith(cut[: len(cut) - 1])):
        return  # the same, wrapped, or a cut of it
    yield ctx.finding(
        codes.TOOL_RESULT_ALTERED,
        f"The result sent back to the model for {tr.call_id} ({tool}) is not what the MCP server "
        f"returned at #{seq}: the server said “{short(str(side.get('result')), 100)}”, the model "
        f"was sent “{short(tr.content, 100)}”.",
        tool_call_id=tr.call_id,
        mcp_seq=seq,
    )


def _mcp_not_run(ctx: TurnContext, tr: ToolResult) -> Iterator[Finding]:
    """A result for a call of a tool a recorded MCP server offers, though no tools/call of that
    tool was recorded between the model's answer and this request. Not when the client marked
    the result an error (a declined or failed call, said as such)."""
    mcp = ctx.mcp
    made = mcp.calls.get(tr.call_id or "")
    if made is None or tr.is_error is True or not mcp.confirmed(made):
        return
    model_seq, name, tool = made.seq, made.name, made.tool
    if mcp.ran_since(tool, model_seq):
        return
    adapter = providers.by_family(ctx.rt.family)
    flagged = adapter is not None and adapter.profile.tool_error_flag
    yield ctx.finding(
        codes.TOOL_CALL_NOT_EXECUTED,
        f"The model's call {tr.call_id} ({name}, #{model_seq}) was never run on the MCP server "
        f"that offers {tool}: no tools/call for it was recorded, yet the client sent the model a "
        f"result (“{short(tr.content, 100)}”)"
        + (
            " without an error flag."
            if flagged
            else "; this API has no error flag, so a declined call may be said in that text."
        ),
        grade=None if flagged else "no error flag",
        tool_call_id=tr.call_id,
        tool=tool,
    )
