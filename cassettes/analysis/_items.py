"""Answers remembered by id: their items, for a history that refers to them by id
(:class:`ItemReferences`), and their tool calls, for a poll that delivers them again
(:class:`Deliveries`)."""

from __future__ import annotations

from collections import OrderedDict

from .. import providers
from ..models import Message, NormalisedResponse, Part
from ..parsing import RoundTrip
from ._mcp import put

__all__ = ["Deliveries", "ItemReferences"]


#: Answer items remembered by id for item references (the most recent; an older id stays
#: unresolved).
MAX_REFERENCED_ITEMS = 4096


class ItemReferences:
    """Items of recent answers by their id, to put back in a history that refers to them by id
    (an ``item_reference`` part: the item is held by the API, ``store`` on). A reference resolved
    is the answer's parts, each marked ``item_reference``, so the history reads as if the client
    had sent the item: the echo, threading and history checks compare what the API will use."""

    def __init__(self, limit: int = MAX_REFERENCED_ITEMS) -> None:
        self._parts: OrderedDict[str, list[Part]] = OrderedDict()
        self._limit = limit

    def remember(self, response: NormalisedResponse | None) -> None:
        fresh: set[str] = set()
        for p in response.parts if response is not None else []:
            pd = p.provider_details or {}
            block = pd.get("block")
            item_id = (
                pd.get("id")
                if isinstance(pd.get("id"), str)
                else block.get("id")
                if isinstance(block, dict)
                else None
            )
            if not isinstance(item_id, str) or not item_id:
                continue
            if item_id not in fresh:  # an id answered again stands for its latest item
                fresh.add(item_id)
                self._parts[item_id] = []
            self._parts[item_id].append(p)
            self._parts.move_to_end(item_id)
        while len(self._parts) > self._limit:
            self._parts.popitem(last=False)

    def resolve(self, messages: list[Message]) -> list[Message]:
        """Replace, in place, each referenced item this analyser has seen by its parts; returns
        the messages changed."""
        changed: list[Message] = []
        if not self._parts:
            return changed
        for m in messages:
            if not any(
                p.kind == "other" and (p.provider_details or {}).get("item_reference")
                for p in m.parts
            ):
                continue
            out: list[Part] = []
            for p in m.parts:
                ref = (
                    (p.provider_details or {}).get("item_reference") if p.kind == "other" else None
                )
                known = self._parts.get(ref) if isinstance(ref, str) else None
                if known is None:
                    out.append(p)
                    continue
                out.extend(
                    q.model_copy(
                        update={
                            "provider_details": {
                                **(q.provider_details or {}),
                                "item_reference": ref,
                            }
                        }
                    )
                    for q in known
                )
            m.parts[:] = out
            changed.append(m)
        return changed


#: How many answers' call ids are remembered to tell a poll that repeats one.
_DELIVERED_MAX = 1024


class Deliveries:
    """Recent answers' tool calls by response id, in families whose answers may be polled again:
    a poll read as a model call (``RoundTrip.polled``) that returns calls an earlier round trip
    already delivered under the same response id (a background response retrieved twice, a
    background stream resumed) has no turn of its own, else the results would answer one turn and
    look dropped on the other."""

    def __init__(self) -> None:
        self._calls: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def delivered_before(self, rt: RoundTrip) -> bool:
        """``rt`` is such a poll; remembers ``rt``'s calls otherwise (only for families that
        poll)."""
        r = rt.response
        if r is None or not r.id or not rt.request or not r.tool_calls:
            return False
        adapter = providers.by_family(rt.family)
        if adapter is None or not adapter.poll_operations:
            return False
        calls = tuple(sorted(c.id or c.name or "" for c in r.tool_calls))
        if rt.polled and self._calls.get(r.id) == calls:
            return True
        put(self._calls, r.id, calls, _DELIVERED_MAX)
        return False
