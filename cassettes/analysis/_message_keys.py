"""Message keys: what the threader compares of a history, robust to what SDKs and frameworks
change when they re-serialise one (key order, whitespace, absent vs null, content as a string vs
a list of text parts, reasoning blocks dropped or re-signed). See :mod:`.threading`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import orjson

from ..models import Message, NormalisedResponse, Part

__all__ = ["MessageKeys", "message_key", "response_message", "squashed", "stable"]

_ROLE = {"developer": "system", "model": "assistant"}


def stable(data: bytes) -> int:
    """A 64-bit hash of ``data`` that is the same in every process (``hash`` of bytes or a str is
    salted per process: a kept analysis is continued by another process, whose keys must match the
    ones the threader and the checks kept; docs/kept-analysis.md)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def squashed(text: str | None) -> str:
    """``text`` with every run of whitespace made one space, and none at either end."""
    return " ".join(text.split()) if text else ""


def _unspaced(text: str | None) -> str:
    """``text`` with no whitespace at all: a text's key. Adjacent text parts are one text, however
    a client splits or joins them — a stream's chunks sent back as streamed (Gemini's parts, one per
    chunk, cut mid-word), blocks joined with a newline or a space. An ASCII text's whitespace
    (what ``str.split`` reads as such of ASCII, :data:`_ASCII_SPACE`) is deleted as bytes."""
    if not text:
        return ""
    if text.isascii():
        return text.encode("ascii").translate(None, _ASCII_SPACE).decode("ascii")
    return "".join(text.split())


#: The ASCII characters ``str.split`` reads as whitespace.
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _canon(value: Any, squash: bool = False) -> Any:
    """Arguments compared as JSON values: key order ignored, absent and null treated alike
    (``squash``: and strings' whitespace squashed)."""
    if isinstance(value, dict):
        return {k: _canon(v, squash) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, list):
        return [_canon(v, squash) for v in value]
    return squashed(value) if squash and isinstance(value, str) else value


def _part_key(p: Part) -> Any:
    """One part's key with its tool-call id (``None`` for parts left out of comparisons)."""
    key: Any = None
    if p.kind in ("text", "refusal"):
        t = _unspaced(p.text)
        key = ("t", t) if t else None
    elif p.kind == "tool_call" and p.tool_call is not None:
        tc = p.tool_call
        args = _canon(tc.arguments) if tc.arguments is not None else squashed(tc.arguments_raw)
        key = ("c", tc.name, args, tc.id)
    elif p.kind == "tool_result" and p.tool_result is not None:
        tr = p.tool_result
        # The name a result is sent under, where the wire has one, is part of it (Gemini's model
        # reads the result as that function's output): a later rename is a rewritten history. A
        # name looked up from the call (Anthropic, OpenAI) is not: it is there only when the call
        # is in the same request.
        key = ("r", squashed(tr.content), tr.name if tr.named else None, tr.call_id)
    elif p.kind == "media":
        key = ("m", p.media_type)
    # reasoning and provider-specific parts are left out: clients may drop or re-sign them
    return key


def _part_keys(parts: list[Part], ids: bool = False) -> list[Any]:
    """Comparable keys of a message's parts; ``ids`` keeps tool-call ids (the strict key)."""
    out: list[Any] = []
    for p in parts:
        k = _part_key(p)
        if k is None:
            continue
        if k[0] == "t":
            if out and out[-1][0] == "t":
                out[-1] = ("t", out[-1][1] + k[1])
            else:
                out.append(k)
        elif ids or k[0] == "m":
            out.append(k)
        else:
            out.append(k[:-1])
    return out


def message_key(m: Message) -> int:
    return _message_keys(m)[0]


def _message_keys(m: Message) -> tuple[int, int, int]:
    """The message's key (for comparing histories), and its loose and strict lookup keys."""
    key, loose, strict, _ = _keyed(m)
    return key, loose, strict


#: A message's key, loose and strict lookup keys, and its parts' keys without the ids
#: (``_part_keys(m.parts)``).
Keyed = tuple[int, int, int, list[Any]]


def _keyed(m: Message) -> Keyed:
    """:func:`_message_keys` and the parts' keys they were made of (without the ids)."""
    role = _ROLE.get(m.role, m.role)
    with_ids = _part_keys(m.parts, ids=True)
    parts = [k[:-1] if k[0] in "cr" else k for k in with_ids]  # the same keys without the ids
    # A tool result is a tool result whether it travels as a `tool` message or inside a user one.
    if parts and all(k[0] == "r" for k in parts):
        role = "tool"
    key = stable(orjson.dumps([role, parts], option=orjson.OPT_NON_STR_KEYS))
    if role == "system":
        return key, _SYSTEM_KEY, _SYSTEM_KEY, parts
    has_ids = any(
        (p.tool_call is not None and p.tool_call.id)
        or (p.tool_result is not None and p.tool_result.call_id)
        for p in m.parts
    )
    strict = (
        stable(orjson.dumps([role, with_ids], option=orjson.OPT_NON_STR_KEYS)) if has_ids else key
    )
    return key, key, strict, parts


#: The kinds of part whose key is made of its text alone, or that have none.
_TEXTS_ONLY = frozenset(("text", "refusal", "reasoning", "other"))

#: What any system message counts as in a lookup key.
_SYSTEM_KEY = stable(b"looptap:system")


_NO_NAMES: frozenset[str] = frozenset()  # one shared empty set: each frozenset() is a new object


