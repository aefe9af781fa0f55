"""A request that both trims and rewrites its history (issue 103 item 3): which of its messages
were changed, and which of the previous request's were dropped, by message key. The first
message that differs is then the rewritten one, not an unchanged one the trim moved up."""

from __future__ import annotations

from typing import Any

from .._context import TurnContext
from .._message_keys import message_key, response_message
from ._managed import MAX_COMPARED, _Diff


def trimmed_and_changed(ctx: TurnContext) -> tuple[list[int], list[int]] | None:
    """(this request's changed messages, the previous request's dropped ones), each by index,
    when the request did both; ``None`` otherwise, or when the previous request's history was
    released (nothing to compare with). A changed message stands in the place of one gone
    between the messages kept around it (replaced, not dropped); the previous answer's echo
    and this turn's own messages are neither."""
    prev = ctx.prev
    if prev is None or not prev.messages or len(prev.messages) != prev.n_messages:
        return None
    # (_Diff reads a shape's key alone, its first field)
    before: list[Any] = [(message_key(m),) for m in prev.messages[:MAX_COMPARED]]
    own = min(ctx.turn.c.appended_from, MAX_COMPARED)
    now: list[Any] = [(message_key(m),) for m in ctx.messages[:own]]
    echo = response_message(prev.rt.response) if prev.rt.response is not None else None
    d = _Diff(before, now, message_key(echo) if echo is not None else None, None)
    if not d.gone or not d.unmatched:
        return None
    replaced: set[int] = set()
    for j in d.unmatched:
        lo = max((i for k, i in d.kept.items() if k < j), default=-1)
        hi = min((i for k, i in d.kept.items() if k > j), default=len(before))
        slot = [i for i in d.gone if lo < i < hi and i not in replaced]
        if slot:
            replaced.add(slot[0])
    dropped = [i for i in d.gone if i not in replaced]
    return (d.unmatched, dropped) if dropped else None
