"""Rules for a request that extends no registered history: a conversation that shares its opening
(its history rewritten), a sibling prompt, the next step of a re-rendered trajectory, a history
that opens with a conversation's latest answer, else a new conversation — a sub-agent's or a side
call's when its first words carry a pending call's prompt or quote its arguments."""

from __future__ import annotations

import itertools

import orjson

from .._message_keys import _ROLE, stable
from .._trajectory import Fields, follows
from ._agents import asks_own, rank
from ._data import MAX_PER_PREFIX, Link, Request, Threads, TurnInfo
from ._history import answered_alike, built_like, describe, resummarising, summary_used
from ._words import (
    MAX_HAY,
    MIN_CARRIED,
    MIN_SUMMARY,
    SCAN_ANSWERS,
    SCAN_OPENING,
    SCAN_PROMPTS,
    Rendered,
    demo_pairs,
    fields_prompt,
    norm_prompt,
    quoted_only,
    rendered_texts,
    short,
    start_len,
    system_words,
)


def by_opening(s: Threads, r: Request) -> Link:
    """No earlier history is extended: the conversation the wire's evidence of managed context
    names (:func:`managed`), else a conversation that begins with the same opening words has
    rewritten its history — unless another agent opens the same way."""
    messages = r.messages
    start = start_len(messages)
    cands = s.by_start.get(hash((r.fam, r.keys.key[start - 1])))
    if cands:
        sib = sibling(s, r)
        if sib is not None:
            return sib
    found = re_rendered(s, r) or managed(s, r, start) or after_overflow(s, r) or summarised(s, r)
    if found is not None:
        return found
    if not cands:
        return start_link(s, r)
    best_tid = max(cands, key=lambda t: (rank(s, r, t, s.latest(t)), t))
    info = s.turns[best_tid]
    conv = info.conversation
    latest = s.last_of[conv]
    other_agent = info.system != r.system and info.tools != r.tools
    if other_agent or (s.turns[latest].system != r.system and len(messages) <= start):
        # The same opening words under another system prompt and nothing of the
        # conversation after them: another agent (a sub-agent, a title call).
        return start_link(s, r)
    return describe(s, r, conv, latest, "rewritten")


def head_key(r: Request, f: Fields) -> int:
    """A re-rendered trajectory's key: its family, agent and first input field."""
    return stable(orjson.dumps([r.family, r.system, r.tools, f.head[0]]))


def re_rendered(s: Threads, r: Request) -> Link | None:
    """The next step of a re-rendered trajectory (:mod:`..trajectory`): the same agent and
    question, every step field its conversation's latest request had and the one step more
    that request's answer asked for. A step field rendered otherwise than it was sent (an
    observation the client rewrote) is the history rewritten in place."""
    now = r.fields
    if now is None or not now.head:
        return None
    tid = s.by_head.get(head_key(r, now))
    if tid is None:
        return None
    t = s.turns[tid]
    if s.last_of.get(t.conversation) != tid or t.fields is None or t.failed or t.step is None:
        return None
    found = follows(t.fields, now, t.step)
    if found is None or not found[0]:
        return None  # not the step the answer asked for: another run of the program
    if found[1]:
        return Link(t.conversation, tid, "rewritten", kept=t.length - 1, echoed=True, rewritten=1)
    return Link(t.conversation, tid, "extends", kept=t.length, echoed=True)


