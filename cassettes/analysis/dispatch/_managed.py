"""What a client's context management did to a history (docs/threading.md, "Context
management"): the messages of the previous request it dropped, the ones it cleared in place, what it
put in their place (a summary), and the user's task or instructions that nothing kept carries.
Computed once per turn, by the C layer's :func:`~cassettes.analysis.dispatch.build`, into
:attr:`~cassettes.analysis._model.Dispatch.context`; the checks here say it."""

from __future__ import annotations

import itertools
import re
import struct
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson

from ...lazy import pattern
from ...models import Message, Part
from .. import codes as codes
from .._context import TurnContext, overflowed
from .._message_keys import _ROLE, MessageKeys, stable
from .._model import ContextChange, Finding
from ..threading import Link

#: Characters of a dropped user message kept to quote it.
CLIP = 200
#: At most this many dropped user messages quoted (their count is always whole).
MAX_QUOTED = 8
#: Messages of a history compared (a longer one is judged on its first and last ones only).
MAX_COMPARED = 2048
#: A dropped user message is the user's instruction when it says how to work from now on.
INSTRUCTION = pattern(
    r"\b(always|never|must|do not|don't|dont|make sure|remember|from now on|avoid|"
    r"stick to|only use|only answer|only reply|at all times)\b",
    re.I,
)
_WORD = pattern(r"[^\W_]{3,}", re.U)
#: Words that say nothing of an instruction's content (and the instruction markers themselves).
_STOP = frozenset(
    """the and for are but not you your yours with this that these those from have has had was
    were will would can could should shall may might must into onto over under then than them
    they their there here what which who whom whose when where why how all any each every some
    such very just also only own same too out off our ours its it's let lets please use using
    about after before again once more most other both few nor now always never remember make
    sure dont don't avoid stick at times answer reply""".split()
)
#: An instruction is judged only on this many content words or more (a short one matches or
#: misses by accident); carried when at least half of them are in the request.
MIN_WORDS = 3


def is_compaction(m: Message) -> bool:
    """A provider item that stands for summarised earlier history."""
    for p in m.parts:
        block = (p.provider_details or {}).get("block")
        if (
            p.kind == "other"
            and isinstance(block, dict)
            and "compact" in str(block.get("type", ""))
        ):
            return True
    return False


def _role(m: Message) -> str:
    return _ROLE.get(m.role, m.role)


def _plain_user(m: Message) -> bool:
    return _role(m) == "user" and not any(p.tool_result is not None for p in m.parts)


def _text(m: Message) -> str:
    return " ".join(p.text for p in m.parts if p.kind == "text" and p.text)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text[:20000].casefold()) if w not in _STOP}


def _part_words(p: Part) -> str:
    if p.tool_result is not None:
        return p.tool_result.content[:20000]
    if p.tool_call is not None:
        return (p.tool_call.arguments_raw or "")[:20000] or str(p.tool_call.arguments)[:20000]
    return (p.text or "")[:20000]


#: ``ConversationState.state`` key: the shape of the conversation's latest request
#: (:func:`shapes`), what the next turn's management is judged against once its history was
#: released.
SHAPES = "_shapes"
#: Characters of a plain user message a shape keeps, to quote it and judge its words by (a
#: conversation keeps one shape per message of its latest request: memory stays small).
KEEP_TEXT = 240

#: One history message as the next turn compares it: its key, role, its text when it is a plain
#: user message (clipped), the key of the message with its results' content blanked and its
#: reasoning left out, whether it had reasoning, its results' (length, key of the content), and
#: the names of its calls. Kept packed in the conversation's state (:func:`_packed`).
Shape = tuple[int, str, str | None, int, bool, tuple[tuple[int, int], ...], tuple[str, ...]]

_Q = struct.Struct("<Q")
_MASK = (1 << 64) - 1
#: A role as one character of the packed roles, and back.
_ROLE_CHAR = {"system": "s", "user": "u", "assistant": "a", "tool": "t"}
_CHAR_ROLE = {c: r for r, c in _ROLE_CHAR.items()} | {"o": "other"}


