"""A property of redaction (issue 54): for any JSON document, with credential-named keys and
credential-shaped values planted in it, streamed as a model streams it (tool-call arguments over
OpenAI Chat, Anthropic and Responses SSE events and Bedrock ConverseStream frames, structured output
over Gemini's text parts) cut into any events and any socket reads, the recorder's redactor stores

* valid JSON with the same structure: every object keeps its keys, every list its length, every
  string stays a string (a number under a credential's name becomes the string ``[REDACTED]``,
  as documented), every other value is kept;
* every credential-named value masked, every planted key of a known format gone;
* alike whatever the cut: the text stored is the one stored when the document comes whole;
* alike where the analysis compares: the answer and its echo in the next request (the same text
  on the wire) are the same stored text, and two leaves equal on the wire are equal stored (for
  values of 8 characters or more; a shorter one is masked only where a name says it is one).

``LOOPTAP_FUZZ_EXAMPLES`` (or ``LOOPTAP_SLOW=1``) runs more examples than CI's few dozen.
"""

from __future__ import annotations

import json
import os
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.recording import REDACTED, Redactor
from looptap.cassettes.wire import Exchange
from tests.support.secret_streams import aws_frame
from tests.support.upstream import cut, synth_stream

SLOW = os.environ.get("LOOPTAP_SLOW") == "1"
EXAMPLES = int(os.environ.get("LOOPTAP_FUZZ_EXAMPLES") or (1000 if SLOW else 40))

#: Credential names (always a credential's, whatever the value), and names that are not (some
#: close to one: counts, plurals, a hint).
CREDENTIAL_KEYS = ["password", "api_key", "secret", "pin", "client_secret", "auth"]
PLAIN_KEYS = ["city", "note", "query", "count", "tags", "passwords", "max_tokens", "keywords"]
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

