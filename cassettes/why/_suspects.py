"""The suspects of a run for ``looptap why`` (docs/why.md "Interventions"): the findings that call
for an intervention, the turns they name and the turns of the final answer (each an E re-sample),
and what a fork at a turn reaches (the seqs it may send live, which the budget counts).
"""

from __future__ import annotations

from typing import Any

from .. import providers
from ..analysis import codes

__all__ = [
    "TRIMS",
    "answered_back",
    "heard",
    "last_turns",
    "later_turns",
    "live_turns",
    "named_turns",
    "newest_texts",
    "said_again",
    "serious_findings",
    "thought",
]

#: E re-samples at most this many turns of the conversation that gave the final answer (its last).
_LAST_TURNS = 6
#: The shortest answer taken as heard by another conversation when its text is in a request there
#: (a shorter one, "Yes.", would be found by chance), and the characters of a request's newest
#: message searched.
_HEARD_MIN, _NEWEST_CHARS = 12, 20_000
#: The chance that a re-sample (same request, same model) says a token of the recorded answer again,
#: so that an answer of n tokens comes back word for word with chance ``p ** n``: the
#: maximum-likelihood fits over the 80 requests of the shared corpus that other projects' suites
#: sent twice or more to the real APIs and got two answers to (two response ids; 13 more were
#: recorded twice with one answer, a cassette copied: no second sample), by whether the model
#: thought first (its request asked it to, :func:`cassettes.providers.asks_to_think`, or its answer
#: carries reasoning): without, 40 of 48 came back word for word, p = 0.996 (bootstrap 90%
#: interval 0.993–0.998); after thinking, 15 of 32, p = 0.967 (0.945–0.982); likelihood ratio 19.3
#: on 1 degree of freedom. The sampling parameters set cannot be told apart: 72 of the 80 set none.
#: bench/said_again.py; docs/why.md "The budget".
_SAID_AGAIN = 0.996
_SAID_AGAIN_THINKING = 0.967


#: The codes of a history the client trimmed, summarised or compacted (C): a suspect whatever its
#: severity (``C.history_trimmed`` is info: intentional, and still what may have lost what the
#: model needed), repaired by putting the history back (``restore_history``).
TRIMS = (codes.HISTORY_TRIMMED, codes.USER_INSTRUCTION_DROPPED)


def serious_findings(a: Any) -> list[Any]:
    """The findings that call for an intervention (not info, or a managed history: :data:`TRIMS`;
    placed at a turn), C first, then A, then E, each in turn order."""
    ordered = sorted(
        a.findings,
        key=lambda f: ({"C": 0, "A": 1, "E": 2}[f.layer], f.conversation or "", f.turn or 0),
    )
    return [
        f
        for f in ordered
        if (f.severity.value != "info" or f.code in TRIMS)
        and f.conversation is not None
        and f.turn is not None
    ]


def named_turns(findings: list[Any]) -> set[tuple[str, int]]:
    """The turns ``findings`` name, their own and the ones they relate to: each an E re-sample."""
    named = {(f.conversation, f.turn) for f in findings}
    return named | {
        (f.conversation, f.related_turn) for f in findings if f.related_turn is not None
    }


def later_turns(a: Any) -> dict[tuple[str, int], list[int]]:
    """Per (conversation, turn index): the seqs a fork there may send live: that turn and the
    conversation's later ones, and the turns recorded after it in the conversations linked to it
    (its parent, its sub-agents, a handoff, a group chat: a change there may reach them, and each
    goes live from the first request it reaches: :mod:`cassettes.replay.forking.cursor`)."""
    linked = _linked(a)
    later: dict[tuple[str, int], list[int]] = {}
    for c in a.conversations:
        idx = [(a.turns[s].index, s) for s in c.turns if s in a.turns]
        others = sorted(s for o in linked.get(c.id, ()) if o != c.id for s in _seqs(a, o))
        for i, s in idx:
            later[(c.id, i)] = sorted([t for j, t in idx if j >= i] + [t for t in others if t > s])
    return later


def live_turns(a: Any, where: tuple[str, int], *, held: bool, repair: bool) -> list[int]:
    """The seqs a fork at ``where`` puts live, as far as the recording tells (what the budget
    estimates; :func:`later_turns` is what it may reach at most): that turn; its conversation's
    later turns unless ``held`` (served as recorded while their requests match); and for a
    ``repair`` (C, A: a change to what the conversation says), the conversations its answer goes
    to: those started from that turn or a later one (a sub-agent, a handoff, a group chat's next
    speaker: all their turns) and, for a sub-agent, its parent's turns after its last. An E
    re-sample is counted as answering as recorded: what it would reach otherwise is served while
    it matches."""
    convs = {c.id: c for c in a.conversations}
    conv = convs.get(where[0])
    if conv is None:
        return []
    own = [s for s in conv.turns if s in a.turns and a.turns[s].index >= where[1]]
    out = set(own[:1] if held else own)
    todo, seen = [where] if repair else [], set()
    while todo:
        cid, index = todo.pop()
        if cid in seen or cid not in convs:
            continue
        seen.add(cid)
        for d in a.conversations:
            start = a.turns.get(d.parent_seq) if d.parent_seq is not None else None
            if start is not None and start.conversation == cid and start.index >= index:
                out |= {s for s in d.turns if s in a.turns}
                todo.append((d.id, 0))
        c = convs[cid]
        parent = a.turns.get(c.parent_seq) if c.parent_seq is not None else None
        if parent is not None and c.branch in ("sub_agent", "agent_tool") and c.turns:
            after = [s for s in _seqs(a, parent.conversation) if s > c.turns[-1]]
            out |= set(after)
            if after:
                todo.append((parent.conversation, a.turns[after[0]].index))
    return sorted(out)


