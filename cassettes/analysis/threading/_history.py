"""Rules over registered histories: the turn whose history a request extends (longest prefix
first, strict keys where they decide), the same request again (a retry, an answer thrown away,
another agent's side call), and how a link describes what the request kept of the turn before."""

from __future__ import annotations

import itertools

from .._message_keys import _ROLE, _part_keys
from ._agents import (
    agent_tool,
    asks_compaction,
    choose,
    compaction,
    forks_running_calls,
    handed_back,
    handed_to,
    hands_back,
    hands_over,
    hears_final_answer,
    other_agent,
    rank,
    receives_answer,
    split_at,
)
from ._data import IN_SYSTEM, KIND, MAX_PER_PREFIX, Link, Registered, Request, Threads, TurnInfo
from ._words import (
    MAX_HAY,
    MIN_SUMMARY,
    SCAN_OPENING,
    SCAN_PROMPTS,
    compactions,
    demo_pairs,
    fields_prompt,
    norm_prompt,
    start_len,
    system_words,
)

#: The longest wait after a failure that still reads as a retry when the client's retry counter
#: does not say it is one: the SDKs honour a retry-after of up to 60 s and back off for less; an
#: identical request minutes later is another run sending it (``looptap run -o +FILE`` appends
#: runs to one cassette).
RETRY_WINDOW = 120.0


def use_strict(s: Threads, r: Request) -> bool:
    """Whether the keys with tool-call ids decide: when they reach as far as the loose ones, or
    when the request answers ids a model gave in this run (a loose match beyond is another
    agent's identical history); a client that rewrote the ids reaches further with the loose
    keys alone."""
    keys = r.keys
    if not keys.key or keys.strict[-1] == keys.loose[-1]:
        return False
    loose_len = next(s.matches(r.fam, keys, strict=False), (0, []))[0]
    strict_len = next(s.matches(r.fam, keys, strict=True), (0, []))[0]
    return strict_len > 0 and (strict_len >= loose_len or any(i in s.id_turn for i in r.ids))


def by_history(s: Threads, r: Request, strict: bool) -> tuple[Link | None, bool]:
    """The turn whose history this request extends, longest match first; with whether the
    request is exactly an earlier request again (``repeat``: only a live turn may take it)."""
    keys = r.keys
    n = len(keys.key)
    repeat = False
    owner: Registered | None = None  # the exact request's turn, when it carries tool-call ids
    for length, regs in s.matches(r.fam, keys, strict=strict):
        if length == n:  # (the longest match comes first: this is the first round, if any)
            link, regs, owner, repeat = _same_request(s, r, regs, n, strict)
            if link is not None:
                return link, repeat
        if repeat:
            if owner is not None and keys.strict[length - 1] == keys.loose[length - 1]:
                break  # a prefix without the ids no longer says whose request this is
            regs = [g for g in regs if s.live(g)]
            if not regs:
                continue
        return _extends(s, r, regs), repeat
    if owner is not None and not s.live(owner):
        # The same request, tool-call ids included, as a turn of a conversation that has
        # since gone on, and no conversation waits where those ids lead: that conversation
        # went back to that point (its history rewritten). Exact ids win over a shorter,
        # id-less prefix another conversation shares.
        latest = s.last_of_reg(owner)
        return describe(s, r, owner.conversation, latest, "rewritten"), repeat
    return None, repeat


def _same_request(
    s: Threads, r: Request, regs: list[Registered], n: int, strict: bool
) -> tuple[Link | None, list[Registered], Registered | None, bool]:
    """The request is exactly a registered history (``n`` messages): its link when that
    decides it (a retry, or another agent's side call); else the registrations left to
    extend, the exact request's turn when tool-call ids name it, and whether it repeats an
    earlier request."""
    again = [g for g in regs[-64:] if not g.with_echo]
    if not again:
        return None, regs, None, False
    retry = _retry_of(s, r, again, n)
    if retry is not None:
        return retry, regs, None, False
    regs = [g for g in regs if g.with_echo]
    if not regs and all(other_agent(r, s.turns[g.turn]) for g in again):
        return _another_agent_again(s, r, again), regs, None, False
    keys = r.keys
    owner = choose(s, r, again)[0] if strict and keys.strict[n - 1] != keys.loose[n - 1] else None
    # Otherwise the same history as another conversation's request: a parallel agent one
    # turn behind (it continues a turn still waiting), or the agent started over (a new
    # run with the same opening).
    return None, regs, owner, True