def _k(v: int) -> bytes:
    return _Q.pack(v & _MASK)


def _blanked_key(parts: list[Any]) -> int:
    """The key of a message (role ``x``) whose part keys are ``parts`` (``_part_keys``), with
    its results' content blanked and its reasoning left out: the key of
    ``Message(role="x", parts=[its parts, reasoning left out, each result's content ""])``, made
    of the message's part keys. Reasoning has no part key (leaving it out changes none); a
    result's key without its id is ``("r", squashed content, name)``, and ``""`` squashed is
    ``""``; the role is ``tool`` where every part key is a result's (:func:`_keyed`)."""
    blank = [("r", "", k[2]) if k[0] == "r" else k for k in parts]
    role = "tool" if blank and all(k[0] == "r" for k in blank) else "x"
    return stable(orjson.dumps([role, blank], option=orjson.OPT_NON_STR_KEYS))


def _packed(m: Message, memo: MessageKeys) -> tuple[bytes, str, Any]:
    """``m`` as the state keeps it: its key (8 bytes), its role (one character), and what only
    some messages need (plain values; ``None`` for most): a plain user message's text, a call's
    tool names (one per line), else the results' and reasoning's blob (:func:`_shape`)."""
    role = _role(m)
    results = [r for p in m.parts if (r := p.tool_result) is not None]
    reasoning = any(p.kind == "reasoning" for p in m.parts)
    names = "\n".join(
        p.tool_call.name for p in m.parts[:16] if p.tool_call is not None and p.tool_call.name
    )
    char = "t" if results else _ROLE_CHAR.get(role, "o")
    extra: Any = None
    key, _, _, parts = memo.keyed(m)
    if results or reasoning:
        blob = _k(_blanked_key(parts)) + b"".join(
            _k(len(r.content)) + _k(stable(r.content.encode("utf-8", "surrogatepass")))
            for r in results[:64]
        )
        extra = blob if not reasoning and not names else (blob, reasoning, names)
    elif _plain_user(m):
        extra = _text(m)[:KEEP_TEXT]
    elif names:
        extra = names
    return _k(key), char, extra


def _shape(keys: bytes, roles: str, extras: list[Any], i: int) -> Shape:
    """Message ``i`` of a packed request, read back."""
    key = _Q.unpack_from(keys, 8 * i)[0]
    char, extra = roles[i], extras[i]
    text: str | None = None
    rest, reasoning, results, names = 0, False, (), ""
    if isinstance(extra, tuple):
        blob, reasoning, names = extra
    else:
        blob = extra if isinstance(extra, bytes) else b""
        if isinstance(extra, str):
            text, names = (extra, "") if char == "u" else (None, extra)
    if blob:
        rest = _Q.unpack_from(blob, 0)[0]
        n = (len(blob) - 8) // 16
        results = tuple(
            _Q.unpack_from(blob, 8 + 16 * j) + _Q.unpack_from(blob, 16 + 16 * j) for j in range(n)
        )  # type: ignore[assignment]
    return (
        key,
        _CHAR_ROLE.get(char, "other"),
        text,
        rest,
        reasoning,
        results,
        tuple(names.split("\n")) if names else (),
    )


Packed = tuple[int, bytes, str, list[Any]]


def shapes(ctx: TurnContext, kept: int) -> Packed | None:
    """This request packed (:func:`_packed`), the first ``kept`` messages taken over from the
    previous request's (they are its messages, unchanged), kept in the conversation's state for
    the next turn (only the latest request's: memory stays one packed history per conversation);
    returns the previous request's, when it is the one this turn follows."""
    prev: Packed | None = ctx.conv.state.get(SHAPES)
    before = prev if prev is not None and ctx.prev is not None and prev[0] == ctx.prev.seq else None
    n = min(kept, len(before[2])) if before is not None else 0
    keys = [before[1][: 8 * n]] if before is not None else []
    roles = [before[2][:n]] if before is not None else []
    extras = list(before[3][:n]) if before is not None else []
    for m in ctx.messages[n:MAX_COMPARED]:
        k, r, e = _packed(m, ctx.keys)
        keys.append(k)
        roles.append(r)
        extras.append(e)
    ctx.conv.state[SHAPES] = (ctx.seq, b"".join(keys), "".join(roles), extras)
    return before