def managed(s: Threads, r: Request, start: int) -> Link | None:
    """A history its client managed (trimmed, summarised, compacted) that extends no registered
    history, linked by the strongest evidence the wire holds, in order: the results of a
    conversation's latest calls (their ids), that conversation's latest answer carried anywhere
    in it, a summary that is a compaction's answer (:data:`~._data.Threads.summaries`). The C
    layer says what the client dropped and what replaced it."""
    summary = summary_used(s, r)
    tid = _calls_answered(s, r)
    if tid is None:
        tid = _answer_carried(s, r, start)
    if summary is not None and (
        tid is None or s.turns[tid].conversation == s.turns[summary[0]].conversation
    ):
        # (the summary names its conversation's latest turn; calls answered of an earlier turn
        # of it are what the client kept: Agno keeps the last run whole after its summary)
        tid = summary[0]
    if tid is None:
        return None
    t = s.turns[tid]
    if _results_only(r):
        # Nothing but the results of the turn's calls, not even the calls: the API holds the
        # history (OpenAI's Conversations API, ``conversation``: the request sends its new items
        # only), as with a previous response's id. Nothing was dropped.
        return Link(t.conversation, tid, "previous_response_id", kept=0, echoed=None)
    link = describe(s, r, t.conversation, tid, "rewritten")
    if link.rewritten <= 0:
        return None
    if summary is not None and summary[0] == tid:
        link.summary_of, link.summary_at = summary[1], summary[2]
        link.summary_answers = s.turns[summary[1]].answers
    link.echo_at = _echo_at(s, r, tid)
    if link.echo_at is not None:
        link.echoed = True
        if link.echo_at < link.kept:
            # The answer's echo inside what reads as the kept prefix: messages equal to
            # earlier ones (a repeated call, an equal result); what follows the echo is the
            # turn's own, what precedes it is kept.
            link.kept = link.echo_at
            link.rewritten = (s.turns[tid].length) - link.kept
    return link


def after_overflow(s: Threads, r: Request) -> Link | None:
    """The request after one the API refused as too long for the model's context window
    (:attr:`~._data.TurnInfo.overflow`), by the same agent, that keeps an in-order part of
    that request's messages, its last one (the latest input) among them, with at most new
    messages before the first it kept (a summary in place of the head): the client managed
    the history the error asked it to (Strands' sliding window and summarising manager, CrewAI's
    ``respect_context_window``). Linked to the refused turn; the C layer says what went."""
    key = r.keys.key
    for tid in reversed(s.overflows):
        t = s.turns[tid]
        if not s.latest(tid) or t.keys is None or t.system != r.system or t.tools != r.tools:
            continue
        if _keeps_part(r, t.keys.key[: t.length]):
            link = describe(s, r, t.conversation, tid, "rewritten")
            return link if link.rewritten > 0 and len(key) <= t.length else None
    return None


def _keeps_part(r: Request, before: list[int]) -> bool:
    """``r``'s messages are ``before``'s in order, its last one last, with at most new
    non-system messages ahead of the first kept one after the system messages."""
    key = r.keys.key
    if not key or not before or key[-1] != before[-1]:
        return False
    j, kept = 0, False
    for i, k in enumerate(key):
        at = next((x for x in range(j, len(before)) if before[x] == k), None)
        if at is None:
            if kept or _ROLE.get(r.messages[i].role, r.messages[i].role) == "system":
                return False  # a new message after one kept: not a head replaced
            continue
        kept = kept or _ROLE.get(r.messages[i].role, r.messages[i].role) != "system"
        j = at + 1
    return kept


def summarised(s: Threads, r: Request) -> Link | None:
    """Another agent (another system prompt and tool set) carrying the results of a
    conversation's latest calls (by id) and asking something of its own after them (a user
    text): a side call of that turn (langmem's ``SummarizationNode``: the agent's messages
    without its system prompt, results included, then its own request); its answer may come
    back in the conversation's next request. Read by the ids and the shape, never the words."""
    if not asks_own(r):
        return None
    for m in reversed(r.messages[-8:]):
        for p in m.parts:
            res = p.tool_result
            tid = s.id_turn.get(res.call_id) if res is not None and res.call_id else None
            if tid is not None and s.latest(tid) and not s.turns[tid].failed:
                return Link(s.new_conversation(), None, "start", parent=tid, branch="side_call")
    return None