def _another_agent_again(s: Threads, r: Request, again: list[Registered]) -> Link:
    """Another agent sent exactly what a turn sent: an agent a pending call handed the
    question to (an agent used as a tool), else a title call on the first message: a
    side call over that history, branched from the turn."""
    tool_of = agent_tool(s, r)
    if tool_of is not None:
        return Link(s.new_conversation(), None, "start", parent=tool_of, branch="agent_tool")
    best, _ = choose(s, r, again)
    latest = s.last_of_reg(best)
    if handed_to(r, s.turns[latest]):
        return Link(s.new_conversation(), None, "start", parent=latest, branch="handoff")
    return Link(s.new_conversation(), None, "start", parent=best.turn, branch="side_call")


def _retry_of(s: Threads, r: Request, again: list[Registered], n: int) -> Link | None:
    """Exactly an earlier request again: a retry when that was the conversation's latest
    attempt and it failed."""
    failed = [
        g for g in again if s.turns[g.turn].failed and s.live(g) and retried(r, s.turns[g.turn])
    ]
    if not failed:
        return None
    best, tied = choose(s, r, failed)
    if not rank(s, r, best.turn, True)[0]:
        return None
    return Link(
        best.conversation,
        best.turn,
        "retry",
        kept=n,
        echoed=None,
        ambiguous=tied if tied > 1 else 0,
    )


def retried(r: Request, t: TurnInfo) -> bool:
    """This request, the same as the failed turn ``t``'s, is its retry, not another run
    sending the same request: the client's retry counter says so (above 0), or it came within
    :data:`RETRY_WINDOW` of the failure. A counter of 0 (the SDK's first attempt) with no
    clock, or a longer wait, is a new start."""
    a = r.attempt
    if a.retries:
        return True
    if a.sent is not None and t.ended is not None:
        return a.sent - t.ended <= RETRY_WINDOW
    return a.retries is None


def _extends(s: Threads, r: Request, regs: list[Registered]) -> Link:
    """The request goes on from the best of the turns whose history it extends."""
    best, tied = choose(s, r, regs)
    prev_info = s.turns[best.turn]
    r.extended = best if best.with_echo else None
    if receives_answer(r, best, prev_info):
        # Another agent of a group chat: it got the turn's answer as input of its own.
        return Link(s.new_conversation(), None, "start", parent=best.turn, branch="group_chat")
    heard = hears_final_answer(s, r, best, r.keys)
    if heard is not None:
        return Link(s.new_conversation(), None, "start", parent=heard, branch="group_chat")
    if r.compacts or compaction(r, prev_info):
        # The agent asked for a summary of its history, every tool withdrawn (Codex's local
        # compaction): a side call; the summary comes back in the conversation's next request.
        return Link(s.new_conversation(), None, "start", parent=best.turn, branch="side_call")
    back = handed_back(s, r, best)
    if back is not None:
        # The agent that handed the run over goes on from its transfer with the handed loop's
        # last answer alone: that loop was the other agent's own conversation (re-read now).
        before, first, last = back
        p = s.turns[before]
        return Link(
            p.conversation, before, "extends", kept=p.length, echoed=True, rehome=(first, last)
        )
    if (
        other_agent(r, prev_info)
        and not hands_over(r, prev_info)
        and not (s.live(best) and hands_back(s, r, prev_info))
    ):
        # Another agent (another system prompt and other tools) over this history: the agent
        # a pending transfer call named (a handoff), else a summary, compaction or title call.
        # Its own conversation, branched here.
        latest = s.last_of_reg(best)
        if handed_to(r, s.turns[latest]):
            return Link(s.new_conversation(), None, "start", parent=latest, branch="handoff")
        return Link(s.new_conversation(), None, "start", parent=best.turn, branch="side_call")
    # Compared with the conversation's latest turn, not the older turn it matched best: a
    # history that extends an earlier turn has dropped or rewritten what came after it.
    latest = s.last_of_reg(best)
    if latest != best.turn and few_shot_again(s, r, latest):
        root = s.sibling_root.get(best.conversation, latest)
        return Link(s.new_conversation(), None, "start", parent=root, branch="sibling")
    known = best.length - best.with_echo if latest == best.turn else 0
    link = describe(s, r, best.conversation, latest, "extends", known)
    if forks_running_calls(r, s.turns[latest], link):
        used = summary_used(s, r)
        if used is not None and used[0] == latest:
            # Not a question over the running calls: the conversation's compaction used (its
            # summary in place of the calls and results; Codex keeps the opening and the task).
            link.summary_of, link.summary_at = used[1], used[2]
            link.summary_answers = s.turns[used[1]].answers
            return link
        return Link(s.new_conversation(), None, "start", parent=latest, branch="side_call")
    if not r.answer_calls and asks_compaction(r, s.turns[latest], link):
        # The conversation's history, its answer left out, asked for a summary (Claude Code's
        # /compact): a compaction side call; the summary comes back in its next request. Told
        # from a question merged into the last message (an edit, the answer dropped) by its
        # answer: a summariser answers in text, the loop going on calls a tool.
        side = Link(s.new_conversation(), None, "start", parent=latest, branch="side_call")
        side.in_place = link
        return side
    rejoins(s, r, link)
    link.ambiguous = tied if tied > 1 else 0
    return link


