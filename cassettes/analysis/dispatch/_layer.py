"""The C layer of a turn: what the request kept, appended and rewritten, and how each tool result
pairs with its call."""

from __future__ import annotations

import re

import orjson

from ...lazy import pattern
from ...models import Message, ToolCall, ToolResult
from .._context import TurnContext, cut_call
from .._model import Dispatch, Pairing
from ..threading import Link
from ._counts import message_counts
from ._history import TEXT_ACTION
from ._managed import context_change, shapes
from ._rewrites import trimmed_and_changed

_THINK = pattern(r"<think>.*?(</think>|$)", re.S)


#: Typographic variants that re-serialisation (and some recorders) normalise away.
_TYPO = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2014": "-",
        "\u2013": "-",
        "\u2026": "...",
    }
)


#: A code fence's info string (```` ```json ````): frameworks that re-render the model's markdown
#: (ReAct parsers that pull the JSON out of a fence and write it back) drop or change the word.
_FENCE_INFO = pattern(r"(`{3,}|~{3,})[^\s`~]+")


def _loose_text(m: Message) -> str:
    text = " ".join(p.text or "" for p in m.parts if p.kind in ("text", "refusal"))
    text = _FENCE_INFO.sub(r"\1", _THINK.sub(" ", text)).translate(_TYPO).replace("--", "-")
    return " ".join(text.split())


def _own_calls(m: Message) -> list[ToolCall]:
    """The message's calls of the client's own tools (``function``/``custom``)."""
    return [
        p.tool_call
        for p in m.parts
        if p.tool_call is not None and p.tool_call.kind in ("function", "custom")
    ]


def _client_calls(m: Message) -> list[tuple[str, str]]:
    return sorted((c.name or "", _canon_args(c)) for c in _own_calls(m))


def _same_calls_but_cut(expected: Message, sent: Message) -> bool:
    """The echo holds the answer's calls, except that a call the stream or the token cap cut
    (arguments not JSON, ``{"city": "Pa``) came back completed or emptied by the client's SDK."""
    want, got = _own_calls(expected), _own_calls(sent)
    if len(want) != len(got) or not any(c.arguments_error for c in want):
        return False
    want.sort(key=lambda c: c.name or "")
    got.sort(key=lambda c: c.name or "")
    return all(map(_echoes_call, want, got))


def _echoes_call(w: ToolCall, g: ToolCall) -> bool:
    """``g`` is the call ``w`` sent back: the same, or, when ``w`` was cut, its arguments
    completed from where the cut left them, or emptied."""
    if (w.name or "") != (g.name or ""):
        return False
    if not w.arguments_error:
        return _canon_args(w) == _canon_args(g)
    cut = "".join((w.arguments_raw or "").split())
    return "".join((g.arguments_raw or "").split()).startswith(cut) or _canon_args(g) == "{}"


def _more_calls_after(want: list[tuple[str, str]], got: list[tuple[str, str]]) -> bool:
    """Every call of the answer is in the echo, and the echo holds more: calls the client added
    after the answer, which a wire that merges consecutive items (Responses) folds into the same
    message. Those calls are checked on their own (C.dropped_tool_result)."""
    if len(got) <= len(want):
        return False
    rest = list(got)
    for c in want:
        if c not in rest:
            return False
        rest.remove(c)
    return True


_WORD = pattern(r"\w+")
#: Where a text-protocol (ReAct) answer hands over to the client: what follows is the observation,
#: which the client writes itself (models often make one up; clients cut it and put the real one).
_OBSERVATION = pattern(r"^\s*Observation\s*:", re.M)


#: JSON's literals as Python's repr spells them (``true``/``True``, ``null``/``None``).
_LITERAL = {"true": "true", "false": "false", "null": "null", "none": "null"}


#: A JSON string escape (``\u00fc``, ``\n``, ``\"``): a client that parses the model's JSON and
#: writes it back another way (a Python dict) writes the character itself.
_ESCAPE = pattern(r"\\(?:u([0-9a-fA-F]{4})|[nrt\"\\/bf])")


def _unescaped(m: re.Match[str]) -> str:
    return chr(int(m.group(1), 16)) if m.group(1) else " "


