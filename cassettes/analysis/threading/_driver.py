"""The driver: reads a request, asks the rules in order for its link, and records the turn in the
threads' indexes for later requests to find (:class:`Threader`)."""

from __future__ import annotations

import itertools

from ...models import Message, NormalisedResponse, Part
from .._message_keys import _NO_NAMES, MessageKeys, _call_ids, _call_names
from .._trajectory import step_of
from ..spill import KEEP, Spill
from ._agents import handed_from
from ._data import (
    CLASSES,
    Attempt,
    Link,
    Registered,
    Request,
    Threads,
    TurnInfo,
    TurnInfos,
    read_request,
)
from ._evidence import Remembered, carried, goes_on, moved_out, register
from ._history import by_history, describe, discarded, merged_first, summary_used, use_strict
from ._opening import by_opening, head_key, managed, sibling, start_link
from ._words import (
    MAX_PROMPT,
    MAX_PROMPTS,
    MIN_SUMMARY,
    RECENT,
    RENDERED_MESSAGES,
    SCAN_PROMPTS,
    answer_fields,
    compactions,
    handoff_targets,
    norm_prompt,
    prompt_strings,
    quote_key,
    seen_text,
    start_len,
    summary_body,
)


class Threader:
    """Assigns each generation round trip to a conversation. Feed turns in recording order."""

    def __init__(self, keep: int = KEEP) -> None:
        #: Where the threads' tables keep what does not fit in memory.
        self._spill = Spill(CLASSES)
        #: What threading knows (:class:`~._data.Threads`): the turns and their indexes.
        self.threads = Threads(self._spill, keep)
        #: The tokens of the messages of the request threaded last (:func:`~._evidence.carried`).
        self._tokens = Remembered()
        #: The keys of the messages of the request threaded last and the one before, and their
        #: answers (read by the analysis of the same turns too: :attr:`.TurnContext.keys`).
        self.keys = MessageKeys()

    @property
    def turns(self) -> TurnInfos:
        """Every turn threaded so far, by turn id (spilled to disk past :data:`~.spill.KEEP`)."""
        return self.threads.turns

    def close(self) -> None:
        """Remove the file the tables spilled to (if any)."""
        self._spill.close()

    def add(
        self,
        family: str,
        messages: list[Message],
        response: NormalisedResponse | None,
        failed: bool,
        label: str | None = None,
        previous_response_id: str | None = None,
        reuse: tuple[int, int] | None = None,
        system: list[Part] | None = None,
        tools: list[str] | None = None,
        attempt: Attempt | None = None,
        compacts: bool = False,
        overflow: bool = False,
        cut: bool = False,
        continuity: frozenset[str] = frozenset(),
    ) -> Link:
        """Thread one request. ``reuse=(turn id, keep)`` says its first ``keep`` messages are that
        earlier turn's (a cassette's history delta): their keys are reused, not recomputed;
        ``attempt`` is what tells a retry from another run sending the same request;
        ``compacts``: the API's compaction endpoint, a side call of the turn it compacts;
        ``overflow``: the API refused the request as longer than the model's context window;
        ``cut``: the answer's tool call was cut by the token cap (finish ``length``);
        ``continuity``: the family's continuity-token keys (:mod:`._evidence`)."""
        s = self.threads
        self.keys.next_request()
        try:
            r = read_request(
                s, family, messages, reuse, system, tools, attempt or Attempt(), self.keys
            )
            r.compacts = compacts
            r.overflow = overflow
            r.cut = cut
            r.answer_calls = response is not None and any(
                p.tool_call is not None for p in response.parts
            )
            r.token_turn = carried(s, messages, continuity, self._tokens)
            link = link_of(s, r, label, previous_response_id)
            if link.summary_of is None and link.how == "extends" and link.previous is not None:
                _summary_beside_history(s, r, link)
            if link.summary_of is not None:
                link.summary_seen = s.seen.get(link.summary_of)
                link.summary_side = s.turns[link.summary_of].conversation != link.conversation
            record(s, r, link, response, failed, label, self.keys)
            if response is not None:
                register(s, response.parts, continuity, len(s.turns) - 1, self._tokens)
            return link
        finally:
            s.trim()


def link_of(s: Threads, r: Request, label: str | None, previous_response_id: str | None) -> Link:
    """The rules in order (docs/threading.md): the label, the previous response's id, the
    longest registered history, the same request again, the opening, a new conversation."""
    if label:
        conv = s.by_label.get(label)
        if conv is None:
            return Link(s.new_conversation(), None, "header")
        return describe(s, r, conv, s.last_of[conv], "header")
    if previous_response_id and previous_response_id in s.by_response:
        tid = s.by_response[previous_response_id]
        if r.compacts:  # a compaction of the history the API holds: a side call of that turn
            return Link(s.new_conversation(), None, "start", parent=tid, branch="side_call")
        return Link(s.turns[tid].conversation, tid, "previous_response_id", kept=0, echoed=None)
    strict = use_strict(s, r)
    link, repeat = by_history(s, r, strict)
    if link is not None:
        return goes_on(s, r, moved_out(s, r, link))
    if repeat:
        # Exactly an earlier request again: a discarded answer asked again, a sibling prompt,
        # or a history managed down to messages equal to that earlier request's (a repeated
        # call with an equal result kept, on a wire without ids): the evidence of management
        # (the latest answer carried, its calls answered) names the conversation.
        again = discarded(s, r, strict) or sibling(s, r) or managed(s, r, start_len(r.messages))
        if again is not None:
            return goes_on(s, r, again)
    if repeat or not r.messages:
        return start_link(s, r)
    return merged_first(s, r) or goes_on(s, r, by_opening(s, r))


