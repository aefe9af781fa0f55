"""Threading round trips into conversations, from the content alone.

Each request's history is reduced to *message keys*: a hash of the message's role and parts, made
robust to what SDKs and frameworks change when they re-serialise a history — key order,
whitespace, absent vs null, content as a string vs a list of text parts, reasoning blocks dropped or
re-signed. Each message has two keys for lookups: a *loose* one without tool-call ids (a client may
rewrite them) and a *strict* one with them (unique ids are what tell apart agents that started
alike); system messages count as "a system message" in both, so that a request made under another
system prompt still finds the history it extends.

After each turn two prefixes are registered for its conversation: the request's history, and the
request's history followed by the assistant message the response produced. Every registration is
kept while its turn is its conversation's latest (bounded), so many agents that started alike each
find their own. A new request looks up the longest registered prefix it extends (strict keys first,
loose ones where the client rewrote ids) and picks among the turns registered there: the same agent
(system prompt and tool names), then the turn whose calls the request answers (tool-call ids),
then a turn still waiting for its continuation, then the most recent. When several conversations
remain equally likely the link says so (``ambiguous``): nothing in the content can tell them apart.

In order:

1. ``X-Looptap-Conversation`` request header — an explicit label always wins;
2. ``previous_response_id`` (Responses API) — the turn that produced that response;
3. the longest registered prefix — the conversation it extends (``extends``), or the same request
   again after a failed attempt (``retry``). A request made under another system prompt *and*
   another tool set that extends a conversation's history, or repeats one of its requests, is
   another agent working on it (a summary, compaction or title side call, a handoff): a new
   conversation, branched from that turn (a handoff, whose request ends with the results of the
   calls the turn made, goes on in the same conversation). A request, of any agent, that carries
   the history of a turn whose tool calls are still running — that history or a prefix of it, its
   last message possibly changed, or all of it plus one question — without the turn's answer and
   without a result for its calls is not the loop's next step (the loop waits for the results):
   a side call forked from that turn (Claude Code's progress summary of a running sub-agent);
4. a conversation whose history shares its start up to the first non-system message — the history
   was rewritten (trimmed, summarised, edited: ``rewritten``);
5. otherwise a new conversation (a new agent, a sub-agent, a side call such as a title); one whose
   first user message carries the prompt a pending tool call of another conversation asked for
   (Claude Code's Task tool, an agent-as-tool) is that call's sub-agent, branched from its turn —
   unless it quotes the prompt as a JSON argument value (``"prompt": "…"``): a request that
   quotes the call is about the call (a summary of the tools used), a side call of that turn.

Agents (docs/threading.md, "Agents, and what each conversation is"): an agent is its system
prompt, its tool names and the name the wire gives it. Under another system prompt, a turn's
history followed by its answer as a *user* message is another agent of a group chat
(``group_chat``); another agent over a conversation's history, while a transfer call naming it (in
its system prompt) waits, is the run handed over (``handoff``); another agent sending exactly a
turn's request whose only question a pending call handed over word for word is an agent used as a
tool (``agent_tool``). A prompt built like a conversation's latest one but for its last question,
after an answer that called no tool, is a ``sibling`` (a few-shot prompt); exactly a later turn's
request again after it was answered is that conversation going back (``retry``: the answer was
discarded); a history that opens with a conversation's latest answer continues it (the question
before was dropped); and the next step of a re-rendered trajectory (:mod:`.trajectory`) continues
the conversation whose latest request it re-renders.
"""

from __future__ import annotations

import itertools
import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from cassettes.analysis.message_keys import (
    _NO_NAMES,
    _ROLE,
    _call_ids,
    _call_names,
    _Memo,
    _message_keys,
    _part_keys,
    message_key,
    response_message,
    squashed,
    stable,
)
from cassettes.analysis.spill import KEEP, Spill, SpillMap
from cassettes.analysis.trajectory import Fields, Step, fields_of, follows, step_of
from cassettes.models import Message, NormalisedResponse, Part