def _call_names(message: Message) -> frozenset[str]:
    """Tool names of a message's calls (kept only where calls carry no ids)."""
    names = frozenset(
        p.tool_call.name for p in message.parts if p.tool_call is not None and p.tool_call.name
    )
    return names if names else _NO_NAMES


def _call_ids(parts: list[Part]) -> set[str]:
    """Tool-call ids named by the parts: calls' own ids and the ids results answer."""
    out: set[str] = set()
    for p in parts:
        if p.tool_call is not None and p.tool_call.id:
            out.add(p.tool_call.id)
        elif p.tool_result is not None and p.tool_result.call_id:
            out.add(p.tool_result.call_id)
    return out


def response_message(resp: NormalisedResponse | None) -> Message | None:
    """The assistant message a response adds to the history, if it has any content."""
    if resp is None or (resp.error is not None and not resp.parts):
        return None
    parts = [
        p for p in resp.parts if p.kind in ("text", "tool_call", "refusal", "reasoning", "media")
    ]
    if not any(map(_keyed_part, parts)):
        return None
    return Message(role="assistant", parts=parts)


def _keyed_part(p: Part) -> bool:
    """``_part_key(p) is not None``, without making the key: a text with a character that is not
    whitespace (``str.split`` and ``str.isspace`` read whitespace alike), a call, a result, a
    media part."""
    if p.kind in ("text", "refusal"):
        t = p.text
        return bool(t and not t.isspace())
    if p.kind == "tool_call":
        return p.tool_call is not None
    if p.kind == "tool_result":
        return p.tool_result is not None
    return p.kind == "media"


class MessageKeys:
    """Each message's keys (:func:`_keyed`) computed once per message object, and each
    response's :func:`response_message` built once, shared by every reader of a turn (the
    threader, the C layer, the checks) and of the next one (a request parsed against the one it
    extends shares its messages: cassettes.parsing). Held by object identity, the object held
    with its entry (an id names no other while it is here), for the request threaded last and
    the one before (:meth:`next_request` moves on): memory stays two requests' messages, not the
    run's.

    Exact only while a message keyed is not changed: the analysis changes messages in one
    place, where it resolves referenced items in place
    (:meth:`~._items.ItemReferences.resolve`), and forgets each message it changed
    (:meth:`forget`) before anything keys it again."""

    __slots__ = ("_answers", "_answers_before", "_before", "_now", "_system")

    def __init__(self) -> None:
        self._now: dict[int, tuple[Message, Keyed]] = {}
        self._before: dict[int, tuple[Message, Keyed]] = {}
        self._answers: dict[int, tuple[NormalisedResponse, Message | None]] = {}
        self._answers_before: dict[int, tuple[NormalisedResponse, Message | None]] = {}
        #: The last system prompt keyed (:meth:`system`): its texts, and its key.
        self._system: tuple[tuple[str | None, ...], int] | None = None

    def __len__(self) -> int:
        """Messages and responses held."""
        return len(self._now) + len(self._before) + len(self._answers) + len(self._answers_before)

    def next_request(self) -> None:
        """A new request is read: what the one before last read is let go."""
        self._before, self._now = self._now, {}
        self._answers_before, self._answers = self._answers, {}

    def forget(self, messages: Iterable[Message]) -> None:
        """``messages`` were changed in place: their keys are made again when next asked."""
        for m in messages:
            self._now.pop(id(m), None)
            self._before.pop(id(m), None)

    def keyed(self, m: Message) -> Keyed:
        return _held(self._now, self._before, m, _keyed)

    def keys(self, m: Message) -> tuple[int, int, int]:
        """:func:`_message_keys` of ``m``."""
        key, loose, strict, _ = self.keyed(m)
        return key, loose, strict

    def key(self, m: Message) -> int:
        """:func:`message_key` of ``m``."""
        return self.keyed(m)[0]

    def parts(self, m: Message) -> list[Any]:
        """``_part_keys(m.parts)`` (shared: not to be changed)."""
        return self.keyed(m)[3]

    def system(self, parts: list[Part]) -> int:
        """The key of a system prompt's parts: ``stable`` of their part keys as JSON. A prompt
        of texts alone (and parts no key reads: reasoning, provider items) is keyed by its texts
        (a text part's key is its text's, whether ``text`` or ``refusal``; the others have
        none): the same texts as the prompt keyed last, the same key."""
        texts: tuple[str | None, ...] | None = None
        if all(p.kind in _TEXTS_ONLY for p in parts):
            texts = tuple(p.text if p.kind in ("text", "refusal") else None for p in parts)
            if self._system is not None and self._system[0] == texts:
                return self._system[1]
        key = stable(orjson.dumps(_part_keys(parts), option=orjson.OPT_NON_STR_KEYS))
        if texts is not None:
            self._system = (texts, key)
        return key

    def answer(self, resp: NormalisedResponse | None) -> Message | None:
        """:func:`response_message` of ``resp``, the same message object each time asked."""
        if resp is None:
            return None
        return _held(self._answers, self._answers_before, resp, response_message)


_O = TypeVar("_O")
_V = TypeVar("_V")


def _held(
    now: dict[int, tuple[_O, _V]],
    before: dict[int, tuple[_O, _V]],
    obj: _O,
    make: Callable[[_O], _V],
) -> _V:
    """``make(obj)``, held in ``now`` by ``obj``'s identity with ``obj`` itself (an id names no
    other object while its entry holds it), taken from ``before`` (the request before) when
    there."""
    got = now.get(id(obj))
    if got is None or got[0] is not obj:
        got = before.get(id(obj))
        if got is None or got[0] is not obj:
            got = (obj, make(obj))
        now[id(obj)] = got
    return got[1]