def _unpacked(p: Packed) -> list[Shape]:
    return [_shape(p[1], p[2], p[3], i) for i in range(len(p[2]))]


#: Evidence of a cleared tool result: the exact texts frameworks write in place of its content
#: (docs/threading.md, "Evidence of management", each row with its source). Any other text in
#: place of a result sent before is the history rewritten (``C.history_mutated``).
RESULT_PLACEHOLDERS = frozenset(
    {
        # LangChain ContextEditingMiddleware / ClearToolUsesEdit.placeholder default
        # (langchain 1.4.2, agents/middleware/context_editing.py DEFAULT_TOOL_PLACEHOLDER)
        "[cleared]",
        # Claude Code's micro-compaction (@anthropic-ai/claude-code 2.1.328)
        "[Old tool result content cleared]",
    }
)
#: Strands' ``SlidingWindowConversationManager._truncate_tool_results`` (strands-agents 1.62.0):
#: the first and last 200 characters kept around this marker; ``removed`` is the rest's length.
_STRANDS_KEEP = 200
_STRANDS_CUT = pattern(r"\.\.\.\n\n\.\.\. \[truncated: (\d{1,12}) chars removed\] \.\.\.\n\n\.\.\.")
#: openai-agents' ``ToolOutputTrimmer`` (openai-agents 0.24.0, extensions/tool_output_trimmer.py):
#: its header (the tool, the output's length, the preview's) on a line of its own, then the preview.
_AGENTS_TRIM = pattern(
    r"\[Trimmed: [^\n\]]{1,200} output \u2014 (\d{1,12}) chars \u2192 (\d{1,12}) char"
    r" preview\]\n"
)
#: AutoGen's ``HeadAndTailChatCompletionContext`` (autogen-core 0.7.5): one user message in place
#: of the middle messages it skipped, their count said.
_SKIPPED = pattern(r"Skipped (\d{1,9}) messages\.")


def placeholder_result(text: str, old_len: int) -> bool:
    """``text`` is what a framework writes in place of a tool result of ``old_len`` characters
    when it clears or truncates it (:data:`RESULT_PLACEHOLDERS`, Strands' and openai-agents'
    truncations with the original length they state)."""
    if text.strip() in RESULT_PLACEHOLDERS:
        return True
    cut = _STRANDS_CUT.search(text[: _STRANDS_KEEP + 64])
    if cut is not None and int(cut.group(1)) + 2 * _STRANDS_KEEP == old_len:
        return True
    trim = _AGENTS_TRIM.match(text[:400])
    return trim is not None and int(trim.group(1)) == old_len


def skipped_placeholder(m: Message) -> bool:
    """``m`` is AutoGen's head-and-tail placeholder (``Skipped N messages.``, N of one or more:
    AutoGen counts its whole buffer's middle, not what left since the previous request)."""
    found = _SKIPPED.fullmatch(_text(m).strip()) if _plain_user(m) else None
    return found is not None and int(found.group(1)) >= 1


def _results_text(m: Message) -> list[str]:
    return [r.content for p in m.parts[:64] if (r := p.tool_result) is not None]


