"""What threading knows: the links it hands out, the turns it threaded, and the indexes a later
request is looked up in (:class:`Threads`); and the request being threaded, as the rules read it
(:class:`Request`: its messages' keys, which agent sent it, its trajectory's fields, the call ids
it answers). Plain data; the rules that read it are functions of their own modules, and
:mod:`._driver` composes them."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...models import Message, Part
from .._message_keys import MessageKeys, _call_ids, stable
from .._trajectory import Fields, Step
from ..spill import KEEP, Spill, SpillMap
from ._words import SYSTEM_TEXT, Rendered, trajectory


@dataclass(frozen=True, slots=True)
class Attempt:
    """What the wire says of a request as an attempt: when it was sent and when its answer ended
    (epoch seconds; ``None``: the recording has no clock), and the client's retry counter (the
    SDK's ``x-stainless-retry-count``: 0 on a first attempt; ``None``: not sent)."""

    sent: float | None = None
    ended: float | None = None
    retries: int | None = None


#: :attr:`Link.summary_at` of a summary that lands in the system prompt where the wire sends it
#: apart from the messages (Anthropic ``system``, Responses ``instructions``, Gemini's system
#: instruction): no message carries it.
IN_SYSTEM = -1


@dataclass
class Link:
    conversation: str
    #: Index (in the conversation) of the turn this one follows; ``None`` for a first turn.
    previous: int | None
    how: str
    #: Messages of the previous request carried over unchanged.
    kept: int = 0
    #: The previous turn's assistant message was echoed right after the kept prefix.
    echoed: bool | None = None
    #: Messages of the previous request (plus its echo) that were dropped or changed.
    rewritten: int = 0
    #: For a new conversation: the threader turn id it branched from (a side call over that turn's
    #: history, a handoff, a sub-agent started by that turn's tool call).
    parent: int | None = None
    #: Why it branched: ``side_call`` (something asked over the history, by another agent or
    #: while the parent's calls run, or about the parent's call) or ``sub_agent``.
    branch: str | None = None
    #: How many conversations this turn could equally belong to (0 or 1: no doubt). Identical
    #: histories with identical ids cannot be told apart; the most recent waiting one was taken.
    ambiguous: int = 0
    #: Where the request carries the previous turn's answer, when the history before it was
    #: managed (trimmed, summarised): this turn's own messages start there.
    echo_at: int | None = None
    #: The turn whose answer the request opens with as its history's summary (a compaction): a
    #: threader turn id, made the round trip's seq by the analyser for the C layer.
    summary_of: int | None = None
    #: Where in the request that summary is (the message carrying the compaction's answer;
    #: :data:`IN_SYSTEM`: the system prompt, on a wire that sends it apart from the messages).
    summary_at: int | None = None
    #: What that compaction's side call was given (its request's texts, normalised, bounded),
    #: when the threader kept it: whether the summary's writer saw a dropped message.
    summary_seen: str | None = None
    #: The tool-call ids that compaction's request answered (its results went into the summary).
    summary_answers: frozenset[str] = frozenset()
    #: That compaction was a side call of the conversation (not one of its own turns).
    summary_side: bool = False
    #: A new conversation whose user words carry a recent conversation's history rendered as
    #: text (:func:`~._opening.rendered`): a summariser's side call when a later request carries
    #: its answer as the summary, else another agent quoting the conversation (a hand-off).
    rendered: bool = False
    #: The turns (threader turn ids, first and last) this request proves were another agent's
    #: loop handed the run and not this conversation's own (:func:`~._agents.handed_back`):
    #: they leave this conversation for one of their own, ``handoff`` under :attr:`previous`.
    rehome: tuple[int, int] | None = None
    #: That conversation's id (given by :func:`~._driver.record`).
    rehomed_to: str | None = None
    #: How those turns branch from :attr:`previous`: ``handoff`` (a handed loop), or ``None``:
    #: another conversation that was never this one's (:func:`~._evidence.moved_out`).
    rehome_branch: str | None = "handoff"
    #: A side call asked in place (:func:`~._agents.asks_compaction`): the link the request
    #: would have had as its conversation's next step, kept for the request that may prove it.
    in_place: Link | None = None
    #: The side call asked in place (its turn id, its conversation, and that link) this request
    #: proves was its parent conversation's next turn: the request carries its text answer as
    #: the assistant message after the merged one (:func:`~._history.rejoins`).
    rejoined: tuple[int, str, Link] | None = None

    @property
    def summary_in_system(self) -> bool:
        """The summary lands in the system prompt the wire sends apart from the messages."""
        return self.summary_at == IN_SYSTEM


