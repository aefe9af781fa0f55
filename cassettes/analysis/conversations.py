"""Threading round trips into conversations, from the content alone.

Each request's history is reduced to *message keys*: a hash of the message's role and parts, made
robust to what SDKs and frameworks change when they re-serialise a history — key order,
whitespace, absent vs null, content as a string vs a list of text parts, tool-call ids rewritten
(ids are left out; names, arguments and results are kept), reasoning blocks dropped or re-signed.

After each turn two prefixes are registered for its conversation: the request's history, and the
request's history followed by the assistant message the response produced. A new request joins
the conversation whose registered prefix it extends the furthest, so interleaved concurrent
conversations separate cleanly, and parallel conversations that start alike separate at the first
echoed answer. Lookups are by rolling hash (one pass over the new history). Then, in order:

1. ``X-Looptap-Conversation`` request header — an explicit label always wins;
2. ``previous_response_id`` (Responses API) — the turn that produced that response;
3. the longest registered prefix — the conversation it extends (``extends``), or the same
   request again after a failed attempt (``retry``);
4. the latest conversation whose history shares its start up to the first non-system message —
   the history was rewritten (trimmed, summarised, edited: ``rewritten``);
5. otherwise a new conversation (a new agent, a sub-agent, a side call such as a title).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from cassettes.models import Message, NormalisedResponse, Part

__all__ = ["Link", "Threader", "message_key", "response_message"]

_ROLE = {"developer": "system", "model": "assistant"}
#: The part keys of a turn that is no longer its conversation's latest (never read again).
_RELEASED: list[Any] = []


def _norm_text(text: str | None) -> str:
    return " ".join((text or "").split())


def _canon(value: Any) -> Any:
    """Arguments compared as JSON values: key order ignored, absent and null treated alike."""
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, list):
        return [_canon(v) for v in value]
    return value


def _part_keys(parts: list[Part]) -> list[Any]:
    out: list[Any] = []
    for p in parts:
        if p.kind in ("text", "refusal"):
            t = _norm_text(p.text)
            if not t:
                continue
            if out and out[-1][0] == "t":
                out[-1] = ("t", out[-1][1] + " " + t)
            else:
                out.append(("t", t))
        elif p.kind == "tool_call" and p.tool_call is not None:
            tc = p.tool_call
            args = _canon(tc.arguments) if tc.arguments is not None else _norm_text(tc.arguments_raw)
            out.append(("c", tc.name, args))
        elif p.kind == "tool_result" and p.tool_result is not None:
            out.append(("r", _norm_text(p.tool_result.content)))
        elif p.kind == "media":
            out.append(("m", p.media_type))
        # reasoning and provider-specific parts are left out: clients may drop or re-sign them
    return out


def message_key(m: Message) -> int:
    role = _ROLE.get(m.role, m.role)
    parts = _part_keys(m.parts)
    # A tool result is a tool result whether it travels as a `tool` message or inside a user one.
    if parts and all(k[0] == "r" for k in parts):
        role = "tool"
    return hash(orjson.dumps([role, parts], option=orjson.OPT_NON_STR_KEYS))


def response_message(resp: NormalisedResponse | None) -> Message | None:
    """The assistant message a response adds to the history, if it has any content."""
    if resp is None or (resp.error is not None and not resp.parts):
        return None
    parts = [p for p in resp.parts if p.kind in ("text", "tool_call", "refusal", "reasoning", "media")]
    if not _part_keys(parts):
        return None
    return Message(role="assistant", parts=parts)


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


@dataclass(slots=True)
class _Registered:
    conversation: str
    turn: int  # global turn id (index into Threader.turns)
    length: int  # prefix length in messages
    with_echo: bool


@dataclass(slots=True)
class _TurnInfo:
    conversation: str
    #: Message keys and their rolling prefix hashes; kept only while the turn is its
    #: conversation's latest (memory stays bounded by the live histories, not the run).
    keys: list[int] | None
    rolling: list[int] | None
    #: Key of the request's system prompt (top-level and history system messages alike).
    system: int
    #: Number of messages in the request. ``keys``/``rolling`` may be longer: a turn that extends
    #: this one takes the lists over and appends to them instead of copying (linear analysis).
    length: int
    #: Part keys of the history's last message, and of the answer (to recognise a merged echo);
    #: like ``keys``, kept only while the turn is its conversation's latest.
    last_parts: list[Any]
    echo_parts: list[Any]
    echo_key: int | None
    response_id: str | None
    failed: bool
    family: str


@dataclass
class Threader:
    """Assigns each generation round trip to a conversation. Feed turns in recording order."""

    turns: list[_TurnInfo] = field(default_factory=list)
    _prefix: dict[int, _Registered] = field(default_factory=dict)
    _by_start: dict[int, int] = field(default_factory=dict)  # start-of-history hash → latest turn id
    _by_response: dict[str, int] = field(default_factory=dict)
    _by_label: dict[str, str] = field(default_factory=dict)
    _last_of: dict[str, int] = field(default_factory=dict)  # conversation → its latest turn id
    _count: int = 0
    _messages: list[Message] = field(default_factory=list)
    _system: int = 0

    def _new_conversation(self) -> str:
        self._count += 1
        return f"c{self._count}"

    @staticmethod
    def _rolling(keys: list[int], start: list[int] | None = None) -> list[int]:
        """Rolling prefix hashes of ``keys``, continuing ``start`` in place when given."""
        out = start if start is not None else []
        h = out[-1] if out else 0
        for k in keys[len(out) :]:
            h = hash((h, k))
            out.append(h)
        return out

    def _keys(self, messages: list[Message], reuse: tuple[int, int] | None) -> tuple[list[int], list[int]]:
        if reuse is not None and 0 <= reuse[0] < len(self.turns):
            base = self.turns[reuse[0]]
            keep = reuse[1]
            if base.keys is not None and base.rolling is not None and 0 <= keep <= min(base.length, len(messages)):
                new = [message_key(m) for m in messages[keep:]]
                if keep == base.length == len(base.keys):
                    # A pure extension of the latest request: append to its lists, no copy.
                    keys = base.keys
                    keys.extend(new)
                    return keys, self._rolling(keys, base.rolling)
                keys = base.keys[:keep] + new
                return keys, self._rolling(keys, base.rolling[:keep])
        keys = [message_key(m) for m in messages]
        return keys, self._rolling(keys)

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
    ) -> Link:
        """Thread one request. ``reuse=(turn id, keep)`` says its first ``keep`` messages are that
        earlier turn's (a cassette's history delta): their keys are reused, not recomputed."""
        keys, rolling = self._keys(messages, reuse)
        self._messages = messages
        self._system = hash(orjson.dumps(_part_keys(system or []), option=orjson.OPT_NON_STR_KEYS))
        link = self._link(family, keys, rolling, messages, label, previous_response_id)
        tid = len(self.turns)
        echo = response_message(response)
        info = _TurnInfo(
            conversation=link.conversation,
            keys=keys,
            rolling=rolling,
            length=len(keys),
            system=self._system,
            last_parts=_part_keys(messages[-1].parts) if messages else [],
            echo_parts=_part_keys(echo.parts) if echo is not None else [],
            echo_key=message_key(echo) if echo is not None else None,
            response_id=response.id if response is not None else None,
            failed=failed,
            family=family,
        )
        self.turns.append(info)
        superseded = self._last_of.get(link.conversation)
        if superseded is not None:
            old = self.turns[superseded]
            old.keys = old.rolling = None
            old.last_parts = old.echo_parts = _RELEASED
        self._last_of[link.conversation] = tid
        if label:
            self._by_label[label] = link.conversation
        if info.response_id:
            self._by_response[info.response_id] = tid
        if rolling:
            self._prefix[hash((family, rolling[-1]))] = _Registered(link.conversation, tid, len(keys), False)
            start = self._start_len(messages)
            self._by_start[hash((family, keys[start - 1]))] = tid
        if info.echo_key is not None:
            h = hash((rolling[-1] if rolling else 0, info.echo_key))
            self._prefix[hash((family, h))] = _Registered(link.conversation, tid, len(keys) + 1, True)
        return link

    def _link(
        self,
        family: str,
        keys: list[int],
        rolling: list[int],
        messages: list[Message],
        label: str | None,
        previous_response_id: str | None,
    ) -> Link:
        if label:
            conv = self._by_label.get(label)
            if conv is None:
                return Link(self._new_conversation(), None, "header")
            prev = self._last_of[conv]
            return self._describe(conv, prev, keys, "header")
        if previous_response_id and previous_response_id in self._by_response:
            tid = self._by_response[previous_response_id]
            return Link(self.turns[tid].conversation, tid, "previous_response_id", kept=0, echoed=None)
        best: _Registered | None = None
        for h in reversed(rolling):  # from the longest prefix down: the first hit is the best
            best = self._prefix.get(hash((family, h)))
            if best is not None:
                break
        if best is not None:
            prev_info = self.turns[best.turn]
            if best.length == len(keys) and not best.with_echo:
                # Exactly an earlier request again: a retry when that was the conversation's
                # latest attempt and it failed; otherwise the agent started over (a new run with
                # the same opening, or a parallel conversation that starts the same way).
                if prev_info.failed and self._last_of.get(best.conversation) == best.turn:
                    return Link(best.conversation, best.turn, "retry", kept=len(keys), echoed=None)
                return Link(self._new_conversation(), None, "start")
            # Compared with the conversation's latest turn, not the older turn it matched best: a
            # history that extends an earlier turn has dropped or rewritten what came after it.
            latest = self._last_of[best.conversation]
            known = best.length - best.with_echo if latest == best.turn else 0
            return self._describe(best.conversation, latest, keys, "extends", known)
        if messages:
            start = self._start_len(messages)
            start_tid = self._by_start.get(hash((family, keys[start - 1])))
            if start_tid is not None:
                conv = self.turns[start_tid].conversation
                latest = self._last_of[conv]
                if self.turns[latest].system != self._system and len(messages) <= start:
                    # The same opening words under another system prompt and nothing of the
                    # conversation after them: another agent (a sub-agent, a title call).
                    return Link(self._new_conversation(), None, "start")
                return self._describe(conv, latest, keys, "rewritten")
        return Link(self._new_conversation(), None, "start")

    def _describe(self, conv: str, prev: int, keys: list[int], how: str, known: int = 0) -> Link:
        p = self.turns[prev]
        pkeys = p.keys if p.keys is not None else []
        plen = p.length if p.keys is not None else 0
        n = min(plen, len(keys))
        kept = min(known, n)
        while kept < n and pkeys[kept] == keys[kept]:
            kept += 1
        echoed: bool | None = None
        if kept == plen - 1 and kept < len(keys):
            # Adapters that merge consecutive model-side items into one message (Responses) make
            # the echo continue the previous last message instead of following it.
            now = _part_keys(self._messages[kept].parts)
            last = p.last_parts
            if now[: len(last)] == last and len(now) > len(last):
                rest = now[len(last) :]
                return Link(conv, prev, how, kept=plen, echoed=(rest[: len(p.echo_parts)] == p.echo_parts) if p.echo_parts else None)
        rewritten = plen - kept
        if p.echo_key is not None and kept == plen:
            echoed = len(keys) > kept and keys[kept] == p.echo_key
        if rewritten and how == "extends":
            how = "rewritten"
        return Link(conv, prev, how, kept=kept, echoed=echoed, rewritten=rewritten)