def _cleared(old: Shape, new: Shape, msg: Message) -> bool:
    """``new`` (``msg``) is ``old`` with its tool results' content replaced by a framework's
    placeholder (:func:`placeholder_result`) or its reasoning removed, and nothing else changed
    (the same calls, ids and names): cleared in place, not rewritten."""
    if old[1] != new[1] or not old[3] or old[3] != new[3] or (new[4] and not old[4]):
        return False
    if len(old[5]) != len(new[5]):
        return False
    texts = _results_text(msg)
    shortened = old[4] and not new[4]
    for k, ((olen, okey), (_, nkey)) in enumerate(zip(old[5], new[5], strict=True)):
        if okey == nkey:
            continue
        if k >= len(texts) or not placeholder_result(texts[k], olen):
            return False
        shortened = True
    return shortened


class _Diff:
    """The previous request's history (``before``) against this one's (``now``), by message
    key: what went (``gone``: indexes in ``before``), what is new (``unmatched``: indexes in
    ``now``), and for each kept message of ``now`` the index in ``before`` it is (``kept``).
    ``echo_at``: where the threader found the previous answer's echo; that message is the echo
    even when the previous request sent one like it (a summary repeated word for word: what was
    kept and dropped must say what the C layer's counts say). ``echo``: where in ``now`` the
    previous answer's echo was found (``None``: not carried)."""

    def __init__(
        self, before: list[Shape], now: list[Shape], answer_key: int | None, echo_at: int | None
    ) -> None:
        at: dict[int, list[int]] = {}
        for i, sh in enumerate(before):
            at.setdefault(sh[0], []).append(i)
        self.kept: dict[int, int] = {}
        self.unmatched: list[int] = []
        self.echo: int | None = None
        answered = answer_key is None
        for j, sh in enumerate(now):
            queue = at.get(sh[0])
            if j == echo_at and not answered and sh[0] == answer_key:
                answered, self.echo = True, j
            elif queue:
                self.kept[j] = queue.pop(0)
            elif not answered and sh[0] == answer_key:
                answered, self.echo = True, j  # the previous answer's echo: not in ``before``
            else:
                self.unmatched.append(j)
        taken = set(self.kept.values())
        self.gone = [i for i in range(len(before)) if i not in taken]

    def in_order(self) -> bool:
        """What stays keeps the order it had."""
        order = [self.kept[j] for j in sorted(self.kept)]
        return all(a < b for a, b in itertools.pairwise(order))


def _pair_cleared(d: _Diff, before: list[Shape], now: list[Shape], ctx: TurnContext) -> list[int]:
    """The dropped messages that stand cleared in place (each paired with one new message, both
    taken off ``d``); their indexes in ``before``."""
    cleared: list[int] = []
    for i in list(d.gone):
        match = next((j for j in d.unmatched if _cleared(before[i], now[j], ctx.messages[j])), None)
        if match is not None:
            cleared.append(i)
            d.gone.remove(i)
            d.unmatched.remove(match)
    return cleared


def _own_from(ctx: TurnContext, link: Link, new_from: int, n: int, opaque: list[int]) -> int:
    """Where this turn's own messages start: before the previous answer's echo; after an
    opaque compaction item (the API's compaction output: the user's messages, then the item);
    where the management dropped the answer too, every message but the last (the new input),
    unless the threader found the summary a compaction wrote."""
    if link.echo_at is not None:
        return new_from
    if opaque:
        return max(new_from, opaque[-1] + 1)
    if link.summary_of is not None:
        # After the message carrying the summary: what follows it is this turn's own, unless
        # it is earlier history kept (matched, not among the unmatched messages).
        if link.summary_in_system:
            return max(new_from, n - 1)
        return n if link.summary_at is None else max(new_from, link.summary_at + 1)
    return max(new_from, n - 1)


def _contiguous(gone: list[int]) -> bool:
    return bool(gone) and gone == list(range(gone[0], gone[0] + len(gone)))


def _first_answer(before: list[Shape]) -> int:
    return next((i for i, sh in enumerate(before) if sh[1] == "assistant"), len(before))