@dataclass(slots=True)
class Registered:
    conversation: str
    turn: int  # global turn id (index into Threads.turns)
    length: int  # prefix length in messages
    with_echo: bool


@dataclass(slots=True)
class Keys:
    """A history's keys: ``key`` to compare histories, rolling hashes of the loose and strict
    lookup keys to find registered prefixes. A turn that extends another takes its lists over."""

    key: list[int] = field(default_factory=list)
    loose: list[int] = field(default_factory=list)
    strict: list[int] = field(default_factory=list)

    def extend(self, messages: list[Message], memo: MessageKeys) -> None:
        lh = self.loose[-1] if self.loose else 0
        sh = self.strict[-1] if self.strict else 0
        for m in messages:
            k, lk, sk = memo.keys(m)
            lh, sh = hash((lh, lk)), hash((sh, sk))
            self.key.append(k)
            self.loose.append(lh)
            self.strict.append(sh)

    def head(self, n: int) -> Keys:
        return Keys(self.key[:n], self.loose[:n], self.strict[:n])


@dataclass(slots=True)
class TurnInfo:
    conversation: str
    #: The history's keys; kept only while the turn is its conversation's latest (memory stays
    #: bounded by the live histories, not the run). May be longer than ``length``: a turn that
    #: extends this one takes the lists over and appends to them instead of copying.
    keys: Keys | None
    #: Key of the request's system prompt (top-level and history system messages alike), and of
    #: the names of the tools it offered: together, which agent made the request.
    system: int
    tools: int
    #: Number of messages in the request.
    length: int
    #: Part keys of the history's last message, and of the answer (to recognise a merged echo);
    #: like ``keys``, kept only while the turn is its conversation's latest (``None``: released).
    last_parts: list[Any] | None
    echo_parts: list[Any] | None
    echo_key: int | None
    #: Tool-call ids of the answer's calls (a later request that answers them continues this turn).
    echo_ids: frozenset[str]
    response_id: str | None
    failed: bool
    family: str
    #: Tool names of the answer's calls (for APIs whose results name the tool, not a call id).
    echo_names: frozenset[str] = frozenset()
    #: The turn started its conversation (a repeat of a later turn's request is the conversation
    #: going back; a first request again is a new start).
    opens: bool = False
    #: The agents the answer's transfer calls name (``transfer_to_agent(agent_name=…)``,
    #: ``transfer_to_<agent>``), casefolded: a request under a system prompt naming one is the
    #: agent the run was handed to.
    handoff_to: frozenset[str] = frozenset()
    #: A re-rendered trajectory's fields (its only user message's) and the answer's ``next_*``
    #: fields; like ``keys``, kept only while the turn is its conversation's latest.
    fields: Fields | None = None
    step: Step | None = None
    #: When a failed turn's answer ended (epoch seconds), for :func:`._history.retried`.
    ended: float | None = None
    #: A side call's: the tool-call ids its request's last results answer (a compaction's: the
    #: calls whose results went into the summary a later request uses).
    answers: frozenset[str] = frozenset()
    #: The API refused the request as longer than the model's context window: the client's
    #: next request may manage this history (:func:`~._opening.after_overflow`).
    overflow: bool = False
    #: The answer's tool call was cut by the token cap (finish ``length``): the same request
    #: again is its retry, even as the conversation's first (:func:`~._history.discarded`).
    cut: bool = False
    #: The turn whose transfer handed the run to this turn's agent in this conversation (the
    #: request went on from that turn's answer and its results alone, under another system
    #: prompt and tool set: :func:`~._agents.hands_over`), kept along that agent's loop; ``None``
    #: where no agent handed the run over.
    handed_from: int | None = None
    #: This turn is the first of that agent's loop (its request went on from the transfer).
    hand_start: bool = False
    #: The turn this one went on from in its conversation (``Link.previous``; ``None``: it
    #: opened it or branched), and whether its request proved it (it echoed that turn's answer,
    #: or carried a continuity token of that conversation: :mod:`._evidence`).
    previous: int | None = None
    proved: bool = False


