"""C — what the client dispatched: view and checks."""

from __future__ import annotations

from collections.abc import Iterator

from cassettes.analysis.context import Check, FinalCheck, TurnContext
from cassettes.analysis.conversations import Link
from cassettes.analysis.model import DispatchView, Pairing

__all__ = ["CHECKS", "FINAL_CHECKS", "build"]


def _calls_of(ctx: TurnContext) -> list[tuple[str | None, str | None]]:
    r = ctx.rt.response
    return [(c.id, c.name) for c in r.tool_calls] if r is not None else []


def build(ctx: TurnContext, link: Link) -> DispatchView:
    req = ctx.rt.request
    assert req is not None
    kept = link.kept if link.how not in ("start", "previous_response_id", "header") or link.previous is not None else 0
    if link.how == "previous_response_id":
        kept = 0
    appended = ctx.messages[kept:]
    # Calls emitted earlier in this conversation, by id, and by name for wires without ids.
    registry: dict[str, int] = ctx.conv.state.setdefault("_calls_by_id", {})
    unanswered_by_name: dict[str, list[int]] = ctx.conv.state.setdefault("_unanswered_by_name", {})
    if ctx.prev is not None:
        for cid, name in _calls_of(ctx.prev):
            if cid:
                registry[cid] = ctx.prev.index
            elif name:
                unanswered_by_name.setdefault(name, []).append(ctx.prev.index)
    pairings: list[Pairing] = []
    for offset, m in enumerate(appended):
        for p in m.parts:
            if p.kind != "tool_result" or p.tool_result is None:
                continue
            tr = p.tool_result
            call_turn: int | None = None
            if tr.call_id and tr.call_id in registry:
                call_turn = registry[tr.call_id]
            elif not tr.call_id or tr.call_id not in registry:
                queue = unanswered_by_name.get(tr.name or "")
                if queue and not (tr.call_id and any(tr.call_id == c for c, _ in _calls_of_all(ctx))):
                    call_turn = queue.pop(0)
            pairings.append(
                Pairing(call_id=tr.call_id, name=tr.name, call_turn=call_turn, is_error=tr.is_error, message_index=kept + offset)
            )
    return DispatchView(
        kept=kept,
        rewritten=link.rewritten,
        appended=appended,
        appended_from=kept,
        echoed_assistant=link.echoed,
        pairings=pairings,
        tools_offered=[t.name for t in req.tools],
        tool_choice=req.tool_choice_mode,
        params=req.params,
        link=link.how,  # type: ignore[arg-type]
    )


def _calls_of_all(ctx: TurnContext) -> Iterator[tuple[str | None, str | None]]:
    for t in ctx.conv.turns:
        yield from _calls_of(t)


CHECKS: tuple[Check, ...] = ()
FINAL_CHECKS: tuple[FinalCheck, ...] = ()
