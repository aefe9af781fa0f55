"""Faults injected into a replayed run: the API misbehaving, in its own wire format, on chosen
requests; after the fault clears, the agent's retry gets the recorded answer, so a run can recover.

A fault is written ``SELECTOR:KIND[=ARG][*TIMES]``:

    turn=2:rate_limit*2        the first two attempts at every conversation's turn 2 get a 429
    seq=4:stream_cut=3         the recorded round trip #4 is cut after 3 chunks, once
    request=1:reset            the first request the server receives: connection reset
    tool=get_weather:overloaded every answer that calls get_weather: overloaded (529/503)
    p=0.2:server_error         each request with probability 0.2 (seeded: --fault-seed)
    *:slow_first_byte=5        every request: the answer starts after 5 s

Kinds (the bodies and headers are each API's own, from its provider adapter):

    rate_limit[=RETRY_AFTER]   429 with retry-after (default 1 s) and the rate-limit headers
    overloaded[=RETRY_AFTER]   the API's own overload status (a 529 or a 503) and body
    server_error               500
    context_length             400 with the API's "too long" text (not retryable)
    reset                      the connection is closed before any response
    slow_first_byte=SECONDS    the recorded answer, after a delay
    stall=SECONDS              a stream pauses halfway for that long, then goes on
    stream_cut=N               a stream stops after N events (at most all but the last), without
                               its terminal event
    error_event                a 200 stream with the API's error event halfway

Rewriting kinds answer with the recorded answer changed, rendered in the API's own format
(streamed when the request streams); where an API has no way to say it, the recorded answer is
served and the replay log says why:

    truncate[=FRACTION]        finish reason length / max tokens: the last tool call's arguments
                               (or the text) cut, keeping FRACTION of it (default 0.5)
    content_filter             the API's content filter: the text cut halfway, no tool calls
    refusal                    the model refuses (the API's refusal field or stop reason)
    bad_arguments              (model) the first tool call's arguments are not JSON
    unoffered_tool             (model) the first tool call names a tool that was not offered
    schema_arguments           (model) the first tool call's arguments break the tool's schema

``TIMES`` counts attempts at one recorded answer: ``*3`` fails the next three attempts at it, then
serves it. Without ``*`` a fault fires once per recorded answer it selects.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...models import FinishReason, Part
from ...parsing import parse_exchange

if TYPE_CHECKING:
    from ...matching import Recorded
    from ...models import NormalisedRequest, NormalisedResponse


class Attempt(Protocol):
    """What a fault plan reads of the request it decides on (a recorded answer in replay)."""

    index: int
    turn: int | None
    conversation: str | None

    @property
    def exchange(self) -> Any: ...


__all__ = ["Fault", "FaultPlan", "parse_fault", "rewrite_answer"]

#: kind → (what its argument is, default argument).
KINDS: dict[str, tuple[str | None, float | None]] = {
    "rate_limit": ("retry-after seconds", 1.0),
    "overloaded": ("retry-after seconds", 1.0),
    "server_error": ("retry-after seconds", 1.0),
    "context_length": (None, None),
    "reset": (None, None),
    "slow_first_byte": ("seconds", 5.0),
    "stall": ("seconds", 5.0),
    "stream_cut": ("chunks", 3.0),
    "error_event": (None, None),
    "truncate": ("fraction kept", 0.5),
    "content_filter": (None, None),
    "refusal": (None, None),
    "bad_arguments": (None, None),
    "unoffered_tool": (None, None),
    "schema_arguments": (None, None),
}
#: Faults answered with an HTTP error status (the rest change how the recorded answer is sent).
STATUS_KINDS = frozenset({"rate_limit", "overloaded", "server_error", "context_length"})
#: Faults answered with the recorded answer rewritten (see :func:`rewrite_answer`).
REWRITE_KINDS = frozenset(
    {"truncate", "content_filter", "refusal", "bad_arguments", "unoffered_tool", "schema_arguments"}
)
#: What a refusing model says (the text of a refusal field).
REFUSAL_TEXT = "I'm sorry, but I can't help with that."
_SELECTORS = ("turn", "seq", "request", "tool", "p", "conversation")


class FaultSpecError(ValueError):
    """A ``--fault`` that cannot be read."""


@dataclass(frozen=True)
class Fault:
    kind: str
    arg: float | None
    times: int
    #: (selector, value): ``("turn", "2")``, ``("p", "0.2")``, ``("*", "")``.
    selector: tuple[str, str]
    text: str

    def describe(self) -> str:
        arg = "" if self.arg is None or KINDS[self.kind][0] is None else f"={self.arg:g}"
        return f"{self.kind}{arg}"


#: A count or an index: ASCII digits only (``str.isdigit`` also takes '²' and other digits
#: ``int`` refuses), at most nine of them.
_INT = re.compile(r"[0-9]{1,9}")
#: A finite decimal number: ASCII digits with an optional fraction; no sign, exponent, ``_``,
#: ``nan`` or ``inf`` (all of which ``float`` takes).
_NUM = re.compile(r"[0-9]{1,9}(?:\.[0-9]{0,9})?|\.[0-9]{1,9}")
#: Kinds whose argument is a whole number (the rest take a decimal).
_WHOLE = frozenset({"stream_cut"})


def _shown(part: str) -> str:
    """A part of a spec as a refusal names it: quoted, escaped, at most 40 characters."""
    return repr(part[:40] + ("…" if len(part) > 40 else ""))


def parse_fault(text: str) -> Fault:
    """Read ``SELECTOR:KIND[=ARG][*TIMES]``; raises :class:`FaultSpecError` saying what is wrong
    (one line naming the part that cannot be read). Numbers are ASCII decimal digits, finite."""
    raw = text.strip()
    spec = _shown(raw)
    where, sep, what = raw.rpartition(":")
    if not sep:
        where, what = "*", raw
    times = 1
    if "*" in what:
        what, _, n = what.partition("*")
        if not _INT.fullmatch(n) or int(n) < 1:
            raise FaultSpecError(
                f"--fault {spec}: '*' wants a count of attempts "
                f"in digits, from 1 (e.g. *3), not {_shown(n)}"
            )
        times = int(n)
    kind, arg = _kind_and_arg(spec, what)
    return Fault(kind, arg, times, _selector(spec, where.strip()), raw)


def _kind_and_arg(spec: str, what: str) -> tuple[str, float | None]:
    """``KIND[=ARG]`` of a fault: the kind, and its argument (the kind's default when not given)."""
    kind, _, arg_text = what.partition("=")
    kind = kind.strip()
    if kind not in KINDS:
        raise FaultSpecError(
            f"--fault {spec}: unknown fault {_shown(kind)}; one of {', '.join(KINDS)}"
        )
    meaning, default = KINDS[kind]
    if not arg_text:
        return kind, default
    if meaning is None:
        raise FaultSpecError(f"--fault {spec}: {kind} takes no value")
    whole = kind in _WHOLE
    if not (_INT if whole else _NUM).fullmatch(arg_text):
        form = "a whole number in digits" if whole else "a decimal number such as 0.5"
        raise FaultSpecError(
            f"--fault {spec}: {kind}= wants {meaning} ({form}), not {_shown(arg_text)}"
        )
    arg = float(arg_text)
    if arg > 3600:
        raise FaultSpecError(
            f"--fault {spec}: {kind}= wants {meaning} between 0 and 3600, not {_shown(arg_text)}"
        )
    if kind == "truncate" and not 0 <= arg < 1:
        raise FaultSpecError(
            f"--fault {spec}: truncate= wants the fraction kept, from 0 up to (not including) 1, "
            f"not {_shown(arg_text)}"
        )
    return kind, arg


def _selector(spec: str, where: str) -> tuple[str, str]:
    """The ``SELECTOR`` of a fault as (name, value); ``("*", "")`` for every request."""
    if where in ("*", "", "all"):
        return ("*", "")
    name, eq, value = where.partition("=")
    if not eq or name not in _SELECTORS or not value:
        raise FaultSpecError(
            f"--fault {spec}: select requests with one of "
            f"{', '.join(s + '=…' for s in _SELECTORS)} or *, not {_shown(where)}"
        )
    if name in ("turn", "seq", "request"):
        if not _INT.fullmatch(value):
            raise FaultSpecError(
                f"--fault {spec}: {name}= wants a number in digits, not {_shown(value)}"
            )
        value = str(int(value))
    if name == "p":
        p = float(value) if _NUM.fullmatch(value) else -1.0
        if not 0 < p <= 1:
            raise FaultSpecError(
                f"--fault {spec}: p= wants a probability in (0, 1] "
                f"(a decimal such as 0.2), not {_shown(value)}"
            )
    return (name, value)


@dataclass
class FaultPlan:
    """Which request gets which fault. Decisions are made in the order requests arrive (one event
    loop): the same run with the same seed gets the same faults."""

    faults: list[Fault]
    seed: int = 0
    #: Faults fired so far: (request number, recorded seq, fault text).
    fired: list[tuple[int, int | None, str]] = field(default_factory=list)
    #: Rewriting faults that could not be made, the recorded answer served instead: (request
    #: number, recorded seq, fault text, why).
    skipped: list[tuple[int, int | None, str, str]] = field(default_factory=list)
    _left: dict[tuple[int, int], int] = field(default_factory=dict)
    _requests: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def needs_turns(self) -> bool:
        return any(f.selector[0] in ("turn", "conversation") for f in self.faults)

    def decide(self, rec: Recorded | Attempt) -> Fault | None:
        """The fault for this attempt at ``rec`` (``None``: serve the recorded answer)."""
        self._requests += 1
        for i, f in enumerate(self.faults):
            key = (i, rec.index)
            left = self._left.get(key)
            if left is None:
                if not self._selects(f, rec):
                    continue
                left = f.times
            if left <= 0:
                continue
            self._left[key] = left - 1
            self.fired.append((self._requests, rec.exchange.seq, f.text))
            return f
        return None

    def skip(self, why: str) -> None:
        """The fault just decided could not be made (the recorded answer was served instead)."""
        if self.fired:
            n, seq, text = self.fired.pop()
            self.skipped.append((n, seq, text, why))

    def _selects(self, f: Fault, rec: Recorded | Attempt) -> bool:
        name, value = f.selector
        ex = rec.exchange
        if name == "*":
            return True
        if name == "seq":
            return ex.seq == int(value)
        if name == "request":
            return self._requests == int(value)
        if name == "turn":
            return rec.turn == int(value)
        if name == "conversation":
            return rec.conversation == value
        if name == "p":
            return self._rng.random() < float(value)
        if name == "tool":
            rt = parse_exchange(ex)
            return rt.response is not None and any(c.name == value for c in rt.response.tool_calls)
        return False


# -- rewriting faults --------------------------------------------------------------------------


def rewrite_answer(
    fault: Fault, answer: NormalisedResponse, request: NormalisedRequest | None
) -> NormalisedResponse | str:
    """The recorded ``answer`` as ``fault`` changes it; a string says why it cannot (the answer
    has no tool call to break, the tool's schema requires nothing …)."""
    # a thought's signature would not match
    parts = [p for p in answer.parts if p.kind != "reasoning"]
    calls = [
        i
        for i, p in enumerate(parts)
        if p.kind == "tool_call" and p.tool_call is not None and p.tool_call.kind == "function"
    ]
    text = "".join(p.text or "" for p in parts if p.kind == "text")
    if fault.kind in ("truncate", "content_filter", "refusal"):
        return _api_fault(fault, answer, parts, calls, text)
    return _model_fault(fault, answer, parts, calls, request)


def _api_fault(
    fault: Fault, answer: NormalisedResponse, parts: list[Part], calls: list[int], text: str
) -> NormalisedResponse | str:
    """The API's faults: the answer cut at the token cap, filtered, or refused."""

    update: dict[str, Any] = {"finish_reason_raw": None, "complete": True}
    if fault.kind == "truncate":
        keep = fault.arg if fault.arg is not None else 0.5
        if calls:
            i = calls[-1]
            call = parts[i].tool_call
            assert call is not None
            raw = _arguments_text(call)
            cut = raw[: min(int(len(raw) * keep), len(raw) - 1)]
            partial = (
                dict(list(call.arguments.items())[:-1]) if isinstance(call.arguments, dict) else {}
            )
            bad = call.model_copy(
                update={
                    "arguments": partial,
                    "arguments_raw": cut,
                    "arguments_error": "cut by max tokens",
                }
            )
            new_parts = [*parts[:i], Part(kind="tool_call", tool_call=bad)]
        elif text:
            new_parts = [Part(kind="text", text=text[: int(len(text) * keep)])]
        else:
            return "the answer has no text or tool call to cut"
        return answer.model_copy(
            update={**update, "parts": new_parts, "finish_reason": FinishReason.TRUNCATED_LENGTH}
        )
    if fault.kind == "content_filter":
        kept = [Part(kind="text", text=text[: len(text) // 2])] if text[: len(text) // 2] else []
        return answer.model_copy(
            update={**update, "parts": kept, "finish_reason": FinishReason.FILTERED}
        )
    return answer.model_copy(
        update={
            **update,
            "parts": [Part(kind="refusal", text=REFUSAL_TEXT)],
            "finish_reason": FinishReason.REFUSED,
        }
    )


def _model_fault(
    fault: Fault,
    answer: NormalisedResponse,
    parts: list[Part],
    calls: list[int],
    request: NormalisedRequest | None,
) -> NormalisedResponse | str:
    """The model's faults: the first call of the client's own tools, changed."""

    if not calls:
        return "the answer calls no tool"
    i = calls[0]
    call = parts[i].tool_call
    assert call is not None
    if fault.kind == "bad_arguments":
        raw = _arguments_text(call).rstrip()
        bad_raw = (raw[:-1] if raw.endswith("}") else raw) + ",}"  # a trailing comma: not JSON
        changed = call.model_copy(
            update={"arguments": None, "arguments_raw": bad_raw, "arguments_error": "not JSON"}
        )
    elif fault.kind == "unoffered_tool":
        offered = {t.name for t in request.tools} if request is not None else set()
        name = next(
            n
            for n in (f"{call.name}_v2", "run_shell", "run_shell_v2", "looptap_unoffered_tool")
            if n not in offered
        )
        changed = call.model_copy(update={"name": name})
    else:  # schema_arguments
        broken = _break_schema(call.name, call.arguments, request)
        if isinstance(broken, str):
            return broken
        changed = call.model_copy(
            update={"arguments": broken, "arguments_raw": None, "arguments_error": None}
        )
    new_parts = [*parts[:i], Part(kind="tool_call", tool_call=changed), *parts[i + 1 :]]
    update: dict[str, Any] = {"finish_reason_raw": None, "complete": True}
    return answer.model_copy(
        update={
            **update,
            "parts": new_parts,
            "finish_reason": answer.finish_reason or FinishReason.TOOL_CALL,
        }
    )


def _arguments_text(call: Any) -> str:
    import orjson

    if call.arguments_raw is not None:
        return str(call.arguments_raw)
    return orjson.dumps(call.arguments if call.arguments is not None else {}).decode()


_WRONG = {
    "string": 12345,
    "integer": "not a number",
    "number": "not a number",
    "boolean": "yes",
    "array": "not a list",
    "object": "not an object",
}


def _break_schema(
    name: str | None, arguments: Any, request: NormalisedRequest | None
) -> dict[str, Any] | str:
    """``arguments`` changed so that they break the offered tool's JSON Schema: a required
    property left out, else a property of the wrong type (checked against the schema)."""
    from ...analysis import schema_errors

    spec = next((t for t in (request.tools if request is not None else []) if t.name == name), None)
    schema = spec.parameters if spec is not None else None
    if not isinstance(schema, dict) or not isinstance(arguments, dict):
        return f"tool {name!r} was offered without a JSON Schema to break"
    for broken in _breakages(arguments, schema):
        if schema_errors(broken, schema):
            return broken
    return f"tool {name!r}'s schema requires nothing the arguments could break"


def _breakages(arguments: dict[str, Any], schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``arguments`` changed in each way that may break ``schema``: a required property left out,
    then a property of the wrong type."""
    for req in schema.get("required") or []:
        if req in arguments:
            yield {k: v for k, v in arguments.items() if k != req}
    found = schema.get("properties")
    for key, sub in (found if isinstance(found, dict) else {}).items():
        kind = sub.get("type") if isinstance(sub, dict) else None
        if isinstance(kind, str) and kind in _WRONG:
            yield {**arguments, key: _WRONG[kind]}
