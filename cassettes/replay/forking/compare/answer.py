"""One answer of a model as ``compare`` reads it: the calls with their arguments checked (JSON, the
declared schema, offered at all), the text, a refusal, the finish, the usage; and when two answers
agree (:data:`TEXT_MEASURE` for two texts)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from decimal import Decimal
from difflib import SequenceMatcher
from typing import Any

from .... import providers
from ....analysis import schema_errors
from ....models import NormalisedResponse, ToolCall, ToolSpec
from ....parsing import parse_exchange
from ....wire import Exchange
from .._lineup import answer_kind

#: How two text answers are compared (stated in every report's header and in docs/fork.md).
TEXT_MEASURE = (
    "word-level difflib ratio (difflib.SequenceMatcher over "
    "the whitespace-split words, the first 2,000 of each)"
)
#: Two text answers agree when their similarity is at least this.
TEXT_THRESHOLD = 0.7
_MAX_WORDS = 2000


def text_similarity(a: str, b: str) -> float:
    """:data:`TEXT_MEASURE` of two texts, from 0 (nothing in common) to 1 (the same words; two
    empty texts too). Whitespace and line breaks do not count; case and punctuation do."""
    return _ratio(*sorted((a, b)))


@functools.lru_cache(maxsize=512)
def _ratio(a: str, b: str) -> float:
    """The ratio of two texts (in a canonical order: the measure is symmetric), kept for the
    report's several readers of one pair (up to 0.2 s for two answers of 2,000 words)."""
    wa, wb = a.split()[:_MAX_WORDS], b.split()[:_MAX_WORDS]
    if not wa and not wb:
        return 1.0
    return SequenceMatcher(None, wa, wb, autojunk=False).ratio()


def _similar(a: str, b: str) -> bool:
    """``text_similarity(a, b) >= TEXT_THRESHOLD``, ruled out first by difflib's cheap upper bounds
    (the K x K pairs of self-agreement need no more than the answer)."""
    wa, wb = a.split()[:_MAX_WORDS], b.split()[:_MAX_WORDS]
    if wa and wb:
        sm = SequenceMatcher(None, wa, wb, autojunk=False)
        if sm.real_quick_ratio() < TEXT_THRESHOLD or sm.quick_ratio() < TEXT_THRESHOLD:
            return False
    return text_similarity(a, b) >= TEXT_THRESHOLD


@dataclass
class ArgumentCheck:
    """One tool call's arguments against the tool the recorded request declared under its name."""

    name: str
    #: The arguments parse as JSON.
    json: bool
    #: The request offered a tool of that name (``None``: it offered no tools at all).
    offered: bool | None
    #: The offered tool declares a schema that could be checked (a schema that is itself invalid is
    #: not).
    checked: bool = False
    #: Violations of that schema, each ``$.path: reason`` (bounded as ``E.arguments_schema``'s).
    schema_errors: list[str] = field(default_factory=list)
    #: Why the arguments are not JSON.
    parse_error: str | None = None

    @property
    def schema_valid(self) -> bool | None:
        """``None`` when there was nothing to check against (or the arguments are not JSON)."""
        return None if not (self.json and self.checked) else not self.schema_errors

    def as_json(self) -> dict[str, Any]:
        return {
            "json": self.json,
            "offered": self.offered,
            "schema_valid": self.schema_valid,
            "schema_errors": self.schema_errors,
            "parse_error": self.parse_error,
        }


