"""No false tolerance (issue 44): a difference the model would read differently — a number, a
name, a word of an instruction, a field of a tool's schema — is never tolerated by the built-in
detectors; a difference only in a date, a uuid, a temp path or a loopback port always is.

Generated text is ordinary prose around the changed token: words of instructions, names, numbers
of any size and kind (counts, prices, versions, 10-digit numbers), with a volatile span or two
beside them so that the detectors are at work on the same strings.

100 examples a property by default (Hypothesis' own default; 300 until session 54), 2,000 under
``LOOPTAP_SLOW=1`` (the nightly run, docs/suite.md); ``LOOPTAP_VOLATILE_EXAMPLES`` sets another
count.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from typing import Any

import orjson
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from looptap.cassettes.matching import VolatileSpans, request_key

V = VolatileSpans(cwd="/home/bob/proj", home="/home/bob")
EXAMPLES = int(
    os.environ.get("LOOPTAP_VOLATILE_EXAMPLES")
    or (2000 if os.environ.get("LOOPTAP_SLOW", "") not in ("", "0") else 100)
)
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

#: Words of instructions and prose. No timing word (``took``, ``in``, ``after``, ``time`` …): a
#: number after one of those is a duration by design, and the property is about numbers that are
#: not.
WORDS = (
    "always never answer with the tool only if user asks file files count retries price total "
    "limit delete keep read write summarise translate French English polite short long first last "
    "every must should not may city weather report row rows column apples euros percent tokens "
    "version step"
).split()
names = st.from_regex(r"[A-Za-z][a-z]{2,9}(_[a-z]{2,8})?[0-9]{0,2}", fullmatch=True)
numbers = st.one_of(
    st.integers(0, 10**12).map(str),
    st.decimals(0, 10**6, places=2, allow_nan=False, allow_infinity=False).map(str),
    # epoch-sized, but with no time word beside it
    st.integers(1_000_000_000, 1_999_999_999).map(str),
    st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 99)).map(
        lambda t: f"{t[0]}.{t[1]}.{t[2]}"
    ),
)
tokens = st.one_of(st.sampled_from(WORDS), names, numbers)
volatile = st.one_of(
    st.datetimes(dt.datetime(1990, 1, 1), dt.datetime(2090, 12, 31)).map(
        lambda d: d.isoformat(timespec="seconds")
    ),
    st.uuids().map(str),
    st.integers(1024, 65535).map(lambda p: f"http://127.0.0.1:{p}/v1"),
)
SEP = st.sampled_from([" ", ", ", ". ", ": ", "\n", " (", ") "])


@st.composite
def sentences(draw: st.DrawFn) -> list[str]:
    """Alternating tokens and separators, a volatile span sometimes among them."""
    out: list[str] = []
    for _ in range(draw(st.integers(3, 14))):
        out += [draw(st.one_of(tokens, tokens, tokens, volatile)), draw(SEP)]
    return out


@st.composite
def changed(draw: st.DrawFn) -> tuple[str, str]:
    """A sentence, and the same sentence with one word, name or number replaced by another."""
    parts = draw(sentences())
    at = draw(st.integers(0, len(parts) // 2 - 1)) * 2
    kind = draw(st.sampled_from([numbers, names, st.sampled_from(WORDS)]))
    old = draw(kind)
    new = draw(kind.filter(lambda t: t != old))
    a, b = list(parts), list(parts)
    a[at], b[at] = old, new
    return "".join(a), "".join(b)


@SETTINGS
@given(changed())
def test_a_changed_word_name_or_number_is_never_tolerated(pair: tuple[str, str]) -> None:
    a, b = pair
    assert V.normalise(a)[0] != V.normalise(b)[0]


def _body(system: str, tool_result: str, schema: dict[str, Any]) -> bytes:
    tools = [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read a file", "parameters": schema},
        }
    ]
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_A1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path":"a"}'},
            }
        ],
    }
    msgs = [
        {"role": "system", "content": system},
        {"role": "user", "content": "go"},
        call,
        {"role": "tool", "tool_call_id": "call_A1", "content": tool_result},
    ]
    return orjson.dumps({"model": "gpt-4o", "messages": msgs, "tools": tools})


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "where"},
        "limit": {"type": "integer", "maximum": 100},
    },
    "required": ["path"],
}
schema_changes = st.sampled_from([
    ("properties", "path", "type", "integer"),
    ("properties", "path", "description", "where, relative to 2026-11-25"),
    ("properties", "limit", "maximum", 1000),
    ("required", None, None, ["path", "limit"]),
    ("properties", "limit", "type", "number"),
])


def _schema(change: tuple[str, str | None, str | None, Any]) -> dict[str, Any]:
    schema = orjson.loads(orjson.dumps(SCHEMA))
    top, prop, field, value = change
    if prop is None:
        schema[top] = value
    else:
        schema[top][prop][field] = value
    return schema


def _digest(body: bytes) -> bytes:
    return request_key(
        "POST", "https://api.openai.com/v1/chat/completions", [], body, volatile=V
    ).digest


@SETTINGS
@given(changed(), changed(), schema_changes, st.sampled_from(["system", "tool", "schema"]))
def test_a_real_change_in_a_request_is_never_tolerated(
    system: tuple[str, str], tool: tuple[str, str], schema: tuple[Any, ...], where: str
) -> None:
    """The whole request through the matcher's key: the change in the system prompt, a tool
    result or the tool's schema makes another digest (a miss), volatile spans around it or not."""
    before = _body(system[0], tool[0], SCHEMA)
    after = {
        "system": _body(system[1], tool[0], SCHEMA),
        "tool": _body(system[0], tool[1], SCHEMA),
        "schema": _body(system[0], tool[0], _schema(schema)),
    }[where]
    assert _digest(before) != _digest(after)


