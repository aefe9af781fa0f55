"""The request being threaded, as the rules read it (:class:`Request`): its messages' keys, which
agent sent it (system prompt and tools), its trajectory's fields, the call ids it answers."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from ...models import Message, Part
from .._message_keys import _call_ids, _part_keys, stable
from .._trajectory import Fields
from ._data import Attempt, Keys, Threads
from ._words import SYSTEM_TEXT, trajectory


@dataclass(slots=True)
class Request:
    #: The API family, and its number for the tables' keys (:meth:`Threads.family`).
    family: str
    fam: int
    messages: list[Message]
    keys: Keys
    #: Keys of the system prompt and of the tool names: which agent sent the request.
    system: int
    tools: int
    #: The system prompt text, casefolded (bounded): where a handoff's agent is named.
    system_text: str
    #: The request's trajectory fields, when it is one (:func:`._words.trajectory`).
    fields: Fields | None
    #: The tool-call ids the request's last messages carry (what it answers).
    ids: set[str]
    #: The request as an attempt: its clock and the client's retry counter.
    attempt: Attempt


def _keys(threads: Threads, messages: list[Message], reuse: tuple[int, int] | None) -> Keys:
    if reuse is not None and 0 <= reuse[0] < len(threads.turns):
        base = threads.turns[reuse[0]]
        keep = reuse[1]
        if base.keys is not None and 0 <= keep <= min(base.length, len(messages)):
            if keep == base.length == len(base.keys.key):
                # A pure extension of the latest request: append to its lists, no copy.
                keys = base.keys
            else:
                keys = base.keys.head(keep)
            keys.extend(messages[keep:])
            return keys
    keys = Keys()
    keys.extend(messages)
    return keys


def read_request(
    threads: Threads,
    family: str,
    messages: list[Message],
    reuse: tuple[int, int] | None,
    system: list[Part] | None,
    tools: list[str] | None,
    attempt: Attempt,
) -> Request:
    """The request as the rules read it. ``reuse=(turn id, keep)``: its first ``keep`` messages
    are that earlier turn's, whose keys are taken over, not recomputed."""
    keys = _keys(threads, messages, reuse)
    ids: set[str] = set()
    for m in messages[-8:]:  # what the request answers sits at its end
        ids |= _call_ids(m.parts)
    return Request(
        family=family,
        fam=threads.family(family),
        messages=messages,
        keys=keys,
        system=stable(orjson.dumps(_part_keys(system or []), option=orjson.OPT_NON_STR_KEYS)),
        tools=stable(orjson.dumps(sorted(tools or ()))),
        system_text=" ".join(
            p.text[:SYSTEM_TEXT] for p in (system or ())[:16] if p.kind == "text" and p.text
        )[:SYSTEM_TEXT].casefold(),
        fields=trajectory(messages),
        ids=ids,
        attempt=attempt,
    )
