"""Our Anthropic stream reassembly agrees with the official SDK's on every corpus stream.

The SDK side is independent of our framing: the raw body goes through the SDK's own SSE decoder,
the events are filtered the way ``anthropic._streaming.Stream`` filters them (``ping`` and unnamed
events skipped, ``error`` ends the stream), built as the SDK's ``RawMessageStreamEvent`` types and
folded with ``accumulate_event`` — the beta accumulator for ``?beta=true`` URLs (what the SDK's
beta client would have used), the stable one otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from real_corpus import Mentioning, corpus_exchanges, rel

from looptap.cassettes.models import NormalisedResponse
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.wire import Exchange

anthropic = pytest.importorskip("anthropic")

from anthropic._models import construct_type  # noqa: E402
from anthropic._streaming import SSEDecoder  # noqa: E402
from anthropic.lib.streaming import _beta_messages, _messages  # noqa: E402
from anthropic.types import RawMessageStreamEvent  # noqa: E402
from anthropic.types.beta import BetaRawMessageStreamEvent  # noqa: E402

httpx2 = pytest.importorskip("httpx2")  # the SDK's own HTTP library

_CALL_TYPES = ("tool_use", "server_tool_use", "mcp_tool_use")


@dataclass
class _Case:
    name: str
    exchange: Exchange


#: The files that can hold an Anthropic stream (its host, path or headers name it, and its
#: content type): read at collection (43 of 1,099 files); test_the_cut_of_the_corpus_loses_no_stream
#: checks the cut against the whole corpus.
MENTIONING: Mentioning = ((b"anthropic", b"/v1/messages"), b"text/event-stream")


def _streams(mentioning: Mentioning = MENTIONING) -> list[_Case]:
    out: list[_Case] = []
    for path, i, ex in corpus_exchanges(mentioning=mentioning):
        if ex.status != 200:
            continue
        rt = parse_exchange(ex)
        if rt.family == "anthropic" and rt.framing == "sse" and rt.operation == "generate":
            out.append(_Case(f"{rel(path)}#{i}", ex))
    return out


STREAMS = _streams()


def _sdk_snapshot(ex: Exchange) -> tuple[Any, bool]:
    """The SDK's final message snapshot and whether the stream carried an ``error`` event."""
    beta = "beta=true" in urlsplit(ex.url).query
    headers = httpx2.Headers(ex.request_headers) if beta else None
    snapshot: Any = None
    json_bufs: dict[int, bytes] = {}
    for sse in SSEDecoder().iter_bytes(iter([ex.response_body])):
        if sse.event in ("ping", None) or not sse.data:
            continue
        if sse.event == "error":
            return snapshot, True
        data = sse.json()
        if beta:
            event = construct_type(type_=BetaRawMessageStreamEvent, value=data)
            snapshot = _beta_messages.accumulate_event(
                event=event, current_snapshot=snapshot, json_bufs=json_bufs, request_headers=headers
            )
        else:
            event = construct_type(type_=RawMessageStreamEvent, value=data)
            snapshot = _messages.accumulate_event(
                event=event, current_snapshot=snapshot, json_bufs=json_bufs
            )
    return snapshot, False


def _ours(ex: Exchange) -> NormalisedResponse:
    rt = parse_exchange(ex)
    assert not rt.analysis_errors, rt.analysis_errors
    assert rt.response is not None
    return rt.response


def test_corpus_has_anthropic_streams() -> None:
    # Guards against the comparison below silently running over nothing.
    assert len(STREAMS) >= 40


def test_the_cut_of_the_corpus_loses_no_stream() -> None:
    """The whole corpus read and parsed (here, not at collection): the same streams."""
    assert [c.name for c in _streams(())] == [c.name for c in STREAMS]


@pytest.mark.parametrize("case", STREAMS, ids=[c.name for c in STREAMS])
def test_reassembly_matches_sdk(case: _Case) -> None:
    snap, had_error = _sdk_snapshot(case.exchange)
    ours = _ours(case.exchange)
    assert snap is not None
    assert ours.complete is not had_error

    blocks = list(snap.content)
    assert ours.text == "".join(b.text for b in blocks if b.type == "text")
    assert [p.text for p in ours.parts if p.kind == "reasoning" and p.text is not None] == [
        b.thinking for b in blocks if b.type == "thinking"
    ]
    assert [
        (p.provider_details or {}).get("signature")
        for p in ours.parts
        if p.kind == "reasoning" and p.text is not None
    ] == [b.signature for b in blocks if b.type == "thinking"]
    sdk_calls = [(b.id, b.name, b.input) for b in blocks if b.type in _CALL_TYPES]
    assert [(c.id, c.name, c.arguments) for c in ours.tool_calls] == sdk_calls

    assert ours.finish_reason_raw == snap.stop_reason
    assert ours.id == snap.id and ours.model == snap.model

    su = snap.usage
    assert ours.usage is not None
    cache_write = su.cache_creation_input_tokens
    cache_read = su.cache_read_input_tokens
    assert ours.usage.input_tokens == su.input_tokens + (cache_write or 0) + (cache_read or 0)
    assert ours.usage.output_tokens == su.output_tokens
    assert ours.usage.cache_write_tokens == cache_write
    assert ours.usage.cache_read_tokens == cache_read
    details = getattr(su, "output_tokens_details", None)
    assert ours.usage.reasoning_tokens == (details.thinking_tokens if details is not None else None)