def _summary_beside_history(s: Threads, r: Request, link: Link) -> None:
    """A request that goes on with its history whole and a system prompt changed to carry a
    summary of its conversation (Agno puts the session's summary in the next run's system
    prompt and keeps the last run): that summary's writer summarised it (a side call fed the
    history as text stays a side call, :func:`~.._state.summary_carried`); nothing dropped."""
    assert link.previous is not None
    if s.turns[link.previous].system == r.system or not any(
        target != by and s.turns[target].conversation == link.conversation
        for target, by in itertools.islice(reversed(s.summaries.values()), SCAN_PROMPTS)
    ):
        return  # (no side call's summary of this conversation: its words are not read)
    used = summary_used(s, r)
    if used is not None and used[0] == link.previous:
        link.summary_of, link.summary_at = used[1], used[2]


def record(
    s: Threads,
    r: Request,
    link: Link,
    response: NormalisedResponse | None,
    failed: bool,
    label: str | None,
    memo: MessageKeys,
) -> None:
    """Record the threaded turn: its info, and the indexes later requests look it up in (its
    label, response id, histories with and without its answer, trajectory, sibling group)."""
    tid = len(s.turns)
    echo = memo.answer(response)
    echo_keys = memo.keys(echo) if echo is not None else None
    info = _turn_info(s, r, link, response, failed, echo, echo_keys, memo)
    info.handed_from, info.hand_start = handed_from(s, r, link)
    if link.rehome is not None and link.rehomed_to is None:
        # the handed loop's turns are a conversation of their own (the analyser moves them)
        link.rehomed_to = s.new_conversation()
    s.turns.append(info)
    s.supersede(link.conversation, tid, info)
    if label:
        s.by_label[label] = link.conversation
    if info.response_id:
        s.by_response[info.response_id] = tid
    _register_history(s, r, link.conversation, tid)
    if link.in_place is not None:
        s.in_place[tid] = link.in_place
        while len(s.in_place) > RECENT:
            s.in_place.popitem(last=False)
    if link.branch == "side_call":
        s.seen[tid] = seen_text(r.messages)
        while len(s.seen) > SCAN_PROMPTS:
            s.seen.popitem(last=False)
    # the history a summariser may be fed as text next: the request, then its answer
    said = r.messages[-RENDERED_MESSAGES:]
    said = said if echo is None else [*said[1 - RENDERED_MESSAGES :], echo]
    s.recent[link.conversation] = (tid, said)
    s.recent.move_to_end(link.conversation)
    while len(s.recent) > RECENT:
        s.recent.popitem(last=False)
    if r.overflow:
        s.overflows[tid] = None
        while len(s.overflows) > SCAN_PROMPTS:
            s.overflows.popitem(last=False)
    if r.fields is not None and r.fields.head:
        s.by_head[head_key(r, r.fields)] = tid
    if link.branch == "sibling" and link.parent is not None:
        s.sibling_root[link.conversation] = link.parent
    if echo is not None and echo_keys is not None:
        s.by_answer[hash((r.fam, echo_keys[0]))] = tid
        _register_echo(s, r, echo, echo_keys, link.conversation, tid)
        _register_summary(s, echo, link, tid)
    if response is not None:
        _register_compaction(s, response, link, tid)


def _turn_info(
    s: Threads,
    r: Request,
    link: Link,
    response: NormalisedResponse | None,
    failed: bool,
    echo: Message | None,
    echo_keys: tuple[int, int, int] | None,
    memo: MessageKeys,
) -> TurnInfo:
    """What is kept of a threaded turn: its request's keys and shape, and its answer (``echo``)
    as the next request should send it back."""
    messages = r.messages
    return TurnInfo(
        conversation=link.conversation,
        keys=r.keys,
        system=r.system,
        tools=r.tools,
        length=len(messages),
        last_parts=memo.parts(messages[-1]) if messages else [],
        echo_parts=memo.parts(echo) if echo is not None else [],
        echo_key=echo_keys[0] if echo_keys is not None else None,
        echo_ids=frozenset(_call_ids(echo.parts) or _NO_NAMES) if echo is not None else _NO_NAMES,
        echo_names=_call_names(echo)
        if echo is not None and not _call_ids(echo.parts)
        else _NO_NAMES,
        response_id=response.id if response is not None else None,
        failed=failed,
        family=r.family,
        opens=link.previous is None,
        handoff_to=handoff_targets(echo) if echo is not None else _NO_NAMES,
        fields=r.fields,
        step=step_of(" ".join(p.text for p in echo.parts if p.kind == "text" and p.text))
        if r.fields is not None and echo is not None
        else None,
        ended=r.attempt.ended if failed else None,
        answers=_results(messages) if link.branch == "side_call" else _NO_NAMES,
        overflow=r.overflow,
        cut=r.cut,
        previous=link.previous,
        proved=link.echoed is True
        or (
            link.previous is not None
            and r.token_turn is not None
            and s.turns[r.token_turn].conversation == link.conversation
        ),
    )