def _calls_answered(s: Threads, r: Request) -> int | None:
    """The latest turn of a conversation whose calls this request's results answer (by their
    ids: unique per call on the APIs that give them), made by this agent."""
    for m in reversed(r.messages[-8:]):
        for p in m.parts:
            res = p.tool_result
            tid = s.id_turn.get(res.call_id) if res is not None and res.call_id else None
            if tid is not None:
                t = s.turns[tid]
                return tid if not t.failed and not _other(r, t) else None
    return None


def _results_only(r: Request) -> bool:
    """The request's messages after its system ones are tool results and nothing else."""
    rest = r.messages[start_len(r.messages) - 1 :]
    return (
        bool(rest)
        and all(p.tool_result is not None for m in rest for p in m.parts)
        and all(m.parts for m in rest)
    )


def _answer_carried(s: Threads, r: Request, start: int) -> int | None:
    """The latest turn of a conversation whose answer this request carries as a model message
    (right after its system messages, or anywhere after them in an agent's loop: the history
    before it dropped or summarised), made under the same system prompt."""
    key = r.keys.key
    # Past the opening, only in an agent's loop (calls or results in it): a prompt of demo
    # questions and answers carries earlier answers as its demos (a prompt optimiser's few-shot
    # prompts, DSPy's bootstrapped demos), not a trimmed history.
    loop = any(
        p.tool_call is not None or p.tool_result is not None
        for m in r.messages[-SCAN_ANSWERS:]
        for p in m.parts
    )
    at = (
        range(len(key) - 1, max(start - 2, len(key) - 1 - SCAN_ANSWERS), -1)
        if loop
        else range(start - 1, start)
    )
    for i in at:
        m = r.messages[i]
        if _ROLE.get(m.role, m.role) not in ("assistant", "model"):
            continue
        tid = s.by_answer.get(hash((r.fam, key[i])))
        if tid is None:
            continue
        t = s.turns[tid]
        if s.latest(tid) and not t.failed and t.system == r.system:
            return tid
    return None


def _other(r: Request, t: TurnInfo) -> bool:
    return t.system != r.system and t.tools != r.tools


def _echo_at(s: Threads, r: Request, tid: int) -> int | None:
    """Where in the request turn ``tid``'s answer is echoed (``None``: not carried)."""
    echo = s.turns[tid].echo_key
    if echo is None:
        return None
    key = r.keys.key
    for i in range(len(key) - 1, max(-1, len(key) - 1 - SCAN_ANSWERS), -1):
        if key[i] == echo:
            return i
    return None


def start_link(s: Threads, r: Request) -> Link:
    """A new conversation; a sub-agent's when its first user words are a pending call's
    prompt."""
    link = Link(s.new_conversation(), None, "start")
    fed = rendered(s, r)
    if fed is not None:
        link.parent, link.branch, link.rendered = fed, "side_call", True
        return link
    again = resummarised(s, r)
    if again is not None:
        link.parent, link.branch = again[0], "side_call"
        link.summary_of = again[1]
        return link
    if not s.prompts and not s.quotes and not s.summaries:
        return link
    # The first few messages after the system ones: a sub-agent's task may follow a context
    # message of its own (Codex: environment context, then the parent's agent_message).
    opening = [m for m in r.messages[:SCAN_OPENING] if _ROLE.get(m.role, m.role) != "system"][:4]
    for m in opening:
        if _ROLE.get(m.role, m.role) != "user":
            continue
        text = norm_prompt(" ".join(p.text for p in m.parts if p.kind == "text" and p.text))
        found = _short_prompted_by(s, r, text) if short(text) else _prompted_by(s, text)
        found = found or _answer_quoted(s, r, text)
        if found is not None:
            link.parent, link.branch = found
            break
    return link


