"""Result groups: the tool results that answer one assistant turn's calls, consecutive in a
request's history, and the order replay matching compares them in.

An agent that runs an answer's calls concurrently may append their results in the order they
complete (LlamaIndex's ``FunctionAgent``): the same results, in another order, from run to run.
Every API pairs a result with its call by the call's id (WIRE.md §A.5, §B.5, §C.5, §D.5), so
such a group means the same whatever its order. Replay matching therefore compares a group in
one order, its calls' (:meth:`ResultGroups.in_call_order`): a result for the same call with
another content, a missing or an extra result, or a result moved to another turn's group still
differ.

A family says where its results and calls are as data (:class:`ResultGroups`, its profile's
``result_groups``); this module is the one reading of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ResultGroups"]


@dataclass(frozen=True)
class ResultGroups:
    """Where an API's tool results and the calls they answer sit in a request's history."""

    #: ``result(element)``: the key of the call a history element answers when it is a tool
    #: result (its call id; ``""`` when it names none), else ``None``.
    result: Callable[[Any], str | None]
    #: ``calls(element)``: the keys of the calls a history element makes, in order (what is not
    #: a string, or is empty, is left out).
    calls: Callable[[Any], Sequence[Any]]
    #: The field of a history item that lists its parts, when results are parts of an item (an
    #: Anthropic user message's ``content`` blocks, a Gemini content's ``parts``); ``None``: the
    #: history's items are the results themselves (OpenAI Chat's ``role: tool`` messages).
    parts: str | None = None

    def in_call_order(self, body: Any, history: str) -> Any:
        """``body`` with each result group of its ``history`` list (two results or more,
        consecutive, each naming a call of its own) in the order of the calls they answer, as
        the history makes them; a result whose call is not in the body (a request continuing a
        kept answer) after those, by its key. ``body`` is not changed: a group moved is a copy,
        and a body with nothing to move is returned as it is. A group with a result that names
        no call, or two that name the same one, keeps its order (the API pairs those by
        position)."""
        items = body.get(history) if isinstance(body, dict) else None
        if not isinstance(items, list):
            return body
        # (a body's lists are bounded as it is read: bounds.loads; the work is linear in them)
        lists: list[tuple[int | None, list[Any]]] = (
            [(None, items)]
            if self.parts is None
            else [
                (i, item[self.parts])
                for i, item in enumerate(items)
                if isinstance(item, dict) and isinstance(item.get(self.parts), list)
            ]
        )
        rank: dict[str, int] = {}
        for _, elements in lists:
            for el in elements:
                for key in self._calls(el):
                    rank.setdefault(key, len(rank))
        moved: dict[int | None, list[Any]] = {}
        for at, elements in lists:
            ordered = self._ordered(elements, rank)
            if ordered is not None:
                moved[at] = ordered
        if not moved:
            return body
        if self.parts is None:
            return {**body, history: moved[None]}
        history_items = list(items)
        for at, elements in moved.items():
            assert at is not None
            history_items[at] = {**history_items[at], self.parts: elements}
        return {**body, history: history_items}

    def _calls(self, element: Any) -> Sequence[str]:
        try:
            keys = self.calls(element)
        except (AttributeError, KeyError, TypeError):  # an element of another shape
            return ()
        return [k for k in keys if isinstance(k, str) and k]

    def _key(self, element: Any) -> str | None:
        try:
            key = self.result(element)
        except (AttributeError, KeyError, TypeError):
            return None
        return key if isinstance(key, str) else None

    def _ordered(self, elements: list[Any], rank: dict[str, int]) -> list[Any] | None:
        """``elements`` with each group in its calls' order, or ``None`` when none moved."""
        out = list(elements)
        changed = False
        found = [self._key(e) for e in elements]  # each element's call key, read once
        i = 0
        while i < len(elements):
            if found[i] is None:
                i += 1
                continue
            j = i
            while j < len(elements) and found[j] is not None:
                j += 1
            keys = [k or "" for k in found[i:j]]
            if j - i > 1 and "" not in keys and len(set(keys)) == len(keys):
                # the calls' order; a call not in the body (a kept answer's) after, by its key
                place = [(0, rank[k], "") if k in rank else (1, 0, k) for k in keys]
                order = sorted(range(j - i), key=place.__getitem__)
                if order != list(range(j - i)):
                    out[i:j] = [elements[i + k] for k in order]
                    changed = True
            i = j
        return out if changed else None
