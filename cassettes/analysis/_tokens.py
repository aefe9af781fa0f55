"""Token accounting and cost per turn: what the input was made of, what it cost, how it grew.

No findings are emitted here; this module fills :class:`TokenCount` for every turn.

**Counts.** The adapters already convert usage to the inclusive convention (see
:mod:`cassettes.models`): ``input`` is every input token, cached or not — OpenAI's
``prompt_tokens`` already are, Anthropic's ``input_tokens`` are not and the adapter adds
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` to them. So
``input_uncached = input - cache_read - cache_write`` for every family, and ``output`` includes
reasoning. ``source`` is ``reported`` when the provider sent usage, ``estimated`` when it did not
(a stream without ``include_usage``, an Ollama call that stopped early …) and looptap estimated
input and output from text size, ``missing`` when the call failed with no usage (an HTTP error or
a transport failure: nothing to estimate the output from, and nothing billed that we can tell).

**Estimator.** No tokenizer is available offline, so sizes are UTF-8 bytes / 4, rounded up
(:data:`BYTES_PER_TOKEN`; close to a BPE tokenizer for English prose and code, and for CJK text
bytes track tokens better than characters do), plus :data:`MESSAGE_OVERHEAD` tokens per message and
:data:`TOOL_OVERHEAD` per tool schema for the chat template. A media part (image, audio, PDF)
counts a flat :data:`MEDIA_TOKENS`, encoded blobs inside other parts count nothing. These are
weights, not counts: when usage is reported, they are scaled to the reported input.

**Segments.** The input split by what it carries — ``system`` (system prompt, instructions,
system/developer messages), ``tools`` (tool schemas), ``user`` (user text and media),
``assistant`` (earlier model output sent back: text, reasoning, tool calls) and
``tool_results`` — estimated per message and scaled with the largest-remainder method so the
five add up exactly to the reported input. ``new`` is the part this turn appended (the messages
from ``c.appended_from`` on; on a conversation's first turn, everything), scaled the same way.
With ``previous_response_id`` the history lives on the server: it is reconstructed from the
previous turn (its effective history + its output) so the stored part is counted as history.
Per-message estimates are kept per conversation and only the appended messages are measured on
each turn, so a turn costs time proportional to what it added, not to the whole history.

**Cost.** From ``genai-prices``, by :func:`cassettes.analysis.pricing.price` (which provider and
model a turn is priced as, and when the price is an estimate). A price of token counts looptap
estimated is an estimate too: ``price_estimated``, shown ``~``. The usage passed uses
genai-prices' keys, which follow the same inclusive convention (its ``input_tokens`` includes
cache reads/writes; cached tokens are then charged at their own rate). An unknown model or
provider gives ``cost = None``, never 0, and ``price_source`` says why. ``cumulative_cost`` is the
sum of the known costs so far in the conversation; ``cost_complete`` is ``False`` once a billed
turn had no known price (the cumulative is then a lower bound). Turns with
``source == "missing"`` are not priced and do not make the cumulative incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from .. import providers
from ..models import Message, NormalisedResponse, Part, ToolSpec, Usage
from ._context import TurnContext
from ._model import Segments, TokenCount
from .pricing import price

__all__ = [
    "apportion",
    "build",
    "estimate_text",
]

#: The estimator: UTF-8 bytes per token.
BYTES_PER_TOKEN = 4
#: Chat-template tokens per message (role markers, separators).
MESSAGE_OVERHEAD = 4
#: Template tokens per tool schema, beyond its JSON.
TOOL_OVERHEAD = 8
#: A media part (image, audio, document), whatever its size: providers bill these by pixels,
#: seconds or pages, which the bytes do not tell.
MEDIA_TOKENS = 500
#: A string longer than this without a space is an encoded blob (base64, encrypted reasoning).
_BLOB = 512

_STATE = "_tokens"

#: Indices into a message estimate vector. ``_SYS_PARTS`` is the content of system/developer
#: messages alone: adapters also list it in ``request.system``, which must not count it twice.
_SYS, _USER, _ASSIST, _RESULTS, _SYS_PARTS = 0, 1, 2, 3, 4
Vec = tuple[int, int, int, int, int]
_ZERO: Vec = (0, 0, 0, 0, 0)


def estimate_text(text: str | None) -> int:
    """Estimated tokens of a text: UTF-8 bytes / :data:`BYTES_PER_TOKEN`, rounded up."""
    if not text:
        return 0
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


def _json_size(v: Any) -> int:
    """Bytes of a JSON value as text, encoded blobs left out."""
    if isinstance(v, str):
        return 0 if len(v) > _BLOB and " " not in v else len(v.encode("utf-8", "surrogatepass")) + 2
    if isinstance(v, dict):
        return 2 + sum(len(str(k)) + 4 + _json_size(x) for k, x in v.items())
    if isinstance(v, list):
        return 2 + sum(_json_size(x) + 1 for x in v)
    return len(orjson.dumps(v)) if v is not None else 4


def _part_tokens(p: Part) -> int:
    if p.kind == "tool_call" and p.tool_call is not None:
        return estimate_text(p.tool_call.name) + estimate_text(p.tool_call.arguments_raw)
    if p.kind == "tool_result" and p.tool_result is not None:
        return estimate_text(p.tool_result.content)
    if p.kind == "media":
        return MEDIA_TOKENS
    if p.text:
        return estimate_text(p.text)
    if p.kind == "other" and p.provider_details:
        return -(-_json_size(p.provider_details) // BYTES_PER_TOKEN)
    return 0


def _message_vec(m: Message) -> Vec:
    """A message's estimate split into (system, user, assistant, tool_results, system content)."""
    out = [0, 0, 0, 0, 0]
    role = m.role.lower()
    home = (
        _SYS
        if role in ("system", "developer")
        else _RESULTS
        # a message of tool results only, whatever its role: Anthropic's and Bedrock's ``user``
        # carrying them is the ``tool`` message of OpenAI's wire (so its template tokens too)
        if role in ("tool", "function")
        or (m.parts and all(p.kind == "tool_result" for p in m.parts))
        else _USER
        if role == "user"
        else _ASSIST
    )
    out[home] += MESSAGE_OVERHEAD
    for p in m.parts:
        n = _part_tokens(p)
        if p.kind == "tool_result":
            out[_RESULTS] += n
        elif p.kind == "tool_call" or (p.kind == "reasoning" and home != _SYS):
            out[_ASSIST] += n
        else:
            out[home] += n
        if home == _SYS:
            out[_SYS_PARTS] += n
    return (out[0], out[1], out[2], out[3], out[4])