def _head_and_answer(d: _Diff, before: list[Shape]) -> bool:
    """Every message of the previous request from its first answer on went, its opening (what
    came before that answer) stays word for word and in order, and the previous answer's echo
    follows it at once: a window that keeps the head and the latest round (what follows the
    echo is this turn's own, not something in the dropped messages' place)."""
    head = _first_answer(before)
    return (
        d.echo == head
        and d.gone == list(range(head, len(before)))
        and all(d.kept.get(j) == j for j in range(head))
        and all(j < head for j in d.kept)
    )


def _block_drop(d: _Diff, before: list[Shape], standing: list[int]) -> bool:
    """The dropped messages are one run of the previous request that starts within its opening
    (before its first answer: a head drop, the opening among what went; a run from the first
    answer on, the opening kept, is a dropped middle: a mutation), or that ends it with nothing
    in its place (the history taken back to an earlier request of the conversation); what
    stays keeps its order."""
    gone = d.gone
    if not _contiguous(gone):
        return False
    if gone[-1] == len(before) - 1 and not standing:
        return True
    first_answer = _first_answer(before)
    if gone[0] < first_answer:
        return True
    if gone[0] == first_answer and all(sh[1] == "system" for sh in before[:first_answer]):
        return True  # no opening left (a window that slid past it): the drop is its head again
    # From the first answer on, the opening kept: a window over whole rounds (the first
    # question pinned, the next kept message a question of the user's) drops rounds; a run
    # that ends mid-task (the kept history goes on with the model's calls) is a dropped middle.
    after = gone[-1] + 1
    return gone[0] == first_answer and after < len(before) and before[after][2] is not None


def _managed(
    d: _Diff, before: list[Shape], standing: list[int], evidence: bool, skipped: bool
) -> bool:
    """The evidence says the client managed its context (docs/threading.md, "Evidence of
    management"), else the change is a mutation: what stays keeps its order, fewer messages
    stand in place of the dropped ones, and the drop is a head drop unless a placeholder or a
    compaction's answer stands where they were."""
    if not d.in_order():
        return False
    if len(standing) >= len(d.gone) and not evidence:
        return False  # messages replaced one for one: an edit in place
    if skipped:  # the placeholder stands for one run of skipped messages
        return _contiguous(d.gone)
    return evidence or _block_drop(d, before, standing)


def context_change(
    ctx: TurnContext, link: Link, new_from: int, packed: Packed | None
) -> ContextChange | None:
    """What the client's management did to the history of this request, relative to the
    previous request of its conversation (``before``: its shapes; ``None``: nothing dropped nor
    cleared, or a change no evidence says is management: ``C.history_mutated``'s).
    ``new_from``: where this turn's own messages start (the previous answer's echo, when the
    history before it was managed)."""
    prev = ctx.prev
    if prev is None or link.rewritten <= 0 or link.how != "rewritten" or not packed:
        return None
    before, now = _unpacked(packed), _unpacked(ctx.conv.state[SHAPES])
    answer = ctx.keys.answer(prev.rt.response)
    key = ctx.keys.key(answer) & _MASK if answer is not None else None
    d = _Diff(before, now, key, new_from if link.echo_at is not None else None)
    if not d.gone:
        return None
    opaque = [j for j, m in enumerate(ctx.messages[:MAX_COMPARED]) if is_compaction(m)]
    cleared = _pair_cleared(d, before, now, ctx)
    if link.echo_at is None and d.echo is not None and _head_and_answer(d, before):
        place = _InPlace(ctx, link, d, d.echo, d.echo, echoed=True)
    else:
        place = _InPlace(ctx, link, d, new_from, _own_from(ctx, link, new_from, len(now), opaque))
    if not d.gone:
        if place.standing:
            return None
        return _change(ctx, link, d, before, now, cleared, [], [], new_from)
    # The summary stands where the dropped messages were, or in the system prompt the wire
    # sends apart (Agno's session summary on Anthropic, Responses, Gemini): no message holds it.
    summary_by = link.summary_of if place.inserted or link.summary_in_system else None
    evidence = (
        bool(place.skipped) or summary_by is not None or any(j in place.inserted for j in opaque)
    )
    if not _managed(d, before, place.standing, evidence, bool(place.skipped)):
        return None
    return _change(ctx, link, d, before, now, cleared, place.inserted, opaque, new_from, summary_by)


