"""What the threading rules read in a request's words, without state: a pending call's prompt or
quotation, a transfer call's agent, a few-shot prompt's shape, a re-rendered trajectory's fields,
where a history's opening ends."""

from __future__ import annotations

import re
from typing import Any

import orjson

from ...lazy import pattern
from ...models import Message, Part
from .._message_keys import _NO_NAMES, _ROLE
from .._trajectory import Fields, fields_of

#: Recent tool-call argument texts that may be a sub-agent's prompt (text → turn id).
MAX_PROMPTS = 4096
#: Recent prompts looked for inside a new conversation's first words (exact matches: all of them).
SCAN_PROMPTS = 64
#: Messages read at a new conversation's start for a pending call's prompt (system ones skipped).
SCAN_OPENING = 16
#: Shortest argument text looked for inside a new conversation's first words (a shorter one is
#: taken only as the whole first message of another agent while its call runs: :func:`short`).
MIN_PROMPT = 24
#: Shortest answer registered as a summary a later request may open with (a compaction's answer:
#: :attr:`~._data.Threads.summaries`); shorter answers match other words by accident.
MIN_SUMMARY = 80
#: Characters of a new conversation's opening searched for a summary.
MAX_HAY = 200_000
#: Messages read from a request's end for the answer it carries (:func:`._opening.managed`).
SCAN_ANSWERS = 64
#: Longest argument text registered as a prompt.
MAX_PROMPT = 100_000


def norm_prompt(text: str) -> str:
    return " ".join(text.split()).casefold()


def system_words(parts: list[Part]) -> str:
    """The system prompt's texts (normalised, bounded): where a summariser may be given a
    history as text (Agno's session summaries), or a summary land (Agno's next run)."""
    return norm_prompt(
        " ".join(p.text for p in parts[:64] if p.kind == "text" and p.text)[:MAX_HAY]
    )


_SUMMARY_TAG = pattern(r"<summary>(.*?)</summary>", re.S | re.I)


def summary_body(text: str) -> str:
    """The body of a ``<summary>`` block of an answer (bounded), else ``""``."""
    found = _SUMMARY_TAG.search(text[:MAX_PROMPT])
    return found.group(1) if found else ""


_FENCE = pattern(r"\s*```(?:json)?\s*\n(.*)\n\s*```\s*", re.S | re.I)


def answer_fields(text: str) -> list[str]:
    """The string values of an answer that is a JSON object or array (a structured answer:
    Agno's session summary ``{"summary": …, "topics": […]}``; fenced in a ```json block or
    not), normalised, bounded (:func:`prompt_strings`); ``[]`` for any other answer. A field's
    value is what a client passes on of such an answer (Agno puts ``summary`` in the next
    system prompt), word for word."""
    text = text[:MAX_PROMPT].strip()
    fenced = _FENCE.fullmatch(text) if text.startswith("```") else None
    text = fenced.group(1).strip() if fenced is not None else text
    if text[:1] not in ("{", "["):
        return []
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    found: list[str] = []
    prompt_strings(value, found)
    return found


def compactions(parts: list[Part]) -> list[str]:
    """The opaque compaction items among ``parts`` (the Responses API's ``compaction`` item, its
    ``encrypted_content``; bounded), as the keys :attr:`~._data.Threads.summaries` holds them:
    the item a compaction answered stands for the history it compacted wherever it is sent
    back, word for word."""
    out: list[str] = []
    for p in parts[:64]:
        block = (p.provider_details or {}).get("block") if p.kind == "other" else None
        if isinstance(block, dict) and block.get("type") == "compaction":
            token = block.get("encrypted_content")
            if isinstance(token, str) and token:
                out.append("\0compaction " + token[:MAX_PROMPT])
    return out


#: A message text shorter than this is not looked for in a rendered history (it matches by
#: accident); a rendered history is judged on the latest 256 messages of a request.
MIN_RENDERED = 8
RENDERED_MESSAGES = 256
#: Conversations whose latest request a rendered history is looked for in: the most recent
#: (a summariser is called right after the turn whose history it is fed); their messages are
#: held, so few.
RECENT = 8
#: Characters of each message text looked for (a prefix of a text carried word for word is
#: carried too; ADK cuts a tool's content at 2,000).
RENDERED_TEXT = 1000
#: Message texts a rendered history must carry in order, one of them the user's (a demo's
#: question and answer are two: a few-shot prompt is no rendered history).
MIN_CARRIED = 3


def message_texts(m: Message) -> list[str]:
    """What a summariser fed rendered text writes of message ``m`` word for word (normalised,
    each bounded): its text parts, and its tool results' content — the string values of a JSON
    result (ADK renders a result as its Python ``repr``, CrewAI the content as sent)."""
    out: list[str] = []
    said = " ".join(p.text for p in m.parts[:64] if p.kind == "text" and p.text)
    if said:
        out.append(norm_prompt(said[:RENDERED_TEXT]))
    for p in m.parts[:64]:
        res = p.tool_result
        if res is None or not res.content:
            continue
        text = res.content[:MAX_PROMPT]  # (parsed whole: a JSON result cut is no JSON)
        if text.lstrip()[:1] in ("{", "["):
            try:
                found: list[str] = []
                prompt_strings(orjson.loads(text), found)
                out.extend(found)
                continue
            except orjson.JSONDecodeError:
                pass
        out.append(norm_prompt(text[:RENDERED_TEXT]))
    return [t[:RENDERED_TEXT] for t in out if len(t) >= MIN_RENDERED]