def _results(messages: list[Message]) -> frozenset[str]:
    """The call ids the results of a request's last messages answer."""
    return frozenset(
        res.call_id
        for m in messages[-8:]
        for p in m.parts[:64]
        if (res := p.tool_result) is not None and res.call_id
    )


def _register_history(s: Threads, r: Request, conversation: str, tid: int) -> None:
    """Register the history sent (loose and strict keys) and its opening, for later requests to
    find."""
    keys, n = r.keys, len(r.messages)
    if not n:
        return
    s.register(r.fam, "l", keys.loose[n - 1], Registered(conversation, tid, n, False))
    if keys.strict[n - 1] != keys.loose[n - 1]:  # a strict lookup reads "l" where they agree
        s.register(r.fam, "s", keys.strict[n - 1], Registered(conversation, tid, n, False))
    start = start_len(r.messages)
    s.add_start(hash((r.fam, keys.key[start - 1])), tid)


def _summarised(link: Link, tid: int) -> int | None:
    """The turn whose conversation this turn's answer would summarise: a side call's parent, or
    the turn itself when it went on from an earlier one of its conversation (``None``: a
    conversation's first answer)."""
    if link.branch == "side_call" and link.parent is not None:
        return link.parent
    return tid if link.previous is not None and link.branch is None else None


def _register_compaction(s: Threads, response: NormalisedResponse, link: Link, tid: int) -> None:
    """An opaque compaction item a side call answered (the Responses API's compaction endpoint:
    not part of the answer's echo) stands for its parent's conversation wherever it is sent
    back: registered whole, looked up whole (:func:`~._history.summary_used`)."""
    if link.branch != "side_call" or link.parent is None:
        return
    for token in compactions(response.parts):
        s.summaries[token] = [link.parent, tid]
        s.summaries.move_to_end(token)
    while len(s.summaries) > MAX_PROMPTS:
        s.summaries.popitem(last=False)


def _register_summary(s: Threads, echo: Message, link: Link, tid: int) -> None:
    """Register a text answer a later request may carry: as its conversation's summary, a side
    call's (a compaction asked by another agent: it summarises its parent's conversation), or a
    turn's that went on from an earlier one of its conversation (the agent asked for the
    summary itself, sent back under its own system prompt); as an answer handed to another
    agent, any turn's own answer quoted under another system prompt."""
    if any(p.tool_call is not None for p in echo.parts):
        return
    # A conversation's first answer is registered as its own (``[tid, tid]``, the turn
    # ``opens``): never a summary (a chain that feeds one call's answer to the next call is two
    # conversations), but another agent quoting it is handed it (:func:`~._opening.start_link`).
    target = _summarised(link, tid)
    target = tid if target is None else target
    said = " ".join(p.text for p in echo.parts if p.kind == "text" and p.text)
    # The answer, the body of a <summary> block in it (Claude Code's compaction answers
    # <analysis>…</analysis><summary>…</summary> and uses the summary's body alone), and the
    # string values of a structured answer (Agno's {"summary": …}: its field is passed on).
    for text in (norm_prompt(said), norm_prompt(summary_body(said)), *answer_fields(said)):
        if MIN_SUMMARY <= len(text) <= MAX_PROMPT:
            s.summaries[text] = [target, tid]
            s.summaries.move_to_end(text)
    while len(s.summaries) > MAX_PROMPTS:
        s.summaries.popitem(last=False)


def _register_echo(
    s: Threads,
    r: Request,
    echo: Message,
    echo_keys: tuple[int, int, int],
    conversation: str,
    tid: int,
) -> None:
    """Register the history plus this turn's answer (what the next request should send), and
    the prompts the answer's calls quote (a sub-agent's first message)."""
    keys, n = r.keys, len(r.messages)
    _, lk, sk = echo_keys
    lh = hash((keys.loose[n - 1] if n else 0, lk))
    sh = hash((keys.strict[n - 1] if n else 0, sk))
    s.register(r.fam, "l", lh, Registered(conversation, tid, n + 1, True))
    if sh != lh:
        s.register(r.fam, "s", sh, Registered(conversation, tid, n + 1, True))
    for p in echo.parts:
        if p.tool_call is not None:
            found: list[str] = []
            prompt_strings(p.tool_call.arguments, found)
            for text in found:
                s.prompts[text] = tid
                s.prompts.move_to_end(text)
            quote = quote_key(p.tool_call.arguments)
            if quote is not None:
                s.quotes[quote] = tid
                s.quotes.move_to_end(quote)
    while len(s.prompts) > MAX_PROMPTS:
        s.prompts.popitem(last=False)
    while len(s.quotes) > MAX_PROMPTS:
        s.quotes.popitem(last=False)