__all__ = ["Attempt", "Link", "Threader", "message_key", "response_message", "squashed"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """What the wire says of a request as an attempt: when it was sent and when its answer ended
    (epoch seconds; ``None``: the recording has no clock), and the client's retry counter (the
    SDK's ``x-stainless-retry-count``: 0 on a first attempt; ``None``: not sent)."""

    sent: float | None = None
    ended: float | None = None
    retries: int | None = None


#: The longest wait after a failure that still reads as a retry when the client's retry counter
#: does not say it is one: the SDKs honour a retry-after of up to 60 s and back off for less; an
#: identical request minutes later is another run sending it (``looptap run -o +FILE`` appends
#: runs to one cassette).
_RETRY_WINDOW = 120.0


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


@dataclass(slots=True)
class _Registered:
    conversation: str
    turn: int  # global turn id (index into Threader.turns)
    length: int  # prefix length in messages
    with_echo: bool


@dataclass(slots=True)
class _Keys:
    """A history's keys: ``key`` to compare histories, rolling hashes of the loose and strict
    lookup keys to find registered prefixes. A turn that extends another takes its lists over."""

    key: list[int] = field(default_factory=list)
    loose: list[int] = field(default_factory=list)
    strict: list[int] = field(default_factory=list)

    def extend(self, messages: list[Message], memo: _Memo | None = None) -> None:
        lh = self.loose[-1] if self.loose else 0
        sh = self.strict[-1] if self.strict else 0
        for m in messages:
            k, lk, sk = _message_keys(m, memo)
            lh, sh = hash((lh, lk)), hash((sh, sk))
            self.key.append(k)
            self.loose.append(lh)
            self.strict.append(sh)

    def head(self, n: int) -> _Keys:
        return _Keys(self.key[:n], self.loose[:n], self.strict[:n])


@dataclass(slots=True)
class _TurnInfo:
    conversation: str
    #: The history's keys; kept only while the turn is its conversation's latest (memory stays
    #: bounded by the live histories, not the run). May be longer than ``length``: a turn that
    #: extends this one takes the lists over and appends to them instead of copying.
    keys: _Keys | None
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
    #: When a failed turn's answer ended (epoch seconds), for :meth:`Threader._retried`.
    ended: float | None = None


#: Registrations kept per prefix hash once pruned: those still their conversation's latest (up
#: to this many), plus the newest. A million identical single-turn requests stay bounded.
_MAX_PER_PREFIX = 256
#: Recent tool-call argument texts that may be a sub-agent's prompt (text → turn id).
_MAX_PROMPTS = 4096
#: Recent prompts looked for inside a new conversation's first words (exact matches: all of them).
_SCAN_PROMPTS = 64
#: Messages read at a new conversation's start for a pending call's prompt (system ones skipped).
_SCAN_OPENING = 16
#: Shortest argument text taken as a sub-agent prompt (shorter ones match by accident).
_MIN_PROMPT = 24


def _norm_prompt(text: str) -> str:
    return " ".join(text.split()).casefold()


def _prompt_strings(value: Any, out: list[str], depth: int = 0) -> None:
    """String values of a call's arguments long enough to be a prompt (bounded walk)."""
    if depth > 8 or len(out) > 16:
        return
    if isinstance(value, str):
        if len(value) >= _MIN_PROMPT:
            out.append(_norm_prompt(value))
    elif isinstance(value, dict):
        for v in value.values():
            _prompt_strings(v, out, depth + 1)
    elif isinstance(value, list):
        for v in value[:16]:
            _prompt_strings(v, out, depth + 1)


#: Shortest arguments JSON (whitespace removed) looked for as a quotation of the call.
_MIN_QUOTE = 16


def _quote_key(arguments: Any) -> str | None:
    """A call's arguments as a quotation would carry them: a JSON object, whitespace removed,
    case folded (so ``{"a": "b"}`` and ``{"a":"b"}`` agree); ``None`` when too short to tell."""
    if not isinstance(arguments, dict) or not arguments:
        return None
    try:
        text = orjson.dumps(arguments).decode()
    except (TypeError, orjson.JSONEncodeError):
        return None
    bare = "".join(text.split()).casefold()
    return bare if _MIN_QUOTE <= len(bare) <= 4096 else None


def _quoted_only(text: str, prompt: str) -> bool:
    """Every occurrence of ``prompt`` in ``text`` is a JSON member's string value (``"key": "…"``):
    the text quotes a call's arguments (it is about the call), it does not hand the prompt over."""
    at = text.find(prompt)
    while at >= 0:
        before, after = text[max(0, at - 4) : at], text[at + len(prompt) : at + len(prompt) + 1]
        if not (before.endswith(('":"', '": "')) and after == '"'):
            return False
        at = text.find(prompt, at + 1)
    return True


#: System prompt text kept to look for a handoff's agent name in (characters).
_SYSTEM_TEXT = 8192
#: What a transfer call's name says (openai-agents' ``transfer_to_<agent>``, Google ADK's
#: ``transfer_to_agent``, swarm's handoffs): the call hands the run over.
_TRANSFER_WORDS = ("transfer", "handoff", "hand_off")
#: An agent's name as a transfer call's argument carries it: one identifier-like word.
_AGENT_NAME = re.compile(r"[\w.-]{3,64}")


#: The most demo pairs a few-shot prompt is read for (a longer history is a conversation's).
_MAX_DEMOS = 64
#: A text-protocol field marker opening a message (DSPy: ``[[ ## question ## ]]``).
_FIELD_MARK = re.compile(r"\s*\[\[ ## [A-Za-z_]\w{0,63} ## \]\][ \t]*\n")


def _demo_pairs(messages: list[Message], start: int) -> bool:
    """After the system messages, question/answer pairs (user, assistant) and a last question,
    none of them with a tool call or result: a few-shot prompt's shape."""
    body = messages[start - 1 :]
    if len(body) % 2 == 0 or len(body) > 2 * _MAX_DEMOS + 1:
        return False
    for i, m in enumerate(body):
        if _ROLE.get(m.role, m.role) != ("user" if i % 2 == 0 else "assistant"):
            return False
        if any(p.tool_call is not None or p.tool_result is not None for p in m.parts):
            return False
    return True


def _fields_prompt(messages: list[Message]) -> bool:
    """Every message after the system ones is written in DSPy's ``[[ ## name ## ]]`` fields."""
    body = [m for m in messages if _ROLE.get(m.role, m.role) != "system"]
    return bool(body) and all(
        _FIELD_MARK.match(next((p.text for p in m.parts if p.kind == "text" and p.text), ""))
        for m in body
    )


def _handoff_targets(answer: Message) -> frozenset[str]:
    """The agents an answer's transfer calls name, casefolded: an identifier-like string argument
    (``{"agent_name": "weather_agent"}``) or the name's tail after ``transfer_to_``."""
    out: set[str] = set()
    for p in answer.parts[:64]:
        call = p.tool_call
        if (
            call is None
            or not call.name
            or not any(w in call.name.casefold() for w in _TRANSFER_WORDS)
        ):
            continue
        name = call.name.casefold()
        if name.startswith("transfer_to_") and name != "transfer_to_agent":
            out.add(name.removeprefix("transfer_to_"))
        if isinstance(call.arguments, dict):
            out.update(
                v.casefold()
                for v in list(call.arguments.values())[:8]
                if isinstance(v, str) and _AGENT_NAME.fullmatch(v)
            )
    return frozenset(out) if out else _NO_NAMES


#: The two kinds of registered prefix (loose, strict) as numbers, for the tables' keys.
_KIND = {"l": 1, "s": 2}


def _names_agent(system_text: str, targets: frozenset[str]) -> bool:
    """The system prompt names one of ``targets`` as a word of its own."""
    return any(re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", system_text) for t in targets)


class _TurnInfos:
    """The threader's turns by id: a list whose older entries live in a :class:`SpillMap`."""

    def __init__(self, spill: Spill, keep: int) -> None:
        self._map: SpillMap[int, _TurnInfo] = SpillMap(spill, keep)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, tid: int) -> _TurnInfo:
        if tid < 0:
            tid += self._n
        if not 0 <= tid < self._n:
            raise IndexError(tid)
        return self._map[tid]

    def append(self, info: _TurnInfo) -> None:
        self._map[self._n] = info
        self._n += 1

    def trim(self) -> None:
        self._map.trim()


@dataclass
class Threader:
    """Assigns each generation round trip to a conversation. Feed turns in recording order."""

    #: Every turn threaded so far, by turn id (spilled to disk past :data:`~.spill.KEEP`).
    turns: _TurnInfos = field(init=False)
    _prefix: SpillMap[int, list[_Registered]] = field(init=False)
    _by_start: SpillMap[int, list[int]] = field(init=False)  # start-of-history hash → turn ids
    _by_response: SpillMap[str, int] = field(init=False)
    _by_label: dict[str, str] = field(default_factory=dict)
    _last_of: SpillMap[str, int] = field(init=False)  # conversation → its latest turn id
    _prompts: OrderedDict[str, int] = field(default_factory=OrderedDict)
    #: Recent calls' arguments as JSON without whitespace (see :func:`_quote_key`) → turn id.
    _quotes: OrderedDict[str, int] = field(default_factory=OrderedDict)
    _count: int = 0
    _messages: list[Message] = field(default_factory=list)
    _system: int = 0
    _tools: int = 0
    _ids: set[str] = field(default_factory=set)
    #: Tool-call ids of the answers of conversations' latest turns → that turn.
    _id_turn: SpillMap[str, int] = field(init=False)
    #: The request's system prompt text, casefolded (bounded): where a handoff's agent is named.
    _system_text: str = ""
    #: The request's trajectory fields, when it is one (:meth:`_trajectory`).
    _fields: Fields | None = None
    #: The request as an attempt: its clock and the client's retry counter.
    _attempt: Attempt = field(default_factory=Attempt)
    #: Answers by their key (family, loose key) → the turn that gave them: a history that starts
    #: with an answer continues that turn's conversation (the question before it was dropped).
    _by_answer: SpillMap[int, int] = field(init=False)
    #: Re-rendered trajectories' latest turns by (family, agent, first input field) → turn id.
    _by_head: SpillMap[int, int] = field(init=False)
    #: Sibling conversations → the turn their group started from (one parent for all siblings).
    _sibling_root: SpillMap[str, int] = field(init=False)
    #: This threader's memo of squashed texts and part keys (:class:`_Memo`).
    _memo: _Memo = field(default_factory=_Memo)
    #: API family → :meth:`_family`'s number for it.
    _families: dict[str, int] = field(default_factory=dict)
    #: Where the tables above keep what does not fit in memory (``keep`` entries each).
    keep: int = KEEP

    def __post_init__(self) -> None:
        spill = self._spill = Spill()
        self.turns = _TurnInfos(spill, self.keep)
        self._prefix, self._by_start = SpillMap(spill, self.keep), SpillMap(spill, self.keep)
        self._by_response, self._last_of, self._id_turn = (
            SpillMap(spill, self.keep),
            SpillMap(spill, self.keep),
            SpillMap(spill, self.keep),
        )
        self._by_answer, self._sibling_root, self._by_head = (
            SpillMap(spill, self.keep),
            SpillMap(spill, self.keep),
            SpillMap(spill, self.keep),
        )

    def _trim(self) -> None:
        """Spill what does not fit (between requests: no entry is held then)."""
        self.turns.trim()
        for table in (
            self._prefix,
            self._by_start,
            self._by_response,
            self._last_of,
            self._id_turn,
            self._by_answer,
            self._sibling_root,
            self._by_head,
        ):
            table.trim()

    def close(self) -> None:
        """Remove the file the tables spilled to (if any)."""
        self._spill.close()

    @property
    def memo(self) -> _Memo:
        """This threader's memo: the checks of a turn key the texts and parts its threading keyed
        a moment before (a tool result, the previous answer)."""
        return self._memo

    def _family(self, family: str) -> int:
        """The API family as a number that is the same in every process (a str's ``hash`` is
        salted per process: :func:`~.message_keys.stable`), for the tables' keys."""
        got = self._families.get(family)
        if got is None:
            got = self._families[family] = stable(family.encode("utf-8", "surrogatepass"))
        return got

    def _new_conversation(self) -> str:
        self._count += 1
        return f"c{self._count}"

    def _keys(self, messages: list[Message], reuse: tuple[int, int] | None) -> _Keys:
        if reuse is not None and 0 <= reuse[0] < len(self.turns):
            base = self.turns[reuse[0]]
            keep = reuse[1]
            if base.keys is not None and 0 <= keep <= min(base.length, len(messages)):
                if keep == base.length == len(base.keys.key):
                    # A pure extension of the latest request: append to its lists, no copy.
                    keys = base.keys
                else:
                    keys = base.keys.head(keep)
                keys.extend(messages[keep:], self._memo)
                return keys
        keys = _Keys()
        keys.extend(messages, self._memo)
        return keys

    @staticmethod
    def _start_len(messages: list[Message]) -> int:
        """Where a history's opening ends: at its first non-system message, whose key identifies
        the conversation when the rest was rewritten (a changed system prompt included)."""
        for i, m in enumerate(messages):
            if _ROLE.get(m.role, m.role) != "system":
                return i + 1
        return len(messages)

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
    ) -> Link:
        """Thread one request. ``reuse=(turn id, keep)`` says its first ``keep`` messages are that
        earlier turn's (a cassette's history delta): their keys are reused, not recomputed;
        ``attempt`` is what tells a retry from another run sending the same request."""
        self._memo.turn()
        self._attempt = attempt or Attempt()
        try:
            return self._add(
                family,
                messages,
                response,
                failed,
                label,
                previous_response_id,
                reuse,
                system,
                tools,
            )
        finally:
            self._memo.end()
            self._trim()

    def _add(
        self,
        family: str,
        messages: list[Message],
        response: NormalisedResponse | None,
        failed: bool,
        label: str | None,
        previous_response_id: str | None,
        reuse: tuple[int, int] | None,
        system: list[Part] | None,
        tools: list[str] | None,
    ) -> Link:
        keys = self._read_request(messages, reuse, system, tools)
        link = self._link(family, keys, messages, label, previous_response_id)
        tid = len(self.turns)
        echo = response_message(response, self._memo)
        echo_keys = _message_keys(echo, self._memo) if echo is not None else None
        info = self._turn_info(family, keys, messages, link, response, failed, echo, echo_keys)
        self.turns.append(info)
        self._supersede(link.conversation, tid, info)
        if label:
            self._by_label[label] = link.conversation
        if info.response_id:
            self._by_response[info.response_id] = tid
        self._register_history(family, keys, messages, link.conversation, tid)
        if self._fields is not None and self._fields.head:
            self._by_head[self._head_key(family, self._fields)] = tid
        if link.branch == "sibling" and link.parent is not None:
            self._sibling_root[link.conversation] = link.parent
        if echo is not None and echo_keys is not None:
            self._by_answer[hash((self._family(family), echo_keys[0]))] = tid
            self._register_echo(
                family, keys, len(messages), echo, echo_keys, link.conversation, tid
            )
        return link

    def _read_request(
        self,
        messages: list[Message],
        reuse: tuple[int, int] | None,
        system: list[Part] | None,
        tools: list[str] | None,
    ) -> _Keys:
        """The request being threaded, as the links read it: its messages' keys (returned), its
        system prompt and tools, its trajectory's fields, the call ids it answers."""
        keys = self._keys(messages, reuse)
        self._messages = messages
        self._system = stable(
            orjson.dumps(_part_keys(system or [], memo=self._memo), option=orjson.OPT_NON_STR_KEYS)
        )
        self._tools = stable(orjson.dumps(sorted(tools or ())))
        self._system_text = " ".join(
            p.text[:_SYSTEM_TEXT] for p in (system or ())[:16] if p.kind == "text" and p.text
        )[:_SYSTEM_TEXT].casefold()
        self._fields = self._trajectory(messages)
        self._ids = set()
        for m in messages[-8:]:  # what the request answers sits at its end
            self._ids |= _call_ids(m.parts)
        return keys

    def _turn_info(
        self,
        family: str,
        keys: _Keys,
        messages: list[Message],
        link: Link,
        response: NormalisedResponse | None,
        failed: bool,
        echo: Message | None,
        echo_keys: tuple[int, int, int] | None,
    ) -> _TurnInfo:
        """What is kept of a threaded turn: its request's keys and shape, and its answer (``echo``)
        as the next request should send it back."""
        memo = self._memo
        return _TurnInfo(
            conversation=link.conversation,
            keys=keys,
            system=self._system,
            tools=self._tools,
            length=len(messages),
            last_parts=_part_keys(messages[-1].parts, memo=memo) if messages else [],
            echo_parts=_part_keys(echo.parts, memo=memo) if echo is not None else [],
            echo_key=echo_keys[0] if echo_keys is not None else None,
            echo_ids=frozenset(_call_ids(echo.parts) or _NO_NAMES)
            if echo is not None
            else _NO_NAMES,
            echo_names=_call_names(echo)
            if echo is not None and not _call_ids(echo.parts)
            else _NO_NAMES,
            response_id=response.id if response is not None else None,
            failed=failed,
            family=family,
            opens=link.previous is None,
            handoff_to=_handoff_targets(echo) if echo is not None else _NO_NAMES,
            fields=self._fields,
            step=step_of(" ".join(p.text for p in echo.parts if p.kind == "text" and p.text))
            if self._fields is not None and echo is not None
            else None,
            ended=self._attempt.ended if failed else None,
        )

    def _supersede(self, conversation: str, tid: int, info: _TurnInfo) -> None:
        """Turn ``tid`` is now its conversation's latest: release what only the latest keeps."""
        superseded = self._last_of.get(conversation)
        if superseded is not None:
            old = self.turns[superseded]
            old.keys = None
            old.last_parts = old.echo_parts = None  # released: read only while the latest
            old.fields = old.step = None
            for i in old.echo_ids:
                if self._id_turn.get(i) == superseded:
                    del self._id_turn[i]
        for i in info.echo_ids:
            self._id_turn[i] = tid
        self._last_of[conversation] = tid

    def _register_history(
        self, family: str, keys: _Keys, messages: list[Message], conversation: str, tid: int
    ) -> None:
        """Register the history sent (loose and strict keys) and its opening, for later requests to
        find."""
        n = len(messages)
        if not n:
            return
        self._register(family, "l", keys.loose[n - 1], _Registered(conversation, tid, n, False))
        if keys.strict[n - 1] != keys.loose[n - 1]:  # a strict lookup reads "l" where they agree
            self._register(
                family, "s", keys.strict[n - 1], _Registered(conversation, tid, n, False)
            )
        start = self._start_len(messages)
        self._add_start(hash((self._family(family), keys.key[start - 1])), tid)

    def _register_echo(
        self,
        family: str,
        keys: _Keys,
        n: int,
        echo: Message,
        echo_keys: tuple[int, int, int],
        conversation: str,
        tid: int,
    ) -> None:
        """Register the history plus this turn's answer (what the next request should send), and
        the prompts the answer's calls quote (a sub-agent's first message)."""
        _, lk, sk = echo_keys
        lh = hash((keys.loose[n - 1] if n else 0, lk))
        sh = hash((keys.strict[n - 1] if n else 0, sk))
        self._register(family, "l", lh, _Registered(conversation, tid, n + 1, True))
        if sh != lh:
            self._register(family, "s", sh, _Registered(conversation, tid, n + 1, True))
        for p in echo.parts:
            if p.tool_call is not None:
                found: list[str] = []
                _prompt_strings(p.tool_call.arguments, found)
                for text in found:
                    self._prompts[text] = tid
                    self._prompts.move_to_end(text)
                quote = _quote_key(p.tool_call.arguments)
                if quote is not None:
                    self._quotes[quote] = tid
                    self._quotes.move_to_end(quote)
        while len(self._prompts) > _MAX_PROMPTS:
            self._prompts.popitem(last=False)
        while len(self._quotes) > _MAX_PROMPTS:
            self._quotes.popitem(last=False)

    def _live(self, r: _Registered) -> bool:
        return self._last_of.get(r.conversation) == r.turn

    def _register(self, family: str, kind: str, h: int, reg: _Registered) -> None:
        key = hash((self._family(family), _KIND[kind], h))
        regs = self._prefix.get(key)
        if regs is None:
            self._prefix[key] = [reg]
            return
        regs.append(reg)
        if len(regs) > 2 * _MAX_PER_PREFIX:
            # Keep the registrations still waiting for their continuation, and the newest one.
            live = [r for r in regs[:-1] if self._live(r)]
            self._prefix[key] = [*live[-_MAX_PER_PREFIX:], reg]

    def _add_start(self, h: int, tid: int) -> None:
        regs = self._by_start.get(h)
        if regs is None:
            self._by_start[h] = [tid]
            return
        regs.append(tid)
        if len(regs) > 2 * _MAX_PER_PREFIX:
            live = [t for t in regs[:-1] if self._last_of.get(self.turns[t].conversation) == t]
            self._by_start[h] = [*live[-_MAX_PER_PREFIX:], tid]

    def _matches(
        self, family: str, keys: _Keys, strict: bool
    ) -> Iterator[tuple[int, list[_Registered]]]:
        """Registered prefixes of the history, longest first: (length, registrations). A strict
        lookup reads the strict table where a prefix carries ids, the loose one elsewhere."""
        loose = keys.loose
        rolling = keys.strict if strict else loose
        fam = self._family(family)
        for i in range(len(rolling) - 1, -1, -1):
            kind = _KIND["s" if strict and rolling[i] != loose[i] else "l"]
            regs = self._prefix.get(hash((fam, kind, rolling[i])))
            if regs:
                yield i + 1, regs

    def _rank(self, tid: int, live: bool) -> tuple[bool, bool, bool]:
        t = self.turns[tid]
        return (
            t.system == self._system and t.tools == self._tools,
            bool(self._ids and t.echo_ids & self._ids),
            live,
        )

    def _hands_over(self, prev: _TurnInfo) -> bool:
        """The request ends with nothing but the results of calls ``prev`` made: the loop goes on
        under another agent (a handoff: openai-agents, swarm), not a side call over the history,
        which asks something of its own (a summary, a title) in its last message."""
        if not self._messages or not (prev.echo_ids or prev.echo_names):
            return False
        last = self._messages[-1].parts
        results = [p.tool_result for p in last if p.tool_result is not None]
        if not results or any(
            p.tool_result is None and p.kind == "text" and (p.text or "").strip() for p in last
        ):
            return False
        # The request echoes ``prev``'s calls under their own ids: exact ids say it is the same
        # loop, whatever ids its results carry (a wrong id is the client's bug, named on this turn).
        if self._ids & prev.echo_ids:
            return True
        # By call id; where the API names only the tool (Gemini, Ollama), by name.
        return all(
            r.call_id in prev.echo_ids
            if r.call_id
            else (r.name is not None and r.name in prev.echo_names)
            for r in results
        )

    def _receives_answer(self, best: _Registered, prev: _TurnInfo) -> bool:
        """The request, under another system prompt, carries ``prev``'s history and then ``prev``'s
        answer as a *user* message (a named one, AutoGen's group chats): another agent hearing what
        this one said, not this agent's next step (which echoes its answer as its own)."""
        n = best.length
        if (
            best.with_echo
            or n != prev.length
            or prev.failed
            or prev.system == self._system
            or not prev.echo_parts
        ):
            return False
        if (
            len(self._messages) <= n
            or _ROLE.get(self._messages[n].role, self._messages[n].role) != "user"
        ):
            return False
        return _part_keys(self._messages[n].parts, memo=self._memo) == prev.echo_parts

    def _hears_final_answer(self, best: _Registered, keys: _Keys) -> int | None:
        """The latest turn of ``best``'s conversation, when this request (under another system
        prompt) is an opening that turn's history began with and then that turn's final answer
        (no calls) as a user message, and nothing more: another agent of a group chat hearing what
        this one concluded. The agent's own tool steps stay its own (AutoGen's teams share an
        agent's response, not its inner calls), so the shared history skips them."""
        latest = self._last_of.get(self.turns[best.turn].conversation)
        n = best.length
        if latest is None or latest == best.turn or best.with_echo or len(self._messages) != n + 1:
            return None
        t = self.turns[latest]
        if (
            t.failed
            or t.echo_ids
            or t.echo_names
            or not t.echo_parts
            or t.system == self._system
            or t.keys is None
        ):
            return None
        if (
            len(t.keys.loose) < n
            or t.keys.loose[n - 1] != keys.loose[n - 1]
            or _ROLE.get(self._messages[n].role, self._messages[n].role) != "user"
        ):
            return None
        return (
            latest if _part_keys(self._messages[n].parts, memo=self._memo) == t.echo_parts else None
        )

    def _handed_to(self, t: _TurnInfo) -> bool:
        """``t``'s answer made a transfer call naming an agent, this request is made under a system
        prompt that names that agent, and it answers none of ``t``'s calls: the run was handed to it
        (Google ADK's ``transfer_to_agent``: the next agent tells the transfer as context text)."""
        return (
            bool(t.handoff_to)
            and not (self._ids & t.echo_ids)
            and _names_agent(self._system_text, t.handoff_to)
        )

    def _agent_tool(self) -> int | None:
        """The turn, its conversation's latest, whose pending call handed this request's only
        question over word for word (an agent used as a tool: ADK's AgentTool, openai-agents'
        ``as_tool``), if any."""
        asked = [m for m in self._messages[:_SCAN_OPENING] if _ROLE.get(m.role, m.role) != "system"]
        if len(asked) != 1 or _ROLE.get(asked[0].role, asked[0].role) != "user":
            return None
        tid = self._prompts.get(
            _norm_prompt(" ".join(p.text for p in asked[0].parts if p.kind == "text" and p.text))
        )
        if tid is None or self._last_of.get(self.turns[tid].conversation) != tid:
            return None
        return tid

    def _other_agent(self, t: _TurnInfo) -> bool:
        """``t`` was made under another system prompt and another tool set than this request."""
        return t.system != self._system and t.tools != self._tools

    def _calls_running(self, t: _TurnInfo, link: Link) -> bool:
        """``t``'s answer made calls, and the request (linked to ``t``) neither echoes the answer
        nor answers any of them: they may still be running."""
        if t.failed or not (t.echo_ids or t.echo_names) or t.keys is None or not self._messages:
            return False
        return not (link.echoed or self._ids & t.echo_ids)

    def _forks_running_calls(self, t: _TurnInfo, link: Link) -> bool:
        """The request, linked to ``t`` (its conversation's latest turn), asks something over
        ``t``'s history while the calls ``t``'s answer made are still running: it carries that
        history — or a prefix of it, all but the last message unchanged, or all of it plus one user
        message with no tool result — without the answer and without a result for the calls. The
        loop cannot go on without those results, so this is not its next step but a side call
        forked from ``t`` (Claude Code's progress summary of a running sub-agent appends its
        question to the last message). A request that answers the calls without echoing them
        stays (a client bug the conversation's findings name), and so does an edited request after
        a final answer."""
        if not self._calls_running(t, link):
            return False
        n = len(self._messages)
        last = self._messages[-1]
        results = sum(1 for p in last.parts if p.tool_result is not None)
        if n == t.length + 1 and link.kept == t.length:
            # A question of its own after the history, taken while a loop step's calls run (the
            # turn's request ended with results: asking again after a first answer's calls were
            # dropped is the client's bug, not a side call).
            return (
                _ROLE.get(last.role, last.role) == "user"
                and not results
                and any(k[0] == "r" for k in t.last_parts or ())
            )
        if n > t.length or link.kept < n - 1:
            return False
        # Results the last message carries beyond what the turn's own last one did (where calls
        # have no ids a result names only the tool): none may answer the running calls.
        carried = sum(1 for k in t.last_parts or () if k[0] == "r") if n == t.length else 0
        return results <= carried

    def _choose(self, regs: list[_Registered]) -> tuple[_Registered, int]:
        """The most likely registration, and how many conversations rank as high."""
        regs = regs[-_MAX_PER_PREFIX:]
        best = max(regs, key=lambda r: (self._rank(r.turn, self._live(r)), r.turn))
        top = self._rank(best.turn, self._live(best))
        tied = {r.conversation for r in regs if self._rank(r.turn, self._live(r)) == top}
        return best, len(tied)

    def _link(
        self,
        family: str,
        keys: _Keys,
        messages: list[Message],
        label: str | None,
        previous_response_id: str | None,
    ) -> Link:
        if label:
            conv = self._by_label.get(label)
            if conv is None:
                return Link(self._new_conversation(), None, "header")
            return self._describe(conv, self._last_of[conv], keys.key, "header")
        if previous_response_id and previous_response_id in self._by_response:
            tid = self._by_response[previous_response_id]
            return Link(
                self.turns[tid].conversation, tid, "previous_response_id", kept=0, echoed=None
            )
        use_strict = self._use_strict(family, keys)
        link, repeat = self._by_history(family, keys, use_strict)
        if link is not None:
            return link
        if repeat:
            again = self._discarded(family, keys, use_strict)
            if again is not None:
                return again
            sibling = self._sibling(family, keys, messages)
            if sibling is not None:
                return sibling
        if repeat or not messages:
            return self._start(messages)
        return self._by_opening(family, keys, messages)

    def _discarded(self, family: str, keys: _Keys, use_strict: bool) -> Link | None:
        """Exactly the request of a conversation's latest turn again, though that turn was
        answered: the client threw the answer away and asked again (``retry``; the C layer says
        the answer was discarded). Only past a conversation's first turn (an identical first
        request is a new agent starting alike) and when one conversation alone sent it."""
        n = len(keys.key)
        length, regs = next(self._matches(family, keys, strict=use_strict), (0, []))
        if length != n:
            return None
        live = [r for r in regs[-_MAX_PER_PREFIX:] if not r.with_echo and self._live(r)]
        if len({r.conversation for r in live}) != 1:
            return None
        t = self.turns[live[-1].turn]
        if t.failed or t.opens or t.system != self._system or t.tools != self._tools:
            return None
        return Link(t.conversation, live[-1].turn, "retry", kept=n, echoed=None)

    def _sibling(self, family: str, keys: _Keys, messages: list[Message]) -> Link | None:
        """An independent prompt that shares a conversation's opening (a prompt optimiser's
        few-shot prompts: system, demo questions and answers, a question of its own), after that
        conversation's answer called no tool: its own conversation, a sibling of the first prompt
        of the group (no history was rewritten). Either built like a conversation's latest request
        but for its last question, or a prompt of demo pairs that does not go on from it
        (:meth:`_goes_on`)."""
        start = self._start_len(messages)
        n = len(messages)
        last = messages[-1]
        if (
            n < start + 2  # (nothing shared beyond the opening: not a few-shot prompt)
            or _ROLE.get(last.role, last.role) != "user"
            or any(p.tool_result is not None for p in last.parts)
        ):
            return None
        cands = self._by_start.get(hash((self._family(family), keys.key[start - 1])))
        if not cands:
            return None
        latest = [
            t
            for t in cands[-_MAX_PER_PREFIX:]
            if self._last_of.get(self.turns[t].conversation) == t and self._answered_alike(t)
        ]
        if not latest:
            return None
        # Built like a conversation's latest request: the same messages but the last.
        same = [
            t
            for t in latest
            if self.turns[t].length == n
            and not any(k[0] == "r" for k in self.turns[t].last_parts or ())
            and self.turns[t].keys.key[: n - 1] == keys.key[: n - 1]  # type: ignore[union-attr]
        ]
        if not same:
            tid = max(latest, key=lambda t: (self._rank(t, True), t))
            if not _demo_pairs(messages, start) or self._goes_on(self.turns[tid], keys, messages):
                return None
        else:
            tid = max(same, key=lambda t: (self._rank(t, True), t))
        root = self._sibling_root.get(self.turns[tid].conversation, tid)
        return Link(self._new_conversation(), None, "start", parent=root, branch="sibling")

    def _answered_alike(self, tid: int) -> bool:
        """Turn ``tid``, a conversation's latest, was this agent's and was answered without a
        call: a prompt may be its sibling."""
        t = self.turns[tid]
        return (
            t.keys is not None
            and not t.failed
            and not t.echo_ids
            and not t.echo_names
            and t.system == self._system
            and t.tools == self._tools
        )

    def _goes_on(self, t: _TurnInfo, keys: _Keys, messages: list[Message]) -> bool:
        """The request may go on from ``t``: its latest request's question is in it, followed by
        more; or it is that request, its last question changed, then ``t``'s answer. A rewritten
        history, not an independent prompt (the same question asked last under other demos is).
        In prompts written in DSPy's fields the second shape is an optimiser's bootstrapped demo:
        a question it asked, re-rendered as a demo, and the answer it got (DSPy's conversation
        history re-sends its questions as they were asked: the first shape)."""
        assert t.keys is not None
        if t.keys.key[t.length - 1] in keys.key[:-1]:
            return True
        if _fields_prompt(messages):
            return False
        m = t.length
        return (
            len(keys.key) > m
            and keys.key[: m - 1] == t.keys.key[: m - 1]
            and keys.key[m] == t.echo_key
        )

    def _use_strict(self, family: str, keys: _Keys) -> bool:
        """Whether the keys with tool-call ids decide: when they reach as far as the loose ones, or
        when the request answers ids a model gave in this run (a loose match beyond is another
        agent's identical history); a client that rewrote the ids reaches further with the loose
        keys alone."""
        n = len(keys.key)
        if not n or keys.strict[-1] == keys.loose[-1]:
            return False
        loose_len = next(self._matches(family, keys, strict=False), (0, []))[0]
        strict_len = next(self._matches(family, keys, strict=True), (0, []))[0]
        return strict_len > 0 and (
            strict_len >= loose_len or any(i in self._id_turn for i in self._ids)
        )

    def _by_history(self, family: str, keys: _Keys, use_strict: bool) -> tuple[Link | None, bool]:
        """The turn whose history this request extends, longest match first; with whether the
        request is exactly an earlier request again (``repeat``: only a live turn may take it)."""
        n = len(keys.key)
        repeat = False
        owner: _Registered | None = None  # the exact request's turn, when it carries tool-call ids
        for length, regs in self._matches(family, keys, strict=use_strict):
            if length == n:  # (the longest match comes first: this is the first round, if any)
                link, regs, owner, repeat = self._same_request(regs, n, keys, use_strict)
                if link is not None:
                    return link, repeat
            if repeat:
                if owner is not None and keys.strict[length - 1] == keys.loose[length - 1]:
                    break  # a prefix without the ids no longer says whose request this is
                regs = [r for r in regs if self._live(r)]
                if not regs:
                    continue
            return self._extends(keys, regs), repeat
        if owner is not None and not self._live(owner):
            # The same request, tool-call ids included, as a turn of a conversation that has
            # since gone on, and no conversation waits where those ids lead: that conversation
            # went back to that point (its history rewritten). Exact ids win over a shorter,
            # id-less prefix another conversation shares.
            return self._describe(
                owner.conversation, self._last_of[owner.conversation], keys.key, "rewritten"
            ), repeat
        return None, repeat

    def _same_request(
        self, regs: list[_Registered], n: int, keys: _Keys, use_strict: bool
    ) -> tuple[Link | None, list[_Registered], _Registered | None, bool]:
        """The request is exactly a registered history (``n`` messages): its link when that
        decides it (a retry, or another agent's side call); else the registrations left to
        extend, the exact request's turn when tool-call ids name it, and whether it repeats an
        earlier request."""
        again = [r for r in regs[-64:] if not r.with_echo]
        if not again:
            return None, regs, None, False
        retry = self._retry_of(again, n)
        if retry is not None:
            return retry, regs, None, False
        regs = [r for r in regs if r.with_echo]
        if not regs and all(self._other_agent(self.turns[r.turn]) for r in again):
            # Another agent sent exactly what a turn sent: an agent a pending call handed the
            # question to (an agent used as a tool), else a title call on the first message: a
            # side call over that history, branched from the turn.
            tool_of = self._agent_tool()
            if tool_of is not None:
                return (
                    Link(
                        self._new_conversation(), None, "start", parent=tool_of, branch="agent_tool"
                    ),
                    regs,
                    None,
                    False,
                )
            best, _ = self._choose(again)
            latest = self._last_of[best.conversation]
            if self._handed_to(self.turns[latest]):
                return (
                    Link(self._new_conversation(), None, "start", parent=latest, branch="handoff"),
                    regs,
                    None,
                    False,
                )
            return (
                Link(self._new_conversation(), None, "start", parent=best.turn, branch="side_call"),
                regs,
                None,
                False,
            )
        owner = (
            self._choose(again)[0]
            if use_strict and keys.strict[n - 1] != keys.loose[n - 1]
            else None
        )
        # Otherwise the same history as another conversation's request: a parallel agent one
        # turn behind (it continues a turn still waiting), or the agent started over (a new
        # run with the same opening).
        return None, regs, owner, True

    def _retry_of(self, again: list[Any], n: int) -> Link | None:
        """Exactly an earlier request again: a retry when that was the conversation's latest
        attempt and it failed."""
        failed = [
            r
            for r in again
            if self.turns[r.turn].failed and self._live(r) and self._retried(self.turns[r.turn])
        ]
        if not failed:
            return None
        best, tied = self._choose(failed)
        if not self._rank(best.turn, True)[0]:
            return None
        return Link(
            best.conversation,
            best.turn,
            "retry",
            kept=n,
            echoed=None,
            ambiguous=tied if tied > 1 else 0,
        )

    def _retried(self, t: _TurnInfo) -> bool:
        """This request, the same as the failed turn ``t``'s, is its retry, not another run
        sending the same request: the client's retry counter says so (above 0), or it came within
        :data:`_RETRY_WINDOW` of the failure. A counter of 0 (the SDK's first attempt) with no
        clock, or a longer wait, is a new start."""
        a = self._attempt
        if a.retries:
            return True
        if a.sent is not None and t.ended is not None:
            return a.sent - t.ended <= _RETRY_WINDOW
        return a.retries is None

    def _extends(self, keys: _Keys, regs: list[Any]) -> Link:
        """The request goes on from the best of the turns whose history it extends."""
        best, tied = self._choose(regs)
        prev_info = self.turns[best.turn]
        if self._receives_answer(best, prev_info):
            # Another agent of a group chat: it got the turn's answer as input of its own.
            return Link(
                self._new_conversation(), None, "start", parent=best.turn, branch="group_chat"
            )
        heard = self._hears_final_answer(best, keys)
        if heard is not None:
            return Link(self._new_conversation(), None, "start", parent=heard, branch="group_chat")
        if self._other_agent(prev_info) and not self._hands_over(prev_info):
            # Another agent (another system prompt and other tools) over this history: the agent
            # a pending transfer call named (a handoff), else a summary, compaction or title call.
            # Its own conversation, branched here.
            latest = self._last_of[best.conversation]
            if self._handed_to(self.turns[latest]):
                return Link(
                    self._new_conversation(), None, "start", parent=latest, branch="handoff"
                )
            return Link(
                self._new_conversation(), None, "start", parent=best.turn, branch="side_call"
            )
        # Compared with the conversation's latest turn, not the older turn it matched best: a
        # history that extends an earlier turn has dropped or rewritten what came after it.
        latest = self._last_of[best.conversation]
        known = best.length - best.with_echo if latest == best.turn else 0
        link = self._describe(best.conversation, latest, keys.key, "extends", known)
        if self._forks_running_calls(self.turns[latest], link):
            return Link(self._new_conversation(), None, "start", parent=latest, branch="side_call")
        link.ambiguous = tied if tied > 1 else 0
        return link

    def _by_opening(self, family: str, keys: _Keys, messages: list[Message]) -> Link:
        """No earlier history is extended: a conversation that begins with the same opening
        words has rewritten its history — unless another agent opens the same way."""
        start = self._start_len(messages)
        cands = self._by_start.get(hash((self._family(family), keys.key[start - 1])))
        if not cands:
            return (
                self._re_rendered(family)
                or self._after_answer(family, keys, messages, start)
                or self._start(messages)
            )
        sibling = self._sibling(family, keys, messages)
        if sibling is not None:
            return sibling
        best_tid = max(
            cands,
            key=lambda t: (self._rank(t, self._last_of.get(self.turns[t].conversation) == t), t),
        )
        info = self.turns[best_tid]
        conv = info.conversation
        latest = self._last_of[conv]
        other_agent = info.system != self._system and info.tools != self._tools
        if other_agent or (self.turns[latest].system != self._system and len(messages) <= start):
            # The same opening words under another system prompt and nothing of the
            # conversation after them: another agent (a sub-agent, a title call).
            return self._start(messages)
        return self._describe(conv, latest, keys.key, "rewritten")

    @staticmethod
    def _trajectory(messages: list[Message]) -> Fields | None:
        """The fields of a request that is system messages and one user message written in
        ``[[ ## name ## ]]`` fields (a re-rendered trajectory: DSPy), else ``None``."""
        asked = [m for m in messages[:_SCAN_OPENING] if _ROLE.get(m.role, m.role) != "system"]
        if (
            len(asked) != 1
            or len(messages) > _SCAN_OPENING
            or _ROLE.get(asked[0].role, asked[0].role) != "user"
        ):
            return None
        return fields_of("\n".join(p.text for p in asked[0].parts if p.kind == "text" and p.text))

    def _head_key(self, family: str, f: Fields) -> int:
        return stable(orjson.dumps([family, self._system, self._tools, f.head[0]]))

    def _re_rendered(self, family: str) -> Link | None:
        """The next step of a re-rendered trajectory (:mod:`.trajectory`): the same agent and
        question, every step field its conversation's latest request had and the one step more
        that request's answer asked for. A step field rendered otherwise than it was sent (an
        observation the client rewrote) is the history rewritten in place."""
        now = self._fields
        if now is None or not now.head:
            return None
        tid = self._by_head.get(self._head_key(family, now))
        if tid is None:
            return None
        t = self.turns[tid]
        if (
            self._last_of.get(t.conversation) != tid
            or t.fields is None
            or t.failed
            or t.step is None
        ):
            return None
        found = follows(t.fields, now, t.step)
        if found is None or not found[0]:
            return None  # not the step the answer asked for: another run of the program
        if found[1]:
            return Link(
                t.conversation, tid, "rewritten", kept=t.length - 1, echoed=True, rewritten=1
            )
        return Link(t.conversation, tid, "extends", kept=t.length, echoed=True)

    def _after_answer(
        self, family: str, keys: _Keys, messages: list[Message], start: int
    ) -> Link | None:
        """A history that opens (after its system messages) with the answer a conversation's
        latest turn gave: that conversation goes on, the messages before the answer dropped (a
        Responses client sending the answer back by id without the question). The C layer says
        what was dropped."""
        first = messages[start - 1]
        if _ROLE.get(first.role, first.role) not in ("assistant", "model"):
            return None
        tid = self._by_answer.get(hash((self._family(family), keys.key[start - 1])))
        if tid is None:
            return None
        t = self.turns[tid]
        if self._last_of.get(t.conversation) != tid or t.failed or t.system != self._system:
            return None
        kept = (
            start - 1
            if t.keys is not None and t.keys.key[: start - 1] == keys.key[: start - 1]
            else 0
        )
        return Link(
            t.conversation, tid, "rewritten", kept=kept, echoed=True, rewritten=t.length - kept
        )

    def _start(self, messages: list[Message]) -> Link:
        """A new conversation; a sub-agent's when its first user words are a pending call's
        prompt."""
        link = Link(self._new_conversation(), None, "start")
        if not self._prompts and not self._quotes:
            return link
        # The first few messages after the system ones: a sub-agent's task may follow a context
        # message of its own (Codex: environment context, then the parent's agent_message).
        opening = [m for m in messages[:_SCAN_OPENING] if _ROLE.get(m.role, m.role) != "system"][:4]
        for m in opening:
            if _ROLE.get(m.role, m.role) != "user":
                continue
            text = _norm_prompt(" ".join(p.text for p in m.parts if p.kind == "text" and p.text))
            if len(text) < _MIN_PROMPT:
                continue
            tid = self._prompts.get(text)
            branch = "sub_agent"
            if tid is None:
                # A prompt the sub-agent's client wrapped in more words: the most recent few only
                # (a run of many new conversations must not scan every prompt each time).
                for prompt, t in itertools.islice(reversed(self._prompts.items()), _SCAN_PROMPTS):
                    if prompt in text:
                        tid = t
                        if _quoted_only(text, prompt):
                            branch = "side_call"
                        break
            if tid is None:
                # A request that quotes a recent call's arguments whole (Claude Code's tool-use
                # summary: ``Input: {"command":"ls"}``), however short their strings: about that
                # call.
                bare = "".join(text.split())
                tid = next(
                    (
                        t
                        for q, t in itertools.islice(reversed(self._quotes.items()), _SCAN_PROMPTS)
                        if q in bare
                    ),
                    None,
                )
                branch = "side_call"
            if tid is not None:
                link.parent, link.branch = tid, branch
                break
        return link

    def _describe(self, conv: str, prev: int, keys: list[int], how: str, known: int = 0) -> Link:
        p = self.turns[prev]
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
            now = _part_keys(self._messages[kept].parts, memo=self._memo)
            last = p.last_parts or []
            if now[: len(last)] == last and len(now) > len(last):
                rest = now[len(last) :]
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