def _output_vec(resp: NormalisedResponse | None) -> Vec:
    """A response's output as a history message would carry it (for ``previous_response_id``)."""
    if resp is None or not resp.parts:
        return _ZERO
    return _message_vec(Message(role="assistant", parts=resp.parts))


def _output_estimate(resp: NormalisedResponse | None) -> int:
    if resp is None:
        return 0
    return sum(_part_tokens(p) for p in resp.parts)


#: Estimated tokens of tool definitions already seen (a client offers the same tools every turn).
_TOOL_TOKENS: dict[bytes, int] = {}
_TOOL_TOKENS_MAX = 4096


def _tool_tokens(t: ToolSpec) -> int:
    n = TOOL_OVERHEAD + estimate_text(t.name) + estimate_text(t.description)
    if t.parameters is not None:
        n += -(-_json_size(t.parameters) // BYTES_PER_TOKEN)
    return n


def _tools_tokens(tools: list[ToolSpec]) -> int:
    n = 0
    for t in tools:
        try:
            key = orjson.dumps(
                [t.name, t.description, t.parameters], option=orjson.OPT_NON_STR_KEYS
            )
        except (orjson.JSONEncodeError, TypeError):
            # not JSON (an integer beyond 64 bits …): not cached
            n += _tool_tokens(t)
            continue
        got = _TOOL_TOKENS.get(key)
        if got is None:
            if len(_TOOL_TOKENS) >= _TOOL_TOKENS_MAX:
                _TOOL_TOKENS.clear()
            got = _TOOL_TOKENS[key] = _tool_tokens(t)
        n += got
    return n


def _add(a: Vec, b: Vec) -> Vec:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4])


def _sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3], a[4] - b[4])