def _words(text: str) -> str:
    """The text's words, one space apart, padded: a rendering-blind form in which JSON and Python
    reprs, quotes, string escapes, a code fence's language and whitespace no longer differ
    (``{"city": "Z\\u00fcrich", "metric": true, "station": null}`` and ``{'city': 'Zürich',
    'metric': True, 'station': None}``: LlamaIndex's ReAct re-renders a step's ``Action Input`` as
    the Python dict)."""
    text = _FENCE_INFO.sub(r"\1", _ESCAPE.sub(_unescaped, text))
    words = (_LITERAL.get(w.lower(), w) for w in _WORD.findall(text))
    return " " + " ".join(words) + " "


#: A text-protocol step's action input (ReAct's ``Action Input:``), up to its value's end.
_ACTION_INPUT = pattern(r"^[ \t]*Action[ \t]*Input[ \t]*:[ \t]*", re.M | re.I)


def _step_only(text: str) -> str | None:
    """A ReAct step without what follows its action input's value (the client's parser reads the
    step up to there and re-renders only that: a sentence the model added after it is dropped);
    ``None`` when it has no action input. The value is a JSON object or list (to its closing
    bracket, fenced or not) or the rest of its line."""
    found = list(_ACTION_INPUT.finditer(text[:200_000]))
    if not found:
        return None
    at = found[-1].end()
    at += len(text[at:]) - len(text[at:].lstrip())  # (the value may start on the next line)
    rest = text[at:]
    if not rest:
        return None
    fence = _FENCE_INFO.match(rest)
    if fence is not None:  # ```json … ```: to the closing fence
        close = rest.find(fence.group(1), fence.end())
        return text[: at + close + len(fence.group(1))] if close > 0 else None
    if rest[:1] in ("{", "["):
        depth = 0
        quote = ""
        for i, ch in enumerate(rest[:100_000]):
            if quote:
                quote = "" if ch == quote and rest[i - 1] != "\\" else quote
            elif ch in "\"'":
                quote = ch
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return text[: at + i + 1]
        return None
    end = rest.find("\n")
    return text if end < 0 else text[: at + end]


def _loosely_echoed(expected: Message | None, sent: Message) -> bool | None:
    """The echo kept the answer's substance: same calls (ids aside) and the same text once
    reasoning the client inlined as ``<think>`` text is set aside; or, for clients that keep their
    loop in text, the same words re-rendered (a ReAct ``Action Input`` re-serialised, the real
    observation written into the echo in place of one the model made up), or the answer's tool
    calls written out as text (:func:`calls_as_text`)."""
    if expected is None:
        return None
    if sent.role not in ("assistant", "model"):
        # a text-protocol step (no calls) re-rendered into the next user message, the
        # observation after it (a scratchpad), is its echo too
        return (
            sent.role == "user"
            and not _own_calls(expected)
            and TEXT_ACTION.search(expected.text[:20_000]) is not None
            and _same_text(expected, sent, False, within=True)
        )
    want, got = _client_calls(expected), _client_calls(sent)
    as_text = False
    if want != got:
        if want and not got:
            if call_as_output(expected, sent):
                return True
            as_text = calls_as_text(expected, sent)
        if not (as_text or _same_calls_but_cut(expected, sent) or _more_calls_after(want, got)):
            return False
    return _same_text(expected, sent, as_text)


def _same_text(expected: Message, sent: Message, as_text: bool, within: bool = False) -> bool:
    """The echo's text is the answer's (``as_text``: the echo writes the answer's calls out, so
    an answer without text of its own is echoed by it; ``within``: the echo must hold all of the
    answer, a message that holds only part of it is none)."""
    a, b = _loose_text(expected), _loose_text(sent)
    if a == b or (a and b and (a in b or (b in a and not within))) or (as_text and not a):
        return True
    raw = " ".join(p.text or "" for p in expected.parts if p.kind == "text")
    step = _OBSERVATION.split(_THINK.sub(" ", raw), maxsplit=1)[0]
    sent_words = _words(b)
    head = _words(step)
    if head.strip() != "" and head in sent_words:
        return True
    only = _step_only(step)  # the step as the client's parser read it
    return only is not None and _words(only).strip() != "" and _words(only) in sent_words


def _echoed_calls(answer: Message, echo: Message) -> list[ToolCall] | None:
    """The answer's function calls, when ``echo`` is assistant text holding no call of its own
    (``None`` otherwise): what :func:`calls_as_text` and :func:`call_as_output` compare."""
    if echo.role not in ("assistant", "model") or any(p.kind == "tool_call" for p in echo.parts):
        return None
    return _own_calls(answer)