#: The classes threading's tables hold, by name: what its spilled rows and its continued state
#: (:mod:`._plain`) are read back into.
CLASSES: dict[str, type] = {
    c.__qualname__: c for c in (TurnInfo, Keys, Registered, Fields, Step, Link)
}


class TurnInfos:
    """The threaded turns by id: a list whose older entries live in a :class:`SpillMap`."""

    def __init__(self, spill: Spill, keep: int) -> None:
        self._map: SpillMap[int, TurnInfo] = SpillMap(spill, keep)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, tid: int) -> TurnInfo:
        if tid < 0:
            tid += self._n
        if not 0 <= tid < self._n:
            raise IndexError(tid)
        return self._map[tid]

    def append(self, info: TurnInfo) -> None:
        self._map[self._n] = info
        self._n += 1

    def trim(self) -> None:
        self._map.trim()

    def entries(self) -> Iterator[TurnInfo]:
        """Every turn, in order (copies of those on disk: for reading)."""
        return (info for _, info in self._map.entries())

    def dumped(self) -> Iterator[Any]:
        """Every turn, in order, as JSON-able data (:meth:`~..spill.SpillMap.dumped`)."""
        return (data for _, data in self._map.dumped())


#: Registrations kept per prefix hash once pruned: those still their conversation's latest (up
#: to this many), plus the newest. A million identical single-turn requests stay bounded.
MAX_PER_PREFIX = 256
#: The two kinds of registered prefix (loose, strict) as numbers, for the tables' keys.
KIND = {"l": 1, "s": 2}
#: The indexes :class:`Threads` keeps in spilled tables, and the type of their keys (in the order
#: :mod:`._plain` writes them).
TABLES: dict[str, type] = {
    "prefix": int, "by_start": int, "by_response": str, "last_of": str, "id_turn": str,
    "by_answer": int, "by_head": int, "sibling_root": str, "by_token": int, "moved": int,
}  # fmt: skip