dates = st.datetimes(dt.datetime(1990, 1, 1), dt.datetime(2090, 12, 31))
DATE_FORMATS = (
    "%Y-%m-%d",
    "%Y-%m-%dT%H:%M:%S",
    "%a %b %d %H:%M:%S UTC %Y",
    "%B %d, %Y",
    "%d/%m/%Y",
    "%a, %d %b %Y %H:%M:%S GMT",
    "%H:%M:%S",
)
tmp_dirs = st.from_regex(r"tmp[a-z0-9_]{8}", fullmatch=True).map(lambda d: f"/tmp/{d}")
slot_fillers = st.one_of(
    st.tuples(st.sampled_from(DATE_FORMATS), dates, dates).map(
        lambda t: (t[1].strftime(t[0]), t[2].strftime(t[0]))
    ),
    st.tuples(st.uuids(), st.uuids()).map(lambda t: (str(t[0]), str(t[1]))),
    st.tuples(tmp_dirs, tmp_dirs),
    st.tuples(st.integers(1024, 65535), st.integers(1024, 65535)).map(
        lambda t: (f"127.0.0.1:{t[0]}", f"127.0.0.1:{t[1]}")
    ),
)


@SETTINGS
@given(sentences(), sentences(), slot_fillers)
def test_a_difference_only_in_a_date_uuid_tmp_path_or_port_is_tolerated(
    before: list[str], after: list[str], fill: tuple[str, str]
) -> None:
    # Ids, uuids, temp paths and ports are numbered by first appearance (a renaming must be
    # consistent): the one that changes is not also one of the text around it.
    around = "".join(before) + "".join(after)
    assume(fill[0].split(":")[-1] not in around and fill[1].split(":")[-1] not in around)
    a = "".join(before) + " " + fill[0] + " " + "".join(after)
    b = "".join(before) + " " + fill[1] + " " + "".join(after)
    assert V.normalise(a)[0] == V.normalise(b)[0]
    key_a = request_key(
        "POST", "https://api.openai.com/v1/chat/completions", [], _body(a, "ok", SCHEMA), volatile=V
    )
    key_b = request_key(
        "POST", "https://api.openai.com/v1/chat/completions", [], _body(b, "ok", SCHEMA), volatile=V
    )
    assert key_a.digest == key_b.digest


def test_uuid_module_and_this_test_agree_on_the_shape() -> None:
    assert V.normalise(str(uuid.uuid4()))[0] == "<uuid>"


far_apart = st.lists(
    st.one_of(
        tokens,
        volatile,
        st.just("x" * 150),
        st.just(" " * 140),
        st.sampled_from(["/", "7", "took 3.5s", "Wed Nov 25 06:00:33 UTC 2026"]),
    ),
    max_size=40,
)


@SETTINGS
@given(far_apart, st.lists(SEP, min_size=40, max_size=40))
def test_searching_only_near_digits_and_slashes_finds_what_a_full_scan_finds(
    parts: list[str], seps: list[str]
) -> None:
    """The scan skips text far from any digit or slash (VolatileSpans._matches): on text with
    long stretches between them, it yields exactly the matches of the whole pattern over all of
    it."""
    spaced = " " + "".join(p + s for p, s in zip(parts, seps, strict=False))
    whole = [(m.span(), m.lastgroup) for m in V._regex.finditer(spaced)]
    assert [(m.span(), m.lastgroup) for m in V._matches(spaced)] == whole


#: A recording's own time (2026-11-25): bare epoch numbers within a year of it are volatile.
RECORDED = 1795643906.0
V_TIMED = VolatileSpans(cwd="/home/bob/proj", home="/home/bob", recorded_time=RECORDED)
far = st.one_of(
    st.integers(1_000_000_000, int(RECORDED) - 400 * 86400),
    st.integers(int(RECORDED) + 400 * 86400, 1_999_999_999),
).map(str)


@SETTINGS
@given(sentences(), far, far)
def test_a_changed_number_far_from_the_recordings_time_is_never_tolerated(
    parts: list[str], old: str, new: str
) -> None:
    """Issue 55: with the recording's time known, an epoch-sized number more than a year from it
    stays significant, in any sentence."""
    assume(old != new)
    a, b = "".join(parts) + f" {old} ", "".join(parts) + f" {new} "
    assert V_TIMED.normalise(a)[0] != V_TIMED.normalise(b)[0]
