"""A request that both trims and rewrites its history (issue 103 item 3): which of its messages
were changed, and which of the previous request's were dropped, by message key. The first
message that differs is then the rewritten one, not an unchanged one the trim moved up."""

from __future__ import annotations

from .._context import TurnContext
from ._managed import _MASK, SHAPES, Packed, _contiguous, _Diff, _unpacked


def trimmed_and_changed(
    ctx: TurnContext, new_from: int, packed: Packed | None
) -> tuple[list[int], list[int]] | None:
    """(this request's changed messages, the previous request's dropped ones), each by index,
    when the request did both: more of the previous request's messages went than new ones came
    before this turn's own (``new_from`` on); ``None`` otherwise, or without the previous
    request's packed history (``packed``, :func:`~._managed.shapes`). A changed message stands
    in the place of one gone between the messages kept around it (replaced, not dropped); the
    previous answer's echo is neither. Said only where what stayed kept its order and what was
    dropped is one run of messages."""
    prev = ctx.prev
    if prev is None or not packed:
        return None
    before, now = _unpacked(packed), _unpacked(ctx.conv.state[SHAPES])[:new_from]
    echo = ctx.keys.answer(prev.rt.response)
    d = _Diff(before, now, ctx.keys.key(echo) & _MASK if echo is not None else None, None)
    if not d.unmatched or len(d.gone) <= len(d.unmatched) or not d.in_order():
        return None  # nothing changed, or as many came as went, or moved (a reorder)
    replaced: set[int] = set()
    for j in d.unmatched:
        lo = max((i for k, i in d.kept.items() if k < j), default=-1)
        hi = min((i for k, i in d.kept.items() if k > j), default=len(before))
        slot = [i for i in d.gone if lo < i < hi and i not in replaced]
        if slot:
            replaced.add(slot[0])
    dropped = [i for i in d.gone if i not in replaced]
    # one run of messages gone (a head or a middle cut); gone here and there is messages merged
    # or split (Responses' items regrouped), no trim
    return (d.unmatched, dropped) if _contiguous(dropped) else None