def _registered_in(s: Threads, r: Request, tid: int, n: int, conv: str) -> None:
    """Turn ``tid``'s registered histories (its request of ``n`` messages, and with its answer:
    this request's first ``n`` and ``n + 1``, which extends it with the answer) name ``conv``,
    the conversation it joined, so a later request that extends them finds it there."""
    keys = r.keys
    for kind, rolling in (("l", keys.loose), ("s", keys.strict)):
        for h in rolling[n - 1 : n + 1]:
            for g in s.prefix.get(hash((r.fam, KIND[kind], h))) or ():
                if g.turn == tid:
                    g.conversation = conv


def merged_first(s: Threads, r: Request) -> Link | None:
    """A one-message request that is a recent conversation's latest one-message request with
    text parts appended to that message and its answer left out, answered in text: asked in
    place over that turn (:func:`~._agents.asks_compaction`; no registered prefix finds it, the
    one message having changed). Looks at the :data:`~._words.RECENT` conversations only."""
    if len(r.messages) != 1 or r.answer_calls:
        return None
    for conv, (tid, _) in reversed(s.recent.items()):
        t = s.turns[tid]
        if (
            t.length != 1
            or s.last_of.get(conv) != tid
            or (t.system, t.tools) != (r.system, r.tools)
        ):
            continue
        link = describe(s, r, conv, tid, "extends")
        if asks_compaction(r, t, link):
            side = Link(s.new_conversation(), None, "start", parent=tid, branch="side_call")
            side.in_place = link
            return side
    return None


def rejoins(s: Threads, r: Request, link: Link) -> None:
    """The request goes on from a side call asked in place (:func:`~._agents.asks_compaction`)
    with that call's text answer as the assistant message right after its merged message, under
    the same system prompt and tools: the question merged into the last message was its parent
    conversation's next turn (langchain-anthropic's ``_merge_messages``, LiteLLM's merged user
    messages; a summariser's answer comes back as a summary in place of the history instead).
    The side call's turn joins that conversation, once, while its parent turn is still that
    conversation's latest and its own conversation the run's newest (the analyser moves it:
    :func:`~cassettes.analysis._rehome.rejoin`); ``link`` then names the conversation."""
    tid = link.previous
    if tid is None or link.how != "extends" or not link.echoed:
        return
    alt = s.in_place.get(tid)
    if alt is None or alt.previous is None:
        return
    t, p = s.turns[tid], s.turns[alt.previous]
    side, conv = t.conversation, p.conversation
    if (
        s.last_of.get(side) != tid
        or side != f"c{s.count}"
        or s.last_of.get(conv) != alt.previous
        or t.echo_ids
        or t.echo_names
        or (r.system, r.tools) != (t.system, t.tools)
        or (p.system, p.tools) != (t.system, t.tools)
    ):
        return
    del s.in_place[tid]
    _registered_in(s, r, tid, t.length, conv)
    s.supersede(conv, tid, t)
    del s.last_of[side]
    t.conversation, t.opens = conv, False
    s.recent.pop(side, None)
    s.seen.pop(tid, None)
    for found in itertools.islice(reversed(s.summaries.values()), 4):
        if found[1] == tid:  # its answer is the conversation's own now, not a side call's
            found[0] = tid
    link.conversation = conv
    link.rejoined = (tid, side, alt)