def calls_as_text(answer: Message, echo: Message) -> bool:
    """The client echoed the answer's tool calls as text, not as calls (smolagents' "Calling
    tools: [{'id': …, 'function': {'name': 'get_weather', 'arguments': {'city': 'Paris'}}}]"): every
    call's name and argument values are in the echo's words, and the echo holds no call itself.
    The API then sees no pending call, and the results come back as text too."""
    calls = _echoed_calls(answer, echo)
    if not calls:
        return False
    words = _words(" ".join(p.text or "" for p in echo.parts if p.kind == "text"))
    for c in calls:
        if not c.name or _words(c.name) not in words:
            return False
        if not all(_words(v) in words for v in _leaf_values(c.arguments) if _words(v).strip()):
            return False
    return True


_FENCE = pattern(r"^(`{3,}|~{3,})[^\n]*\n(?P<body>.*)\n\1\s*$", re.S)
_NO_JSON = object()


def call_as_output(answer: Message, echo: Message) -> bool:
    """The client turned the answer's one call into the output it stood for: the echo is assistant
    text, no call, that is the call's arguments as JSON (or the value of its one argument). A
    structured-output tool (pydantic-ai's ``final_result``) ends a run; a framework that resumes the
    conversation later writes that call back as the answer, with no result for it."""
    calls = _echoed_calls(answer, echo) or []
    args = calls[0].arguments if len(calls) == 1 and not calls[0].arguments_error else None
    text = _unfenced(echo)
    if args in (None, "", {}) or not text or len(text) > 1_000_000:
        return False
    try:
        value: object = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = _NO_JSON
    if value == args:
        return True
    if isinstance(args, dict) and len(args) == 1:
        only = next(iter(args.values()))
        return value == only or (isinstance(only, str) and only.strip() == text)
    return False


def _unfenced(echo: Message) -> str:
    """The message's text, out of the code fence it may be written in."""
    text = "".join(p.text or "" for p in echo.parts if p.kind == "text").strip()
    fenced = _FENCE.match(text)
    return fenced.group("body").strip() if fenced else text


def _leaf_values(value: object, depth: int = 0) -> list[str]:
    """The string and number leaves of a call's arguments (bounded: arguments are untrusted)."""
    if depth > 20:
        return []
    if isinstance(value, dict):
        return [s for v in list(value.values())[:64] for s in _leaf_values(v, depth + 1)]
    if isinstance(value, list):
        return [s for v in value[:64] for s in _leaf_values(v, depth + 1)]
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return [str(value)[:200]]
    return []


def _canon_args(c: ToolCall) -> str:
    if c.arguments in (None, "", {}) and not (c.arguments_raw or "").strip("{} "):
        return "{}"
    if c.arguments is not None:
        return orjson.dumps(c.arguments, option=orjson.OPT_SORT_KEYS).decode()
    return " ".join((c.arguments_raw or "").split())


def previous_calls(ctx: TurnContext) -> list[ToolCall]:
    """The calls of the answer this request follows (none: no previous turn, or no answer)."""
    prev = ctx.prev
    return prev.rt.response.tool_calls if prev is not None and prev.rt.response is not None else []


def _echo_ids(ctx: TurnContext, echoed: list[ToolCall]) -> dict[int, str]:
    """For each call of the previous turn (by position), the id the client gave it when echoing it
    back among ``echoed`` (the calls with an id this request appended). Frameworks rewrite ids,
    and invent them for wires that have none (Gemini-compat)."""
    out: dict[int, str] = {}
    left = list(echoed)
    for i, c in enumerate(previous_calls(ctx)):
        # Its own id first: an earlier call of the same tool and arguments (a repeat) sent
        # again in a rewritten history is not this call's echo.
        at = next((j for j, e in enumerate(left) if c.id and e.id == c.id), None)
        if at is None:
            at = next(
                (
                    j
                    for j, e in enumerate(left)
                    if e.name == c.name and _canon_args(e) == _canon_args(c)
                ),
                None,
            )
        if at is not None:
            out[i] = left.pop(at).id or ""
    return out