def apportion(weights: list[int], total: int) -> list[int]:
    """Split ``total`` in proportion to ``weights`` into integers that add up to ``total`` exactly
    (largest remainder). All-zero weights put everything in the first slot."""
    if total <= 0:
        return [0] * len(weights)
    s = sum(weights)
    if s <= 0:
        return [total] + [0] * (len(weights) - 1)
    quotas = [w * total for w in weights]
    base = [q // s for q in quotas]
    rest = total - sum(base)
    order = sorted(range(len(weights)), key=lambda i: (-(quotas[i] % s), i))
    for i in order[:rest]:
        base[i] += 1
    return base


@dataclass
class _ConvTokens:
    """Per-conversation memory: message estimates as prefix sums, running totals."""

    #: seq of the turn ``prefix`` describes.
    owner: int | None = None
    #: Prefix sums of message estimates over the effective history (``prefix[0]`` is zero).
    prefix: list[Vec] = field(default_factory=lambda: [_ZERO])
    #: Effective-history index of the request's first message (> 0 after ``previous_response_id``).
    base: int = 0
    cost: Decimal | None = None
    #: A price in ``cost`` was estimated (a list price by model name).
    estimated: bool = False
    unknown: int = 0
    input: int | None = None
    output: int | None = None


def _history(ctx: TurnContext, mem: _ConvTokens) -> tuple[Vec, Vec, Vec]:
    """Estimates of the whole effective history, of what this turn appended, of the request's
    own messages (the history minus what ``previous_response_id`` stored on the server)."""
    req = ctx.rt.request
    prev = ctx.prev
    msgs = ctx.messages
    appended_from = ctx.turn.c.appended_from
    # chained: ``prev`` is the answer the request continues (not a failed attempt it retries,
    # which a request naming an answer the server never gave can be linked to)
    chained = (
        req is not None
        and req.previous_response_id is not None
        and prev is not None
        and ctx.turn.c.link == "previous_response_id"
    )
    if chained and prev is not None and mem.owner == prev.seq:
        mem.prefix.append(_add(mem.prefix[-1], _output_vec(prev.rt.response)))
        mem.base = len(mem.prefix) - 1
    elif (
        not chained
        and prev is not None
        and mem.owner == prev.seq
        and mem.base == 0
        and 0 <= appended_from < len(mem.prefix)
        and appended_from <= len(msgs)
    ):
        del mem.prefix[appended_from + 1 :]
    else:  # first turn, a fork from an earlier turn, or a chain we cannot follow: measure it all
        mem.prefix = [_ZERO]
        mem.base = 0
        appended_from = 0 if prev is None else min(appended_from, len(msgs))
        for m in msgs[:appended_from]:
            mem.prefix.append(_add(mem.prefix[-1], _message_vec(m)))
    start = mem.base + appended_from
    for m in msgs[appended_from:]:
        mem.prefix.append(_add(mem.prefix[-1], _message_vec(m)))
    mem.owner = ctx.seq
    total = mem.prefix[-1]
    new = total if prev is None else _sub(total, mem.prefix[start])
    return total, new, _sub(total, mem.prefix[mem.base])


def _failed_without_usage(ctx: TurnContext) -> bool:
    rt = ctx.rt
    resp = rt.response
    if resp is None or (rt.status or 0) >= 400:
        return True
    return bool(rt.transport_error) and not resp.parts


def build(ctx: TurnContext) -> TokenCount:
    """The token accounting of one turn (call in recording order, once per turn)."""
    mem = ctx.conv.state.get(_STATE)
    if not isinstance(mem, _ConvTokens):
        mem = ctx.conv.state[_STATE] = _ConvTokens()
    req = ctx.rt.request
    hist, new_hist, own = _history(ctx, mem)
    # ``request.system`` also lists the content of system/developer messages: count only the rest
    # (Anthropic's ``system``, Gemini's ``systemInstruction``, the Responses ``instructions``).
    system_est = sum(_part_tokens(p) for p in req.system) if req is not None else 0
    system_est = max(0, system_est - own[_SYS_PARTS])
    tools_est = _tools_tokens(ctx.tools)
    # what the request carries, re-sent and new apart, each part in one slot (system messages
    # with the system prompt): scaled together, the parts add up and the new ones are theirs
    old = _sub(hist, new_hist)
    weights = [
        system_est + hist[_SYS],
        tools_est,
        old[_USER],
        old[_ASSIST],
        old[_RESULTS],
        new_hist[_USER],
        new_hist[_ASSIST],
        new_hist[_RESULTS],
    ]
    est_input = sum(weights)
    usage: Usage | None = ctx.rt.response.usage if ctx.rt.response is not None else None
    tv = _counts(ctx, usage, est_input)
    # a reported input
    if tv.input is not None and usage is not None and usage.input_tokens is not None:
        parts = apportion(weights, tv.input)
    else:
        parts = weights
    tv.segments = Segments(
        system=parts[0],
        tools=parts[1],
        user=parts[2] + parts[5],
        assistant=parts[3] + parts[6],
        tool_results=parts[4] + parts[7],
        new=sum(parts) if ctx.prev is None else sum(parts[5:]),
        new_tool_results=parts[7],
    )
    _cost(ctx, tv, usage, mem)
    if tv.input is not None:
        mem.input = (mem.input or 0) + tv.input
    if tv.output is not None:
        mem.output = (mem.output or 0) + tv.output
    tv.cumulative_cost = mem.cost
    tv.cumulative_estimated = mem.estimated
    tv.cost_complete = None if mem.cost is None else mem.unknown == 0
    tv.cumulative_input = mem.input
    tv.cumulative_output = mem.output
    return tv


def _counts(ctx: TurnContext, usage: Usage | None, est_input: int) -> TokenCount:
    """The turn's token counts: as reported (an estimate filling a side the API left out), else
    estimated, else missing (a failed call that reported none)."""
    resp = ctx.rt.response
    tv = TokenCount()
    if usage is not None and (usage.input_tokens is not None or usage.output_tokens is not None):
        tv.source = (
            "reported"
            if usage.input_tokens is not None and usage.output_tokens is not None
            else "estimated"
        )
        tv.input = usage.input_tokens if usage.input_tokens is not None else est_input
        tv.output = (
            usage.output_tokens if usage.output_tokens is not None else _output_estimate(resp)
        )
        tv.cache_read = usage.cache_read_tokens
        tv.cache_write = usage.cache_write_tokens
        tv.reasoning = usage.reasoning_tokens
        if usage.input_tokens is not None:
            tv.input_uncached = max(
                0,
                usage.input_tokens
                - (usage.cache_read_tokens or 0)
                - (usage.cache_write_tokens or 0),
            )
    elif _failed_without_usage(ctx):
        tv.source = "missing"
    else:
        tv.source = "estimated"
        tv.input = est_input
        tv.output = _output_estimate(resp)
    return tv


def _cost(ctx: TurnContext, tv: TokenCount, usage: Usage | None, mem: _ConvTokens) -> None:
    """The turn's price and where it came from, added to the conversation's running cost."""
    if tv.source == "missing":
        code = ctx.rt.status if ctx.rt.status and ctx.rt.status >= 400 else None
        why = (
            f"HTTP {code}"
            if code
            else (
                "the client hung up"
                if ctx.rt.cut_by_client
                else ("a transport failure" if ctx.rt.transport_error else "no response")
            )
        )
        tv.price_source = f"not priced: the call failed ({why}) and reported no usage"
        return
    if usage is not None and tv.source == "reported":
        adapter = providers.by_family(ctx.rt.family)
        price_usage = adapter.profile.price_usage(usage) if adapter is not None else {}
    else:
        price_usage = {"input_tokens": tv.input or 0, "output_tokens": tv.output or 0}
    tv.cost, tv.price_source = price(ctx, price_usage)
    if tv.cost is None:
        mem.unknown += 1
        return
    if tv.source == "estimated":
        tv.price_source += " (on estimated tokens)"
    # a list price at a host that may charge otherwise, or any price of estimated counts
    tv.price_estimated = tv.price_source.startswith("estimated:") or tv.source == "estimated"
    mem.cost = (mem.cost or Decimal(0)) + tv.cost
    mem.estimated = mem.estimated or tv.price_estimated
