"""Helpers the C checks share: JSON paths into the request, the previous turn's state, short
quotes."""

from __future__ import annotations

from collections.abc import Iterator

from ... import providers
from ...models import Message
from .._context import TurnContext


def _prev_ok(ctx: TurnContext) -> bool:
    p = ctx.prev
    return (
        p is not None
        and p.rt.response is not None
        and p.rt.response.error is None
        and (p.rt.status or 0) < 400
    )


def _continues(ctx: TurnContext) -> bool:
    """This request continues the previous turn's exchange with the model (not a retry/branch)."""
    return ctx.prev is not None and ctx.turn.c.link in (
        "extends",
        "rewritten",
        "header",
        "previous_response_id",
    )


def attempts(ctx: TurnContext) -> Iterator[TurnContext]:
    """This turn, then each earlier attempt at the same request it retries, newest first."""
    yield ctx
    while ctx.turn.c.link == "retry" and ctx.prev is not None:
        ctx = ctx.prev
        yield ctx


def _item(ctx: TurnContext, message_index: int, part_index: int | None = None) -> str:
    """The path of a history message (and one of its parts) in the request as sent."""
    adapter = providers.by_family(ctx.rt.family)
    path = (
        adapter.item_path(ctx.ex.request_json(), message_index, part_index)
        if adapter is not None
        else None
    )
    return path or f"{ctx.history_key}[{message_index}]"


def _result_part(ctx: TurnContext, pairing_number: int) -> tuple[int, int | None]:
    """(message index, part index) of the ``pairing_number``-th pairing's tool result."""
    pairings = ctx.turn.c.pairings
    mi = pairings[pairing_number].message_index
    if mi is None or mi >= len(ctx.messages):
        return (mi or 0), None
    ordinal = sum(1 for q in pairings[:pairing_number] if q.message_index == mi)
    result_parts = [
        k for k, part in enumerate(ctx.messages[mi].parts) if part.kind == "tool_result"
    ]
    return mi, result_parts[ordinal] if ordinal < len(result_parts) else None


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def speaker(m: Message) -> str | None:
    """The ``name`` a message carries (a group chat's agent, a named user), bounded."""
    name = m.provider_details.get("name") if isinstance(m.provider_details, dict) else None
    return name.strip()[:60] if isinstance(name, str) and name.strip() else None