def rendered(s: Threads, r: Request) -> int | None:
    """The latest turn of a recent conversation whose history this new conversation's user
    words or system prompt carry as rendered text: the texts of that turn's messages and its
    answer (:func:`_carried`), word for word and in order — a summariser fed the history as one
    text (Google ADK's events compaction, CrewAI's ``summarize_messages`` in the user's words;
    Agno's session summaries in the system prompt): a side call of that turn, whose answer the
    conversation's next request carries."""
    if not s.recent:
        return None
    hay = _words_of(r)
    if len(hay) < MIN_SUMMARY:
        return None
    for conv, (tid, messages) in reversed(list(s.recent.items())):
        if not s.latest(tid):
            continue
        texts = messages if isinstance(messages, tuple) else rendered_texts(messages)
        s.recent[conv] = (tid, texts)  # (read once; what a continued state keeps)
        if _carried(hay, texts):
            return tid
    return None


def resummarised(s: Threads, r: Request) -> tuple[int, int] | None:
    """A summariser given its own earlier summaries of a conversation (Haystack's
    ``SummarizationCompactor`` folds its ``[conversation_summary]`` entries into a new one;
    LlamaIndex's summary buffer re-summarises its summary): a new conversation under the agent
    (system prompt and tools) of a side call whose answer, that conversation's summary, its
    words carry word for word — a side call of that conversation's latest turn; with the side
    call whose summary it carries (its answer used: :func:`~.._state.summary_carried`)."""
    if not s.summaries:
        return None
    hay: str | None = None
    for text, (target, by) in itertools.islice(reversed(s.summaries.items()), SCAN_PROMPTS):
        if target == by or text.startswith("\0"):
            continue
        latest = s.last_of.get(s.turns[target].conversation)
        if latest is None or not resummarising(r, s.turns[by], s.turns[latest]):
            continue
        hay = _words_of(r) if hay is None else hay
        if text in hay:
            return latest, by
    return None


def _words_of(r: Request) -> str:
    """The request's system prompt and user texts (normalised, bounded): where a summariser is
    given a history as text."""
    said = " ".join(
        p.text
        for m in r.messages[:SCAN_OPENING]
        if _ROLE.get(m.role, m.role) == "user"
        for p in m.parts
        if p.kind == "text" and p.text
    )[:MAX_HAY]
    return (system_words(r.system_parts) + " " + norm_prompt(said)).strip()


def _carried(hay: str, texts: Rendered) -> bool:
    """``hay`` carries ``texts`` in order (:func:`~._words.rendered_texts`; the last of them the
    turn's answer): :data:`~._words.MIN_CARRIED` or more, a plain user message's among them; or
    the conversation whole from its first question to its last word (a question and its answer:
    Agno summarises a session after its first run). Another agent quoting a later question and
    its answer (a judge, a demo) carries no rendered history; one quoting the whole of a short
    conversation reads so until the run shows its answer never came back as a summary
    (``settle_rendered``: a hand-off)."""
    at, found, user, first, last = 0, 0, False, False, False
    asked = next((k for k, (plain_user, said) in enumerate(texts) if plain_user and said), None)
    for k, (plain_user, said) in enumerate(texts):
        for text in said:
            i = hay.find(text, at)
            if i < 0:
                continue
            at, found = i + len(text), found + 1
            user = user or plain_user
            first, last = first or k == asked, k == len(texts) - 1
    return user and (found >= MIN_CARRIED or (found >= 2 and first and last))


def _answer_quoted(s: Threads, r: Request, text: str) -> tuple[int, str] | None:
    """The turn whose answer (a conversation's own, not a side call's) this new conversation's
    first user words quote whole, made under another system prompt: the answer handed to
    another agent (a guardrail, an evaluator, the next task's agent) — a hand-off, never a
    summary."""
    for said, (target, by) in itertools.islice(reversed(s.summaries.items()), SCAN_PROMPTS):
        if target == by and not said.startswith("\0") and said in text:
            if s.turns[by].system != r.system:
                return by, "handoff"
    return None