class _InPlace:
    """What stands in this request where the dropped messages were (``standing``: before the
    previous answer's echo when there is one, else anywhere: a re-rendered request replaces its
    one message), AutoGen's placeholders among them (``skipped``), and what was put in their
    place before this turn's own messages (``inserted``, ``upto`` where those start)."""

    def __init__(
        self, ctx: TurnContext, link: Link, d: _Diff, new_from: int, upto: int, echoed: bool = False
    ) -> None:
        anywhere = link.echo_at is None and not echoed and new_from <= link.kept
        standing = [j for j in d.unmatched if j < new_from or anywhere]
        self.skipped = [j for j in standing if skipped_placeholder(ctx.messages[j])]
        self.standing = [j for j in standing if j not in self.skipped]
        self.inserted = [j for j in d.unmatched if j < upto and j not in self.skipped]


def _change(
    ctx: TurnContext,
    link: Link,
    d: _Diff,
    before: list[Shape],
    now: list[Shape],
    cleared: list[int],
    inserted: list[int],
    opaque: list[int],
    new_from: int,
    summary_by: int | None = None,
) -> ContextChange:
    """The management said: what went, what was cleared, what stands in their place, and what
    of the user's nothing kept carries."""
    prev = ctx.prev
    assert prev is not None
    gone = d.gone
    task = _task(before, now, new_from, inserted)
    # What an opaque compaction carries cannot be read: nothing is judged lost under one.
    judged = _judged([i for i in gone if before[i][2] is not None], before, task[1])
    lost, task_lost, restated = (
        ([], False, [])
        if any(j in inserted for j in opaque)
        else _lost(ctx, judged, before, task[1], _seen(link, inserted, summary_by))
    )
    return ContextChange(
        kind="summarised"
        if gone and (inserted or summary_by is not None)
        else "trimmed"
        if gone
        else "cleared",
        from_seq=prev.seq,
        dropped=gone,
        dropped_roles=dict(Counter(before[i][1] for i in gone)),
        dropped_user=[t for i in gone if (t := before[i][2]) is not None][:MAX_QUOTED],
        dropped_tools=sorted({n for i in gone for n in before[i][6]})[:64],
        question_dropped=task[0] is not None and task[0] in gone,
        cleared=cleared,
        summary=inserted,
        summary_by_seq=summary_by,
        summary_by_side_call=summary_by is not None and link.summary_side,
        summarised_calls=_summarised_calls(prev, link) if summary_by is not None else [],
        restore_at=min(inserted) if inserted else _restore_at(before, now, gone, new_from),
        lost=lost,
        task_lost=task_lost,
        restated=restated,
        after_overflow=prev.seq if overflowed(prev.rt) else None,
    )


def _task(
    before: list[Shape], now: list[Shape], new_from: int, inserted: list[int]
) -> tuple[int | None, int | None]:
    """The latest plain user message before (the question), and the same when it is still the
    user's task: the agent still works on it, no new plain user message came since (a question
    asked after an answer is a new one)."""
    asked_anew = any(now[j][2] is not None for j in range(new_from, len(now)) if j not in inserted)
    task = next((i for i in range(len(before) - 1, -1, -1) if before[i][2] is not None), None)
    return task, None if asked_anew else task


def _summarised_calls(prev: TurnContext, link: Link) -> list[str]:
    """Ids of the previous turn's calls whose results the compaction's request answered."""
    calls = prev.rt.response.tool_calls if prev.rt.response is not None else []
    return [c.id for c in calls[:64] if c.id and c.id in link.summary_answers]


