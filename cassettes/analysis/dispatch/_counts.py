"""The messages of a request counted once each (:class:`~cassettes.analysis._model.MessageCounts`):
the one place ``show``, ``show --json`` and the inspector read them from.

From what the C layer classified: the history kept as it was (the threader's ``kept`` prefix),
where this turn's own messages start (``appended_from``), the context management's drops
(:class:`~cassettes.analysis._model.ContextChange`), and the keys of the previous request's and
this request's messages that the context management keeps per conversation (each message's key,
8 bytes, in order): a message sent again between the kept prefix and this turn's own is *as
before* when the previous request sent one with its key (each of those counted once), else
*changed*; so is a summary the context management found in place of what it dropped."""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any

from .._context import TurnContext
from .._model import ContextChange, MessageCounts
from ._managed import SHAPES

_Q = struct.Struct("<Q")


def _keys(packed: Any, start: int, stop: int) -> list[int] | None:
    """Keys ``start:stop`` of a packed request (``None``: not all of them kept)."""
    raw = packed[1] if isinstance(packed, tuple) and len(packed) > 1 else None
    if not isinstance(raw, bytes) or 8 * stop > len(raw):
        return None
    return [_Q.unpack_from(raw, 8 * i)[0] for i in range(start, stop)]


def message_counts(
    ctx: TurnContext,
    how: str,
    kept: int,
    new_from: int,
    before: Any,
    context: ContextChange | None,
) -> MessageCounts | None:
    """This request's messages as before, changed and new (they sum to what was sent), and the
    previous request's that it dropped. ``before``: the previous request packed, as
    :func:`~._managed.shapes` returned it (``None``: not the request this one follows)."""
    sent = len(ctx.messages)
    if context is not None and context.after_overflow is not None:
        # The refused request again, managed (issue 90): it got no answer, so nothing it sent is
        # this turn's own; each message is as before (the refused request sent it) or changed.
        new_from = sent
    new_from = min(max(new_from, kept), sent)
    new = sent - new_from
    previous = ctx.prev.n_messages if ctx.prev is not None and how != "previous_response_id" else 0
    as_before = kept
    if new_from > kept:
        had = _keys(before, kept, len(before[2])) if isinstance(before, tuple) else None
        now = _keys(ctx.conv.state.get(SHAPES), kept, new_from)
        if had is None or now is None:
            return None
        left = Counter(had)
        for k in now:
            if left[k] > 0:
                left[k] -= 1
                as_before += 1
    changed = new_from - as_before
    if context is not None:
        # a summary put in place of what was dropped is history changed, not this turn's own
        moved = sum(1 for j in context.summary if new_from <= j < sent)
        changed, new = changed + moved, new - moved
        dropped = len(context.dropped)
        # what the management kept of the previous request past where this turn's own messages
        # were taken to start (no echo of the previous answer found): as before, not new
        extra = min(previous - dropped - len(context.cleared) - as_before, new) if previous else 0
        as_before, new = as_before + max(extra, 0), new - max(extra, 0)
    else:
        dropped = max(0, previous - as_before - changed)
    return MessageCounts(sent=sent, as_before=as_before, changed=changed, new=new, dropped=dropped)