def build(ctx: TurnContext, link: Link) -> Dispatch:
    req = ctx.rt.request
    assert req is not None
    kept = link.kept if link.how != "previous_response_id" else 0
    # A managed history (trimmed, summarised) carries the previous answer further on: this turn's
    # own messages start at its echo.
    new_from = (
        link.echo_at
        if link.echo_at is not None and kept <= link.echo_at < len(ctx.messages)
        else _rewritten_in_place(ctx, link, kept)
    )
    before = shapes(ctx, kept)
    appended = ctx.messages[new_from:]
    calls = [
        c
        for m in appended
        for p in m.parts
        if p.kind == "tool_call" and (c := p.tool_call) is not None and c.id
    ]
    ctx.echo_ids = _echo_ids(ctx, calls)
    names = _registerprevious_calls(ctx, ctx.echo_ids)
    # Call ids present in the history the client has sent in this conversation, kept up to date
    # from what each turn appended (no re-scan of the whole history).
    in_history: set[str] = ctx.conv.state.setdefault("_history_call_ids", set())
    # Where the previous answer's echo should start: after any results sent late (read before this
    # turn's calls join the history ids).
    echo_at = _after_late_results(ctx, kept, in_history) if link.echoed is False else kept
    by_id = {cid: c for c in calls if (cid := c.id)}
    in_history.update(by_id)
    # the calls this request appended name the results that carry no name (OpenAI's) too
    names.update({cid: c.name for cid, c in by_id.items() if c.name})
    pairings = [
        _pairing(ctx, tr, in_history, names, new_from + offset)
        for offset, m in enumerate(appended)
        for p in m.parts
        if p.kind == "tool_result" and (tr := p.tool_result) is not None
    ]
    if ctx.prev is not None and cut_call(ctx.prev.rt):
        _forget_cut(ctx, ctx.prev.index)
    context = context_change(ctx, link, new_from, before)
    ctx.trim_beside = (
        trimmed_and_changed(ctx, new_from, before) if context is None and link.rewritten else None
    )
    return Dispatch(
        kept=kept,
        rewritten=link.rewritten,
        appended=appended,
        appended_from=new_from,
        echoed_assistant=_echoed(ctx, link, echo_at),
        pairings=pairings,
        tools_offered=[t.name for t in req.tools],
        tool_choice=req.tool_choice_mode,
        params=req.params,
        context=context,
        counts=message_counts(ctx, link.how, kept, new_from, before, context),
        link=link.how,  # type: ignore[arg-type]
    )


def _echoed(ctx: TurnContext, link: Link, at: int) -> bool | None:
    """Whether the previous answer was echoed: the threader's word, unless it found no echo where
    the history extends; then the message at ``at`` (past inserted user messages) compared."""
    if link.echoed is not False or ctx.prev is None or at >= len(ctx.messages):
        return link.echoed
    answer = ctx.keys.answer(ctx.prev.rt.response)
    return _loosely_echoed(answer, ctx.messages[_after_inserted_user(ctx, at)])


#: At most this many user messages a framework puts between the request and the answer's echo.
_INSERTED_MAX = 3


def _after_inserted_user(ctx: TurnContext, at: int) -> int:
    """Where the answer's echo is, past user messages a framework put before it (an image the
    answer's tool produced, sent as a user message because tool results cannot carry one): the
    first assistant message within :data:`_INSERTED_MAX` plain user messages (no tool results),
    else ``at``. The echo found there is still compared word for word."""
    i = at
    while i < len(ctx.messages) and i - at < _INSERTED_MAX:
        m = ctx.messages[i]
        if m.role != "user" or any(p.kind == "tool_result" for p in m.parts):
            break
        i += 1
    if i > at and i < len(ctx.messages) and ctx.messages[i].role in ("assistant", "model"):
        return i
    return at


def _rewritten_in_place(ctx: TurnContext, link: Link, kept: int) -> int:
    """Where this turn's own messages start. Normally after the history kept as it was; but when the
    client rewrote earlier messages in place (``C.history_mutated``) and the previous answer's echo
    still follows the previous request's length, the messages between are that history re-sent
    (changed): its tool results answered earlier calls and are not this turn's results."""
    prev = ctx.prev
    if link.rewritten <= 0 or prev is None or prev.rt.response is None or kept >= prev.n_messages:
        return kept
    at = prev.n_messages
    if at >= len(ctx.messages) or not _loosely_echoed(
        ctx.keys.answer(prev.rt.response), ctx.messages[at]
    ):
        return kept
    return at


