"""Re-rendered trajectories: a text-protocol agent that sends its whole loop as fields of one user
message each step (DSPy's ChatAdapter: ``[[ ## question ## ]]``, ``[[ ## trajectory ## ]]``, then
``[[ ## thought_0 ## ]]``, ``[[ ## tool_name_0 ## ]]``, ``[[ ## tool_args_0 ## ]]``,
``[[ ## observation_0 ## ]]`` … and the model answers ``[[ ## next_thought ## ]]``,
``[[ ## next_tool_name ## ]]``, ``[[ ## next_tool_args ## ]]``).

Each step's request is a new text, so no history extends another; the loop is followed by its
fields instead (docs/threading.md, "Re-rendered trajectories"): the next step carries the same
input fields (the *head*: the question), every step field the previous request had, and one step
more whose thought, tool name and tool arguments are the previous answer's ``next_*`` fields. A
step field sent differently than the step before (an observation the client rewrote) is a change
of the history in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..lazy import pattern
from ._message_keys import squashed

__all__ = ["Fields", "Step", "fields_of", "follows", "step_of"]

#: A field marker, on a line of its own.
_MARK = pattern(r"^\[\[ ## ([A-Za-z_][\w]{0,63}) ## \]\][ \t]*$", re.M)
#: A step field's name: ``thought_0``, ``observation_12``.
_STEP = pattern(r"^(\w+?)_(\d{1,4})$")
#: Longest text read for fields (a longer message is not parsed: bounded work).
_MAX_TEXT = 1_000_000
#: Most fields read in one message.
_MAX_FIELDS = 512


@dataclass(frozen=True, slots=True)
class Fields:
    """A message's fields: ``head`` (input fields, by name: the question) and ``steps`` (step
    fields in order, name and value), values whitespace-squashed; ``tail`` is the text after the
    last field's value that the next render puts elsewhere (an instruction: "Respond with …")."""

    head: tuple[tuple[str, str], ...]
    steps: tuple[tuple[str, str], ...]


def fields_of(text: str) -> Fields | None:
    """The fields of a user message written in ``[[ ## name ## ]]`` markers (at least two, and a
    step field or a ``trajectory`` one), else ``None``."""
    if len(text) > _MAX_TEXT or "[[ ## " not in text:
        return None
    marks = list(_MARK.finditer(text))[:_MAX_FIELDS]
    if len(marks) < 2:
        return None
    head: list[tuple[str, str]] = []
    steps: list[tuple[str, str]] = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        value = squashed(text[m.end() : end])
        (steps if _STEP.match(m.group(1)) else head).append((m.group(1), value))
    if not steps and not any(name == "trajectory" for name, _ in head):
        return None
    return Fields(tuple(head), tuple(steps))


@dataclass(frozen=True, slots=True)
class Step:
    """A model's answer in fields: what the next step's ``thought_k``, ``tool_name_k`` and
    ``tool_args_k`` should say (``next_thought`` … without ``next_``)."""

    fields: tuple[tuple[str, str], ...]


def step_of(text: str) -> Step | None:
    """The ``next_*`` fields of an answer (``None`` when it has none)."""
    if len(text) > _MAX_TEXT or "[[ ## next_" not in text:
        return None
    marks = list(_MARK.finditer(text))[:_MAX_FIELDS]
    out: list[tuple[str, str]] = []
    for i, m in enumerate(marks):
        name = m.group(1)
        if name.startswith("next_"):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            out.append((name.removeprefix("next_"), squashed(text[m.end() : end])))
    return Step(tuple(out)) if out else None


def follows(before: Fields, after: Fields, answer: Step | None) -> tuple[bool, list[str]] | None:
    """Whether ``after`` is the step after ``before`` (same head, every step field of ``before``
    and more): ``None`` when it is not; else (the answer's fields are the new step's, the step
    fields ``after`` renders otherwise than ``before`` sent them)."""
    if after.head[:1] != before.head[:1] or [n for n, _ in after.head] != [
        n for n, _ in before.head
    ]:
        return None
    if any(
        a != b
        for (n, a), (_, b) in zip(before.head[:-1], after.head[:-1], strict=True)
        if n != "trajectory"
    ):
        return None
    n = len(before.steps)
    if len(after.steps) <= n or [name for name, _ in after.steps[:n]] != [
        name for name, _ in before.steps
    ]:
        return None
    changed = [
        name
        for (name, a), (_, b) in zip(before.steps, after.steps[:n], strict=True)
        if not _same(a, b, last=name == before.steps[-1][0])
    ]
    index = _next_index(before)
    new = {name: value for name, value in after.steps[n:]}
    echoed = (
        answer is not None
        and all(new.get(f"{k}_{index}") == v for k, v in answer.fields if f"{k}_{index}" in new)
        and any(f"{k}_{index}" in new for k, _ in answer.fields)
    )
    return echoed, changed


def _same(sent: str, now: str, last: bool) -> bool:
    """A step field's value as sent and as re-rendered: equal, or (the last field sent, which
    carried the render's closing instruction) the re-render starts it."""
    return sent == now or (last and sent.startswith(now))


def _next_index(f: Fields) -> int:
    """The index of the step after ``f``'s last one."""
    last = -1
    for name, _ in f.steps:
        m = _STEP.match(name)
        if m:
            last = max(last, int(m.group(2)))
    return last + 1