@dataclass
class Threads:
    """The state of threading after each turn: every turn threaded, and the indexes that find a
    round trip's parent. The tables keep ``keep`` entries each in memory and spill the rest."""

    #: Where the tables keep what does not fit in memory (``keep`` entries each).
    spill: Spill
    keep: int = KEEP
    #: Every turn threaded so far, by turn id (spilled to disk past :data:`~.spill.KEEP`).
    turns: TurnInfos = field(init=False)
    #: Registered prefixes (family, kind, rolling hash) → the turns that sent or answered them.
    prefix: SpillMap[int, list[Registered]] = field(init=False)
    by_start: SpillMap[int, list[int]] = field(init=False)  # start-of-history hash → turn ids
    by_response: SpillMap[str, int] = field(init=False)
    by_label: dict[str, str] = field(default_factory=dict)
    last_of: SpillMap[str, int] = field(init=False)  # conversation → its latest turn id
    #: Recent tool-call argument texts that may be a sub-agent's prompt (text → turn id).
    prompts: OrderedDict[str, int] = field(default_factory=OrderedDict)
    #: Recent calls' arguments as JSON without whitespace (see :func:`._words.quote_key`) → turn id.
    quotes: OrderedDict[str, int] = field(default_factory=OrderedDict)
    #: Recent text answers (normalised, :data:`~._words.MIN_SUMMARY` characters or more) a later
    #: request may open with as the summary of a conversation (a compaction) → [the turn whose
    #: conversation they summarise (a side call's parent, else the answering turn itself), the
    #: answering turn].
    summaries: OrderedDict[str, list[int]] = field(default_factory=OrderedDict)
    #: The most recent turns the API refused as too long for the context window (turn ids, as
    #: keys: an ordered set): a later request may keep part of their history.
    overflows: OrderedDict[int, None] = field(default_factory=OrderedDict)
    #: The most recent conversations' latest requests (conversation → turn id, its messages, or
    #: the texts of them a rendered history carries once read: :data:`~._words.Rendered`), which a
    #: summariser fed the history as rendered text carries (:func:`~._opening.rendered`); kept
    #: as those texts in a continued state.
    recent: OrderedDict[str, tuple[int, list[Message] | Rendered]] = field(
        default_factory=OrderedDict
    )
    #: What the most recent side calls were given (turn id → their requests' texts,
    #: normalised, bounded): the summary one of them wrote may restate what it saw.
    seen: OrderedDict[int, str] = field(default_factory=OrderedDict)
    #: The most recent side calls asked in place (turn id → :attr:`Link.in_place`).
    in_place: OrderedDict[int, Link] = field(default_factory=OrderedDict)
    count: int = 0
    #: Tool-call ids of the answers of conversations' latest turns → that turn.
    id_turn: SpillMap[str, int] = field(init=False)
    #: Answers by their key (family, loose key) → the turn that gave them: a history that starts
    #: with an answer continues that turn's conversation (the question before it was dropped).
    by_answer: SpillMap[int, int] = field(init=False)
    #: Re-rendered trajectories' latest turns by (family, agent, first input field) → turn id.
    by_head: SpillMap[int, int] = field(init=False)
    #: Sibling conversations → the turn their group started from (one parent for all siblings).
    sibling_root: SpillMap[str, int] = field(init=False)
    #: Continuity tokens (stable hashes, :mod:`._evidence`) → the turn whose answer produced
    #: them (:data:`~._evidence.TWICE`: two answers did).
    by_token: SpillMap[int, int] = field(init=False)
    #: Turns a later request moved to another conversation (:func:`~._evidence.moved_out`) →
    #: that conversation: the registrations of their histories are made to name it.
    moved: SpillMap[int, str] = field(init=False)
    #: API family → :meth:`family`'s number for it.
    families: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.turns = TurnInfos(self.spill, self.keep)
        for name in TABLES:
            setattr(self, name, SpillMap(self.spill, self.keep))

    def trim(self) -> None:
        """Spill what does not fit (between requests: no entry is held then)."""
        self.turns.trim()
        for name in TABLES:
            getattr(self, name).trim()

    def family(self, family: str) -> int:
        """The API family as a number that is the same in every process (a str's ``hash`` is
        salted per process: :func:`~._message_keys.stable`), for the tables' keys."""
        got = self.families.get(family)
        if got is None:
            got = self.families[family] = stable(family.encode("utf-8", "surrogatepass"))
        return got

    def new_conversation(self) -> str:
        self.count += 1
        return f"c{self.count}"

    def live(self, r: Registered) -> bool:
        """``r``'s turn is still its conversation's latest."""
        return self.last_of.get(r.conversation) == r.turn

    def last_of_reg(self, r: Registered) -> int:
        """The latest turn of ``r``'s conversation; a registration of a turn that joined
        another conversation since (:func:`~._history.rejoins`) is made to name that one."""
        latest = self.last_of.get(r.conversation)
        if latest is None:
            r.conversation = self.turns[r.turn].conversation
            latest = self.last_of[r.conversation]
        return latest

    def latest(self, tid: int) -> bool:
        """Turn ``tid`` is still its conversation's latest."""
        return self.last_of.get(self.turns[tid].conversation) == tid

    def matches(self, fam: int, keys: Keys, strict: bool) -> Iterator[tuple[int, list[Registered]]]:
        """Registered prefixes of the history, longest first: (length, registrations). A strict
        lookup reads the strict table where a prefix carries ids, the loose one elsewhere."""
        loose = keys.loose
        rolling = keys.strict if strict else loose
        for i in range(len(rolling) - 1, -1, -1):
            kind = KIND["s" if strict and rolling[i] != loose[i] else "l"]
            regs = self.prefix.get(hash((fam, kind, rolling[i])))
            if regs:
                if len(self.moved):
                    for g in regs:
                        g.conversation = self.moved.get(g.turn, g.conversation)
                yield i + 1, regs

    def register(self, fam: int, kind: str, h: int, reg: Registered) -> None:
        key = hash((fam, KIND[kind], h))
        regs = self.prefix.get(key)
        if regs is None:
            self.prefix[key] = [reg]
            return
        regs.append(reg)
        if len(regs) > 2 * MAX_PER_PREFIX:
            # Keep the registrations still waiting for their continuation, and the newest one.
            live = [r for r in regs[:-1] if self.live(r)]
            self.prefix[key] = [*live[-MAX_PER_PREFIX:], reg]

    def add_start(self, h: int, tid: int) -> None:
        regs = self.by_start.get(h)
        if regs is None:
            self.by_start[h] = [tid]
            return
        regs.append(tid)
        if len(regs) > 2 * MAX_PER_PREFIX:
            live = [t for t in regs[:-1] if self.latest(t)]
            self.by_start[h] = [*live[-MAX_PER_PREFIX:], tid]

    def supersede(self, conversation: str, tid: int, info: TurnInfo) -> None:
        """Turn ``tid`` is now its conversation's latest: release what only the latest keeps."""
        superseded = self.last_of.get(conversation)
        if superseded is not None:
            old = self.turns[superseded]
            old.keys = None
            old.last_parts = old.echo_parts = None  # released: read only while the latest
            old.fields = old.step = None
            for i in old.echo_ids:
                if self.id_turn.get(i) == superseded:
                    del self.id_turn[i]
        for i in info.echo_ids:
            self.id_turn[i] = tid
        self.last_of[conversation] = tid


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
    #: Sent to the API's compaction endpoint (``POST /responses/compact``): not a step of the
    #: loop but a compaction of the history it carries, a side call of that history's turn.
    compacts: bool = False
    #: The API refused it as longer than the model's context window.
    overflow: bool = False
    #: Its answer's tool call was cut by the token cap.
    cut: bool = False
    #: Its answer calls a tool (known when the request is threaded: a recording holds both).
    answer_calls: bool = False
    #: The system prompt's parts (Anthropic ``system``, Responses ``instructions``, Gemini's
    #: system instruction, Chat's system messages): where a summary may land, or a summariser
    #: be given a history as text (:func:`._words.system_words`).
    system_parts: list[Part] = field(default_factory=list)
    #: The latest turn whose continuity token it carries back (:func:`~._evidence.carried`).
    token_turn: int | None = None
    #: The registration its history extended, when that was a turn's history with its answer.
    extended: Registered | None = None