def _after_late_results(ctx: TurnContext, kept: int, earlier: set[str]) -> int:
    """The index of the first appended message that is not a late result: a result of a call made
    before the previous answer (its id already in the history) that the previous request lacked. A
    client that dropped a result on one turn and sends it on the next puts it before the previous
    answer's echo; the drop is reported on the turn that lacked it, and the answer was echoed."""
    if ctx.prev is None or ctx.prev.rt.response is None:
        return kept
    answered_now = {c.id for c in ctx.prev.rt.response.tool_calls if c.id}
    i = kept
    while i < len(ctx.messages) and _late_results(ctx.messages[i], earlier, answered_now):
        i += 1
    return i


def _late_results(m: Message, earlier: set[str], answered_now: set[str]) -> bool:
    """``m`` holds results only, each of a call of ``earlier`` that the previous answer did not
    make."""
    ids = [
        p.tool_result.call_id
        for p in m.parts
        if p.kind == "tool_result" and p.tool_result is not None
    ]
    return (
        m.role not in ("assistant", "model")
        and 0 < len(ids) == len(m.parts)
        and all(x and x in earlier and x not in answered_now for x in ids)
    )


def _registerprevious_calls(ctx: TurnContext, echo_ids: dict[int, str]) -> dict[str, str]:
    """The previous turn's calls registered for the results that answer them: by id (and by the
    id the client echoed them under), and by name for wires without ids. Returns their names by
    id, for wires whose results carry no name (OpenAI's): kept per turn, not per conversation,
    so the threading's memory per turn stays flat."""
    names: dict[str, str] = {}
    if ctx.prev is None:
        return names
    registry: dict[str, int] = ctx.conv.state.setdefault("_calls_by_id", {})
    unanswered_by_name: dict[str, list[int]] = ctx.conv.state.setdefault("_unanswered_by_name", {})
    for i, c in enumerate(previous_calls(ctx)):
        echoed = echo_ids.get(i)
        if echoed is not None:
            registry[echoed] = ctx.prev.index
        if c.id:
            registry[c.id] = ctx.prev.index
        elif c.name and echoed is None:
            unanswered_by_name.setdefault(c.name, []).append(ctx.prev.index)
        names.update({key: c.name for key in (c.id, echoed) if key and c.name})
    return names


def _pairing(
    ctx: TurnContext, tr: ToolResult, in_history: set[str], names: dict[str, str], index: int
) -> Pairing:
    """One result and the call it answers: by id, else by name (wires without call ids, Gemini
    and Ollama; clients may invent ids), else a call the client itself put in the history."""
    call_turn, found = _answered(ctx, tr, in_history)
    found = found or (not tr.call_id and _called_before(ctx, tr.name, index))
    call_name = names.get(tr.call_id) if tr.call_id else None
    return Pairing(
        call_id=tr.call_id,
        name=tr.name or call_name,
        call_turn=call_turn,
        in_history=found,
        is_error=tr.is_error,
        message_index=index,
        call_name=call_name if tr.name and call_name and tr.name != call_name else None,
    )


def _forget_cut(ctx: TurnContext, index: int) -> None:
    """The id-less calls of turn ``index``, whose answer the token cap cut, that this request
    (the next) did not answer: the client left them out (they never ran); no later result
    pairs with them by name."""
    queues: dict[str, list[int]] = ctx.conv.state.get("_unanswered_by_name", {})
    for name, queue in queues.items():
        queues[name] = [t for t in queue if t != index]


def _called_before(ctx: TurnContext, name: str | None, index: int) -> bool:
    """A call of ``name`` stands in this request's history right before result ``index`` (a
    wire without call ids: the call the result answers, sent again with it after a failed
    attempt or a trim)."""
    for m in reversed(ctx.messages[max(0, index - 4) : index]):
        if any(p.tool_call is not None and p.tool_call.name == name for p in m.parts):
            return bool(name)
    return False


def _answered(ctx: TurnContext, tr: ToolResult, in_history: set[str]) -> tuple[int | None, bool]:
    """The turn of the call ``tr`` answers (``None``: not known), and whether there is one."""
    registry: dict[str, int] = ctx.conv.state.setdefault("_calls_by_id", {})
    if tr.call_id and tr.call_id in registry:
        return registry[tr.call_id], True
    queue = ctx.conv.state.setdefault("_unanswered_by_name", {}).get(tr.name or "")
    if queue:
        # the previous turn's call first (the results after its answer answer it), else the
        # oldest: an earlier call of that name the client never answered takes no later result
        last = ctx.prev.index if ctx.prev is not None else None
        return queue.pop(queue.index(last) if last in queue else 0), True
    return None, bool(tr.call_id and tr.call_id in in_history)