#: What a summariser fed rendered text would carry of a request's messages, as plain data: for each
#: message after the system ones, whether it is a plain user message (no tool result) and its
#: texts (:func:`message_texts`). What a grown file's continued state keeps of a request.
Rendered = tuple[tuple[bool, tuple[str, ...]], ...]


def rendered_texts(messages: list[Message]) -> Rendered:
    """The texts of ``messages`` a rendered history carries (:data:`Rendered`), the latest
    :data:`RENDERED_MESSAGES` read."""
    out: list[tuple[bool, tuple[str, ...]]] = []
    for m in messages[-RENDERED_MESSAGES:]:
        role = _ROLE.get(m.role, m.role)
        if role == "system":
            continue
        user = role == "user" and all(p.tool_result is None for p in m.parts)
        out.append((user, tuple(message_texts(m))))
    return tuple(out)


def seen_text(messages: list[Message]) -> str:
    """Every text of a request (text parts, tool results, calls' arguments; normalised,
    bounded): what a side call was given."""
    out: list[str] = []
    size = 0
    for m in messages[-RENDERED_MESSAGES:]:
        for p in m.parts[:64]:
            if p.tool_result is not None:
                text = p.tool_result.content
            elif p.tool_call is not None:
                text = p.tool_call.arguments_raw or ""
            else:
                text = p.text or ""
            out.append(text[:MAX_HAY])
            size += len(out[-1])
        if size >= MAX_HAY:
            break
    return norm_prompt(" ".join(out)[:MAX_HAY])


def short(prompt: str) -> bool:
    """A prompt too short to be looked for inside other words (it would match by accident)."""
    return len(prompt) < MIN_PROMPT


def prompt_strings(value: Any, out: list[str], depth: int = 0) -> None:
    """String values of a call's arguments that may be a prompt, however short (bounded walk):
    one shorter than :data:`MIN_PROMPT` is matched only whole (:func:`short`)."""
    if depth > 8 or len(out) > 16:
        return
    if isinstance(value, str):
        text = norm_prompt(value[:MAX_PROMPT])
        if text:
            out.append(text)
    elif isinstance(value, dict):
        for v in value.values():
            prompt_strings(v, out, depth + 1)
    elif isinstance(value, list):
        for v in value[:16]:
            prompt_strings(v, out, depth + 1)


#: Shortest arguments JSON (whitespace removed) looked for as a quotation of the call.
_MIN_QUOTE = 16


def quote_key(arguments: Any) -> str | None:
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


def quoted_only(text: str, prompt: str) -> bool:
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
SYSTEM_TEXT = 8192
#: What a transfer call's name says (openai-agents' ``transfer_to_<agent>``, Google ADK's
#: ``transfer_to_agent``, swarm's handoffs): the call hands the run over.
_TRANSFER_WORDS = ("transfer", "handoff", "hand_off")
#: An agent's name as a transfer call's argument carries it: one identifier-like word.
_AGENT_NAME = pattern(r"[\w.-]{3,64}")


#: The most demo pairs a few-shot prompt is read for (a longer history is a conversation's).
_MAX_DEMOS = 64
#: A text-protocol field marker opening a message (DSPy: ``[[ ## question ## ]]``).
_FIELD_MARK = pattern(r"\s*\[\[ ## [A-Za-z_]\w{0,63} ## \]\][ \t]*\n")


def demo_pairs(messages: list[Message], start: int) -> bool:
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


def fields_prompt(messages: list[Message]) -> bool:
    """Every message after the system ones is written in DSPy's ``[[ ## name ## ]]`` fields."""
    body = [m for m in messages if _ROLE.get(m.role, m.role) != "system"]
    return bool(body) and all(
        _FIELD_MARK.match(next((p.text for p in m.parts if p.kind == "text" and p.text), ""))
        for m in body
    )


def handoff_targets(answer: Message) -> frozenset[str]:
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


def names_agent(system_text: str, targets: frozenset[str]) -> bool:
    """The system prompt names one of ``targets`` as a word of its own."""
    return any(re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", system_text) for t in targets)


def start_len(messages: list[Message]) -> int:
    """Where a history's opening ends: at its first non-system message, whose key identifies
    the conversation when the rest was rewritten (a changed system prompt included)."""
    for i, m in enumerate(messages):
        if _ROLE.get(m.role, m.role) != "system":
            return i + 1
    return len(messages)


def trajectory(messages: list[Message]) -> Fields | None:
    """The fields of a request that is system messages and one user message written in
    ``[[ ## name ## ]]`` fields (a re-rendered trajectory: DSPy), else ``None``."""
    asked = [m for m in messages[:SCAN_OPENING] if _ROLE.get(m.role, m.role) != "system"]
    if (
        len(asked) != 1
        or len(messages) > SCAN_OPENING
        or _ROLE.get(asked[0].role, asked[0].role) != "user"
    ):
        return None
    return fields_of("\n".join(p.text for p in asked[0].parts if p.kind == "text" and p.text))