def _keys(
    threads: Threads, messages: list[Message], reuse: tuple[int, int] | None, memo: MessageKeys
) -> Keys:
    if reuse is not None and 0 <= reuse[0] < len(threads.turns):
        base = threads.turns[reuse[0]]
        keep = reuse[1]
        if base.keys is not None and 0 <= keep <= min(base.length, len(messages)):
            if keep == base.length == len(base.keys.key):
                # A pure extension of the latest request: append to its lists, no copy.
                keys = base.keys
            else:
                keys = base.keys.head(keep)
            keys.extend(messages[keep:], memo)
            return keys
    keys = Keys()
    keys.extend(messages, memo)
    return keys


def read_request(
    threads: Threads,
    family: str,
    messages: list[Message],
    reuse: tuple[int, int] | None,
    system: list[Part] | None,
    tools: list[str] | None,
    attempt: Attempt,
    memo: MessageKeys,
) -> Request:
    """The request as the rules read it. ``reuse=(turn id, keep)``: its first ``keep`` messages
    are that earlier turn's, whose keys are taken over, not recomputed; the others' are asked
    of ``memo``."""
    keys = _keys(threads, messages, reuse, memo)
    ids: set[str] = set()
    for m in messages[-8:]:  # what the request answers sits at its end
        ids |= _call_ids(m.parts)
    return Request(
        family=family,
        fam=threads.family(family),
        messages=messages,
        keys=keys,
        system=memo.system(system or []),
        tools=stable(orjson.dumps(sorted(tools or ()))),
        system_text=" ".join(
            p.text[:SYSTEM_TEXT] for p in (system or ())[:16] if p.kind == "text" and p.text
        )[:SYSTEM_TEXT].casefold(),
        fields=trajectory(messages),
        ids=ids,
        attempt=attempt,
        system_parts=list(system or ()),
    )