@dataclass
class Sample:
    status: int | None
    #: (tool name, arguments) of each call, in order.
    calls: list[tuple[str, Any]]
    text: str
    refusal: bool
    finish: str | None
    output_tokens: int | None
    latency: float
    error: str | None = None
    #: Each call's arguments checked (JSON, schema, offered), in the order of ``calls``.
    checks: list[ArgumentCheck] = field(default_factory=list)
    #: The reported usage as genai-prices keys (``None``: none reported).
    usage: dict[str, int] | None = None
    #: What the answer cost at the candidate's price (``None``: unknown).
    cost: Decimal | None = None

    @property
    def signature(self) -> str:
        """The kind of answer (:func:`~cassettes.replay.forking._lineup.answer_kind`). Two answers
        agree when their signatures are equal and, for text, the texts are similar
        (:meth:`agrees`)."""
        return answer_kind(self.status, self.error is not None, self.calls, self.refusal)

    @property
    def answered(self) -> bool:
        """An answer of the model (not an error): what agreement is measured on."""
        return self.error is None

    def agrees(self, other: Sample) -> bool:
        """The same calls with the same arguments; both refusals; or two texts whose
        :func:`text_similarity` is at least :data:`TEXT_THRESHOLD`."""
        if self.signature != other.signature:
            return False
        return self.signature != "text" or _similar(self.text, other.text)


def sample_of(ex: Exchange, latency: float, tools: list[ToolSpec]) -> Sample:
    """The answer in ``ex``, its calls checked against ``tools`` (those the recorded request
    declared)."""
    rt = parse_exchange(ex)
    r = rt.response
    # a broken stream is no answer
    if (
        r is None
        or ex.status is None
        or ex.status >= 400
        or r.error is not None
        or ex.transport_error is not None
    ):
        return Sample(ex.status, [], "", False, None, None, latency, error=_failure(ex, r)[:500])
    # not a zero-valued placeholder
    calls = [
        c for c in r.tool_calls if c.name or c.id or (c.arguments_raw or "").strip() or c.arguments
    ]
    return Sample(
        ex.status,
        [
            (c.name or "?", c.arguments if c.arguments is not None else c.arguments_raw)
            for c in calls
        ],
        r.text,
        _refused(r),
        r.finish_reason_raw,
        r.usage.output_tokens if r.usage else None,
        latency,
        checks=[check_arguments(c, tools) for c in calls],
        usage=price_usage(rt.family, r.usage),
    )


def price_usage(family: str, usage: Any) -> dict[str, int] | None:
    """Reported usage as genai-prices' keys (the family's adapter knows its extras), or ``None``."""
    if usage is None or (usage.input_tokens is None and usage.output_tokens is None):
        return None
    adapter = providers.by_family(family)
    if adapter is not None:
        return adapter.profile.price_usage(usage)
    return {
        k: v
        for k, v in (("input_tokens", usage.input_tokens), ("output_tokens", usage.output_tokens))
        if v is not None
    }


def _failure(ex: Exchange, r: NormalisedResponse | None) -> str:
    """Why a sample has no answer: the API's error message, else the transport error, else its
    status."""
    why = (
        (r.error.message if r is not None and r.error is not None else None)
        or ex.transport_error
        or f"status {ex.status}"
    )
    if ex.transport_error is not None and ex.status is not None and ex.status < 400:
        why = f"the answer broke off: {ex.transport_error}"
    return str(why)


def _refused(r: NormalisedResponse) -> bool:
    """Whether the model refused: a refusal part, or a refusal finish."""
    return any(p.kind == "refusal" for p in r.parts) or (
        r.finish_reason is not None and str(r.finish_reason.value) == "refusal"
    )


def check_arguments(c: ToolCall, tools: list[ToolSpec]) -> ArgumentCheck:
    """``c``'s arguments: JSON? valid against the declared schema of its tool? (jsonschema is
    imported with the check, when a comparison first needs it.)"""
    spec = next((t for t in tools if t.name == c.name), None) if c.name else None
    parsed = c.arguments_error is None and (
        c.arguments is not None or not (c.arguments_raw or "").strip()
    )
    out = ArgumentCheck(
        c.name or "?",
        json=parsed,
        offered=(spec is not None) if tools else None,
        parse_error=c.arguments_error,
    )
    if parsed and spec is not None and spec.parameters and c.kind == "function":
        out.checked = True
        out.schema_errors = schema_errors(
            c.arguments if c.arguments is not None else {}, spec.parameters
        )
    return out


def offered_tools(ex: Exchange) -> list[ToolSpec]:
    """The tools the recorded request declared (as its family's adapter reads them)."""
    req = parse_exchange(ex).request
    return list(req.tools) if req is not None else []