def summary_used(s: Threads, r: Request) -> tuple[int, int, int] | None:
    """The latest turn of the conversation a compaction summarised, when this request's opening
    carries the compaction's answer (word for word, whatever its client wrapped it in): a side
    call's answer over that conversation, or the conversation's own latest answer when its agent
    was asked for the summary; with the turn that answered it and the message that carries it."""
    if not s.summaries:
        return None
    for i, m in enumerate(r.messages[:SCAN_OPENING]):  # a compaction item sent back
        for token in compactions(m.parts):
            found = s.summaries.get(token)
            if found is not None:
                latest = s.last_of.get(s.turns[found[0]].conversation)
                if latest is not None and not other_agent(r, s.turns[latest]):
                    return latest, found[1], i
    hay, said = _opening_text(r, assistant=False), _opening_text(r, assistant=True)
    apart, own = _system_apart(r), hay
    hay = f"{apart} {hay}" if apart else hay
    if len(hay) < MIN_SUMMARY and len(said) < MIN_SUMMARY:
        return None
    for text, (target, by) in itertools.islice(reversed(s.summaries.items()), SCAN_PROMPTS):
        # A side call's answer may come back as a model message (Google ADK puts the
        # compaction's answer in place of the events, role ``model``); a conversation's own
        # answer there is its echo, not a summary.
        if text in hay or (target != by and text in said):
            if target == by and (s.turns[by].opens or s.turns[by].system != r.system):
                # An answer of the conversation's own, quoted under another system prompt:
                # another agent handed it (a guardrail, an evaluator, the next task's agent),
                # not a summary (:func:`~._opening.start_link` says the hand-off); nor is a
                # conversation's first answer one (a chain of calls is two conversations).
                continue
            conv = s.turns[target].conversation
            latest = s.last_of.get(conv)
            if latest is None or (target != by and resummarising(r, s.turns[by], s.turns[latest])):
                continue  # (the summariser again, given its own summary: LlamaIndex's buffer)
            if not other_agent(r, s.turns[latest]):
                apart_only = text in apart and text not in own and text not in said
                return latest, by, IN_SYSTEM if apart_only else _carrying(r, text)
    return None


def resummarising(r: Request, writer: TurnInfo, latest: TurnInfo) -> bool:
    """The request is the agent that wrote a summary (the same system prompt and tools), not
    the summarised conversation's (another system prompt or tool set than its latest turn's): a
    summariser given its own earlier summary. (Claude Code's compaction asks under the agent's
    own prompt and tools: its summary then sent back is the conversation going on.)"""
    same = writer.system == r.system and writer.tools == r.tools
    return same and (latest.system != r.system or latest.tools != r.tools)


def _system_apart(r: Request) -> str:
    """The system prompt's texts where the wire sends it apart from the messages (Anthropic
    ``system``, Responses ``instructions``, Gemini's system instruction; Chat's system messages
    are among the messages), normalised: where a summary may land (Agno's session summary)."""
    if any(_ROLE.get(m.role, m.role) == "system" for m in r.messages[:SCAN_OPENING]):
        return ""
    return system_words(r.system_parts)


def _carrying(r: Request, text: str) -> int:
    """The first opening message whose text holds ``text`` (else the last opening one)."""
    opening = r.messages[:SCAN_OPENING]
    for i, m in enumerate(opening):
        said = " ".join(p.text for p in m.parts if p.kind == "text" and p.text)
        if text in norm_prompt(said[:MAX_HAY]):
            return i
    return len(opening) - 1


def _opening_text(r: Request, assistant: bool) -> str:
    """The texts of the request's opening messages (bounded, normalised): the model's
    (``assistant``) or everyone else's."""
    return norm_prompt(
        " ".join(
            p.text
            for m in r.messages[:SCAN_OPENING]
            if (_ROLE.get(m.role, m.role) == "assistant") == assistant
            for p in m.parts
            if p.kind == "text" and p.text
        )[:MAX_HAY]
    )