def newest_texts(run: Any) -> dict[int, str]:
    """Per recorded seq, what its request says that is new since the agent last spoke: the text
    and tool results of the messages after the last assistant one (where an agent hears what
    another said: a group chat's next speaker told the last one's answer, a parent given its
    sub-agent's answer as a tool's result), at most :data:`_NEWEST_CHARS` characters."""
    out: dict[int, str] = {}
    for rt in run.roundtrips:
        messages = rt.request.messages if rt.request is not None else []
        said: list[str] = []
        for m in reversed(messages):
            if m.role == "assistant" or sum(map(len, said)) >= _NEWEST_CHARS:
                break
            said += [p.text or "" for p in m.parts if p.kind == "text"]
            said += [p.tool_result.content for p in m.parts if p.tool_result is not None]
        if rt.seq is not None and said:
            out[rt.seq] = "\n".join(reversed(said))[-_NEWEST_CHARS:]
    return out


def heard(a: Any, seqs: list[int], newest: dict[int, str]) -> list[int]:
    """``seqs`` (turns a fork puts live) and the turns of other conversations that hear one of
    their answers, though no call links them: from the first turn whose request's newest message
    (``newest``: :func:`newest_texts`) holds a recorded answer of theirs, given before it, that
    conversation's turns (a changed answer changes that request: the fork's cursor puts it live,
    :mod:`cassettes.replay.forking.cursor`); and so on from those."""
    out = {s for s in seqs if s in a.turns}
    while True:
        said = [(s, text) for s in out if len(text := str(a.turns[s].e.text or "")) >= _HEARD_MIN]
        live = {a.turns[s].conversation for s in out}
        reached = next(
            (
                (c, s)
                for c in a.conversations
                if c.id not in live
                for s in c.turns
                if any(t < s and text in newest.get(s, "") for t, text in said)
            ),
            None,
        )
        if reached is None:
            return sorted(out)
        c, first = reached
        out |= {s for s in c.turns if s >= first and s in a.turns}


def said_again(a: Any, seqs: list[int]) -> float:
    """The chance that re-sampling the turns ``seqs`` gives each of their answers again word for
    word: per visible output token, as recorded (a turn with no count: its text's characters / 4),
    :data:`_SAID_AGAIN_THINKING` for a turn whose model thought first (its request asked it to, or
    its answer carries reasoning), else :data:`_SAID_AGAIN`."""
    chance = 1.0
    for s in seqs:
        t = a.turns.get(s)
        if t is None:
            continue
        out = t.tokens.output
        n = (
            max(0, out - (t.tokens.reasoning or 0))
            if out is not None
            else len(str(t.e.text or "")) // 4
        )
        chance *= (_SAID_AGAIN_THINKING if thought(t) else _SAID_AGAIN) ** n
    return float(chance)


def thought(t: Any) -> bool:
    """Whether the model of turn ``t`` thought before it answered, as the wire says it: its
    request asked it to (:func:`cassettes.providers.asks_to_think`), or its answer carries
    reasoning (text or a count)."""
    return bool(
        providers.asks_to_think(t.c.params) or (t.tokens.reasoning or 0) > 0 or t.e.reasoning
    )


def _seqs(a: Any, conversation: str) -> list[int]:
    return [s for c in a.conversations if c.id == conversation for s in c.turns if s in a.turns]


def _linked(a: Any) -> dict[str, set[str]]:
    """Per conversation, the conversations linked to it through parents and branches, itself
    included (the tree it is in)."""
    group = {c.id: {c.id} for c in a.conversations}
    for c in a.conversations:
        parent = a.turns.get(c.parent_seq) if c.parent_seq is not None else None
        if parent is not None and parent.conversation in group:
            merged = group[c.id] | group[parent.conversation]
            for member in merged:
                group[member] = merged
    return group


def last_turns(a: Any) -> set[tuple[str, int]]:
    """The last :data:`_LAST_TURNS` turns of the conversation of the run's last turn."""
    named: set[tuple[str, int]] = set()
    last = max(a.turns.values(), key=lambda t: t.seq, default=None)
    if last is not None:
        conv = next((c for c in a.conversations if c.id == last.conversation), None)
        for s in (conv.turns if conv is not None else [])[-_LAST_TURNS:]:
            if s in a.turns:
                named.add((last.conversation, a.turns[s].index))
    return named


def answered_back(a: Any) -> set[tuple[str, int]]:
    """The last turn of each sub-agent (an agent used as a tool) of the conversation of the run's
    last turn: its answer went back to that conversation as a tool's result."""
    last = max(a.turns.values(), key=lambda t: t.seq, default=None)
    out: set[tuple[str, int]] = set()
    for c in a.conversations:
        parent = a.turns.get(c.parent_seq) if c.parent_seq is not None else None
        if (
            last is not None
            and parent is not None
            and parent.conversation == last.conversation
            and c.branch in ("sub_agent", "agent_tool")
            and c.turns
            and c.turns[-1] in a.turns
        ):
            out.add((c.id, a.turns[c.turns[-1]].index))
    return set(sorted(out)[:_LAST_TURNS])
