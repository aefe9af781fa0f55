"""Our Gemini stream reassembly against google-genai's own types, on every corpus stream.

The SDK has no stream accumulator: a caller iterates ``GenerateContentResponse`` chunks and reads
``part.text`` / ``part.thought`` / ``part.function_call`` / ``candidate.finish_reason`` /
``usage_metadata`` from each. That is what :func:`_sdk_view` does, on the same events we framed,
and the result must match what :meth:`Gemini.reassemble` built.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import pytest
from real_corpus import Mentioning, corpus_exchanges, rel

from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.wire import Exchange, frame

genai_types = pytest.importorskip("google.genai.types")
genai_models = pytest.importorskip("google.genai.models")


#: The files that can hold a stream (its URL names it): read at collection;
#: test_the_cut_of_the_corpus_loses_no_stream checks the cut against the whole corpus.
MENTIONING: Mentioning = (b"streamgeneratecontent",)


def _streams(mentioning: Mentioning = MENTIONING) -> list[tuple[str, int, Exchange]]:
    return [
        (rel(p), i, ex)
        for p, i, ex in corpus_exchanges("pydantic-ai/**/*.yaml", mentioning)
        if ":streamGenerateContent" in ex.url and (ex.status or 0) < 400
    ]


STREAMS = _streams()


@dataclass
class View:
    text: str = ""
    thoughts: str = ""
    calls: list[tuple[str | None, str | None, Any]] = field(default_factory=list)
    signatures: list[bytes] = field(default_factory=list)
    finish: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    total_tokens: int | None = None


def _sdk_view(ex: Exchange) -> View:
    framed = frame(ex.response_chunks, ex.response_header("content-type"))
    view = View()
    usage = None
    vertex = "aiplatform.googleapis.com" in ex.url
    for ev in framed.events:
        # What ``Models.generate_content_stream`` does with each event: the AI Studio converter
        # (Vertex JSON is taken as is), then ``_from_response``, which drops fields the SDK does
        # not know yet (``usageMetadata.serviceTier`` …) and validates.
        data = ev.json()
        if not vertex:
            data = genai_models._GenerateContentResponse_from_mldev(data)
        chunk = genai_types.GenerateContentResponse._from_response(response=data, kwargs={})
        if chunk.usage_metadata is not None:
            usage = chunk.usage_metadata
        cand = (chunk.candidates or [None])[0]
        if cand is None:
            continue
        if cand.finish_reason is not None:
            view.finish = cand.finish_reason.value
        for part in (cand.content.parts if cand.content else None) or []:
            if part.thought_signature:
                view.signatures.append(part.thought_signature)
            if part.text is not None:
                if part.thought:
                    view.thoughts += part.text
                else:
                    view.text += part.text
            if part.function_call is not None:
                fc = part.function_call
                view.calls.append((fc.id, fc.name, fc.args))
    if usage is not None:
        prompt, tool_use = usage.prompt_token_count, usage.tool_use_prompt_token_count
        cands, thoughts = usage.candidates_token_count, usage.thoughts_token_count
        view.input_tokens = (
            None if prompt is None and tool_use is None else (prompt or 0) + (tool_use or 0)
        )
        view.output_tokens = (
            None if cands is None and thoughts is None else (cands or 0) + (thoughts or 0)
        )
        view.reasoning_tokens = thoughts
        view.cache_read_tokens = usage.cached_content_token_count
        view.total_tokens = usage.total_token_count
    return view


def _our_view(ex: Exchange) -> View:
    rt = parse_exchange(ex)
    assert not rt.analysis_errors
    r = rt.response
    assert r is not None and r.usage is not None
    return View(
        text=r.text,
        thoughts="".join(p.text or "" for p in r.parts if p.kind == "reasoning"),
        calls=[(c.id, c.name, c.arguments) for c in r.tool_calls if c.kind == "function"],
        signatures=[
            base64.b64decode(p.provider_details["thought_signature"])
            for p in r.parts
            if p.provider_details and "thought_signature" in p.provider_details
        ],
        finish=r.finish_reason_raw,
        input_tokens=r.usage.input_tokens,
        output_tokens=r.usage.output_tokens,
        reasoning_tokens=r.usage.reasoning_tokens,
        cache_read_tokens=r.usage.cache_read_tokens,
        total_tokens=r.usage.total_tokens,
    )


def test_every_corpus_stream_is_compared() -> None:
    assert len(STREAMS) >= 18


def test_the_cut_of_the_corpus_loses_no_stream() -> None:
    """The whole of pydantic-ai's corpus read (here, not at collection): the same streams."""
    assert [(p, i) for p, i, _ in _streams(())] == [(p, i) for p, i, _ in STREAMS]


@pytest.mark.parametrize(("path", "index", "ex"), STREAMS, ids=[f"{p}#{i}" for p, i, _ in STREAMS])
def test_reassembly_agrees_with_sdk(path: str, index: int, ex: Exchange) -> None:
    assert _our_view(ex) == _sdk_view(ex)