def discarded(s: Threads, r: Request, strict: bool) -> Link | None:
    """Exactly the request of a conversation's latest turn again, though that turn was
    answered: the client threw the answer away and asked again (``retry``; the C layer says
    the answer was discarded). Only past a conversation's first turn (an identical first
    request is a new agent starting alike) and when one conversation alone sent it."""
    n = len(r.keys.key)
    length, regs = next(s.matches(r.fam, r.keys, strict=strict), (0, []))
    if length != n:
        return None
    live = [g for g in regs[-MAX_PER_PREFIX:] if not g.with_echo and s.live(g)]
    if len({g.conversation for g in live}) != 1:
        return None
    t = s.turns[live[-1].turn]
    # A conversation's first request again is another agent starting alike, unless the first
    # answer's call was cut by the token cap: then it is that call asked again (a forced-tool
    # retry, a fallback model given the same request).
    if t.failed or (t.opens and not t.cut) or t.system != r.system or t.tools != r.tools:
        return None
    return Link(t.conversation, live[-1].turn, "retry", kept=n, echoed=None)


def describe(s: Threads, r: Request, conv: str, prev: int, how: str, known: int = 0) -> Link:
    """The link to turn ``prev`` of ``conv``: how much of its history the request kept, whether
    it echoed the answer, how much it rewrote."""
    keys = r.keys.key
    p = s.turns[prev]
    pkeys = p.keys.key if p.keys is not None else []
    plen = p.length if p.keys is not None else 0
    n = min(plen, len(keys))
    kept = min(known, n)
    while kept < n and pkeys[kept] == keys[kept]:
        kept += 1
    echoed: bool | None = None
    if kept == plen - 1 and kept < len(keys):
        # Adapters that merge consecutive model-side items into one message (Responses) make
        # the echo continue the previous last message instead of following it.
        now = _part_keys(r.messages[kept].parts)
        last = p.last_parts or []
        at = None if now[: len(last)] == last else split_at(r.messages[kept].parts, last)
        if at is not None or (now[: len(last)] == last and len(now) > len(last)):
            rest = now[len(last) :] if at is None else _part_keys(r.messages[kept].parts[at:])
            return Link(
                conv,
                prev,
                how,
                kept=plen,
                echoed=(rest[: len(p.echo_parts)] == p.echo_parts) if p.echo_parts else None,
            )
    rewritten = plen - kept
    if p.echo_key is not None and kept == plen:
        echoed = len(keys) > kept and keys[kept] == p.echo_key
    if rewritten and how == "extends":
        how = "rewritten"
    return Link(conv, prev, how, kept=kept, echoed=echoed, rewritten=rewritten)


def answered_alike(s: Threads, r: Request, tid: int) -> bool:
    """Turn ``tid``, a conversation's latest, was this agent's and was answered without a
    call: a prompt may be its sibling."""
    t = s.turns[tid]
    return (
        t.keys is not None
        and not t.failed
        and not t.echo_ids
        and not t.echo_names
        and t.system == r.system
        and t.tools == r.tools
    )


def built_like(s: Threads, r: Request, tid: int) -> bool:
    """The request is turn ``tid``'s (a conversation's latest, answered without a call) but for
    its last message, a question where ``tid`` had one too: another prompt built alike."""
    t, key, n = s.turns[tid], r.keys.key, len(r.keys.key)
    last = r.messages[-1] if r.messages else None
    return (
        last is not None
        and _ROLE.get(last.role, last.role) == "user"
        and all(p.tool_result is None for p in last.parts)
        and answered_alike(s, r, tid)
        and t.length == n
        and not any(k[0] == "r" for k in t.last_parts or ())
        and t.keys.key[: n - 1] == key[: n - 1]  # type: ignore[union-attr]
    )


def few_shot_again(s: Threads, r: Request, tid: int) -> bool:
    """A prompt optimiser's few-shot prompt built like the latest request ``tid`` of a
    conversation but for its last question, where that request went on from an earlier one
    (DSPy 2.5 re-sends a bootstrapped demo exactly as it was asked and answered, so the first
    compiled prompt extends that demo's own turn): written in DSPy's fields, demo pairs and a
    question. A sibling of ``tid``, not ``tid``'s history rewritten."""
    return (
        s.latest(tid)
        and demo_pairs(r.messages, start_len(r.messages))
        and fields_prompt(r.messages)
        and built_like(s, r, tid)
    )