short_secret = st.text(_ALNUM, min_size=1, max_size=7)
long_secret = st.text(_ALNUM, min_size=8, max_size=24)
format_key = st.text(_ALNUM, min_size=24, max_size=32).map(lambda s: "sk-proj-" + s)
words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=16)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**9), 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """An object, up to three levels deep, with a few long secrets each planted under a
    credential's name and sometimes again under a plain one."""
    # (a weak password may be a word of the document: one of its keys)
    secret = st.one_of(long_secret, st.sampled_from(["passwords", "keywords"]))
    pool = draw(st.lists(secret, min_size=1, max_size=3, unique=True))
    formats = draw(st.lists(format_key, max_size=2))

    def obj(depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _ in range(draw(st.integers(1, 4))):
            if draw(st.booleans()):
                name = draw(st.sampled_from(CREDENTIAL_KEYS))
                out[name] = draw(
                    st.one_of(short_secret, st.sampled_from(pool), st.integers(1, 10**12))
                )
                continue
            name = draw(st.sampled_from(PLAIN_KEYS))
            kind = draw(st.integers(0, 5 if depth < 2 else 3))
            if kind == 0:
                out[name] = draw(words)
            elif kind == 1:
                out[name] = draw(st.sampled_from(pool + formats or pool))
            elif kind == 2:
                out[name] = draw(scalars)
            elif kind == 3:  # a secret inside prose
                out[name] = f"{draw(words)} {draw(st.sampled_from(pool + formats))}."
            elif kind == 4:
                out[name] = [obj(depth + 1) for _ in range(draw(st.integers(0, 2)))]
            else:
                out[name] = obj(depth + 1)
        return out

    return {"doc": obj(0), "formats": formats}


#: The families whose next request sends the call's input back as an object (compared as one).
OBJECTS = ("anthropic", "bedrock")
URLS = {
    "openai_chat": "https://api.openai.com/v1/chat/completions",
    "openai_responses": "https://api.openai.com/v1/responses",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"
    ":streamGenerateContent?alt=sse",
    "bedrock": "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
    "anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream",
}


def _stream(family: str, text: str, doc: dict[str, Any], events: int | list[int]) -> list[bytes]:
    """The answer's stream: its SSE events, or (Bedrock ConverseStream) its event-stream frames,
    a call's input ``text`` cut at ``events``."""
    if family != "bedrock":
        return synth_stream(family, _answer(family, text, doc), events)
    start = {"toolUse": {"toolUseId": "t1", "name": "f"}}
    frames = [("messageStart", {"role": "assistant"})]
    frames += [("contentBlockStart", {"contentBlockIndex": 0, "start": start})]
    frames += [
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": piece}}})
        for piece in (cut(text, events) if events else [text])
    ]
    frames += [("contentBlockStop", {"contentBlockIndex": 0})]
    frames += [("messageStop", {"stopReason": "tool_use"})]
    frames += [("metadata", {"usage": {"inputTokens": 9, "outputTokens": 9, "totalTokens": 18}})]
    head = {":content-type": "application/json", ":message-type": "event"}
    return [aws_frame({":event-type": k, **head}, json.dumps(v).encode()) for k, v in frames]


def _answer(family: str, text: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The model's answer: a call of ``f`` whose arguments are ``text`` (Gemini: ``text`` as its
    structured output)."""
    if family == "openai_chat":
        call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": text}}
        msg = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "message": msg, "finish_reason": "tool_calls"}
        return {"id": "c1", "object": "chat.completion", "model": "gpt-4o", "choices": [choice]}
    if family == "openai_responses":
        item = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": text,
            "status": "completed",
        }
        return {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": "gpt-4o",
            "output": [item],
            "usage": {"input_tokens": 9, "output_tokens": 9},
        }
    if family == "anthropic":
        use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": doc}
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [use],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 9, "output_tokens": 9},
        }
    cand = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "finishReason": "STOP",
        "index": 0,
    }
    return {"candidates": [cand], "usageMetadata": {"promptTokenCount": 9}}


def _request(family: str, echo: bool, text: str, doc: dict[str, Any]) -> bytes:
    """The request that asks, or (``echo``) the next one, which sends the answer back."""
    if family == "openai_chat":
        call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": text}}
        back = [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        ]
        body: dict[str, Any] = {
            "model": "gpt-4o",
            "stream": True,
            "messages": [{"role": "user", "content": "go"}, *back[: 2 * echo]],
        }
    elif family == "openai_responses":
        back = [
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": text},
            {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
        ]
        body = {
            "model": "gpt-4o",
            "stream": True,
            "input": [{"role": "user", "content": "go"}, *back[: 2 * echo]],
        }
    elif family == "anthropic":
        use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": doc}
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
        back = [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 99,
            "stream": True,
            "messages": [{"role": "user", "content": "go"}, *back[: 2 * echo]],
        }
    elif family == "bedrock":
        use = {"toolUse": {"toolUseId": "t1", "name": "f", "input": doc}}
        result = {"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}]}}
        back = [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
        body = {"messages": [{"role": "user", "content": [{"text": "go"}]}, *back[: 2 * echo]]}
    else:
        back = [
            {"role": "model", "parts": [{"text": text}]},
            {"role": "user", "parts": [{"text": "thanks"}]},
        ]
        body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}, *back[: 2 * echo]]}
    return orjson.dumps(body)


def _exchange(family: str, request: bytes, events: list[bytes], reads: list[int]) -> Exchange:
    """``events`` as the socket delivered them: cut at the byte positions ``reads`` lists."""
    data = b"".join(events)
    cuts = sorted({c for c in reads if 0 < c < len(data)})
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return Exchange(
        "POST",
        URLS[family],
        [("content-type", "application/json"), ("authorization", "Bearer not-a-key")],
        request,
        200,
        "OK",
        [
            (
                "content-type",
                "application/vnd.amazon.eventstream"
                if family == "bedrock"
                else "text/event-stream",
            )
        ],
        [(0.01 * i, c) for i, c in enumerate(chunks)],
    )


def _said(family: str, ex: Exchange) -> str:
    """What the stored answer says, as the analysis reads it: the call's arguments, or the
    text."""
    response = parse_exchange(ex).response
    assert response is not None
    if family == "gemini":
        return "".join(p.text or "" for p in response.parts if p.kind == "text")
    (call,) = response.tool_calls
    assert call.arguments_raw is not None
    return call.arguments_raw


def _echoed(family: str, ex: Exchange) -> str:
    """What the stored next request sends back of the answer, as the analysis reads it."""
    request = parse_exchange(ex).request
    assert request is not None
    (answer,) = [m for m in request.messages if m.role == "assistant"]
    if family == "gemini":
        return answer.text
    (call,) = [p.tool_call for p in answer.parts if p.tool_call is not None]
    assert call.arguments_raw is not None
    return call.arguments_raw


def _same_shape(wire: Any, stored: Any, name: str | None = None) -> None:
    """``stored`` has ``wire``'s structure (see the module's docstring)."""
    if isinstance(wire, dict):
        assert isinstance(stored, dict) and list(stored) == list(wire), (wire, stored)
        for k in wire:
            _same_shape(wire[k], stored[k], k)
    elif isinstance(wire, list):
        assert isinstance(stored, list) and len(stored) == len(wire), (wire, stored)
        for a, b in zip(wire, stored, strict=True):
            _same_shape(a, b)
    elif isinstance(wire, str):
        assert isinstance(stored, str), (wire, stored)
    elif name in CREDENTIAL_KEYS and isinstance(wire, int) and not isinstance(wire, bool):
        assert stored == REDACTED, (name, wire, stored)
    else:
        assert stored == wire or (wire != wire and stored != stored), (wire, stored)


def _leaves(wire: Any, stored: Any, name: str | None, out: list[tuple[str, str, Any]]) -> None:
    """(name, value on the wire, value stored) of each leaf, walking both alike."""
    if isinstance(wire, dict):
        for k in wire:
            _leaves(wire[k], stored[k], k, out)
    elif isinstance(wire, list):
        for a, b in zip(wire, stored, strict=True):
            _leaves(a, b, name, out)
    else:
        out.append((name or "", wire, stored))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
@given(
    planted=documents(),
    family=st.sampled_from(sorted(URLS)),
    ascii_only=st.booleans(),
    events=st.lists(st.integers(1, 300), max_size=12),
    reads=st.lists(st.integers(1, 3000), max_size=8),
)
def test_any_document_streamed_any_way_is_stored_as_valid_alike_json(
    planted: dict[str, Any], family: str, ascii_only: bool, events: list[int], reads: list[int]
) -> None:
    doc, formats = planted["doc"], planted["formats"]
    # (Anthropic streams its input as the JSON text the server writes: one way)
    text = json.dumps(doc, ensure_ascii=ascii_only or family == "anthropic")
    red = Redactor()
    first = _request(family, False, text, doc)
    said = _said(
        family, red.exchange(_exchange(family, first, _stream(family, text, doc, events), reads))
    )
    stored = json.loads(said)  # valid JSON
    _same_shape(doc, stored)
    leaves: list[tuple[str, str, Any]] = []
    _leaves(doc, stored, None, leaves)
    for name, wire, kept in leaves:
        if name in CREDENTIAL_KEYS and not isinstance(wire, bool) and wire:
            assert kept == REDACTED, (name, wire, kept)
    for a_name, a_wire, a_kept in leaves:
        for b_name, b_wire, b_kept in leaves:
            if isinstance(a_wire, str) and a_wire == b_wire and len(a_wire) >= 8:
                assert a_kept == b_kept, (a_name, b_name, a_wire, a_kept, b_kept)
    for key in formats:
        assert key[8:] not in said
    # the echo the next request sends is stored as the answer was
    again = _exchange(family, _request(family, True, text, doc), _stream(family, "{}", {}, 0), [])
    echoed = _echoed(family, red.exchange(again))
    assert json.loads(echoed) == stored if family in OBJECTS else echoed == said
    # and whatever the cut: the document whole, through a redactor of its own, is stored alike
    whole = _exchange(family, first, _stream(family, text, doc, 0), [])
    assert _said(family, Redactor().exchange(whole)) == said