def _restore_at(before: list[Shape], now: list[Shape], gone: list[int], new_from: int) -> int:
    """Where in ``now`` the dropped messages stood: at the first message the previous request
    had after the first dropped one that this request kept, else before this turn's own."""
    if not gone:
        return new_from
    dropped = set(gone)
    opening = next((j for j, sh in enumerate(now) if sh[1] != "system"), len(now))
    for i in range(gone[0] + 1, len(before)):
        if i in dropped:
            continue
        at = next((j for j in range(opening, len(now)) if now[j][0] == before[i][0]), None)
        if at is not None:
            return at
    return new_from


def _judged(users: list[int], before: list[Shape], task: int | None) -> list[int]:
    """Of the dropped plain user messages (``users``), the user's task (``task``: the latest
    plain user message before, while the agent still works on it) and instructions, long
    enough to be judged (:data:`MIN_WORDS` content words or more)."""
    return [
        i
        for i in users
        if (i == task or INSTRUCTION.search(before[i][2] or ""))
        and len(_words(before[i][2] or "")) >= MIN_WORDS
    ]


def _seen(link: Link, inserted: list[int], summary_by: int | None) -> str | None:
    """What the summary's writer was given (normalised): the side call's request, when the
    threader kept it; ``None`` where nothing tells (a summary of unknown origin: it may restate
    anything); ``""`` where nothing stands in the dropped messages' place."""
    if summary_by is not None:
        return link.summary_seen
    return None if inserted else ""


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _lost(
    ctx: TurnContext, judged: list[int], before: list[Shape], task: int | None, seen: str | None
) -> tuple[list[str], bool, list[str]]:
    """The judged dropped user messages (:func:`_judged`) nothing this request holds carries
    word for word (its system prompt, kept messages, summary, results: whitespace and case
    aside; a message judged on its first 240 characters), by evidence: ``lost`` where the
    model cannot know them (no summary, or a summary whose side call was not given them:
    ``seen``), ``restated`` where a summary stands whose writer saw them, or of unknown origin
    (it may restate them in other words)."""
    if not judged:
        return [], False, []
    req = ctx.rt.request
    texts = [p.text or "" for p in (req.system if req is not None else [])]
    texts += [_part_words(p) for m in ctx.messages[:MAX_COMPARED] for p in m.parts]
    hay = _norm(" ".join(texts))
    lost: list[str] = []
    restated: list[str] = []
    task_lost = False
    for i in judged:
        text = before[i][2] or ""
        said = _norm(text)
        if said in hay:
            continue
        if seen is None or (seen and said in seen):
            restated.append(text[:CLIP])
            continue
        lost.append(text[:CLIP])
        task_lost = task_lost or i == task
    return lost[:MAX_QUOTED], task_lost, restated[:MAX_QUOTED]


def _said(items: list[str]) -> str:
    return "; ".join(repr(t) for t in items[:3]) + (
        f" and {len(items) - 3} more" if len(items) > 3 else ""
    )


def check_history_managed(ctx: TurnContext) -> Iterator[Finding]:
    """C.user_instruction_dropped — the client's context management dropped the user's task or
    an instruction of the user's that nothing the request keeps (no kept message, no summary,
    not the system prompt) carries. The root of what follows from it on this turn."""
    cc = ctx.turn.c.context
    if cc is None or not cc.lost or ctx.prev is None:
        return
    what = "the user's task" if cc.task_lost else "an instruction of the user's"
    if len(cc.lost) > 1:
        what += f" (and {len(cc.lost) - 1} more of the user's messages)"
    replaced = (
        "the summary that replaced them"
        if cc.summary or cc.summary_by_seq is not None
        else "any summary"
    )
    yield ctx.finding(
        codes.USER_INSTRUCTION_DROPPED,
        f"The client's context management dropped {what} from the history, and neither the "
        f"messages it kept nor {replaced} carry it: {_said(cc.lost)}. The model no longer sees "
        "it from this turn on.",
        related_turn=ctx.prev.index,
        from_seq=cc.from_seq,
        lost=cc.lost,
        task=cc.task_lost,
        dropped=cc.dropped,
    )