def _short_prompted_by(s: Threads, r: Request, text: str) -> tuple[int, str] | None:
    """A short first message (``hi``) is a sub-agent's only by the call that started it: the
    whole of a call's argument, of its conversation's latest turn (the call still running),
    made by another agent (another system prompt or tool set). Never looked for inside other
    words: a short text matches by accident there."""
    tid = s.prompts.get(text) if text else None
    if tid is None or not s.latest(tid):
        return None
    t = s.turns[tid]
    return (tid, "sub_agent") if t.system != r.system or t.tools != r.tools else None


def _prompted_by(s: Threads, text: str) -> tuple[int, str] | None:
    """The turn whose pending call's prompt (or quoted arguments) a new conversation's first
    words carry, and what that makes the conversation: ``sub_agent`` or ``side_call``."""
    tid = s.prompts.get(text)
    if tid is not None:
        return tid, "sub_agent"
    # A prompt the sub-agent's client wrapped in more words: the most recent few only (a run
    # of many new conversations must not scan every prompt each time).
    recent = (x for x in reversed(s.prompts.items()) if not short(x[0]))
    for prompt, t in itertools.islice(recent, SCAN_PROMPTS):
        if prompt in text:
            return t, "side_call" if quoted_only(text, prompt) else "sub_agent"
    # A request that quotes a recent call's arguments whole (Claude Code's tool-use summary:
    # ``Input: {"command":"ls"}``), however short their strings: about that call.
    bare = "".join(text.split())
    tid = next(
        (t for q, t in itertools.islice(reversed(s.quotes.items()), SCAN_PROMPTS) if q in bare),
        None,
    )
    return (tid, "side_call") if tid is not None else None


def sibling(s: Threads, r: Request) -> Link | None:
    """An independent prompt that shares a conversation's opening (a prompt optimiser's
    few-shot prompts: system, demo questions and answers, a question of its own), after that
    conversation's answer called no tool: its own conversation, a sibling of the first prompt
    of the group (no history was rewritten). Either built like a conversation's latest request
    but for its last question, or a prompt of demo pairs that does not go on from it
    (:func:`_goes_on`)."""
    messages, key = r.messages, r.keys.key
    start = start_len(messages)
    n = len(messages)
    last = messages[-1]
    if (
        n < start + 2  # (nothing shared beyond the opening: not a few-shot prompt)
        or _ROLE.get(last.role, last.role) != "user"
        or any(p.tool_result is not None for p in last.parts)
    ):
        return None
    cands = s.by_start.get(hash((r.fam, key[start - 1])))
    if not cands:
        return None
    latest = [t for t in cands[-MAX_PER_PREFIX:] if s.latest(t) and answered_alike(s, r, t)]
    if not latest:
        return None
    # Built like a conversation's latest request: the same messages but the last.
    same = [t for t in latest if built_like(s, r, t)]
    if not same:
        tid = max(latest, key=lambda t: (rank(s, r, t, True), t))
        if not demo_pairs(messages, start) or _goes_on(r, s.turns[tid]):
            return None
    else:
        tid = max(same, key=lambda t: (rank(s, r, t, True), t))
    root = s.sibling_root.get(s.turns[tid].conversation, tid)
    return Link(s.new_conversation(), None, "start", parent=root, branch="sibling")


def _goes_on(r: Request, t: TurnInfo) -> bool:
    """The request may go on from ``t``: its latest request's question is in it, followed by
    more; or it is that request, its last question changed, then ``t``'s answer. A rewritten
    history, not an independent prompt (the same question asked last under other demos is).
    In prompts written in DSPy's fields the second shape is an optimiser's bootstrapped demo:
    a question it asked, re-rendered as a demo, and the answer it got (DSPy's conversation
    history re-sends its questions as they were asked: the first shape)."""
    assert t.keys is not None
    key = r.keys.key
    if t.keys.key[t.length - 1] in key[:-1]:
        return True
    if fields_prompt(r.messages):
        return False
    m = t.length
    return len(key) > m and key[: m - 1] == t.keys.key[: m - 1] and key[m] == t.echo_key
